"""Honest uncertainty for any fitted rating model (docs/methods/uncertainty.md).

Scores are identified only up to the model's symmetries (a shift for every model; a scale for
am-ELO; …), so every variance here is for a stated normalisation — ratings with mean 1000 (the
mean-zero scores) or with an anchor model fixed — or for differences R_i − R_j, which need none.

Three estimators, each working with any :class:`~stablearena.raters.base.Fitted` that implements
the information contract (``parameters``, ``hessian``, ``score_contributions``, ``refit``,
``gauge_constraints``):

- **fisher**: the inverse observed information on the identifiable subspace. With H the Hessian
  of the log-likelihood and G the Jacobian of the model's normalisation constraints, the
  covariance is the upper-left block P of the inverse of the bordered matrix
  [[−H, G], [Gᵀ, 0]] (Aitchison & Silvey 1958; for Bradley–Terry P is the pseudo-inverse L⁺ of
  the information Laplacian, docs/methods/uncertainty.md), times the model's dispersion φ (1 for a proper
  likelihood; the Pearson estimate for ties scored as half, see ``Fitted.dispersion``).
- **sandwich**: P B P with the meat B = Σ_rows Σ_outcomes N g gᵀ of per-comparison score
  vectors (Huber 1967; White 1982) — robust to misspecification, what LMArena's arena-rank
  reports. With sampling weights (inverse propensities, :meth:`Battles.with_ipw`) the bread is
  the weighted Hessian and the meat B = Σ_battles w² g gᵀ, read from the counts' squared
  weights (:attr:`PairCounts.squares`); Fisher intervals and the battle bootstrap, which would
  treat such weights as frequencies, are refused.
- **bootstrap**: refits on resampled data. Battle level: the pair counts are redrawn as one
  multinomial sample of the same total over all (row, outcome) cells — exactly what resampling
  battles with replacement does, without touching battles. Clustered: whole annotators or prompts
  are resampled with replacement from a raw :class:`~stablearena.data.battles.Battles`. Round r uses
  the random stream ``SeedSequence(seed, spawn_key=(r,))``, and rounds are processed in blocks
  fixed by the data alone, so results are the same for any number of worker processes. m-ELO
  and BT refit each round with a compiled exact solver (:func:`_bt_round`); other models call
  ``fitted.refit``.

From these come rating intervals (normal for fisher/sandwich, percentile for the bootstrap),
rank intervals (bootstrap ranks, or the ranks of draws from the normal approximation),
the win-probability matrix with intervals, Chatbot Arena's displayed rank and tiers.
"""

from __future__ import annotations

import multiprocessing
import os
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from .._lifetime import exit_with_parent
from .._numeric import expit, normal_ppf, normal_sf
from .._progress import report
from .._threads import single_threaded_blas
from ..choices import CI_METHODS
from ..data.battles import Battles, PairCounts
from ..data.graph import check_comparison_graph
from ..errors import (
    ConvergenceError,
    DisconnectedGraphError,
    InputError,
    StableArenaError,
    StableArenaWarning,
)
from .base import _BT_LIKELIHOOD, Fitted, rater_names
from .information import dense_bytes, laplacian, laplacian_pinv, require_memory

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "CI_METHODS",
    "Covariance",
    "covariance",
    "Bootstrap",
    "bootstrap",
    "resample_counts",
    "Intervals",
    "intervals",
    "rank_intervals",
    "normal_rank_samples",
    "displayed_rank",
    "tiers",
    "WinProbability",
    "win_probability",
]

CIMethod = Literal["fisher", "sandwich", "bootstrap"]
ClusterBy = Literal["annotator", "prompt"]
#: Draws from the normal approximation used for its rank intervals (Monte Carlo error of a
#: 2.5% quantile of a rank with 4,000 draws is well under one rank).
NORMAL_RANK_DRAWS: int = 4000
#: Compiled-solver iterations before a bootstrap round falls back to the exact Newton fit.
_CHORD_MAX_ITER: int = 40
#: What to do when a dense covariance does not fit in memory (the end of the refusal).
MEMORY_HINT: str = (
    "free memory or use a larger machine, or rate fewer models at once (--min-battles N drops "
    "models with fewer than N battles, --exclude leaves models out)."
)
#: Target number of (round × cell) resampled counts held per block of rounds.
_BLOCK_CELLS: int = 1 << 20


# ============================================================================ normalisation
def _normaliser(fitted: Fitted) -> np.ndarray:
    """Matrix A with ratings = A scores / scale + constant under the fitted normalisation:
    I − 11ᵀ/m for mean 1000, I − 1 e_aᵀ for an anchored model a."""
    m = fitted.n_models
    if fitted.anchor is None:
        return np.eye(m) - np.full((m, m), 1.0 / m)
    a = np.zeros((m, m))
    a[:, fitted.models.index(fitted.anchor[0])] = 1.0
    return np.eye(m) - a


def _ratings_from_scores(fitted: Fitted, scores: np.ndarray) -> np.ndarray:
    """Elo-scale ratings of score vectors (rows) under ``fitted``'s normalisation."""
    r = np.asarray(scores, dtype=float) / fitted.elo_scale
    if fitted.anchor is None:
        return r - r.mean(axis=-1, keepdims=True) + float(np.mean(fitted.ratings))
    k = fitted.models.index(fitted.anchor[0])
    return r - r[..., k : k + 1] + fitted.anchor[1]


def _check_level(level: float) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise InputError(
            f"the confidence level must lie strictly between 0 and 1 (e.g. 0.95), not {level}."
        )
    return level


# ============================================================================ covariance
@dataclass(frozen=True, eq=False)
class Covariance:
    """Covariance of a fitted model's estimates.

    Attributes:
        kind: ``"fisher"``, ``"sandwich"`` or ``"bootstrap"``.
        scores: m×m covariance of the scores (natural units) in the model's gauge; only its
            contrasts are meaningful.
        params: covariance of the full :meth:`Fitted.parameters` vector (``None`` for the
            bootstrap, which only records scores).
        dispersion: the φ the Fisher covariance was multiplied by (1 otherwise).
        notes: anything the user should know (e.g. a symmetry fixed by the pseudo-inverse).
    """

    kind: str
    fitted: Fitted = field(repr=False)
    scores: np.ndarray = field(repr=False)
    params: np.ndarray | None = field(default=None, repr=False)
    dispersion: float = 1.0
    notes: tuple[str, ...] = ()

    @property
    def ratings(self) -> np.ndarray:
        """m×m covariance of the Elo-scale ratings under the fitted normalisation (mean 1000,
        or the anchor model fixed — its variance is then 0)."""
        a = _normaliser(self.fitted)
        c = a @ self.scores @ a.T / self.fitted.elo_scale**2
        return (c + c.T) / 2

    @property
    def se(self) -> np.ndarray:
        """Standard errors of the ratings (Elo points) under the fitted normalisation: the
        diagonal of :attr:`ratings`, computed from the scores' covariance in O(m²) without
        forming the m×m matrix (A Σ Aᵀ)_ii = Σ_ii − 2 (Σ1)_i/m + 1ᵀΣ1/m² for mean 1000, or
        Σ_ii − 2 Σ_ia + Σ_aa with the anchor a fixed."""
        c = self.scores
        d = np.diag(c).astype(float)
        if self.fitted.anchor is None:
            m = c.shape[0]
            row = c.sum(axis=1) / m
            var = d - 2 * row + row.sum() / m
        else:
            a = self.fitted.models.index(self.fitted.anchor[0])
            var = d - 2 * c[:, a] + c[a, a]
        return np.sqrt(np.clip(var / self.fitted.elo_scale**2, 0.0, None))

    def difference_se(self, a: Any = None, b: Any = None) -> np.ndarray | float:
        """Standard error (Elo points) of R_a − R_b: √((e_a − e_b)ᵀ Σ (e_a − e_b)); the full m×m
        matrix when ``a`` and ``b`` are omitted (given pairs are computed alone, in O(pairs)).
        Needs no normalisation."""
        c = self.scores
        if a is None and b is None:
            c = c / self.fitted.elo_scale**2
            d = np.diag(c)
            return np.sqrt(np.clip(d[:, None] + d[None, :] - 2 * c, 0.0, None))
        ia = np.vectorize(self.fitted.index)(a) if not isinstance(a, np.ndarray) else a
        ib = np.vectorize(self.fitted.index)(b) if not isinstance(b, np.ndarray) else b
        ia, ib = np.broadcast_arrays(np.asarray(ia, dtype=np.int64), np.asarray(ib, dtype=np.int64))
        s2 = self.fitted.elo_scale**2  # the full matrix's arithmetic, entry by entry
        var = (c[ia, ia] / s2 + c[ib, ib] / s2) - 2 * (c[ia, ib] / s2)
        out = np.where(ia == ib, 0.0, np.sqrt(np.clip(var, 0.0, None)))
        return float(out) if np.ndim(out) == 0 else out


