"""Metrics of rankings, predictions and detections (docs/methods/metrics.md).

- :func:`pairwise_agreement`: the pairwise metric of Hastie & Tibshirani — the fraction of model
  pairs two rating vectors order the same way, 2/(N(N−1)) Σ_{i<j} 1[(r_i − r_j)(r̂_i − r̂_j) > 0].
- :func:`consistency`: the pairwise metric averaged over all pairs of runs.
- :func:`kendall_tau`: Kendall's τ-b (τ = 2·pairwise − 1 when there are no ties).
- :func:`prediction_mse`, :func:`prediction_auc`: am-ELO Table 2's prediction metrics.
- :func:`detection_scores`: precision, recall and F1 of a flagged set against the truth.
- :func:`paired_difference`: per-seed differences of two strategies summarised as mean ± standard
  error with the seeds won, tied and lost.
- :func:`random_effects_mean`: DerSimonian–Laird pooling of per-arena estimates with the
  between-arena variance; :func:`pooled_paired_difference` applies it to per-seed differences
  on several arenas and adds a sign test over arena × seed.
- :func:`separability`, :func:`agreement_with_ci`, :func:`pair_rank_brier`, :func:`spearman`,
  :func:`benchmark_metrics`: the benchmark metrics of Arena-Hard-Auto's paper (Li et al. 2024,
  "From Crowdsourced Data to High-Quality Benchmarks"): how many model pairs a board's
  intervals separate, and how it agrees with a reference (human) board.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
from scipy.stats import kendalltau, rankdata

from ..errors import InputError

__all__ = [
    "pairwise_agreement",
    "consistency",
    "kendall_tau",
    "prediction_mse",
    "prediction_auc",
    "detection_scores",
    "paired_difference",
    "random_effects_mean",
    "pooled_paired_difference",
    "separability",
    "agreement_with_ci",
    "pair_rank_brier",
    "spearman",
    "benchmark_metrics",
]


def paired_difference(diffs: Sequence[float] | np.ndarray) -> dict[str, float | int]:
    """Summary of per-seed differences d_s (a strategy minus its baseline on the same seed):
    ``mean_diff`` = mean d, ``se`` = sample sd/√seeds (0 with one seed), and the seeds
    ``won`` (d > 0), ``tied`` (d = 0) and ``lost`` (d < 0)."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim != 1 or len(d) == 0:
        raise InputError("paired_difference() takes a non-empty vector of per-seed differences.")
    n = len(d)
    return {
        "mean_diff": float(d.mean()),
        "se": float(d.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0,
        "won": int(np.sum(d > 0)),
        "tied": int(np.sum(d == 0)),
        "lost": int(np.sum(d < 0)),
    }


def random_effects_mean(
    means: Sequence[float] | np.ndarray, ses: Sequence[float] | np.ndarray
) -> dict[str, float | int]:
    """DerSimonian–Laird random-effects mean of K estimates y_k with standard errors s_k.

    Fixed-effect weights w_k = 1/s_k², ȳ = Σ w_k y_k / Σ w_k, Cochran's Q = Σ w_k (y_k − ȳ)²;
    the between-estimate variance τ² = max(0, (Q − (K − 1)) / (Σ w_k − Σ w_k² / Σ w_k)); then
    w*_k = 1/(s_k² + τ²), ``mean`` = Σ w*_k y_k / Σ w*_k and ``se`` = (Σ w*_k)^(−1/2)
    (DerSimonian & Laird 1986, "Meta-analysis in clinical trials"). Also returns ``tau`` = τ,
    ``q`` = Q, ``i2`` = max(0, (Q − (K − 1))/Q) (the share of the spread that is between
    estimates; 0 when Q = 0), ``fixed_mean`` = ȳ, ``fixed_se`` = (Σ w_k)^(−1/2) and ``k``.
    With one estimate it is that estimate and its standard error; the random-effects standard
    error is never below the fixed-effect one, and it grows with the spread of the y_k.
    """
    y = np.asarray(means, dtype=float)
    s = np.asarray(ses, dtype=float)
    if y.ndim != 1 or y.shape != s.shape or len(y) == 0:
        raise InputError("random_effects_mean() takes two non-empty vectors of the same length.")
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(s)) and np.all(s > 0)):
        raise InputError(
            "random_effects_mean() needs finite estimates with positive standard errors "
            "(an arena with one seed, or with identical results for both strategies, has a "
            "standard error of 0: run at least two seeds)."
        )
    k = len(y)
    w = 1.0 / s**2
    fixed = float(np.sum(w * y) / np.sum(w))
    q = float(np.sum(w * (y - fixed) ** 2))
    c = float(np.sum(w) - np.sum(w**2) / np.sum(w))
    tau2 = max(0.0, (q - (k - 1)) / c) if k > 1 and c > 0 else 0.0
    ws = 1.0 / (s**2 + tau2)
    return {
        "mean": float(np.sum(ws * y) / np.sum(ws)),
        "se": float(1.0 / np.sqrt(np.sum(ws))),
        "tau": float(np.sqrt(tau2)),
        "q": q,
        "i2": max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0,
        "fixed_mean": fixed,
        "fixed_se": float(1.0 / np.sqrt(np.sum(w))),
        "k": k,
    }


