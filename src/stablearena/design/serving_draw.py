"""The live arena's serving rule: which pair an annotator gets, and with what probability.

With probability 1 − ε the selector's pick, with probability ε a draw from the exploration
distribution over the allowed pairs — uniform, or ∝ b_i b_j when models are boosted (b_m the
boost of a model still short of its battle target, 1 otherwise). The probability the pair was
served with (its *propensity*) is stored with each battle:

    π(i, j) = (1 − ε) · P_selector(i, j) + ε · b_i b_j / Σ_{allowed (k, l)} b_k b_l

with P_selector the selector's own pick distribution
(:meth:`stablearena.design.selection.Selector.pick_distribution`, the one its ``select`` draws from),
so π > 0 for every allowed pair when ε > 0 and inverse-propensity estimates stay unbiased. See
docs/methods/live-arena.md and docs/methods/selection.md.

The live arena (:mod:`stablearena.service.state`) calls :func:`serving_draw` for each battle it
serves; an offline replay can call it with the same tracker, selector and random generator to
serve exactly what the arena would. :func:`simulate_served` does that on a simulated arena of
known Bradley–Terry strengths and keeps each battle's propensity, as the export does — the
adaptive design on which inverse-propensity weights (:meth:`stablearena.Battles.with_ipw`) and
their sandwich intervals are checked (bench/bench_ipw.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import numpy as np

from ..data.battles import Battles, Outcome
from ..errors import InputError
from .selection import InformationTracker, Selector

__all__ = ["boost_weights", "serving_draw", "exploration_draw", "simulate_served"]


def boost_weights(
    tracker: InformationTracker, boosted: Iterable[tuple[int, float, float]]
) -> np.ndarray | None:
    """Exploration weight per tracker model: a boosted model (``(position, boost,
    boost_until)``) with fewer than ``boost_until`` battles in ``tracker`` gets its boost, every
    other model 1; ``None`` when no boost is in force."""
    w = np.ones(tracker.n_models)
    any_boost = False
    for pos, boost, until in boosted:
        if tracker.pair_battles[pos].sum() < until:
            w[pos] = boost
            any_boost = True
    return w if any_boost else None


def serving_draw(
    tracker: InformationTracker,
    selector: Selector,
    candidates: np.ndarray,
    blocked: np.ndarray,
    n_excluded: int,
    *,
    exploration: float,
    boost: np.ndarray | None,
    rng: np.random.Generator,
) -> tuple[int, int, str, float]:
    """One draw of the serving rule: (i, j) (i < j, tracker positions), which part chose it
    (``"explore"`` or the selector's name) and its propensity π (module docstring).

    ``candidates``: the positions of the models a battle may use (sorted); ``blocked``: the
    mask of the pairs left out (models that are not candidates, pairs judged or already in the
    batch); ``n_excluded`` of those are distinct pairs of candidates, so the allowed pairs
    number C(len(candidates), 2) − n_excluded. ``boost``: :func:`boost_weights`."""
    ca = candidates
    eps = exploration
    si, sj, sp = selector.pick_distribution(tracker, blocked=blocked)
    if boost is None:
        b = None
        total = len(ca) * (len(ca) - 1) / 2.0 - n_excluded
    else:
        b = boost[ca]
        outer = np.outer(b, b)
        sub = blocked[np.ix_(ca, ca)]
        total = (outer.sum() - np.trace(outer)) / 2.0 - (outer * sub).sum() / 2.0
    if len(si) == 0 or rng.random() < eps:
        i, j = exploration_draw(blocked, ca, np.ones(len(ca)) if b is None else b, rng)
        path = "explore"
    else:
        r = int(rng.choice(len(sp), p=sp / sp.sum())) if len(sp) > 1 else 0
        i, j = int(si[r]), int(sj[r])
        path = selector.name
    hit = np.flatnonzero((si == i) & (sj == j))
    p_sel = float(sp[hit[0]]) if len(hit) else 0.0
    w_ij = 1.0 if boost is None else float(boost[i] * boost[j])
    prop = (1.0 - eps) * p_sel + eps * w_ij / float(total)
    return int(i), int(j), path, prop


def exploration_draw(
    blocked: np.ndarray, candidates: np.ndarray, weights: np.ndarray, rng: np.random.Generator
) -> tuple[int, int]:
    """A pair of allowed candidates (i < j) with probability ∝ w_i w_j (``weights`` per
    candidate; uniform when all equal): both ends drawn ∝ w, redrawn while equal or blocked
    (few redraws: most pairs are allowed); after many redraws, an exact draw over the enumerated
    allowed pairs."""
    ca, b = candidates, weights
    prob = b / b.sum()
    for _ in range(64):
        x, y = rng.choice(ca, 2, p=prob)
        if x != y and not blocked[x, y]:
            return (int(x), int(y)) if x < y else (int(y), int(x))
    sub = ~blocked[np.ix_(ca, ca)]
    iu, ju = np.nonzero(np.triu(sub, 1))
    w = b[iu] * b[ju]
    r = int(rng.choice(len(iu), p=w / w.sum()))
    x, y = int(ca[iu[r]]), int(ca[ju[r]])
    return (x, y) if x < y else (y, x)


def simulate_served(
    scores: np.ndarray,
    selector: Selector,
    n_battles: int,
    *,
    exploration: float = 0.1,
    refit_every: int = 50,
    seed: int | np.random.Generator = 0,
    models: Iterable[str] | None = None,
) -> Battles:
    """Battles served by the live arena's rule on a simulated arena, with their propensities.

    Each battle is drawn by :func:`serving_draw` (``selector``'s pick with probability
    1 − ``exploration``, else a uniform pair; one anonymous annotator, no pair blocked) and
    counted in the tracker at once, as the arena does; its vote comes from the Bradley–Terry
    truth ``scores`` (natural log-odds units: model i beats j with probability
    σ(scores_i − scores_j); the side shown first is random). Every ``refit_every`` battles the
    ratings are refitted (m-ELO) and the tracker refreshed at them — the design adapts to the
    outcomes so far, which is what makes unweighted and inverse-propensity analyses differ.

    Returns the log with ``extra["propensity"]`` (the draw probability of each battle's pair,
    as the export stores it) and ``extra["strategy"]`` (``"explore"`` or the selector's name);
    ``battles.with_ipw()`` weights it."""
    from ..raters.bradley_terry import MElo

    x = np.asarray(scores, dtype=float)
    m = len(x)
    if x.ndim != 1 or m < 2 or not np.all(np.isfinite(x)):
        raise InputError("scores must be at least two finite numbers (natural log-odds units).")
    if int(n_battles) != n_battles or n_battles < 1:
        raise InputError(f"n_battles must be a positive integer, not {n_battles!r}.")
    if not 0.0 < exploration <= 1.0:
        raise InputError(f"exploration must lie in (0, 1], not {exploration!r}.")
    if int(refit_every) != refit_every or refit_every < 1:
        raise InputError(f"refit_every must be a positive integer, not {refit_every!r}.")
    names = tuple(models) if models is not None else tuple(f"model_{k:02d}" for k in range(m))
    rng = np.random.default_rng(seed)
    tracker = InformationTracker(names, estimate=selector.estimate or "plug-in")  # as the arena
    candidates = np.arange(m)
    blocked = tracker.mask(np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64))
    n = int(n_battles)
    a = np.empty(n, dtype=np.int32)
    b = np.empty(n, dtype=np.int32)
    outcome = np.empty(n, dtype=np.int8)
    prop = np.empty(n)
    path = np.empty(n, dtype=object)
    rater = MElo()
    for t in range(n):
        i, j, path[t], prop[t] = serving_draw(
            tracker, selector, candidates, blocked, 0, exploration=exploration, boost=None, rng=rng
        )
        tracker.add(i, j)
        if rng.random() < 0.5:
            i, j = j, i
        a[t], b[t] = i, j
        won = rng.random() < 1.0 / (1.0 + np.exp(x[j] - x[i]))
        outcome[t] = Outcome.A if won else Outcome.B
        if (t + 1) % int(refit_every) == 0 and t + 1 < n and tracker.connected:
            sofar = Battles(names, a[: t + 1], b[: t + 1], outcome[: t + 1])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a model yet to lose: the prior, said elsewhere
                fitted = rater.fit(sofar)
            tracker.refresh(np.asarray(fitted.scores))
    return Battles(
        names,
        a,
        b,
        outcome,
        source="simulated serving",
        extra={"propensity": prop, "strategy": path},
    )