def _bread_inverse(h: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Upper-left block P of [[−H, G], [Gᵀ, 0]]⁻¹ — the inverse information on the subspace the
    constraints leave free. Falls back to the pseudo-inverse of the bordered matrix (minimum-norm
    gauge) when the constraints do not fix every symmetry of H, and says so."""
    n = h.shape[0]
    info = -np.asarray(h, dtype=float)
    info = (info + info.T) / 2
    k = g.shape[1]
    # scaling the constraint columns leaves P unchanged and keeps the system well conditioned
    scale = max(float(np.mean(np.abs(np.diag(info)))), 1e-300)
    gs = g / np.maximum(np.linalg.norm(g, axis=0), 1e-300) * np.sqrt(scale)
    bordered = np.zeros((n + k, n + k))
    bordered[:n, :n] = info
    bordered[:n, n:] = gs
    bordered[n:, :n] = gs.T
    rhs = np.zeros((n + k, n))
    rhs[:n] = np.eye(n)
    notes: tuple[str, ...] = ()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", scipy.linalg.LinAlgWarning)
            sol = scipy.linalg.solve(bordered, rhs, assume_a="sym", check_finite=False)
        p = sol[:n]
        if not np.all(np.isfinite(p)):
            raise np.linalg.LinAlgError
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError, scipy.linalg.LinAlgWarning):
        pinv = np.linalg.pinv(bordered, rcond=1e-10, hermitian=True)
        p = pinv[:n, :n]
        s = np.linalg.eigvalsh(bordered)
        deficient = int(np.sum(np.abs(s) <= 1e-10 * np.max(np.abs(s))))
        notes = (
            f"the information matrix has {deficient} direction(s) the model's constraints do not "
            "fix; the covariance uses the minimum-norm (pseudo-inverse) gauge for them.",
        )
    return (p + p.T) / 2, notes


def _is_plain_bt(fitted: Fitted) -> bool:
    """A base-class Bradley–Terry result (m-elo or bt) whose contract methods are the base ones."""
    return fitted.method in ("m-elo", "bt") and type(fitted).hessian is Fitted.hessian


def _is_bt_meat(fitted: Fitted) -> bool:
    """Whether the meat of ``fitted`` is the Bradley–Terry one of the base class (m-elo, bt,
    elo read as Bradley–Terry)."""
    return (
        type(fitted).score_contributions is Fitted.score_contributions
        and fitted.method in _BT_LIKELIHOOD
    )


def sampling_weighted(fitted: Fitted) -> bool:
    """Whether ``fitted`` was fitted on sampling-weighted counts (:attr:`PairCounts.squares`:
    inverse-propensity weights, :meth:`Battles.with_ipw`)."""
    return fitted.counts is not None and fitted.counts.squares is not None


#: What to do instead when an interval method would treat sampling weights as frequencies.
SAMPLING_HINT: str = (
    "the weights are sampling weights (inverse propensities, --ipw / Battles.with_ipw), not "
    "frequencies: a weight of 3 is one battle standing for three, not three battles"
)


def _meat(fitted: Fitted) -> np.ndarray:
    """B = Σ_rows Σ_outcomes N g gᵀ from the score contributions (a weighted Laplacian for
    Bradley–Terry, computed without the dense per-row gradients; a result class may also offer
    a memory-light ``outer_product()`` returning B, which is then used)."""
    squares = fitted._bt_square_rows() if _is_bt_meat(fitted) else None
    if squares is not None:
        # sampling weights: B = Σ_battles w² g gᵀ — per row and outcome Σ w² (W − p)²
        i, j, _, w = fitted._bt_rows()
        p = expit(fitted.scores[i] - fitted.scores[j])
        weight = np.sum(squares * (w[None, :] - p[:, None]) ** 2, axis=1)
        return laplacian(fitted.n_models, i, j, weight)
    light = getattr(fitted, "outer_product", None)
    if callable(light):
        return np.asarray(light(), dtype=float)
    if _is_bt_meat(fitted):
        i, j, counts, w = fitted._bt_rows()
        p = expit(fitted.scores[i] - fitted.scores[j])
        weight = np.sum(counts * (w[None, :] - p[:, None]) ** 2, axis=1)
        return laplacian(fitted.n_models, i, j, weight)
    g, n = fitted.score_contributions()
    g = np.asarray(g, dtype=float)
    n = np.asarray(n, dtype=float)
    if g.ndim != 3 or n.shape != g.shape[:2]:
        raise StableArenaError(
            f"{type(fitted).__name__}.score_contributions returned shapes {g.shape} and {n.shape}; "
            "expected (rows, outcomes, n_params) and (rows, outcomes)."
        )
    gw = (g * np.sqrt(n)[:, :, None]).reshape(-1, g.shape[2])
    return gw.T @ gw


def covariance(
    fitted: Fitted,
    kind: Literal["fisher", "sandwich"] = "fisher",
    *,
    dispersion: float | None = None,
) -> Covariance:
    """Covariance of ``fitted``'s estimates from its information (docs/methods/uncertainty.md).

    ``kind="fisher"``: φ·P, P the inverse information on the identifiable subspace (module
    docstring), φ = ``dispersion`` or ``fitted.dispersion()`` when ``None``.
    ``kind="sandwich"``: P B P (φ plays no part: B measures the actual spread of the scores).
    """
    if kind not in ("fisher", "sandwich"):
        raise InputError(f"covariance kind must be 'fisher' or 'sandwich', not {kind!r}.")
    sampling = sampling_weighted(fitted)
    if sampling and kind == "fisher":
        raise InputError(
            f"no Fisher intervals: {SAMPLING_HINT}, and the Fisher covariance Σ w H would count "
            "them as extra battles — intervals too narrow. Use the sampling-weight sandwich: "
            "--ci sandwich (covariance(fitted, 'sandwich'))."
        )
    if sampling and not _is_bt_meat(fitted):
        raise InputError(
            f"{fitted.method}: no sandwich with sampling weights ({SAMPLING_HINT}): the "
            "sampling-weight sandwich is implemented for m-elo, bt and elo; rank with one of "
            "them, or without inverse-propensity weights."
        )
    try:
        h = np.asarray(fitted.hessian(), dtype=float)
        g = np.asarray(fitted.gauge_constraints(), dtype=float)
    except NotImplementedError as exc:
        raise InputError(f"{fitted.method}: no {kind} intervals — {exc}") from None
    n = h.shape[0]
    if h.shape != (n, n) or n < fitted.n_models or g.ndim != 2 or g.shape[0] != n:
        raise StableArenaError(
            f"{type(fitted).__name__}: hessian() has shape {h.shape} and gauge_constraints() "
            f"{g.shape}; expected (n, n) and (n, k) with n ≥ {fitted.n_models}."
        )
    if not np.all(np.isfinite(h)):
        raise StableArenaError(f"{fitted.method}: the Hessian holds non-finite values.")
    p = None
    notes: tuple[str, ...] = ()
    if _is_plain_bt(fitted) and type(fitted).gauge_constraints is Fitted.gauge_constraints:
        # Bradley–Terry with mean-zero scores: P is the Laplacian's pseudo-inverse, by Cholesky
        # in the Hessian's own memory (the bordered solve below needs four m×m arrays and 2.3m³
        # flops: 1,000 s at 8,000 models)
        report(f"Fisher covariance: Cholesky inverse of the {n}×{n} information")
        np.negative(h, out=h)
        with single_threaded_blas():
            try:
                p = laplacian_pinv(h, overwrite=True)
            except np.linalg.LinAlgError:
                p = None  # not positive definite: the bordered solve says why
        if p is not None and not np.all(np.isfinite(p)):
            p = None
        if p is None:
            h = np.asarray(fitted.hessian(), dtype=float)
    if p is None:
        k = g.shape[1]
        require_memory(
            dense_bytes(n + k, 4),
            f"the {fitted.method} {kind} covariance of {n:,} parameters (four dense "
            f"{n + k}×{n + k} arrays)",
            MEMORY_HINT,
        )
        report(f"{kind} covariance: bordered solve of the {n + k}×{n + k} information")
        with single_threaded_blas():
            p, notes = _bread_inverse(h, g)
    if fitted.method == "elo":
        notes += (
            "online Elo is not a maximum-likelihood fit: these are the Bradley–Terry (ties as ½) "
            "information intervals evaluated at its ratings.",
        )
    m = fitted.n_models
    phi = 1.0
    if kind == "fisher":
        phi = float(fitted.dispersion()) if dispersion is None else float(dispersion)
        if dispersion is None and phi == 0.0:
            notes += (
                "every comparison is a tie: the outcome scores (all ½) have no variance, so the "
                "estimated dispersion φ is 0 and the ratings — all equal — have zero-width "
                "intervals; the rank intervals span the tied models.",
            )
        elif not (np.isfinite(phi) and phi > 0):
            raise InputError(f"dispersion must be a positive number, not {phi}.")
        cov = p
        if phi != 1.0:
            cov *= phi  # in place: p is no longer needed
        if phi not in (0.0, 1.0):
            notes += (
                f"Fisher covariance scaled by the estimated dispersion φ = {phi:.4f} (ties scored as ½).",
            )
    else:
        require_memory(
            dense_bytes(n, 3),
            f"the {fitted.method} sandwich covariance of {n:,} parameters (P B P: three more "
            f"dense {n}×{n} arrays)",
            MEMORY_HINT,
        )
        b = _meat(fitted)
        cov = p @ b @ p
        cov = (cov + cov.T) / 2
        if sampling:
            notes += (
                "sampling weights (inverse propensities): sandwich A⁺ B A⁺ with A = Σ w H, the "
                "weighted information, and B = Σ w² g gᵀ over battles.",
            )
    # the scores' block is the whole matrix when the parameters are the scores: shared, not copied
    scores = cov if cov.shape[0] == m else cov[:m, :m].copy()
    return Covariance(kind, fitted, scores, cov, phi, notes)


# ============================================================================ bootstrap
@dataclass(frozen=True, eq=False)
class Bootstrap:
    """Bootstrap replicates of a fitted model.

    Attributes:
        scores: rounds × m scores (natural units) of the successful rounds, each in the model's
            own gauge (mean zero for Bradley–Terry).
        seed, cluster: how the rounds were drawn (``cluster`` None = battle level).
        failed: rounds whose resample had no rating (e.g. a model left without battles); they are
            left out and counted here.
        prior_rounds: rounds whose resample needed the existence prior (a model never lost or
            never won in it).
        win_matrices: rounds × m × m expected scores (float32), kept only when asked for models
            whose prediction is not σ(x_i − x_j).
    """

    fitted: Fitted = field(repr=False)
    scores: np.ndarray = field(repr=False)
    seed: int
    cluster: str | None
    rounds: int
    failed: int = 0
    prior_rounds: int = 0
    notes: tuple[str, ...] = ()
    win_matrices: np.ndarray | None = field(default=None, repr=False)

    @property
    def ratings(self) -> np.ndarray:
        """rounds × m Elo-scale ratings under the fitted normalisation."""
        return _ratings_from_scores(self.fitted, self.scores)

    def covariance(self) -> Covariance:
        """Sample covariance of the replicated scores."""
        c = (
            np.cov(self.scores, rowvar=False)
            if len(self.scores) > 1
            else np.zeros((self.fitted.n_models,) * 2)
        )
        return Covariance("bootstrap", self.fitted, np.atleast_2d(c), None, 1.0, self.notes)

    def percentile(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Percentile intervals of the ratings (Efron's percentile method)."""
        level = _check_level(level)
        a = (1 - level) / 2
        low, high = np.quantile(self.ratings, [a, 1 - a], axis=0)
        return low, high

    def ranks(self) -> np.ndarray:
        """rounds × m ranks (1 = best) of each replicate."""
        return _ranks(self.scores)


def _ranks(scores: np.ndarray, *, worse: bool = False) -> np.ndarray:
    """Rank 1 + #{j: x_j > x_i} of each entry of each row (equal scores share the better rank),
    or with ``worse`` #{j: x_j ≥ x_i} (equal scores share the worse rank).

    Each row is sorted once and ties found among neighbours: O(m log m) per row (the pairwise
    comparison this replaces was O(m²): 4,000 rows of 8,000 models took minutes)."""
    x = np.atleast_2d(np.asarray(scores, dtype=float))
    n, m = x.shape
    out = np.empty(x.shape, dtype=np.int64)
    if m == 0:
        return out
    step = max(1, (1 << 18) // m)  # a few MB per block whatever m
    pos = np.arange(m)
    for lo in range(0, n, step):
        blk = x[lo : lo + step]
        order = np.argsort(blk, axis=1)  # tie groups get one value: stability is not needed
        srt = np.take_along_axis(blk, order, axis=1)
        new = srt[:, 1:] != srt[:, :-1]  # a tie group starts after each True
        if worse:
            # #{x_j ≥ x_i} = m − (first position of x_i's tie group among the sorted row)
            start = np.where(np.column_stack([np.ones(len(blk), bool), new]), pos, 0)
            val = m - np.maximum.accumulate(start, axis=1)
        else:
            # 1 + #{x_j > x_i} = 1 + m − (1 + last position of x_i's tie group)
            end = np.where(np.column_stack([new, np.ones(len(blk), bool)]), pos, m)
            val = m - np.minimum.accumulate(end[:, ::-1], axis=1)[:, ::-1]
        np.put_along_axis(out[lo : lo + step], order, val, axis=1)
    return out


@dataclass(frozen=True, eq=False)
class _Task:
    """What a worker needs to run bootstrap rounds (inherited by fork, or pickled once)."""

    fitted: Fitted
    seed: int
    rounds: int
    block: int
    n_rows: int  # rows of fitted.resampling_table()
    cell_row: np.ndarray  # row of each nonzero (row, outcome) cell
    cell_cat: np.ndarray  # outcome 0..3 of each cell
    cell_weight: np.ndarray  # its (weighted) count
    cell_cum: np.ndarray  # cumulative sum of cell_weight
    n_draw: int  # battles per resample
    cluster_matrix: sp.csr_matrix | None  # cells × clusters counts (clustered bootstrap)
    fast: _FastBT | None
    keep_win_matrices: bool


@dataclass(frozen=True, eq=False)
class _FastBT:
    """Bradley–Terry data of the compiled bootstrap solver (see :func:`_bt_round`)."""

    m: int
    i: np.ndarray  # row → model i (int64)
    j: np.ndarray  # row → model j
    n_weight: np.ndarray  # per outcome 0..3: comparisons it counts as (ties dropped: 0 for ties)
    s_weight: np.ndarray  # per outcome: score of i (1, 0, ½, ½; ties dropped: 1, 0, 0, 0)
    x_hat: np.ndarray
    p0: np.ndarray  # inverse information at x_hat on the mean-zero subspace
    tol: float
    exact_only: bool  # the full data already needed the prior: use the exact fit every round


def _round_rng(seed: int, r: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(r,)))


def _multinomial_cells(
    rng: np.random.Generator, weight: np.ndarray, cum: np.ndarray, n: int
) -> np.ndarray:
    """One multinomial sample of ``n`` draws over cells with probabilities ∝ ``weight``.

    Exact, via Poisson(n p_k) counts corrected to total n: given their total t the Poisson counts
    are Multinomial(t, p); removing t − n of those t items uniformly at random (or adding n − t
    fresh draws) leaves n exchangeable draws from p, i.e. Multinomial(n, p). About three times
    faster than sequential binomials for tens of thousands of cells."""
    total = cum[-1]
    y = rng.poisson(n * (weight / total))
    t = int(y.sum())
    if t > n:
        pos = rng.choice(t, size=t - n, replace=False)
        y -= np.bincount(np.searchsorted(np.cumsum(y), pos, side="right"), minlength=len(y))
    elif t < n:
        u = rng.random(n - t) * total
        y += np.bincount(np.searchsorted(cum, u, side="right"), minlength=len(y))
    return y.astype(float)


def _draw_cells(task: _Task, r: int) -> np.ndarray:
    """Resampled counts of the nonzero cells for round ``r``."""
    rng = _round_rng(task.seed, r)
    if task.cluster_matrix is None:
        return _multinomial_cells(rng, task.cell_weight, task.cell_cum, task.n_draw)
    k = task.cluster_matrix.shape[1]
    mult = rng.multinomial(k, np.full(k, 1.0 / k)).astype(float)
    return task.cluster_matrix @ mult


def _cells_to_table(task: _Task, cells: np.ndarray) -> np.ndarray:
    table = np.zeros((task.n_rows, 4))
    np.add.at(table, (task.cell_row, task.cell_cat), cells)
    return table


def _refit_round(
    task: _Task, cells: np.ndarray
) -> tuple[np.ndarray | None, bool, np.ndarray | None]:
    """(scores or None on failure, needed the prior, win matrix) of one round via
    ``refit_table``."""
    table = _cells_to_table(task, cells)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StableArenaWarning)
        try:
            res = task.fitted.refit_table(table)
        except (DisconnectedGraphError, ConvergenceError):
            return None, False, None
    prior = any(issubclass(w.category, StableArenaWarning) for w in caught)
    scores = np.asarray(res.scores, dtype=float)
    if not np.all(np.isfinite(scores)):
        return None, prior, None
    wm = res.win_matrix().astype(np.float32) if task.keep_win_matrices else None
    return scores, prior, wm