def pooled_paired_difference(
    per_arena: Sequence[Sequence[float] | np.ndarray],
) -> dict[str, Any]:
    """Per-seed differences of two strategies on several arenas, pooled.

    Each arena's differences are summarised by :func:`paired_difference` (mean ± sample
    sd/√seeds); the arenas' means are pooled by :func:`random_effects_mean` (so a lead that
    varies from arena to arena carries that variance in its standard error). Returns
    ``mean_diff``, ``se``, ``tau``, ``i2`` and ``q`` of the pooled mean; ``won``, ``tied``,
    ``lost`` summed over arena × seed with ``sign_p``, the two-sided sign-test p-value of
    won against lost (ties left out; 1 when every seed is tied); and ``arenas``: the per-arena
    summaries.
    """
    from scipy.stats import binomtest

    if len(per_arena) == 0:
        raise InputError("pooled_paired_difference() needs at least one arena.")
    arenas = [paired_difference(d) for d in per_arena]
    pooled = random_effects_mean([a["mean_diff"] for a in arenas], [a["se"] for a in arenas])
    won = sum(int(a["won"]) for a in arenas)
    lost = sum(int(a["lost"]) for a in arenas)
    return {
        "mean_diff": pooled["mean"],
        "se": pooled["se"],
        "tau": pooled["tau"],
        "i2": pooled["i2"],
        "q": pooled["q"],
        "won": won,
        "tied": sum(int(a["tied"]) for a in arenas),
        "lost": lost,
        "sign_p": float(binomtest(won, won + lost).pvalue) if won + lost else 1.0,
        "arenas": arenas,
    }


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


# =============================================================================================
# Fit metrics of outcome models (leaderbot App. D; docs/methods/metrics.md)
# =============================================================================================
#
# How well a fitted model reproduces the observed outcome frequencies of each pair, on the data
# it was fitted on or on held-out counts. Every metric works with any fitted rater:
#
# - three-outcome models (Rao–Kupper, Davidson and their factored / covariance variants) are
#   scored on win / loss / tie, with ties of both kinds counted as ties;
# - Bradley–Terry models have no tie outcome. As in leaderbot (its ``tie=False`` evaluation, the
#   BT rows of Table D.1–D.3), they are scored in their own two-outcome space: m-ELO (ties as
#   half) against the counts w + t/2 and l + t/2, BT with ties dropped against w and l. Their
#   tie columns are ``None`` and their NLL is not comparable with a tie model's.
#
# Probabilities are floored at PROB_FLOOR inside logarithms, so a held-out outcome a model gives
# probability 0 (a Rao–Kupper pair whose fitted threshold is exactly 0 and that ties in the test
# data) costs −ln(1e−12) ≈ 27.6 nats instead of making the metric infinite.

