"""Is a fit fit to publish? The checks that keep a broken fit off the board.

A maximum-likelihood fit can fail in ways that still produce numbers: the solver stops before
the gradient vanishes (not converged), a score is not finite, or — the failure a flood of
votes can cause — the fit lands on a degenerate point where the annotators' abilities collapse
and the scores stretch to many times their spread (6,400 new-account votes against
about 27,000 honest ones were reported to make the Elo scale ×34 and put a 7th-placed model
last in 2 seeds of 10).
:func:`board_problems` says what is wrong, in words; the live arena keeps the last good board
(marked stale, with an alert in ``/healthz``) when it is not empty, and ``stablearena rank``
warns (docs/guides/live-arena.md, "A board that never publishes a broken fit").

The scale check compares the spread (standard deviation) of the new scores with the last good
board's over the models both rank: more than ``max_scale_change`` times larger or smaller is a
problem — unless the votes have more than doubled since (an import), or the last good board
had fewer than ``MIN_VOTES_PER_MODEL`` votes per model it ranks (an arena's first days, when
a few votes more can shrink ratings stretched by near-perfect records several times over:
measured ×0.225 from 22 to 35 votes on 4 models in the service tests).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

__all__ = ["MAX_SCALE_CHANGE", "MIN_VOTES_PER_MODEL", "board_problems", "scale_ratio"]

#: The largest change of the scores' spread between two boards that is believed without more
#: than twice the votes (a factor, either way).
MAX_SCALE_CHANGE: float = 3.0

#: The votes per ranked model the last good board needs before its scale is held to.
MIN_VOTES_PER_MODEL: int = 50


def scale_ratio(new: Mapping[str, float], old: Mapping[str, float]) -> float | None:
    """The spread of ``new`` over the spread of ``old`` (standard deviations of the scores of
    the models both have, at least 3), or ``None`` when it cannot be compared."""
    common = [m for m in new if m in old]
    if len(common) < 3:
        return None
    a = np.array([new[m] for m in common], dtype=float)
    b = np.array([old[m] for m in common], dtype=float)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return None
    sb = float(b.std())
    if sb <= 1e-12:
        return None
    return float(a.std()) / sb


def board_problems(
    scores: Mapping[str, float],
    *,
    converged: bool = True,
    previous: Mapping[str, float] | None = None,
    votes: int = 0,
    previous_votes: int = 0,
    max_scale_change: float = MAX_SCALE_CHANGE,
) -> list[str]:
    """What makes a fit unfit to publish, in words (empty: publish it).

    ``scores``: the new fit's scores by model (any consistent units); ``converged``: whether its
    solver converged; ``previous``/``previous_votes``: the last good board's scores and votes;
    ``votes``: the new fit's votes. The scale is compared only when the last good board had
    at least :data:`MIN_VOTES_PER_MODEL` votes per model and the votes have not more than
    doubled since.
    """
    problems = []
    if not converged:
        problems.append("the fit did not converge")
    bad = sorted(m for m, x in scores.items() if not math.isfinite(float(x)))
    if bad:
        problems.append(f"scores that are not finite: {', '.join(bad[:5])}")
    settled = previous is not None and previous_votes >= MIN_VOTES_PER_MODEL * len(previous)
    if previous and settled and not bad and votes <= 2 * max(previous_votes, 1):
        ratio = scale_ratio(scores, previous)
        if ratio is not None and not (1 / max_scale_change <= ratio <= max_scale_change):
            problems.append(
                f"the scores' spread changed ×{ratio:.3g} since the last good board with "
                f"{votes - previous_votes:+,} votes (believed up to ×{max_scale_change:g} "
                "either way unless the votes more than double)"
            )
    return problems