def _bt_round_py(
    cells: np.ndarray,
    cell_row: np.ndarray,
    cell_cat: np.ndarray,
    n_weight: np.ndarray,
    s_weight: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    x_hat: np.ndarray,
    p0: np.ndarray,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, bool]:  # pragma: no cover - compiled
    """Exact Bradley–Terry fit of one resample, compiled.

    A simplified (chord) Newton iteration x ← x + P₀ ∇lnL(x), P₀ the inverse information at the
    full-data optimum x̂: a resample's Hessian differs from it by O(1/√n), so each iteration
    gains about that factor, and the fixed point is the exact MLE ∇lnL = 0. Stops when
    ‖∇lnL‖/n ≤ tol — the criterion of :class:`~stablearena.raters.MElo`. Returns (scores with
    mean zero, ok); not ok when a model never won or never lost in the resample (no finite MLE),
    the rows drawn leave the comparison graph disconnected, or the iteration did not converge:
    the caller then runs the exact Newton fit (with the prior; a disconnected resample fails).
    """
    m = len(x_hat)
    rows = len(i)
    n = np.zeros(rows)
    s = np.zeros(rows)
    won = np.zeros(m)
    lost = np.zeros(m)
    for k in range(len(cells)):
        c = cells[k]
        if c == 0.0:
            continue
        r = cell_row[k]
        o = cell_cat[k]
        n[r] += c * n_weight[o]
        s[r] += c * s_weight[o]
        if n_weight[o] > 0.0:
            # a win of i is not a loss for i; a tie is neither (it counts both ways)
            if s_weight[o] > 0.0:
                won[i[r]] += c
                lost[j[r]] += c
            if s_weight[o] < 1.0:
                lost[i[r]] += c
                won[j[r]] += c
    total = n.sum()
    x = x_hat.copy()
    if total <= 0.0 or won.min() <= 0.0 or lost.min() <= 0.0:
        return x, False
    # a resample whose drawn rows leave the comparison graph disconnected has no rating gap
    # between the parts (the chord iteration would keep the full-data gap and understate the
    # spread): union–find over the rows drawn, not ok unless they connect every model
    parent = np.arange(m)
    left = m - 1
    for r in range(rows):
        if n[r] == 0.0:
            continue
        a = i[r]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        b = j[r]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a != b:
            parent[a] = b
            left -= 1
    if left > 0:
        return x, False
    g = np.zeros(m)
    last = np.inf
    for _ in range(max_iter):
        g[:] = 0.0
        for r in range(rows):
            if n[r] == 0.0:
                continue
            p = 1.0 / (1.0 + np.exp(x[j[r]] - x[i[r]]))
            res = s[r] - n[r] * p
            g[i[r]] += res
            g[j[r]] -= res
        gnorm = np.sqrt(np.sum(g * g)) / total
        if gnorm <= tol:
            return x - x.mean(), True
        if not np.isfinite(gnorm) or gnorm > 4.0 * last:
            return x, False
        last = gnorm
        x += p0 @ g
    return x, False


