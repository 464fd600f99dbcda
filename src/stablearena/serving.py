"""The live arena's serving rule: which pair an annotator gets, and with what probability.

With probability 1 − ε the selector's pick, with probability ε a draw from the exploration
distribution over the allowed pairs — uniform, or ∝ b_i b_j when models are boosted (b_m the
boost of a model still short of its battle target, 1 otherwise). The probability the pair was
served with (its *propensity*) is stored with each battle:

    π(i, j) = (1 − ε) · P_selector(i, j) + ε · b_i b_j / Σ_{allowed (k, l)} b_k b_l

with P_selector the selector's own pick distribution
(:meth:`stablearena.selection.Selector.pick_distribution`, the one its ``select`` draws from),
so π > 0 for every allowed pair when ε > 0 and inverse-propensity estimates stay unbiased. See
docs/methods/live-arena.md and docs/methods/selection.md.

The live arena (:mod:`stablearena.service.state`) calls :func:`serving_draw` for each battle it
serves; an offline replay can call it with the same tracker, selector and random generator to
serve exactly what the arena would.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .selection import InformationTracker, Selector

__all__ = ["boost_weights", "serving_draw", "exploration_draw"]


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