from dataclasses import dataclass as _dataclass  # noqa: E402
from typing import Any as _Any  # noqa: E402

import pandas as _pd  # noqa: E402
from scipy.special import xlogy as _xlogy  # noqa: E402

from ..data.battles import Battles as _Battles  # noqa: E402
from ..data.battles import PairCounts as _PairCounts  # noqa: E402
from ..data.battles import as_counts as _as_counts  # noqa: E402

__all__ += [  # noqa: PLE0605
    "PROB_FLOOR",
    "OutcomeTable",
    "outcome_table",
    "fit_metrics",
    "marginal_outcomes",
    "split_counts",
    "kendall_tau_matrix",
]

#: Smallest probability used inside a logarithm (see the section comment).
PROB_FLOOR: float = 1e-12

#: Methods of the Bradley–Terry family that drop ties (scored on wins and losses only).
_TIES_DROPPED = frozenset({"bt"})


@_dataclass(frozen=True)
class OutcomeTable:
    """Observed counts and predicted probabilities of each outcome per pair row.

    ``observed`` and ``predicted`` are (rows, 3) arrays over (win of i, win of j, tie);
    ``space`` is ``"ties"`` (three outcomes), ``"half"`` or ``"drop"`` (two outcomes, tie column
    zero); ``i``, ``j`` the model indices of each row.
    """

    i: np.ndarray
    j: np.ndarray
    observed: np.ndarray
    predicted: np.ndarray
    space: str

    @property
    def n(self) -> np.ndarray:
        """Comparisons per row."""
        return self.observed.sum(axis=1)

    @property
    def n_outcomes(self) -> int:
        return 3 if self.space == "ties" else 2


def _outcome_space(fitted: _Any) -> str:
    space = getattr(fitted, "outcome_space", None)
    if space is not None:
        return str(space)
    if hasattr(fitted, "outcome_probabilities"):
        return "ties"
    return "drop" if getattr(fitted, "method", "") in _TIES_DROPPED else "half"


def outcome_table(fitted: _Any, counts: _Battles | _PairCounts | None = None) -> OutcomeTable:
    """Observed and predicted outcome frequencies of ``fitted`` on ``counts`` (default: the
    counts it was fitted on), rows with at least one comparison in the model's outcome space.

    ``fitted`` may be any fitted rater: one with ``outcome_probabilities(i, j)`` (the tie models)
    is asked for all three probabilities; any other is a Bradley–Terry-type model whose
    ``predict(i, j)`` is P(i beats j).
    """
    data = counts if counts is not None else getattr(fitted, "counts", None)
    if data is None:
        raise InputError(
            "no counts to evaluate: pass counts=, the fitted result does not keep its own."
        )
    c = _as_counts(data).collapse()
    if tuple(c.models) != tuple(fitted.models):
        known = set(fitted.models)
        unknown = [m for m in c.models if m not in known]
        if unknown:
            raise InputError(
                f"{c.source}: model(s) {unknown[:5]} were not in the fitted model; evaluate on data "
                "over the same models."
            )
    # map the counts' model codes to the fitted model's
    code = np.array([fitted.models.index(m) for m in c.models], dtype=np.int64)
    i, j = code[c.i], code[c.j]
    space = _outcome_space(fitted)
    ties = c.all_ties
    if space == "ties":
        obs = np.column_stack([c.wins, c.losses, ties])
    elif space == "half":
        obs = np.column_stack([c.wins + 0.5 * ties, c.losses + 0.5 * ties, np.zeros(len(c))])
    elif space == "drop":
        obs = np.column_stack([c.wins, c.losses, np.zeros(len(c))])
    else:
        raise InputError(f"unknown outcome space {space!r}.")
    keep = obs.sum(axis=1) > 0
    i, j, obs = i[keep], j[keep], obs[keep]
    if len(i) == 0:
        raise InputError(f"{c.source}: no comparisons to evaluate.")
    if hasattr(fitted, "outcome_probabilities"):
        pred = np.asarray(fitted.outcome_probabilities(i, j), dtype=float).reshape(len(i), 3)
    else:
        p = np.asarray(fitted.predict(i, j), dtype=float).reshape(len(i))
        pred = np.column_stack([p, 1.0 - p, np.zeros(len(i))])
    if space != "ties":
        pred = pred.copy()
        pred[:, 2] = 0.0
        pred[:, :2] /= pred[:, :2].sum(axis=1, keepdims=True)
    return OutcomeTable(i, j, obs, pred, space)