_COMPILED: dict[str, Any] = {}


def _bt_round_kernel() -> Any:
    """:func:`_bt_round_py` compiled with numba on first use (and cached on disk): importing
    numba costs ~0.3 s, which only the bootstrap should pay."""
    fn = _COMPILED.get("bt_round")
    if fn is None:
        from numba import njit

        fn = _COMPILED["bt_round"] = njit(cache=True)(_bt_round_py)
    return fn


def _bt_round(*args: Any) -> tuple[np.ndarray, bool]:
    return _bt_round_kernel()(*args)


def _run_block(task: _Task, k: int) -> tuple[int, np.ndarray, np.ndarray, int, np.ndarray | None]:
    """Rounds [k·block, (k+1)·block): (k, scores, ok mask, prior rounds, win matrices)."""
    with single_threaded_blas():
        return _run_block_inner(task, k)


def _run_block_inner(
    task: _Task, k: int
) -> tuple[int, np.ndarray, np.ndarray, int, np.ndarray | None]:
    lo = k * task.block
    hi = min(lo + task.block, task.rounds)
    cells = np.stack([_draw_cells(task, r) for r in range(lo, hi)])
    m = task.fitted.n_models
    out = np.zeros((hi - lo, m))
    ok = np.ones(hi - lo, dtype=bool)
    prior = 0
    wms = np.zeros((hi - lo, m, m), dtype=np.float32) if task.keep_win_matrices else None
    slow = np.ones(hi - lo, dtype=bool)
    fast = task.fast
    if fast is not None and not fast.exact_only:
        for r in range(hi - lo):
            out[r], good = _bt_round(
                cells[r],
                task.cell_row,
                task.cell_cat,
                fast.n_weight,
                fast.s_weight,
                fast.i,
                fast.j,
                fast.x_hat,
                fast.p0,
                fast.tol,
                _CHORD_MAX_ITER,
            )
            slow[r] = not good
    for r in np.flatnonzero(slow):
        sc, pr, wm = _refit_round(task, cells[r])
        prior += pr
        if sc is None:
            ok[r] = False
        else:
            out[r] = sc
            if wms is not None and wm is not None:
                wms[r] = wm
    return k, out, ok, prior, wms


