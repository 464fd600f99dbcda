"""Metrics of rankings, predictions and detections (SPEC §6).

- :func:`pairwise_agreement`: the pairwise metric of Hastie & Tibshirani — the fraction of model
  pairs two rating vectors order the same way, 2/(N(N−1)) Σ_{i<j} 1[(r_i − r_j)(r̂_i − r̂_j) > 0].
- :func:`consistency`: the pairwise metric averaged over all pairs of runs.
- :func:`kendall_tau`: Kendall's τ-b (τ = 2·pairwise − 1 when there are no ties).
- :func:`prediction_mse`, :func:`prediction_auc`: am-ELO Table 2's prediction metrics.
- :func:`detection_scores`: precision, recall and F1 of a flagged set against the truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
from scipy.stats import kendalltau, rankdata

from .errors import InputError

__all__ = [
    "pairwise_agreement",
    "consistency",
    "kendall_tau",
    "prediction_mse",
    "prediction_auc",
    "detection_scores",
]


def _pair(
    r1: Sequence[float] | np.ndarray, r2: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(r1, dtype=float)
    b = np.asarray(r2, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise InputError(f"rating vectors must have the same length, got {a.shape} and {b.shape}.")
    if len(a) < 2:
        raise InputError("a ranking metric needs at least two models.")
    return a, b


def pairwise_agreement(r1: Sequence[float] | np.ndarray, r2: Sequence[float] | np.ndarray) -> float:
    """Fraction of model pairs ordered the same (strictly) by both rating vectors."""
    a, b = _pair(r1, r2)
    iu, ju = np.triu_indices(len(a), 1)
    return float(np.mean((a[iu] - a[ju]) * (b[iu] - b[ju]) > 0))


def consistency(runs: Sequence[Sequence[float] | np.ndarray]) -> float:
    """Pairwise agreement averaged over all pairs of runs (shuffles, restarts, perturbations)."""
    if len(runs) < 2:
        raise InputError("consistency needs at least two runs.")
    return float(np.mean([pairwise_agreement(x, y) for x, y in combinations(runs, 2)]))


def kendall_tau(r1: Sequence[float] | np.ndarray, r2: Sequence[float] | np.ndarray) -> float:
    """Kendall's τ-b between two rating vectors (0 when either is constant)."""
    a, b = _pair(r1, r2)
    tau = kendalltau(a, b).statistic
    return 0.0 if not np.isfinite(tau) else float(tau)


def prediction_mse(
    predicted: np.ndarray, observed: np.ndarray, weight: np.ndarray | None = None
) -> float:
    """Mean squared error of predicted expected scores against observed W ∈ {0, ½, 1}."""
    p = np.asarray(predicted, dtype=float)
    y = np.asarray(observed, dtype=float)
    w = np.ones_like(p) if weight is None else np.asarray(weight, dtype=float)
    if p.shape != y.shape or p.shape != w.shape:
        raise InputError("predicted, observed and weight must have the same shape.")
    if w.sum() <= 0:
        raise InputError("prediction_mse needs at least one weighted observation.")
    return float(np.sum(w * (p - y) ** 2) / w.sum())


def prediction_auc(
    predicted: np.ndarray, observed: np.ndarray, weight: np.ndarray | None = None
) -> float:
    """Area under the ROC curve of predicted P(i beats j) for the decisive outcomes.

    Observations with W = ½ (ties) carry no label and are left out; the AUC is the
    Mann–Whitney probability that a won comparison scores above a lost one (ties in the score
    count half), with optional weights.
    """
    p = np.asarray(predicted, dtype=float)
    y = np.asarray(observed, dtype=float)
    w = np.ones_like(p) if weight is None else np.asarray(weight, dtype=float)
    keep = (y != 0.5) & (w > 0)
    p, y, w = p[keep], y[keep], w[keep]
    pos, neg = y == 1, y == 0
    wp, wn = w[pos].sum(), w[neg].sum()
    if wp == 0 or wn == 0:
        raise InputError("AUC needs both won and lost comparisons.")
    # weighted Mann–Whitney via average ranks of tied scores
    order = np.argsort(p, kind="mergesort")
    ps, ys, ws = p[order], y[order], w[order]
    ranks = rankdata(ps)  # average ranks, only used to group equal scores
    groups, start = np.unique(ranks, return_index=True)
    gw_neg = np.add.reduceat(ws * (ys == 0), start)
    gw_pos = np.add.reduceat(ws * (ys == 1), start)
    neg_below = np.cumsum(gw_neg) - gw_neg
    u = np.sum(gw_pos * (neg_below + 0.5 * gw_neg))
    del groups
    return float(u / (wp * wn))


def detection_scores(flagged: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of boolean ``flagged`` against boolean ``truth`` (0 when undefined)."""
    f = np.asarray(flagged, dtype=bool)
    t = np.asarray(truth, dtype=bool)
    if f.shape != t.shape:
        raise InputError("flagged and truth must have the same shape.")
    tp = float(np.sum(f & t))
    precision = tp / f.sum() if f.sum() else 0.0
    recall = tp / t.sum() if t.sum() else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