def _free_params(fitted: _Any) -> int | None:
    k = getattr(fitted, "n_free_params", None)
    if k is not None:
        return int(k)
    if getattr(fitted, "method", "") in ("m-elo", "bt"):
        return len(fitted.models) - 1  # scores up to a shift
    return None


def fit_metrics(fitted: _Any, counts: _Battles | _PairCounts | None = None) -> dict[str, _Any]:
    """Goodness of fit of ``fitted`` on ``counts`` (default: its training counts), leaderbot App. D.

    Returns a dict with ``n_comparisons``, ``n_pairs``, ``loglik`` (total), ``nll`` (per comparison),
    ``ce_win``, ``ce_loss``, ``ce_tie`` (cross-entropy per outcome, leaderbot eq. D.2; they sum to
    ``nll``), ``rmse_win``, ``rmse_loss``, ``rmse_tie``, ``rmse`` (RMSE of predicted vs observed
    counts n_ij P vs w_ij …, weighted by n_ij/n; ``rmse`` = √(mean of the squares over outcomes)),
    ``kld`` and ``jsd`` (KL and Jensen–Shannon divergence, nats, of the empirical outcome
    distribution of each pair from the predicted one, averaged over pairs), ``n_params`` (free
    parameters k), ``aic`` = 2k − 2 lnL and ``bic`` = k ln n − 2 lnL with lnL the *total*
    log-likelihood and n the number of comparisons (``None`` on held-out counts, or when k is not
    known for the method). Two-outcome (Bradley–Terry) models have ``None`` in the tie columns.
    """
    tab = outcome_table(fitted, counts)
    obs, pred = tab.observed, np.clip(tab.predicted, 0.0, 1.0)
    logp = np.log(np.maximum(pred, PROB_FLOOR))
    n_row = tab.n
    n = float(n_row.sum())
    ce = -(np.where(obs > 0, obs * logp, 0.0)).sum(axis=0) / n
    loglik = -float(ce.sum()) * n
    weight = n_row / n
    sq = (weight[:, None] * (obs - n_row[:, None] * pred) ** 2).sum(axis=0)
    k_out = tab.n_outcomes
    emp = obs / n_row[:, None]
    q = np.maximum(pred, PROB_FLOOR)
    kld = float(np.mean(np.sum(_xlogy(emp, emp) - _xlogy(emp, q), axis=1)))
    mix = 0.5 * (emp + pred)
    mixf = np.maximum(mix, PROB_FLOOR)
    jsd = float(
        np.mean(
            0.5 * np.sum(_xlogy(emp, emp) - _xlogy(emp, mixf), axis=1)
            + 0.5 * np.sum(_xlogy(pred, pred) - _xlogy(pred, mixf), axis=1)
        )
    )
    training = counts is None or counts is getattr(fitted, "counts", None)
    k = _free_params(fitted) if training else None
    out: dict[str, _Any] = {
        "n_comparisons": n,
        "n_pairs": int(len(n_row)),
        "loglik": loglik,
        "nll": -loglik / n,
        "ce_win": float(ce[0]),
        "ce_loss": float(ce[1]),
        "ce_tie": float(ce[2]) if k_out == 3 else None,
        "rmse_win": float(np.sqrt(sq[0])),
        "rmse_loss": float(np.sqrt(sq[1])),
        "rmse_tie": float(np.sqrt(sq[2])) if k_out == 3 else None,
        "rmse": float(np.sqrt(sq[:k_out].mean())),
        "kld": max(kld, 0.0),
        "jsd": max(jsd, 0.0),
        "n_params": k,
        "aic": None if k is None else 2.0 * k - 2.0 * loglik,
        "bic": None if k is None else k * float(np.log(n)) - 2.0 * loglik,
        "outcomes": tab.space,
    }
    return out