_WORKER_TASK: _Task | None = None


def _init_worker(task: _Task, parent: int) -> None:
    global _WORKER_TASK
    exit_with_parent(parent)  # no orphan left computing when the command is killed
    _WORKER_TASK = task


def _worker_block(k: int) -> tuple[int, np.ndarray, np.ndarray, int, np.ndarray | None]:
    assert _WORKER_TASK is not None  # set by _init_worker
    return _run_block(_WORKER_TASK, k)


def _cluster_matrix(
    fitted: Fitted, battles: Battles, cluster: str, cell_ids: np.ndarray
) -> tuple[sp.csr_matrix, int, int]:
    """cells × clusters matrix of (weighted) counts: column c = the cells of cluster c's battles.

    Also returns the number of clusters and of battles left aside because their annotator is not
    in the fit (e.g. left out by am-ELO's screening)."""
    codes = battles.annotator if cluster == "annotator" else battles.prompt
    if codes is None:
        raise InputError(
            f"{battles.source}: --cluster {cluster} needs a battle log with a {cluster} column "
            f"(this one has none); use the battle-level bootstrap instead."
        )
    base = fitted.counts
    assert base is not None
    if tuple(battles.models) != tuple(fitted.models):
        battles = _align_models(battles, fitted)
    a = battles.model_a.astype(np.int64)
    b = battles.model_b.astype(np.int64)
    oc = battles.outcome.astype(np.int64)
    swap = a > b
    i = np.where(swap, b, a)
    j = np.where(swap, a, b)
    oc = np.where(swap & (oc < 2), 1 - oc, oc)
    m = fitted.n_models
    key = i * m + j
    if base.annotator is not None:
        if battles.annotator is None:
            raise InputError(
                f"{battles.source}: the model was fitted per annotator; the log has no annotator column."
            )
        ann_names = np.array(base.annotators, dtype=object)
        lookup = {name: k for k, name in enumerate(ann_names)}
        ann = np.array([lookup.get(n, -1) for n in battles.annotators])[battles.annotator]
        key = key * len(ann_names) + ann
        row_keys = (base.i.astype(np.int64) * m + base.j) * len(ann_names) + base.annotator
        in_fit = ann >= 0
    else:
        row_keys = base.i.astype(np.int64) * m + base.j
        in_fit = np.ones(len(key), dtype=bool)
    valid = in_fit.copy()
    order = np.argsort(row_keys)
    pos = np.clip(np.searchsorted(row_keys[order], key), 0, len(order) - 1)
    valid &= row_keys[order][pos] == key
    cell_of = np.full(len(base) * 4, -1, dtype=np.int64)
    cell_of[cell_ids] = np.arange(len(cell_ids))
    cells = cell_of[order[pos] * 4 + oc]
    valid &= cells >= 0
    w = battles.weights()
    n_cells = len(cell_ids)
    mat = sp.coo_matrix(
        (w[valid], (cells[valid], codes[valid])), shape=(n_cells, int(codes.max()) + 1)
    ).tocsr()
    # the clustered counts must reproduce the counts the model was fitted on
    got = np.asarray(mat.sum(axis=1)).ravel()
    want = np.column_stack([base.wins, base.losses, base.ties, base.ties_both_bad]).ravel()[
        cell_ids
    ]
    if not (
        np.allclose(got, want, rtol=1e-9, atol=1e-9) and np.isclose(w[valid].sum(), w[in_fit].sum())
    ):
        raise InputError(
            f"{battles.source}: the battles do not reproduce the pair counts the model was fitted on "
            "(apply the same filters as for the fit, e.g. --both-bad, --exclude, --min-battles)."
        )
    used = np.flatnonzero(np.asarray(mat.sum(axis=0)).ravel() > 0)
    return mat[:, used].tocsr(), len(used), int((~in_fit).sum())


def _align_models(battles: Battles, fitted: Fitted) -> Battles:
    """Recode ``battles`` to the fitted model order (every model must be known)."""
    lookup = {name: k for k, name in enumerate(fitted.models)}
    missing = sorted(set(battles.models) - set(lookup))
    if missing:
        raise InputError(
            f"{battles.source}: model(s) {', '.join(missing[:5])} are not in the fitted model; use "
            "the battles the model was fitted on."
        )
    remap = np.array([lookup[n] for n in battles.models], dtype=np.int32)
    return replace(
        battles,
        models=fitted.models,
        model_a=remap[battles.model_a],
        model_b=remap[battles.model_b],
    )


def _fast_bt(fitted: Fitted, base: PairCounts) -> _FastBT | None:
    """Compiled-solver data for plain m-ELO/BT fits with the exact Newton solver, else None."""
    if not _is_plain_bt(fitted) or str(fitted.params.get("solver", "newton")) != "newton":
        return None
    ties = _BT_LIKELIHOOD[fitted.method]
    if ties == "half":
        n_w = np.ones(4)
        s_w = np.array([1.0, 0.0, 0.5, 0.5])
    else:
        n_w = np.array([1.0, 1.0, 0.0, 0.0])
        s_w = np.array([1.0, 0.0, 0.0, 0.0])
    m = fitted.n_models
    i = base.i.astype(np.int64)
    j = base.j.astype(np.int64)
    table = np.column_stack([base.wins, base.losses, base.ties, base.ties_both_bad])
    x_hat = np.asarray(fitted.scores, dtype=float)
    p = expit(x_hat[i] - x_hat[j])
    info = laplacian(m, i, j, (table @ n_w) * p * (1 - p))
    return _FastBT(
        m=m,
        i=i,
        j=j,
        n_weight=n_w,
        s_weight=s_w,
        x_hat=x_hat,
        p0=np.ascontiguousarray(laplacian_pinv(info)),
        tol=float(fitted.params.get("tol", 1e-9)),
        exact_only=not check_comparison_graph(base, ties_count=(ties == "half")).ok,
    )


def bootstrap(
    fitted: Fitted,
    *,
    rounds: int = 1000,
    seed: int = 0,
    battles: Battles | None = None,
    cluster: ClusterBy | None = None,
    workers: int | None = None,
    progress: bool = False,
    keep_win_matrices: bool = False,
) -> Bootstrap:
    """Bootstrap ``fitted``: refit on ``rounds`` resamples (docs/methods/uncertainty.md).

    Args:
        fitted: any result implementing ``refit`` (m-ELO/BT use the batched solver).
        rounds: number of resamples.
        seed: round r draws from ``SeedSequence(seed, spawn_key=(r,))`` — the same replicates for
            any ``workers``.
        battles, cluster: with ``cluster="annotator"`` or ``"prompt"``, resample whole annotators
            or prompts of the raw ``battles`` (the log the model was fitted on) with replacement;
            otherwise resample battles (multinomial on the pair counts).
        workers: processes to use (default: every CPU; 1 = in this process).
        progress: show a progress bar on stderr.
        keep_win_matrices: also keep each round's win matrix (for models whose prediction is not
            σ(x_i − x_j); memory rounds × m² × 4 bytes).
    """
    if isinstance(rounds, bool) or int(rounds) != rounds or rounds < 2:
        raise InputError(f"the number of bootstrap rounds must be an integer ≥ 2, not {rounds!r}.")
    rounds = int(rounds)
    if cluster not in (None, "annotator", "prompt"):
        raise InputError(f"cluster must be 'annotator' or 'prompt', not {cluster!r}.")
    if cluster is not None and not isinstance(battles, Battles):
        raise InputError(
            f"a bootstrap clustered by {cluster} needs the raw battles (a log with a {cluster} "
            "column), not pair counts."
        )
    base = fitted.counts
    if base is None:
        raise InputError(
            f"this {fitted.method} result does not keep its pair counts; it cannot be bootstrapped."
        )
    if type(fitted).refit is Fitted.refit and fitted.method not in rater_names():
        raise InputError(
            f"{fitted.method}: no bootstrap — {type(fitted).__name__} does not implement refit() "
            "and its method is not a registered rater."
        )
    if cluster is not None and not fitted.resamples_pair_counts:
        raise InputError(
            f"{fitted.method}: no clustered bootstrap (its likelihood's rows are not pair "
            "counts); use the battle bootstrap (no --cluster) or sandwich intervals."
        )
    if cluster is None and sampling_weighted(fitted):
        raise InputError(
            f"no battle bootstrap: {SAMPLING_HINT}, and the battle bootstrap redraws the "
            "weighted counts as if each were that many battles. Use --ci sandwich, or "
            "--cluster annotator / prompt (whole clusters resampled with their weights)."
        )
    table = fitted.resampling_table()
    flat = table.ravel()
    nz = np.flatnonzero(flat > 0)
    if not len(nz):
        raise InputError("no comparisons to resample.")
    cell_row, cell_cat = np.divmod(nz, 4)
    weight = flat[nz]
    total = float(weight.sum())
    n_draw = int(round(total))
    notes: list[str] = []
    if not np.allclose(weight, np.round(weight)):
        notes.append(
            f"the counts are weighted; each resample draws {n_draw:,} battles with probabilities "
            "proportional to the weighted counts."
        )
    cmat = None
    if cluster is not None:
        assert battles is not None
        cmat, n_clusters, aside = _cluster_matrix(fitted, battles, cluster, nz)
        if aside:
            notes.append(f"{aside} battles of annotators outside the fit were left aside")
        if n_clusters < 2:
            raise InputError(
                f"a bootstrap clustered by {cluster} needs at least two {cluster}s; the log has {n_clusters}."
            )
        notes.append(f"resampled {n_clusters} {cluster}s with replacement")
    with single_threaded_blas():
        fast = _fast_bt(fitted, base)
    # blocks depend on the data only, so the replicates do not depend on the number of workers
    block = int(np.clip(_BLOCK_CELLS // max(len(nz), 1), 4, 64)) if fast is not None else 4
    task = _Task(
        fitted=fitted,
        seed=int(seed),
        rounds=rounds,
        block=block,
        n_rows=len(table),
        cell_row=cell_row,
        cell_cat=cell_cat,
        cell_weight=weight,
        cell_cum=np.cumsum(weight),
        n_draw=n_draw,
        cluster_matrix=cmat,
        fast=fast,
        keep_win_matrices=keep_win_matrices,
    )
    n_blocks = -(-rounds // block)
    if workers is None:
        workers = os.cpu_count() or 1
    if isinstance(workers, bool) or int(workers) < 1:
        raise InputError(f"workers must be a positive integer, not {workers!r}.")
    workers = min(int(workers), n_blocks)
    try:
        results = _execute(task, n_blocks, workers, progress, rounds)
    except NotImplementedError as exc:
        raise InputError(f"{fitted.method}: no bootstrap — {exc}") from None
    m = fitted.n_models
    scores = np.zeros((rounds, m))
    ok = np.ones(rounds, dtype=bool)
    wms = np.zeros((rounds, m, m), dtype=np.float32) if keep_win_matrices else None
    prior = 0
    for k, out, good, pr, wm in results:
        lo = k * block
        scores[lo : lo + len(out)] = out
        ok[lo : lo + len(out)] = good
        prior += pr
        if wms is not None and wm is not None:
            wms[lo : lo + len(out)] = wm
    failed = int((~ok).sum())
    if failed > rounds // 2:
        raise InputError(
            f"{base.source}: {failed} of {rounds} bootstrap resamples left a model without a "
            "rating (too few battles "
            "per model or a sparsely connected comparison graph); remove rarely compared models "
            "(e.g. --min-battles) before bootstrapping."
        )
    if failed:
        notes.append(
            f"{failed} of {rounds} resamples had no rating for some model (disconnected) and were left out"
        )
    if prior:
        notes.append(
            f"{prior} of {rounds} resamples needed the existence prior (a model never lost or never won)"
        )
    return Bootstrap(
        fitted=fitted,
        scores=scores[ok],
        seed=int(seed),
        cluster=cluster,
        rounds=rounds,
        failed=failed,
        prior_rounds=prior,
        notes=tuple(notes),
        win_matrices=None if wms is None else wms[ok],
    )


def _execute(task: _Task, n_blocks: int, workers: int, progress: bool, rounds: int) -> list[Any]:
    """Run the blocks in this process or in a pool of ``workers`` processes, with a progress bar."""
    from .._progress import counting_bar

    bar = counting_bar("bootstrap", enabled=progress)
    results = []
    if workers <= 1:
        with bar:
            tid = bar.add_task("bootstrap", total=rounds)
            for k in range(n_blocks):
                res = _run_block(task, k)
                results.append(res)
                bar.advance(tid, len(res[1]))
        return results
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    if ctx.get_start_method() == "fork" and task.fast is not None and not task.fast.exact_only:
        # load (or compile) the round kernel here, once: forked workers share it, where each
        # would otherwise import numba and load the kernel itself (about 0.5 s and 80 MB each)
        if not _bt_round_kernel().signatures:  # loaded on its first call: make one round
            _run_block_inner(replace(task, rounds=1, block=1), 0)
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(task, os.getpid())
    ) as ex:
        # submitting starts the workers: do it before the progress bar starts its thread, so that
        # no other thread of ours is running when the worker processes are forked
        futures = [ex.submit(_worker_block, k) for k in range(n_blocks)]
        with bar:
            tid = bar.add_task("bootstrap", total=rounds)
            for fut in futures:
                res = fut.result()
                results.append(res)
                bar.advance(tid, len(res[1]))
    return results


def resample_counts(fitted: Fitted, *, seed: int = 0, round_index: int = 0) -> PairCounts:
    """The battle-level resample that :func:`bootstrap` draws in round ``round_index`` (for
    inspection and tests)."""
    base = fitted.counts
    if base is None:
        raise InputError("this result does not keep its pair counts.")
    table = np.column_stack([base.wins, base.losses, base.ties, base.ties_both_bad]).ravel()
    nz = np.flatnonzero(table > 0)
    weight = table[nz]
    cells = _multinomial_cells(
        _round_rng(seed, round_index), weight, np.cumsum(weight), int(round(weight.sum()))
    )
    out = np.zeros(len(table))
    out[nz] = cells
    out = out.reshape(-1, 4)
    return base.with_counts(out[:, 0], out[:, 1], out[:, 2], out[:, 3])


# ============================================================================ ranks and tiers
def rank_intervals(rank_samples: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed rank intervals from sampled ranks (rows = samples): the lower (1 − level)/2
    and upper (1 + level)/2 quantiles, rounded outwards to whole ranks."""
    level = _check_level(level)
    a = (1 - level) / 2
    low = np.quantile(rank_samples, a, axis=0, method="lower")
    high = np.quantile(rank_samples, 1 - a, axis=0, method="higher")
    return low.astype(np.int64), high.astype(np.int64)


#: Above this many models the normal approximation's draws use a Cholesky root of the
#: covariance (m³/3 flops, in one m×m copy) instead of its eigen-decomposition (about 9m³ and
#: three m×m arrays: 5 s at 1,000 models on a busy machine, minutes at 8,000); both are exact roots, so the draws have the same
#: distribution, but not the same values: the rank intervals of a given seed depend on the route.
CHOLESKY_DRAWS_ABOVE: int = 500


def _cholesky_root(cov: np.ndarray) -> np.ndarray | None:
    """Upper-triangular U (Fortran order, lower part unused) with UᵀU = P cov P + s 11ᵀ/m,
    P = I − 11ᵀ/m, s the mean variance — a root of the covariance of the contrasts (a draw
    from it differs from one from ``cov`` by a shift common to all models, which changes no
    rank). ``None`` when that matrix is not positive definite (contrasts with zero variance)."""
    m = cov.shape[0]
    b = np.array(cov, dtype=np.float64, order="F")
    b += b.T
    b /= 2
    row = b.mean(axis=1)
    b -= row[:, None]
    b -= row[None, :]
    b += row.mean() + max(float(np.mean(np.diag(cov))), 1e-300) / m
    c, info = scipy.linalg.lapack.dpotrf(b, lower=0, overwrite_a=1, clean=0)
    return c if info == 0 else None


def _normal_draws(scores: np.ndarray, cov: np.ndarray, draws: int, seed: int) -> np.ndarray:
    """``draws`` score vectors (rows) from N(scores, cov), up to a shift per row when drawn
    through :func:`_cholesky_root` (more than :data:`CHOLESKY_DRAWS_ABOVE` models)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2**31 - 1,)))
    x = np.asarray(scores, dtype=float)
    m = len(x)
    if m > CHOLESKY_DRAWS_ABOVE:
        report(f"normal draws: Cholesky root of the {m}×{m} covariance")
        with single_threaded_blas():
            u = _cholesky_root(cov)
        if u is not None:
            z = rng.standard_normal((draws, m))
            report(f"normal draws: {draws:,} draws of {m} scores")
            # z U by rows: (z U)ᵀ = Uᵀ zᵀ, with zᵀ (Fortran order) overwritten in place
            with single_threaded_blas():
                y = scipy.linalg.blas.dtrmm(1.0, u, z.T, side=0, lower=0, trans_a=1, overwrite_b=1)
            del u
            out = y.T
            out += x[None, :]
            return out
    vals, vecs = np.linalg.eigh((cov + cov.T) / 2)
    root = vecs * np.sqrt(np.clip(vals, 0.0, None))
    z = rng.standard_normal((draws, m))
    return x[None, :] + z @ root.T