def marginal_outcomes(fitted: _Any, counts: _Battles | _PairCounts | None = None) -> _pd.DataFrame:
    """Per model: the observed and predicted fractions of its comparisons it won, lost and tied.

    Predicted fraction of i's comparisons won = Σ_pairs∋i n_ij P(i wins | pair) / Σ_pairs∋i n_ij
    (leaderbot eq. D.5, normalised per model rather than by all comparisons, so that each model's
    three fractions sum to 1; the relative errors are the same). Columns: ``model``, ``battles``,
    ``observed_win``, ``observed_loss``, ``observed_tie``, ``predicted_win``, ``predicted_loss``,
    ``predicted_tie`` (tie columns 0 for Bradley–Terry models, whose observed counts are then
    those of their own outcome space).
    """
    tab = outcome_table(fitted, counts)
    m = len(fitted.models)
    n_row = tab.n
    exp_counts = n_row[:, None] * tab.predicted

    def per_model(a: np.ndarray) -> np.ndarray:
        # a: (rows, 3) from i's side; for j the win/loss columns swap
        first = np.column_stack([np.bincount(tab.i, a[:, k], m) for k in range(3)])
        second = np.column_stack([np.bincount(tab.j, a[:, k], m) for k in (1, 0, 2)])
        return first + second

    obs = per_model(tab.observed)
    pred = per_model(exp_counts)
    battles = obs.sum(axis=1)
    denom = np.where(battles > 0, battles, 1.0)[:, None]
    obs_f, pred_f = obs / denom, pred / denom
    return _pd.DataFrame(
        {
            "model": list(fitted.models),
            "battles": battles,
            "observed_win": obs_f[:, 0],
            "observed_loss": obs_f[:, 1],
            "observed_tie": obs_f[:, 2],
            "predicted_win": pred_f[:, 0],
            "predicted_loss": pred_f[:, 1],
            "predicted_tie": pred_f[:, 2],
        }
    )