def normal_rank_samples(
    scores: np.ndarray,
    cov: np.ndarray,
    *,
    draws: int = NORMAL_RANK_DRAWS,
    seed: int = 0,
    worse: bool = False,
) -> np.ndarray:
    """Ranks of ``draws`` score vectors drawn from N(scores, cov) — the normal approximation's
    distribution of the ranks (a parametric bootstrap of the ranks); equal draws share the better
    rank, or the worse one with ``worse`` (same draws for the same seed). The root of ``cov`` is
    its eigen-decomposition up to :data:`CHOLESKY_DRAWS_ABOVE` models, a Cholesky factor above."""
    return _ranks(_normal_draws(scores, cov, draws, seed), worse=worse)


def displayed_rank(ci_low: np.ndarray, ci_high: np.ndarray) -> np.ndarray:
    """Chatbot Arena's displayed rank: 1 + the number of models whose lower bound is above this
    model's upper bound."""
    low = np.asarray(ci_low, dtype=float)
    high = np.asarray(ci_high, dtype=float)
    return 1 + np.sum(low[None, :] > high[:, None], axis=1)


def tiers(
    ratings: np.ndarray,
    diff_se: np.ndarray | Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    level: float = 0.95,
    adjust: Literal["holm", "bonferroni", "none"] = "holm",
) -> tuple[np.ndarray, np.ndarray]:
    """Tiers of models not separable at ``level``.

    Models are ordered by rating; each adjacent pair (k, k+1) is tested for R_k = R_{k+1} with
    z = (R_k − R_{k+1}) / se(R_k − R_{k+1}); the m − 1 two-sided p-values are adjusted for
    multiplicity (Holm's step-down by default, which controls the family-wise error rate at
    1 − level), and a new tier starts after every adjacent pair that is separated. Returns the
    tier of each model (1 = top) and the adjusted p-value of each model against the next one
    down (1.0 for the last). ``diff_se``: the m×m standard errors of the differences, or a
    function of index arrays (a, b) giving those of the pairs asked for (e.g.
    :meth:`Covariance.difference_se`), so that no m×m matrix is formed."""
    level = _check_level(level)
    r = np.asarray(ratings, dtype=float)
    m = len(r)
    order = np.lexsort((np.arange(m), -r))
    a, b = order[:-1], order[1:]
    se = np.asarray(diff_se(a, b) if callable(diff_se) else np.asarray(diff_se)[a, b], dtype=float)
    gap = r[a] - r[b]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, gap / se, np.where(gap > 0, np.inf, 0.0))
    p = 2 * normal_sf(np.abs(z))
    if adjust == "holm":
        k = len(p)
        idx = np.argsort(p, kind="stable")
        adj_sorted = np.maximum.accumulate(np.minimum(1.0, (k - np.arange(k)) * p[idx]))
        adj = np.empty(k)
        adj[idx] = adj_sorted
    elif adjust == "bonferroni":
        adj = np.minimum(1.0, len(p) * p)
    elif adjust == "none":
        adj = p
    else:
        raise InputError(f"adjust must be 'holm', 'bonferroni' or 'none', not {adjust!r}.")
    split = adj < 1 - level
    tier_sorted = 1 + np.concatenate([[0], np.cumsum(split)])
    out = np.empty(m, dtype=np.int64)
    out[order] = tier_sorted
    padj = np.ones(m)
    padj[a] = adj
    return out, padj


# ============================================================================ intervals
@dataclass(frozen=True, eq=False)
class Intervals:
    """Ratings with intervals, rank intervals and tiers (model order as ``fitted.models``).

    Attributes:
        method, level: the interval method (``fisher``, ``sandwich``, ``bootstrap``) and level.
        ratings: point ratings (Elo scale, fitted normalisation).
        se: standard errors of the ratings (Elo points; the bootstrap's is the replicates' sd).
        ci_low, ci_high: rating intervals (normal for fisher/sandwich, percentile for bootstrap).
        rank: point rank (1 = best); rank_low, rank_high: rank intervals.
        displayed_rank: Chatbot Arena's rank (1 + models whose lower bound beats our upper).
        tier: tier of statistically inseparable models (1 = top), see :func:`tiers`.
        p_next: Holm-adjusted p-value of each model against the next one down.
        covariance: the covariance used (for differences: ``covariance.difference_se``).
        bootstrap: the replicates when ``method == "bootstrap"``.
    """

    method: str
    level: float
    fitted: Fitted = field(repr=False)
    ratings: np.ndarray = field(repr=False)
    se: np.ndarray = field(repr=False)
    ci_low: np.ndarray = field(repr=False)
    ci_high: np.ndarray = field(repr=False)
    rank: np.ndarray = field(repr=False)
    rank_low: np.ndarray = field(repr=False)
    rank_high: np.ndarray = field(repr=False)
    displayed_rank: np.ndarray = field(repr=False)
    tier: np.ndarray = field(repr=False)
    p_next: np.ndarray = field(repr=False)
    covariance: Covariance = field(repr=False)
    bootstrap: Bootstrap | None = field(default=None, repr=False)
    notes: tuple[str, ...] = ()

    @property
    def models(self) -> tuple[str, ...]:
        return self.fitted.models

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        """One row per model, best first: model, rating, se, ci_low, ci_high, rank, rank_low,
        rank_high, displayed_rank, tier."""
        order = self.fitted.order()
        return pd.DataFrame(
            {
                "model": [self.models[k] for k in order],
                "rating": self.ratings[order],
                "se": self.se[order],
                "ci_low": self.ci_low[order],
                "ci_high": self.ci_high[order],
                "rank": self.rank[order],
                "rank_low": self.rank_low[order],
                "rank_high": self.rank_high[order],
                "displayed_rank": self.displayed_rank[order],
                "tier": self.tier[order],
            }
        )

    def difference(self, a: str | int, b: str | int) -> dict[str, float]:
        """R_a − R_b with its standard error, interval at ``level`` and two-sided p-value
        (normal for fisher/sandwich; percentile interval of the replicates for the bootstrap)."""
        ia, ib = self.fitted.index(a), self.fitted.index(b)
        est = float(self.ratings[ia] - self.ratings[ib])
        se = float(self.covariance.difference_se(ia, ib))
        z = normal_ppf(0.5 + self.level / 2)
        if self.bootstrap is not None:
            d = self.bootstrap.ratings[:, ia] - self.bootstrap.ratings[:, ib]
            lo, hi = np.quantile(d, [(1 - self.level) / 2, (1 + self.level) / 2])
        else:
            lo, hi = est - z * se, est + z * se
        p = float(2 * normal_sf(abs(est) / se)) if se > 0 else float(est == 0)
        return {"estimate": est, "se": se, "ci_low": float(lo), "ci_high": float(hi), "p_value": p}