def split_counts(
    data: _Battles | _PairCounts,
    test_ratio: float,
    *,
    by: str = "battle",
    seed: int | None = 0,
) -> tuple[_PairCounts, _PairCounts]:
    """Split the comparisons into training and held-out test counts.

    ``by="battle"``: every comparison goes to the test set independently with probability
    ``test_ratio`` (on pair counts: a binomial draw per pair and outcome, which is the same
    thing; counts must be whole numbers). ``by="pair"``: whole pairs go to the test set, as in
    leaderbot's ``data.split``; the pairs of a random spanning tree of the comparison graph always
    stay in training so that it remains connected, and round(test_ratio × pairs) of the others
    are drawn. Both sets keep the full model list.
    """
    if not 0.0 < float(test_ratio) < 1.0:
        raise InputError(f"test_ratio must lie strictly between 0 and 1, got {test_ratio!r}.")
    c = _as_counts(data).collapse().nonempty()
    rng = np.random.default_rng(seed)
    cols = (c.wins, c.losses, c.ties, c.ties_both_bad)
    if by == "battle":
        if not all(np.allclose(x, np.round(x)) for x in cols):
            raise InputError(
                f"{c.source}: splitting by battle needs whole-number counts (these are weighted); "
                "split by pair instead (--split pair)."
            )
        test = [rng.binomial(np.round(x).astype(np.int64), test_ratio).astype(float) for x in cols]
        train = [np.round(x) - t for x, t in zip(cols, test, strict=True)]
        tr = c.with_counts(*train).nonempty()
        te = c.with_counts(*test).nonempty()
    elif by == "pair":
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import minimum_spanning_tree

        m = c.n_models
        weights = rng.random(len(c)) + 1.0  # random positive weights → a random spanning tree
        tree = minimum_spanning_tree(coo_matrix((weights, (c.i, c.j)), shape=(m, m))).tocoo()
        in_tree = np.zeros(len(c), dtype=bool)
        key = {(int(a), int(b)): r for r, (a, b) in enumerate(zip(c.i, c.j, strict=True))}
        for a, b in zip(tree.row, tree.col, strict=True):
            in_tree[key[(min(a, b), max(a, b))]] = True
        free = np.flatnonzero(~in_tree)
        n_test = min(int(round(test_ratio * len(c))), len(free))
        chosen = np.zeros(len(c), dtype=bool)
        chosen[rng.choice(free, n_test, replace=False)] = True
        tr, te = c.take(~chosen), c.take(chosen)
    else:
        raise InputError(f"split must be 'battle' or 'pair', not {by!r}.")
    if len(te) == 0:
        raise InputError(f"{c.source}: the test set is empty; use a larger test_ratio.")
    return tr, te


def kendall_tau_matrix(
    fitted: Sequence[_Any], labels: Sequence[str] | None = None
) -> _pd.DataFrame:
    """Kendall's τ-b between the rankings (scores) of every pair of fitted models (leaderbot App. E.3).

    All results must rate the same set of models (their order may differ). Returns a square
    DataFrame indexed by ``labels`` (default: each result's method).
    """
    if len(fitted) < 1:
        raise InputError("kendall_tau_matrix needs at least one fitted model.")
    names = list(fitted[0].models)
    rows = []
    for f in fitted:
        if set(f.models) != set(names):
            raise InputError("kendall_tau_matrix: every fitted model must rate the same models.")
        pos = {mname: k for k, mname in enumerate(f.models)}
        rows.append(np.asarray(f.scores, dtype=float)[[pos[mname] for mname in names]])
    lab = (
        list(labels)
        if labels is not None
        else [str(getattr(f, "method", k)) for k, f in enumerate(fitted)]
    )
    if len(lab) != len(fitted):
        raise InputError("labels must have one entry per fitted model.")
    k = len(rows)
    tau = np.ones((k, k))
    for a in range(k):
        for b in range(a + 1, k):
            tau[a, b] = tau[b, a] = kendall_tau(rows[a], rows[b])
    return _pd.DataFrame(tau, index=lab, columns=lab)


# ------------------------------------------------------------------------ benchmark metrics
def _intervals(
    lower: Sequence[float] | np.ndarray, upper: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    lo = np.asarray(lower, dtype=float)
    hi = np.asarray(upper, dtype=float)
    if lo.shape != hi.shape or lo.ndim != 1 or len(lo) < 2:
        raise InputError(
            "intervals need one lower and one upper bound per model, two models or more."
        )
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo > hi):
        raise InputError("every interval must be finite with lower <= upper.")
    return lo, hi


def _separated(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """m × m: +1 where i's interval lies wholly above j's, −1 wholly below, 0 overlapping."""
    return (lo[:, None] > hi[None, :]).astype(int) - (hi[:, None] < lo[None, :]).astype(int)


def separability(lower: Sequence[float] | np.ndarray, upper: Sequence[float] | np.ndarray) -> float:
    """Separability with confidence: the fraction of model pairs whose intervals do not
    overlap."""
    lo, hi = _intervals(lower, upper)
    iu, ju = np.triu_indices(len(lo), 1)
    return float(np.mean(_separated(lo, hi)[iu, ju] != 0))


def agreement_with_ci(
    lower: Sequence[float] | np.ndarray,
    upper: Sequence[float] | np.ndarray,
    ref_lower: Sequence[float] | np.ndarray,
    ref_upper: Sequence[float] | np.ndarray,
) -> float:
    """Agreement with confidence interval against a reference board: over the pairs the
    reference's intervals separate, +1 when the board's intervals separate them in the same
    order, −1 in the opposite order, 0 when the board's overlap; the mean (in [−1, 1])."""
    lo, hi = _intervals(lower, upper)
    rlo, rhi = _intervals(ref_lower, ref_upper)
    if len(lo) != len(rlo):
        raise InputError(f"the board has {len(lo)} models and the reference {len(rlo)}.")
    iu, ju = np.triu_indices(len(lo), 1)
    ref = _separated(rlo, rhi)[iu, ju]
    mine = _separated(lo, hi)[iu, ju]
    judged = ref != 0
    if not judged.any():
        raise InputError("the reference board separates no pair of models: nothing to agree with.")
    return float(np.mean(mine[judged] * ref[judged]))


def pair_rank_brier(
    samples: np.ndarray,
    ref_lower: Sequence[float] | np.ndarray,
    ref_upper: Sequence[float] | np.ndarray,
) -> float:
    """Pair-rank Brier score against a reference board (lower is better; 0.25 is a coin):
    over the pairs the reference separates, the mean of (p − y)², p the board's probability
    that i ranks above j (the fraction of its bootstrap rounds ``samples``, rounds × models,
    with i above j, ties half) and y = 1 if the reference ranks i above j, else 0."""
    x = np.asarray(samples, dtype=float)
    rlo, rhi = _intervals(ref_lower, ref_upper)
    if x.ndim != 2 or x.shape[1] != len(rlo) or x.shape[0] < 1 or not np.all(np.isfinite(x)):
        raise InputError("samples must be finite, rounds × models with the reference's models.")
    iu, ju = np.triu_indices(len(rlo), 1)
    ref = _separated(rlo, rhi)[iu, ju]
    judged = ref != 0
    if not judged.any():
        raise InputError("the reference board separates no pair of models: nothing to score.")
    d = x[:, iu] - x[:, ju]
    p = np.mean((d > 0) + 0.5 * (d == 0), axis=0)
    y = (ref > 0).astype(float)
    return float(np.mean((p[judged] - y[judged]) ** 2))


def spearman(r1: Sequence[float] | np.ndarray, r2: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation of two rating vectors (0 when either is constant)."""
    a, b = _pair(r1, r2)
    ra, rb = rankdata(a), rankdata(b)
    if np.ptp(ra) == 0 or np.ptp(rb) == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def benchmark_metrics(
    score: Sequence[float] | np.ndarray,
    lower: Sequence[float] | np.ndarray,
    upper: Sequence[float] | np.ndarray,
    samples: np.ndarray | None = None,
    reference: tuple[Sequence[float], Sequence[float], Sequence[float]] | None = None,
) -> dict[str, float]:
    """Arena-Hard-Auto's benchmark metrics of one board: ``separability``; with a
    ``reference`` board (score, lower, upper, same models in the same order) also
    ``agreement_with_ci``, ``spearman``, ``kendall_tau`` and, given the bootstrap
    ``samples``, ``brier``."""
    out = {"separability": separability(lower, upper)}
    if reference is not None:
        rs, rlo, rhi = reference
        out["agreement_with_ci"] = agreement_with_ci(lower, upper, rlo, rhi)
        out["spearman"] = spearman(score, rs)
        out["kendall_tau"] = kendall_tau(score, rs)
        if samples is not None:
            out["brier"] = pair_rank_brier(samples, rlo, rhi)
    return out