def intervals(
    fitted: Fitted,
    ci: CIMethod = "fisher",
    *,
    level: float = 0.95,
    rounds: int = 1000,
    seed: int = 0,
    battles: Battles | None = None,
    cluster: ClusterBy | None = None,
    workers: int | None = None,
    progress: bool = False,
    dispersion: float | None = None,
    boot: Bootstrap | None = None,
) -> Intervals:
    """Rating intervals, rank intervals, displayed ranks and tiers of ``fitted`` (docs/methods/uncertainty.md).

    ``ci="fisher"`` / ``"sandwich"``: normal intervals R ± z·se from :func:`covariance`, rank
    intervals from draws of the normal approximation (seeded by ``seed``).
    ``ci="bootstrap"``: percentile intervals and bootstrap rank intervals from
    :func:`bootstrap` (``rounds``, ``seed``, ``battles``/``cluster``, ``workers``,
    ``progress``), or from ``boot`` when given.
    """
    level = _check_level(level)
    if ci not in CI_METHODS:
        raise InputError(f"ci must be one of {', '.join(CI_METHODS)}, not {ci!r}.")
    if cluster is not None and ci != "bootstrap":
        raise InputError("--cluster applies to the bootstrap only (use --ci bootstrap).")
    ratings = np.asarray(fitted.ratings, dtype=float)
    m = fitted.n_models
    notes: tuple[str, ...] = ()
    if ci == "bootstrap":
        if boot is None:
            boot = bootstrap(
                fitted,
                rounds=rounds,
                seed=seed,
                battles=battles,
                cluster=cluster,
                workers=workers,
                progress=progress,
            )
        cov = boot.covariance()
        low, high = boot.percentile(level)
        se = np.std(boot.ratings, axis=0, ddof=1)
        rank_samples = boot.ranks()
        worse_samples = _ranks(boot.scores, worse=True)
        notes = boot.notes
    else:
        require_memory(
            dense_bytes(m, 2) + 3 * 8 * NORMAL_RANK_DRAWS * m,
            f"{ci} intervals of {m:,} models (two dense {m}×{m} arrays and "
            f"{NORMAL_RANK_DRAWS:,} draws of the ranks)",
            MEMORY_HINT,
        )
        cov = covariance(fitted, ci, dispersion=dispersion)
        se = cov.se
        z = normal_ppf(0.5 + level / 2)
        low, high = ratings - z * se, ratings + z * se
        # one set of draws, ranked both ways (as normal_rank_samples with and without worse)
        drawn = _normal_draws(np.asarray(fitted.scores), cov.scores, NORMAL_RANK_DRAWS, seed)
        report(f"rank intervals: ranking {NORMAL_RANK_DRAWS:,} draws of {m} models")
        rank_samples = _ranks(drawn)
        worse_samples = _ranks(drawn, worse=True)
        del drawn
        notes = cov.notes
    rank = np.empty(m, dtype=np.int64)
    rank[fitted.order()] = np.arange(1, m + 1)
    # models whose sampled scores tie (e.g. every comparison a tie) share the ranks they span
    rank_low, _ = rank_intervals(rank_samples, level)
    _, rank_high = rank_intervals(worse_samples, level)
    # a rank interval always contains the point rank
    rank_low = np.minimum(rank_low, rank)
    rank_high = np.maximum(rank_high, rank)
    tier, p_next = tiers(ratings, cov.difference_se, level=level)
    return Intervals(
        method=ci,
        level=level,
        fitted=fitted,
        ratings=ratings,
        se=np.asarray(se, dtype=float),
        ci_low=np.asarray(low, dtype=float),
        ci_high=np.asarray(high, dtype=float),
        rank=rank,
        rank_low=rank_low,
        rank_high=rank_high,
        displayed_rank=displayed_rank(low, high),
        tier=tier,
        p_next=p_next,
        covariance=cov,
        bootstrap=boot,
        notes=tuple(notes),
    )


# ============================================================================ win probabilities
@dataclass(frozen=True, eq=False)
class WinProbability:
    """m×m expected scores E[W_ij] = P(i beats j) + ½ P(tie) with intervals at ``level``."""

    models: tuple[str, ...]
    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float
    method: str

    def to_frame(self, which: Literal["estimate", "low", "high"] = "estimate") -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(
            getattr(self, which), index=list(self.models), columns=list(self.models)
        )


def _predicts_bt(fitted: Fitted) -> bool:
    x = np.asarray(fitted.scores)
    return bool(np.allclose(fitted.win_matrix(), expit(x[:, None] - x[None, :]), atol=1e-12))


def win_probability(
    fitted: Fitted,
    ci: CIMethod = "fisher",
    *,
    level: float = 0.95,
    boot: Bootstrap | None = None,
    cov: Covariance | None = None,
    **bootstrap_options: Any,
) -> WinProbability:
    """The win-probability matrix with intervals.

    For models predicting σ(x_i − x_j) (m-ELO, BT, am-ELO's average annotator) the interval of
    the difference maps through σ, which is monotone: normal d ± z·se for fisher/sandwich,
    percentile of the replicated σ(d) for the bootstrap. For other models only the bootstrap
    applies, from per-round win matrices (``keep_win_matrices``)."""
    level = _check_level(level)
    est = fitted.win_matrix()
    a = (1 - level) / 2
    if ci == "bootstrap":
        if boot is None:
            boot = bootstrap(
                fitted, keep_win_matrices=not _predicts_bt(fitted), **bootstrap_options
            )
        if _predicts_bt(fitted):
            x = boot.scores
            lo, hi = np.quantile(x[:, :, None] - x[:, None, :], [a, 1 - a], axis=0)
            low, high = expit(lo), expit(hi)
        elif boot.win_matrices is not None:
            low, high = np.quantile(boot.win_matrices.astype(float), [a, 1 - a], axis=0)
        else:
            raise InputError(
                "this model's win probabilities need a bootstrap with keep_win_matrices=True."
            )
    elif ci in ("fisher", "sandwich"):
        if not _predicts_bt(fitted):
            raise InputError(
                f"{fitted.method}: normal intervals of win probabilities are available for "
                "Bradley–Terry-type models only; use ci='bootstrap'."
            )
        cov = cov if cov is not None else covariance(fitted, ci)
        se = cov.difference_se() * fitted.elo_scale
        x = np.asarray(fitted.scores)
        d = x[:, None] - x[None, :]
        z = normal_ppf(0.5 + level / 2)
        low, high = expit(d - z * se), expit(d + z * se)
    else:
        raise InputError(f"ci must be one of {', '.join(CI_METHODS)}, not {ci!r}.")
    np.fill_diagonal(low, 0.5)
    np.fill_diagonal(high, 0.5)
    return WinProbability(fitted.models, est, np.asarray(low), np.asarray(high), level, ci)
