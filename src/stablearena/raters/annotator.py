"""am-ELO: Bradley–Terry with a per-annotator ability (am-ELO paper, §4.2; docs/methods/annotators.md).

Model (am-ELO eq. 4, in natural units)::

    P(i beats j | annotator k) = σ(a_k (x_i − x_j))

with x the model scores (log-odds of an *average* annotator, mean zero) and a_k the ability of
annotator k relative to the average annotator: mean |a_k| = 1 over the fitted annotators, the
sign chosen so that most votes come from annotators of positive ability (an inverted annotator
gets a negative ability; docs/methods/annotator-identification.md). While every ability is
positive this is the paper's mean(θ) = C: in its notation θ_k = C·a_k and R = x / C with
C = ln10/400, so am-ELO ratings read on the same Elo scale as m-ELO. ``normalization="sum"``
reports the paper's Σθ = 1 instead (θ_k = a_k / Σa, R = Σa·x) — the same fit, undefined (and
refused) when the abilities sum to ≤ 0.

Log-likelihood (am-ELO eq. 5), ties as W = ½, on pair × annotator count rows r = (i, j, k)
with n_r comparisons and score s_r = wins + ½ ties of i::

    ln L(x, a) = Σ_r s_r ln σ(z_r) + (n_r − s_r) ln σ(−z_r),   z_r = a_k (x_i − x_j).

With e_r = s_r − n_r p_r, w_r = n_r p_r (1 − p_r), d_r = x_i − x_j (am-ELO eq. 6)::

    ∂/∂x_i = Σ a_k e_r          ∂/∂a_k = Σ d_r e_r
    −∂²/∂x∂x = Laplacian with edge weights a_k² w_r
    −∂²/∂a_k² = Σ d_r² w_r
    −∂²/∂x_i∂a_k = Σ (a_k d_r w_r − e_r)   (and the opposite sign for x_j).

The likelihood is invariant under (x, a) → (αx, a/α) for every α ≠ 0, negative too (and under
shifts of x); the solver fixes the shift by Σx = 0, the scale by Σ s_k a_k = M with s_k the
sign of a_k (mean |a| = 1; the signs are updated, with a rescale, when an ability crosses 0),
and the sign by the vote majority, and maximises exactly by Newton's method on that set (the bordered/KKT system, reduced to the m×m model block by a Schur
complement over the diagonal annotator block), falling back to the Gauss–Newton (Fisher)
matrix when the exact Hessian is not negative definite there, with a backtracking line search.
Since L is scale-invariant the Lagrange multiplier of the scale gauge vanishes at the optimum, so the
converged point has a zero gradient in every direction. Initialised from m-ELO with a = 1 the
result is deterministic.

The paper's own solver — Adam, lr 0.1, 2,000 full-batch steps on the mean binary
cross-entropy, random Xavier-uniform initialisation, θ/Σθ inside the forward pass (reference
code ``bigdata-ustc/am-ELO``, ``model.py``) — is available as ``solver="adam"``, a reproduction
mode that stops short of the optimum.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
from scipy.special import expit, log_expit

from .._numeric import normal_ppf
from .._threads import single_threaded_blas
from ..data.battles import UNKNOWN_ANNOTATOR, Battles, PairCounts, as_counts
from ..data.graph import check_comparison_graph
from ..errors import ConvergenceError, InputError, StableArenaWarning, TooFewRecords
from ._newton import NewtonProblem, newton
from .base import ELO_SCALE, Convergence, Fitted, Rater, parse_anchor, register_rater
from .bradley_terry import PRIOR_STRENGTH, _prior_terms, solve_bradley_terry
from .information import laplacian

__all__ = [
    "UNKNOWN_ANNOTATOR",
    "ANNOTATOR_PRIOR_STRENGTH",
    "AmEloRows",
    "AmEloSolution",
    "am_elo_loglik",
    "am_elo_gradient",
    "am_elo_hessian",
    "solve_am_elo",
    "adam_am_elo",
    "abilities_given_scores",
    "AmEloFitted",
    "AmElo",
]


#: Virtual ties added to an annotator whose votes all agree (or all disagree) with the ranking:
#: without them that annotator's ability MLE is ±∞. Half a tie, spread over the annotator's
#: pairs in proportion to their battles (the same strength as m-ELO's existence prior).
ANNOTATOR_PRIOR_STRENGTH: float = 0.5

#: Abilities within this of the flagging threshold count as at the threshold (not below it):
#: the Newton solver pins an ability to about 1e-11, so a judge at exactly 0 reads ±1e-11.
_FLAG_PRECISION: float = 1e-9

#: Largest dense annotator-by-parameter block the solver builds (entries); above it, sparse.
_DENSE_LIMIT: int = 20_000_000


# ---------------------------------------------------------------------------------- the rows
@dataclass(frozen=True)
class AmEloRows:
    """The data the am-ELO likelihood reads: pair × annotator rows with ``n`` comparisons and
    score ``s`` (wins + ½ ties) of model ``i`` against ``j`` judged by annotator ``k``."""

    n_models: int
    n_annotators: int
    i: np.ndarray
    j: np.ndarray
    k: np.ndarray
    n: np.ndarray
    s: np.ndarray

    @classmethod
    def from_counts(cls, counts: PairCounts, n_annotators: int | None = None) -> AmEloRows:
        if counts.annotator is None:
            k = np.zeros(len(counts), dtype=np.int64)
            n_ann = 1
        else:
            k = counts.annotator.astype(np.int64)
            n_ann = len(counts.annotators) if n_annotators is None else n_annotators  # type: ignore[arg-type]
        n = counts.totals
        keep = n > 0
        return cls(
            counts.n_models,
            n_ann,
            counts.i[keep].astype(np.int64),
            counts.j[keep].astype(np.int64),
            k[keep],
            n[keep],
            counts.score[keep],
        )

    @property
    def total(self) -> float:
        return float(self.n.sum())

    @cached_property
    def cross_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """Flat indices i·K + k and j·K + k of the model-by-annotator block."""
        return self.i * self.n_annotators + self.k, self.j * self.n_annotators + self.k

    def records(self) -> np.ndarray:
        """Comparisons per annotator."""
        return np.bincount(self.k, self.n, self.n_annotators)

    def with_virtual_ties(self, weight: np.ndarray) -> AmEloRows:
        """Add ``weight[k]`` virtual ties to each annotator, spread over its rows by battles."""
        if not np.any(weight):
            return self
        rec = self.records()
        share = np.where(rec[self.k] > 0, self.n / np.maximum(rec[self.k], 1e-300), 0.0)
        extra = weight[self.k] * share
        return replace(self, n=self.n + extra, s=self.s + 0.5 * extra)


def am_elo_loglik(x: np.ndarray, a: np.ndarray, rows: AmEloRows) -> float:
    """ln L = Σ s ln σ(z) + (n − s) ln σ(−z), z = a_k (x_i − x_j); uses ln σ(−z) = ln σ(z) − z."""
    z = a[rows.k] * (x[rows.i] - x[rows.j])
    return float(np.sum(rows.n * log_expit(z) - (rows.n - rows.s) * z))


def _row_terms(x: np.ndarray, a: np.ndarray, rows: AmEloRows) -> tuple[np.ndarray, ...]:
    """Per row: a_k, d = x_i − x_j, e = s − n p, w = n p (1 − p)."""
    ak = a[rows.k]
    d = x[rows.i] - x[rows.j]
    p = expit(ak * d)
    e = rows.s - rows.n * p
    w = rows.n * p * (1.0 - p)
    return ak, d, e, w


def _gradient(rows: AmEloRows, terms: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    ak, d, e, _ = terms
    m, kk = rows.n_models, rows.n_annotators
    r = ak * e
    gx = np.bincount(rows.i, r, m) - np.bincount(rows.j, r, m)
    ga = np.bincount(rows.k, d * e, kk)
    return gx, ga


def am_elo_gradient(x: np.ndarray, a: np.ndarray, rows: AmEloRows) -> tuple[np.ndarray, np.ndarray]:
    """(∂lnL/∂x, ∂lnL/∂a), am-ELO eq. 6 in natural units."""
    return _gradient(rows, _row_terms(x, a, rows))


def _cross_block(rows: AmEloRows, v: np.ndarray):
    """m×K matrix Σ_r v_r (e_i − e_j) e_kᵀ — dense when small enough, else scipy sparse CSR."""
    m, kk = rows.n_models, rows.n_annotators
    if m * kk <= _DENSE_LIMIT:
        ik, jk = rows.cross_keys
        return (np.bincount(ik, v, m * kk) - np.bincount(jk, v, m * kk)).reshape(m, kk)
    from scipy.sparse import coo_matrix

    return coo_matrix(
        (
            np.concatenate([v, -v]),
            (np.concatenate([rows.i, rows.j]), np.concatenate([rows.k, rows.k])),
        ),
        shape=(m, kk),
    ).tocsr()


def _blocks(rows: AmEloRows, terms: tuple[np.ndarray, ...], exact: bool):
    ak, d, e, w = terms
    m, kk = rows.n_models, rows.n_annotators
    lap = laplacian(m, rows.i, rows.j, ak * ak * w)
    dd = np.bincount(rows.k, d * d * w, kk)
    return lap, _cross_block(rows, ak * d * w - e if exact else ak * d * w), dd


def _neg_hessian_blocks(x: np.ndarray, a: np.ndarray, rows: AmEloRows, *, exact: bool = True):
    """Blocks of −∇²lnL: A (m×m model Laplacian), B (m×K, dense or sparse), D (K diagonal).

    ``exact=False`` gives the Gauss–Newton / expected (Fisher) information instead, which drops
    the −e_r term of the cross block and is positive semi-definite everywhere.
    """
    return _blocks(rows, _row_terms(x, a, rows), exact)


def am_elo_hessian(
    x: np.ndarray, a: np.ndarray, rows: AmEloRows, *, exact: bool = True
) -> np.ndarray:
    """Dense (m+K)×(m+K) Hessian of ln L with respect to (x, a) (``exact=False``: −Fisher)."""
    lap, b, dd = _neg_hessian_blocks(x, a, rows, exact=exact)
    b = b if isinstance(b, np.ndarray) else b.toarray()
    m, kk = rows.n_models, rows.n_annotators
    h = np.zeros((m + kk, m + kk))
    h[:m, :m] = -lap
    h[:m, m:] = -b
    h[m:, :m] = -b.T
    h[m + np.arange(kk), m + np.arange(kk)] = -dd
    return h


# ---------------------------------------------------------------------------------- solver
@dataclass(frozen=True)
class AmEloSolution:
    """Result of :func:`solve_am_elo`. ``prior_ties``: virtual ties given to each annotator
    (non-zero only for annotators whose ability MLE is infinite)."""

    x: np.ndarray
    a: np.ndarray
    loglik: float
    convergence: Convergence
    prior_ties: np.ndarray


def _kkt_step(
    lap: np.ndarray,
    b,
    dd: np.ndarray,
    gx: np.ndarray,
    ga: np.ndarray,
    active: np.ndarray,
    sign: np.ndarray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Newton step (dx, da) maximising the quadratic model subject to Σdx = 0, sᵀda = 0.

    ``sign``: s_k = ±1, the sign of each active annotator's ability (the gauge Σ s_k a_k =
    Σ|a_k| = M, see :func:`_gauge_signs`). With −H = [[A, B], [Bᵀ, D]] and D diagonal,
    eliminating da gives the m×m system (A − B D⁻¹ Bᵀ + c cᵀ / sᵀu) dx = g_x − B D⁻¹ g_a +
    c (uᵀg_a) / sᵀu with u = D⁻¹s, c = B u; then da = D⁻¹(g_a − Bᵀ dx) − λ u, λ fixing
    sᵀda = 0. Only ``active`` annotators (those with comparisons) take part. Returns ``None``
    when the reduced matrix is not positive definite on Σdx = 0 (then the caller uses the Fisher
    matrix).
    """
    m = lap.shape[0]
    dinv = np.where(active, 1.0 / np.where(active, dd, 1.0), 0.0)
    u = dinv * sign
    su = float((u * sign).sum())
    if isinstance(b, np.ndarray):
        schur = lap - (b * dinv) @ b.T
    else:
        schur = lap - (b.multiply(dinv[None, :]).tocsr() @ b.T).toarray()
    c = np.asarray(b @ u).ravel()
    ga_s = dinv * ga
    schur += np.outer(c, c) / su
    rhs = gx - np.asarray(b @ ga_s).ravel() + c * ((sign * ga_s).sum() / su)
    shift = max(float(np.mean(np.abs(np.diag(schur)))), 1e-12)
    mat = schur + shift / m
    dx = _pd_solve(mat, rhs)
    if dx is None:
        return None
    dx -= dx.mean()
    t = dinv * (ga - np.asarray(b.T @ dx).ravel())
    lam = (sign * t).sum() / su
    da = t - lam * u
    return dx, da


def _pd_solve(mat: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """The solution of ``mat`` x = ``rhs`` for a positive definite ``mat`` (a Newton step's
    reduced system); ``None`` when ``mat`` is not positive definite (its Cholesky factorisation
    fails) or x is not finite. NumPy's LAPACK throughout: mixing NumPy's and SciPy's OpenBLAS
    thread pools makes each wait for the other's spinning threads."""
    try:
        np.linalg.cholesky(mat)
        x = np.linalg.solve(mat, rhs)
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(x)):
        return None
    return x


def _gauge_signs(a: np.ndarray, active: np.ndarray) -> np.ndarray:
    """s_k = sign(a_k) (+1 at 0) for active annotators, 0 for the rest: the normal of the gauge
    Σ s_k a_k = Σ|a_k| = M, i.e. mean |ability| = 1 over the fitted annotators.

    Unlike mean(a) = 1 this scale cannot cancel: an inverted annotator (a < 0) adds to it instead
    of offsetting the honest ones (docs/methods/annotator-identification.md). While every
    ability is positive it is the same gauge as mean(a) = 1."""
    return np.where(active, np.where(a < 0, -1.0, 1.0), 0.0)


def _orient(x: np.ndarray, a: np.ndarray, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fix the sign of the fit: (x, a) and (−x, −a) have the same likelihood, so choose the one
    in which the majority of the votes (weighted by comparisons) come from annotators with a
    positive ability; on an exact tie, the one with Σ records·a > 0."""
    pos = float(records[a > 0].sum())
    neg = float(records[a < 0].sum())
    if neg > pos or (neg == pos and float(records @ a) < 0):
        return -x, -a
    return x, a


def _normalise_abilities(
    x: np.ndarray, a: np.ndarray, active: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rescale (x, a) → (x·s, a/s) with s = mean |a| over ``active``: the likelihood is unchanged
    and the abilities read relative to the average annotator (mean |ability| = 1)."""
    scale = float(np.abs(a[active]).mean())
    return x * scale, np.where(active, a / scale, 1.0)


def _m_elo_start(rows: AmEloRows, prior_mask: np.ndarray | None, tol: float = 1e-9) -> np.ndarray:
    """m-ELO scores (natural units) on the rows pooled over annotators: the deterministic start."""
    m = rows.n_models
    key, inv = np.unique(rows.i * m + rows.j, return_inverse=True)
    n = np.bincount(inv, rows.n, len(key))
    s = np.bincount(inv, rows.s, len(key))
    return solve_bradley_terry(m, key // m, key % m, n, s, prior_mask=prior_mask, tol=tol).x


#: Above this |ability| (in units of the average annotator) the solver checks, each iteration,
#: whether the annotator's votes have become separable (its ability running off to ±∞).
_DIVERGING: float = 3.0

#: An |ability| this many times the average annotator's means the MLE does not exist (the
#: abilities run off in opposite directions while the ratings collapse); the solver says so.
_RUNAWAY: float = 1000.0


class _AmEloProblem(NewtonProblem):
    """:func:`solve_am_elo` for the Newton driver: the point (x, a) on the gauge Σx = 0,
    Σ s_k a_k = M, the annotators given virtual ties, and the Gauss–Newton steps taken."""

    def __init__(
        self,
        x: np.ndarray,
        a: np.ndarray,
        sign: np.ndarray,
        data_rows: AmEloRows,
        ann_prior: np.ndarray,
        active: np.ndarray,
        mask: np.ndarray | None,
        prior_strength: float,
    ) -> None:
        self.x, self.a, self.sign = x, a, sign
        self.data_rows, self.ann_prior, self.active = data_rows, ann_prior, active
        self.mask, self.prior_strength = mask, prior_strength
        self.kk, self.total = data_rows.n_annotators, data_rows.total
        self.rows = data_rows.with_virtual_ties(ANNOTATOR_PRIOR_STRENGTH * ann_prior)
        self.f = self.objective(x, a)

    def objective(self, x: np.ndarray, a: np.ndarray) -> float:
        val = am_elo_loglik(x, a, self.rows)
        if self.mask is not None:
            val += _prior_terms(x, self.mask, self.prior_strength)[0]
        return val

    def _give_virtual_ties(self, which: np.ndarray) -> None:
        self.ann_prior |= which
        self.rows = self.data_rows.with_virtual_ties(ANNOTATOR_PRIOR_STRENGTH * self.ann_prior)
        self.f = self.objective(self.x, self.a)

    def _projected_norm(self, gx: np.ndarray, ga: np.ndarray) -> float:
        """‖(g_x, g_a projected on sᵀda = 0)‖ per comparison (``ga`` zero off the active)."""
        act, sign = self.active, self.sign
        pga = np.where(act, ga - sign * ((sign * ga)[act].mean()), 0.0)
        return float(math.sqrt(float(gx @ gx) + float(pga @ pga))) / self.total

    def _gradient_at(self, x: np.ndarray, terms: tuple[np.ndarray, ...]):
        """(g_x, g_a) with the existence prior's terms; keeps the prior's Hessian for the step."""
        gx, ga = _gradient(self.rows, terms)
        if self.mask is not None:
            _, pg, self.prior_h = _prior_terms(x, self.mask, self.prior_strength)
            gx = gx + pg
        return gx, np.where(self.active, ga, 0.0)

    def prepare(self) -> None:
        a = self.a
        if self.kk > 1 and np.any(np.abs(a) > _DIVERGING):
            diverging = (
                separable_annotators(self.x, self.data_rows)
                & (np.abs(a) > _DIVERGING)
                & ~self.ann_prior
            )
            if diverging.any():
                self._give_virtual_ties(diverging)

    def gradient_norm(self) -> float:
        self.terms = _row_terms(self.x, self.a, self.rows)
        self.gx, self.ga = self._gradient_at(self.x, self.terms)
        return self._projected_norm(self.gx, self.ga)

    def at_optimum(self, gnorm: float, tol: float) -> bool | None:
        if gnorm > tol:
            return False
        if self.kk <= 1:
            return True
        late = separable_annotators(self.x, self.data_rows) & ~self.ann_prior
        if not late.any():
            return True
        # converged only because the runaway ability's gradient fell below tol: fix it
        self._give_virtual_ties(late)
        return None

    def check(self, iteration: int) -> str | None:
        a = self.a
        if np.max(np.abs(a)) > _RUNAWAY:
            raise ConvergenceError(
                "am-ELO has no maximum-likelihood solution on these data: the votes are best "
                "explained by annotators who disagree in sign with no consistent majority, so the "
                "rating spread shrinks towards 0 while the abilities run off to ±∞ (largest |ability| "
                f"{np.max(np.abs(a)):.3g} × average after {iteration} iterations). Add battles per "
                "annotator, raise --min-records, or use m-elo."
            )
        return None

    def direction(self) -> float | str:
        rows, terms, gx, ga = self.rows, self.terms, self.gx, self.ga
        active, sign = self.active, self.sign
        lap, b, dd = _blocks(rows, terms, exact=True)
        if self.mask is not None:
            lap = lap - self.prior_h
        dd = np.maximum(dd, 1e-300)
        step = _kkt_step(lap, b, dd, gx, ga, active, sign)
        if step is None or float(gx @ step[0] + ga @ step[1]) <= 0:
            self.fisher_steps += 1
            ak, d, _, w = terms
            step = _kkt_step(lap, _cross_block(rows, ak * d * w), dd, gx, ga, active, sign)
            if step is not None and float(gx @ step[0] + ga @ step[1]) <= 0:
                step = None
        if step is None:
            return "neither the Hessian nor the Fisher matrix is definite on the constraint set"
        dx, da = self.step = step
        return float(gx @ dx + ga @ da)

    def trial(self, t: float) -> float:
        dx, da = self.step
        return self.objective(self.x + t * dx, self.a + t * da)

    def full_gradient_norm(self) -> float:
        dx, da = self.step
        xn, an = self.x + dx, self.a + da
        return self._projected_norm(*self._gradient_at(xn, _row_terms(xn, an, self.rows)))

    def accept(self, t: float, f: float | None) -> None:
        dx, da = self.step
        xn, an = self.x + t * dx, self.a + t * da
        active, sign = self.active, self.sign
        # re-centre against floating-point drift (a shift of x leaves L unchanged)
        self.x = xn - xn.mean()
        self.f = f if f is not None else self.objective(xn, an)
        if np.array_equal(_gauge_signs(an, active), sign):
            self.a = np.where(active, an - sign * ((sign * an)[active].mean() - 1.0), 1.0)
        else:
            # an ability changed sign: back onto mean |a| = 1 (a rescale, L unchanged) and
            # continue on the gauge with the new signs
            self.x, self.a = _normalise_abilities(self.x, an, active)
            self.sign = _gauge_signs(self.a, active)
            self.f = self.objective(self.x, self.a)


def solve_am_elo(
    rows: AmEloRows,
    *,
    x0: np.ndarray | None = None,
    a0: np.ndarray | None = None,
    prior_mask: np.ndarray | None = None,
    prior_strength: float = PRIOR_STRENGTH,
    tol: float = 1e-9,
    max_iter: int = 200,
) -> AmEloSolution:
    """Exact joint MLE of (x, a) under Σx = 0, mean |a| = 1 over annotators with comparisons,
    the sign chosen so that most votes come from annotators of positive ability (:func:`_orient`).

    ``x0`` defaults to the m-ELO solution (ties as half, pooled over annotators), ``a0`` to 1.
    ``prior_mask`` marks models that need m-ELO's existence prior (a virtual half tie against
    the average model, :func:`stablearena.raters.bradley_terry._prior_terms`). An annotator
    whose votes all go with (or all against) the current ranking while its ability runs off
    gets :data:`ANNOTATOR_PRIOR_STRENGTH` virtual ties (see :func:`separable_annotators`).
    Converged when the gradient projected on the constraint set has norm ≤ ``tol`` ×
    comparisons; with no prior in use that is the full gradient (the multiplier of the scale
    gauge vanishes by scale invariance).
    """
    kk = rows.n_annotators
    total = rows.total
    if total <= 0:
        raise InputError("no comparisons to fit.")
    data_rows = rows
    active = rows.records() > 0
    use_prior = prior_mask is not None and bool(np.any(prior_mask))
    mask = np.asarray(prior_mask, dtype=float) if use_prior else None
    x_start = _m_elo_start(rows, prior_mask, tol) if x0 is None or kk > 1 else None
    if x0 is None:
        x0 = x_start
    x = np.asarray(x0, dtype=float) - np.mean(x0)
    a = np.ones(kk) if a0 is None else np.where(active, np.asarray(a0, dtype=float), 1.0)
    a = np.where(active, a / np.abs(a[active]).mean(), 1.0)
    sign = _gauge_signs(a, active)
    ann_prior = np.zeros(kk, dtype=bool)
    if kk > 1:
        # which annotators need virtual ties is decided at the deterministic m-ELO start, also
        # when the solver starts elsewhere (a warm start): the objective, hence the optimum,
        # must not depend on where the iteration begins
        ann_prior = separable_annotators(x_start - np.mean(x_start), data_rows)

    problem = _AmEloProblem(
        x, a, sign, data_rows, ann_prior, active, mask if use_prior else None, prior_strength
    )
    conv = newton(problem, tol=tol, max_iter=max_iter)
    x, a, ann_prior = problem.x, problem.a, problem.ann_prior
    prior_ties = ANNOTATOR_PRIOR_STRENGTH * ann_prior.astype(float)
    x, a = _orient(x, a, data_rows.records())
    return AmEloSolution(x, a, am_elo_loglik(x, a, data_rows), conv, prior_ties)


def adam_am_elo(
    rows: AmEloRows,
    *,
    lr: float = 0.1,
    steps: int = 2000,
    normalize: bool = True,
    ratings0: np.ndarray | None = None,
    theta0: np.ndarray | None = None,
    seed: int | np.random.Generator = 0,
    record_every: int = 0,
    train_theta: bool = True,
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, float, np.ndarray]]]:
    """The am-ELO reference code's solver (``bigdata-ustc/am-ELO``, ``model.py``; paper Alg. 2).

    Logit θ_k / Σθ · (R_i − R_j) (``normalize``; without it θ_k (R_i − R_j), the paper's
    "w/o Norm"), mean binary cross-entropy over battles, Adam (β = 0.9, 0.999, ε = 1e-8) with
    learning rate ``lr`` for ``steps`` full-batch steps. Initialisation: ``ratings0``/``theta0``
    or, as in the reference code, Xavier-uniform: U(±√(6/(N+1))) for R and U(±√(6/(M+1))) for θ,
    drawn from ``seed``.

    ``train_theta=False`` keeps θ at ``theta0`` — with θ = C and ``normalize=False`` this is the
    reference code's m-ELO (its θ embedding gets no gradient).

    Returns raw (R, θ) and, every ``record_every`` steps, (step, loss, R copy).
    """
    rng = np.random.default_rng(seed)
    m, kk = rows.n_models, rows.n_annotators
    r = (
        rng.uniform(-1, 1, m) * math.sqrt(6.0 / (m + 1))
        if ratings0 is None
        else np.array(ratings0, dtype=float)
    )
    th = (
        rng.uniform(-1, 1, kk) * math.sqrt(6.0 / (kk + 1))
        if theta0 is None
        else np.array(theta0, dtype=float)
    )
    total = rows.total
    params = np.concatenate([r, th])
    mom = np.zeros_like(params)
    vel = np.zeros_like(params)
    b1, b2, eps = 0.9, 0.999, 1e-8
    history: list[tuple[int, float, np.ndarray]] = []
    i, j, k, n, s = rows.i, rows.j, rows.k, rows.n, rows.s

    def loss_and_grad(r: np.ndarray, th: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        ssum = th.sum() if normalize else 1.0
        coef = th[k] / ssum
        d = r[i] - r[j]
        z = coef * d
        loss = -float(np.sum(n * log_expit(z) - (n - s) * z)) / total
        e = (n * expit(z) - s) / total  # ∂loss/∂z per row
        gr = np.bincount(i, e * coef, m) - np.bincount(j, e * coef, m)
        q = np.bincount(k, e * d, kk)
        gth = q / ssum - (float(th @ q) / ssum**2 if normalize else 0.0)
        return loss, gr, gth

    for t in range(1, steps + 1):
        loss, gr, gth = loss_and_grad(params[:m], params[m:])
        if record_every and (t - 1) % record_every == 0:
            history.append((t - 1, loss, params[:m].copy()))
        g = np.concatenate([gr, gth if train_theta else np.zeros(kk)])
        mom = b1 * mom + (1 - b1) * g
        vel = b2 * vel + (1 - b2) * g * g
        params = params - lr * (mom / (1 - b1**t)) / (np.sqrt(vel / (1 - b2**t)) + eps)
    if record_every:
        loss, _, _ = loss_and_grad(params[:m], params[m:])
        history.append((steps, loss, params[:m].copy()))
    return params[:m], params[m:], history


def abilities_given_scores(
    x: np.ndarray, rows: AmEloRows, *, tol: float = 1e-10, max_iter: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Each annotator's ability MLE with the model scores held at ``x``, and its standard error
    from the one-dimensional information Σ d² w (a logistic regression through the origin on
    the feature d = x_i − x_j, solved by a vectorised damped Newton iteration).

    Annotators whose votes are separable (all with, or all against, the ranking) get
    :data:`ANNOTATOR_PRIOR_STRENGTH` virtual ties first, so every value is finite.
    """
    kk = rows.n_annotators
    sep = separable_annotators(x, rows)
    rows = rows.with_virtual_ties(ANNOTATOR_PRIOR_STRENGTH * sep)
    d = x[rows.i] - x[rows.j]
    a = np.ones(kk)

    def per_ann_loglik(a: np.ndarray) -> np.ndarray:
        z = a[rows.k] * d
        return np.bincount(rows.k, rows.n * log_expit(z) - (rows.n - rows.s) * z, kk)

    f = per_ann_loglik(a)
    for _ in range(max_iter):
        p = expit(a[rows.k] * d)
        g = np.bincount(rows.k, d * (rows.s - rows.n * p), kk)
        h = np.bincount(rows.k, d * d * rows.n * p * (1 - p), kk)
        h = np.maximum(h, 1e-300)
        if np.max(np.abs(g)) <= tol * max(rows.total, 1.0):
            break
        step = g / h
        t = np.ones(kk)
        for _ in range(60):
            fn = per_ann_loglik(a + t * step)
            bad = fn < f - 1e-12 * np.abs(f)
            if not bad.any():
                break
            t = np.where(bad, t * 0.5, t)
        a = a + t * step
        f = per_ann_loglik(a)
    p = expit(a[rows.k] * d)
    info = np.bincount(rows.k, d * d * rows.n * p * (1 - p), kk)
    se = 1.0 / np.sqrt(np.maximum(info, 1e-300))
    return a, np.minimum(se, 1e6)


def separable_annotators(x: np.ndarray, rows: AmEloRows) -> np.ndarray:
    """Annotators whose ability MLE is infinite at scores ``x``: every comparison they judged
    (between models of different score) went to the higher-scored model (→ +∞), or every one to
    the lower-scored model (→ −∞). A tie, or one vote each way, makes the MLE finite."""
    return separable_by_logit(x[rows.i] - x[rows.j], rows.s, rows.n, rows.k, rows.n_annotators)


def separable_by_logit(
    d: np.ndarray, s: np.ndarray, n: np.ndarray, k: np.ndarray, n_annotators: int
) -> np.ndarray:
    """Annotators (``k`` per row) all of whose rows with d ≠ 0 went to the side d favours
    (score ``s`` = ``n``), or all against it: their ability MLE is infinite (d: the logit an
    average annotator would give, before scaling by the ability)."""
    nz = d != 0
    with_rank = np.where(d > 0, s >= n, s <= 0)
    against = np.where(d > 0, s <= 0, s >= n)
    not_plus = np.bincount(k, nz & ~with_rank, n_annotators) > 0
    not_minus = np.bincount(k, nz & ~against, n_annotators) > 0
    has = np.bincount(k, nz, n_annotators) > 0
    return has & ~(not_plus & not_minus)


def _gauge_covariance(
    lap: np.ndarray, b, dd: np.ndarray, active: np.ndarray, sign: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Covariance of (x, a) under the gauge Σx = 0, Σ s_k a_k = M from the information −H
    (``sign``: s, the signs of the abilities, :func:`_gauge_signs`; default all +1).

    The top-left block of the inverse of the bordered matrix [[I, Gᵀ], [G, 0]] with
    G = [(1, 0), (0, s)] — the covariance of the normalised estimates (delta method).
    Computed as M⁻¹ − M⁻¹Gᵀ(G M⁻¹ Gᵀ)⁻¹ G M⁻¹ with M = I + GᵀG, using the Schur complement
    over the diagonal annotator block (O(K m² + m³)); returns (cov_xx, var_a).
    """
    kk = len(dd)
    bd = b if isinstance(b, np.ndarray) else b.toarray()
    bd = bd[:, active]
    dv = dd[active]
    sg = np.ones(len(dv)) if sign is None else np.asarray(sign, dtype=float)[active]
    # M = [[A + 11ᵀ, B], [Bᵀ, D + s sᵀ]] (unit weights on the two gauge normals)
    a_blk = lap + 1.0
    dinv = 1.0 / dv
    # (D + s sᵀ)⁻¹ = D⁻¹ − u uᵀ / (1 + sᵀu), u = D⁻¹s
    u = dinv * sg
    den = 1.0 + (u * sg).sum()
    # Y = (D + 11ᵀ)⁻¹ Bᵀ  (ka × m)
    bt = bd.T
    y = dinv[:, None] * bt - np.outer(u, u @ bt) / den
    schur = a_blk - bd @ y
    sinv = np.linalg.inv(schur)
    # M⁻¹ blocks: xx = S⁻¹; xa = −S⁻¹ Yᵀ; aa = Dp⁻¹ + Y S⁻¹ Yᵀ
    m_xx = sinv
    m_xa = -sinv @ y.T  # m × ka
    ys = y @ sinv  # ka × m
    diag_dp = dinv - u * u / den
    m_aa_diag = diag_dp + np.einsum("km,km->k", ys, y)
    # M⁻¹ Gᵀ columns: g1 = (1_m, 0), g2 = (0, s)
    # M⁻¹ g2 needs Dp⁻¹ s = u − u (sᵀu) / den = u / den
    dp1 = u / den
    col1_x = m_xx.sum(axis=1)
    col1_a = m_xa.sum(axis=0)
    col2_x = m_xa @ sg
    col2_a = dp1 + y @ (sinv @ (y.T @ sg))
    gmg = np.array([[col1_x.sum(), col2_x.sum()], [(sg * col1_a).sum(), (sg * col2_a).sum()]])
    gmg = 0.5 * (gmg + gmg.T)
    ginv = np.linalg.pinv(gmg)
    cx = np.column_stack([col1_x, col2_x])  # m × 2
    ca = np.column_stack([col1_a, col2_a])  # ka × 2
    cov_xx = m_xx - cx @ ginv @ cx.T
    var_a_act = m_aa_diag - np.einsum("kp,pq,kq->k", ca, ginv, ca)
    var_a = np.zeros(kk)
    var_a[active] = np.maximum(var_a_act, 0.0)
    return 0.5 * (cov_xx + cov_xx.T), var_a


# ---------------------------------------------------------------------------------- results
_STATUS = ("included", "flagged", "excluded", "left_out")


@dataclass(frozen=True, eq=False, kw_only=True)
class AmEloFitted(Fitted):
    """A fitted am-ELO model: model scores plus every annotator's ability (besides the attributes
    of :class:`~stablearena.raters.base.Fitted`).

    Attributes:
        annotators: every annotator in the data (including those left out of the fit).
        abilities: a_k relative to the average fitted annotator (mean |a| = 1 over
            ``included``, negative for an annotator who votes against the ranking; see
            docs/methods/annotator-identification.md); for annotators not in the fit, the
            ability MLE with the ratings held fixed.
        ability_se: standard errors of ``abilities`` (from the gauge-constrained information
            matrix for fitted annotators, the one-dimensional information otherwise).
        records: comparisons per annotator in the data given.
        status: per annotator ``"included"`` (in the fit), ``"flagged"`` (in the fit, ability
            below the threshold), ``"excluded"`` (flagged, then left out and the model refitted)
            or ``"left_out"`` (fewer than ``min_records`` comparisons, or excluded beforehand).
        reasons: a sentence per annotator saying why.
        normalization: ``"mean"`` (θ = C·a, mean |θ| = C) or ``"sum"`` (θ = a/Σa, Σθ = 1,
            the paper's; refused when the abilities sum to ≤ 0).
        fit_counts: the pair × annotator counts of the annotators in the fit (the rows of
            :meth:`score_contributions` and :meth:`refit`); ``counts`` holds the same.
    """

    annotators: tuple[str, ...]
    abilities: np.ndarray
    ability_se: np.ndarray
    records: np.ndarray
    status: tuple[str, ...]
    reasons: tuple[str, ...]
    normalization: str = "mean"
    prior_ties: np.ndarray | None = field(default=None, repr=False)
    model_prior: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("abilities", "ability_se", "records"):
            arr = np.array(getattr(self, name), dtype=float, copy=True)
            if not np.all(np.isfinite(arr)):
                raise AssertionError(f"internal error: non-finite {name} in a fitted am-ELO result")
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)

    # ------------------------------------------------------------------ views
    @property
    def n_annotators(self) -> int:
        return len(self.annotators)

    @property
    def included(self) -> np.ndarray:
        """Annotators whose votes the fit used."""
        return np.isin(np.array(self.status), ["included", "flagged"])

    @property
    def flagged(self) -> np.ndarray:
        """Annotators whose ability fell below the threshold (warned about or excluded)."""
        return np.isin(np.array(self.status), ["flagged", "excluded"])

    @property
    def elo_scale(self) -> float:
        """Natural units per rating point: C (mean |θ| = C) or 1/Σa (the paper's Σθ = 1; Σa = M
        when every ability is positive)."""
        if self.normalization == "sum":
            return 1.0 / float(self.abilities[self.included].sum())
        return ELO_SCALE

    @property
    def theta(self) -> np.ndarray:
        """Abilities on the paper's scale: θ_k = C·a_k (``mean``) or a_k / Σa (``sum``)."""
        return self.abilities * self.elo_scale

    @cached_property
    def _gauge_signs(self) -> np.ndarray:
        """Signs of the fitted abilities (the gauge Σ s_k a_k = M, mean |a| = 1)."""
        a = self.abilities[self._fit_annotators]
        return _gauge_signs(a, np.ones(len(a), dtype=bool))

    def annotator_index(self, annotator: str | int) -> int:
        if isinstance(annotator, (int, np.integer)):
            return int(annotator)
        try:
            return self.annotators.index(str(annotator))
        except ValueError:
            raise InputError(f"unknown annotator {annotator!r}.") from None

    def predict(self, i: Any, j: Any, annotator: Any = None) -> np.ndarray | float:
        """Expected score of i against j: σ(a (x_i − x_j)) with a the annotator's ability, or 1
        (the average annotator) when ``annotator`` is ``None``. Arrays broadcast."""
        ii = np.vectorize(self.index)(i) if not isinstance(i, np.ndarray) else i
        jj = np.vectorize(self.index)(j) if not isinstance(j, np.ndarray) else j
        if annotator is None:
            a = 1.0
        elif isinstance(annotator, np.ndarray) and np.issubdtype(annotator.dtype, np.integer):
            a = self.abilities[annotator]
        else:
            a = self.abilities[np.vectorize(self.annotator_index)(annotator)]
        out = expit(a * (self.scores[ii] - self.scores[jj]))
        return float(out) if np.ndim(out) == 0 else out

    def annotator_table(self):
        """DataFrame ``annotator, records, ability, ability_se, flagged, status, reason``,
        worst (lowest ability) first."""
        import pandas as pd

        order = np.lexsort((np.array(self.annotators), self.abilities))
        return pd.DataFrame(
            {
                "annotator": [self.annotators[k] for k in order],
                "records": self.records[order].round().astype(np.int64),
                "ability": self.abilities[order],
                "ability_se": self.ability_se[order],
                "flagged": self.flagged[order],
                "status": [self.status[k] for k in order],
                "reason": [self.reasons[k] for k in order],
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """:meth:`Fitted.to_dict` plus ``"annotators"`` (worst first) and ``"normalization"``."""
        out = super().to_dict()
        tab = self.annotator_table()
        out["normalization"] = self.normalization
        out["annotators"] = [
            {
                "annotator": str(r.annotator),
                "records": int(r.records),
                "ability": float(r.ability),
                "ability_se": float(r.ability_se),
                "flagged": bool(r.flagged),
                "reason": str(r.reason),
            }
            for r in tab.itertuples(index=False)
        ]
        return out

    # ------------------------------------------------------------------ information contract
    @cached_property
    def _rows(self) -> AmEloRows:
        """The likelihood's rows over the fitted annotators (coded 0..M_in−1), virtual ties in."""
        rows = AmEloRows.from_counts(self.counts, n_annotators=len(self._fit_annotators))  # type: ignore[arg-type]
        if self.prior_ties is not None:
            rows = rows.with_virtual_ties(self.prior_ties)
        return rows

    @cached_property
    def _fit_annotators(self) -> np.ndarray:
        """Indices (into ``annotators``) of the fitted annotators, in parameter order."""
        return np.flatnonzero(self.included)

    def parameters(self) -> np.ndarray:
        """(x, a) at the optimum: the ``n_models`` scores, then the fitted annotators' abilities
        (mean 1) in the order of ``np.flatnonzero(self.included)``."""
        return np.concatenate([self.scores, self.abilities[self._fit_annotators]])

    def hessian(self) -> np.ndarray:
        """Exact Hessian of the total log-likelihood in :meth:`parameters` (virtual ties of the
        existence prior included when one was needed). Singular along the shift of x and the
        scale direction (x, −a): use it on Σx = 0, Σa = M (see :meth:`covariance`)."""
        x, a = self.scores, self.abilities[self._fit_annotators]
        h = am_elo_hessian(x, a, self._rows)
        if self.model_prior is not None and self.model_prior.any():
            m = self.n_models
            h[:m, :m] += _prior_terms(x, self.model_prior.astype(float), PRIOR_STRENGTH)[2]
        return h

    def covariance(self) -> np.ndarray:
        """Covariance of :meth:`parameters` under the gauge Σx = 0, mean |a| = 1: the top-left
        block of the inverse of the bordered matrix [[−H, Gᵀ], [G, 0]]."""
        h = -self.hessian()
        p = h.shape[0]
        g = self.gauge_constraints().T
        kkt = np.block([[h, g.T], [g, np.zeros((2, 2))]])
        inv = np.linalg.inv(kkt)[:p, :p]
        return 0.5 * (inv + inv.T)

    def score_contributions(self) -> tuple[np.ndarray, np.ndarray]:
        """``G`` (rows, 4, n_params): ∇ ln P(outcome | row) for the outcomes in
        :class:`PairCounts` order (i won, j won, tie, both-bad tie); ``N`` (rows, 4): counts.
        Rows are those of ``fit_counts`` (zero rows included). Σ N g gᵀ is the meat matrix;
        see :meth:`outer_product` for a memory-light version."""
        c = self.counts
        m = self.n_models
        p_n = m + len(self._fit_annotators)
        n_rows = len(c)
        if n_rows * 4 * p_n > 200_000_000:
            raise InputError(
                f"score_contributions would need {n_rows}×4×{p_n} floats; use outer_product() "
                "or a cluster bootstrap (refit) instead."
            )
        x, a = self.scores, self.abilities[self._fit_annotators]
        k = c.annotator.astype(np.int64)  # type: ignore[union-attr]
        d = x[c.i] - x[c.j]
        p = expit(a[k] * d)
        g = np.zeros((n_rows, 4, p_n))
        rr = np.arange(n_rows)
        for col, w in enumerate((1.0, 0.0, 0.5, 0.5)):
            e = w - p
            g[rr, col, c.i] = a[k] * e
            g[rr, col, c.j] = -a[k] * e
            g[rr, col, m + k] = d * e
        nn = np.column_stack([c.wins, c.losses, c.ties, c.ties_both_bad])
        return g, nn

    def outer_product(self) -> np.ndarray:
        """Σ_rows Σ_outcomes N g gᵀ (the sandwich's meat) without materialising ``G``."""
        c = self.counts
        m = self.n_models
        kin = len(self._fit_annotators)
        x, a = self.scores, self.abilities[self._fit_annotators]
        k = c.annotator.astype(np.int64)  # type: ignore[union-attr]
        d = x[c.i] - x[c.j]
        p = expit(a[k] * d)
        # Σ_outcomes N e² per row, e = W − p
        q = c.wins * (1 - p) ** 2 + c.losses * p**2 + c.all_ties * (0.5 - p) ** 2
        meat = np.zeros((m + kin, m + kin))
        meat[:m, :m] = laplacian(m, c.i.astype(np.int64), c.j.astype(np.int64), a[k] ** 2 * q)
        cross = _cross_block(
            AmEloRows(m, kin, c.i.astype(np.int64), c.j.astype(np.int64), k, q, q), a[k] * d * q
        )
        cross = cross if isinstance(cross, np.ndarray) else cross.toarray()
        meat[:m, m:] = cross
        meat[m:, :m] = cross.T
        meat[m + np.arange(kin), m + np.arange(kin)] = np.bincount(k, d * d * q, kin)
        return meat

    def gauge_constraints(self) -> np.ndarray:
        """Jacobian (n_params × 2) of the gauge: Σx = 0 (shift) and Σ s_k a_k = M with s the
        signs of the abilities (scale: mean |a| = 1, docs/methods/annotator-identification.md)."""
        m = self.n_models
        kin = len(self._fit_annotators)
        g = np.zeros((m + kin, 2))
        g[:m, 0] = 1.0
        g[m:, 1] = self._gauge_signs
        return g

    def dispersion(self) -> float:
        """Pearson dispersion Σ N (W − p)² / (p(1 − p)) / (n − (m − 1) − (M − 1)) when the data
        hold ties (W = ½ makes the likelihood a quasi-likelihood), else 1."""
        c = self.counts
        if c is None or c.all_ties.sum() <= 0:
            return 1.0
        k = c.annotator.astype(np.int64)  # type: ignore[union-attr]
        a = self.abilities[self._fit_annotators]
        p = expit(a[k] * (self.scores[c.i] - self.scores[c.j]))
        v = np.maximum(p * (1 - p), 1e-300)
        pearson = float(
            np.sum((c.wins * (1 - p) ** 2 + c.losses * p**2 + c.all_ties * (0.5 - p) ** 2) / v)
        )
        dof = c.n_comparisons - (self.n_models - 1) - (len(a) - 1)
        return pearson / dof if dof > 0 else 1.0

    def refit(self, counts: PairCounts) -> AmEloFitted:
        """Fit the same model (same annotators, options) to ``counts`` with the rows of
        ``self.counts`` (e.g. a bootstrap resample), warm-started from this result."""
        c0 = self.counts
        if (
            counts.annotator is None
            or len(counts) != len(c0)
            or not (np.array_equal(counts.i, c0.i) and np.array_equal(counts.j, c0.j))  # type: ignore[union-attr]
            or not np.array_equal(counts.annotator, c0.annotator)  # type: ignore[union-attr]
        ):
            raise InputError("refit needs pair counts with the same rows as fitted.counts.")
        fit_idx = self._fit_annotators
        full = replace(
            counts, annotator=fit_idx[counts.annotator].astype(np.int32), annotators=self.annotators
        )
        rater = AmElo(**dict(self.params))
        return rater._fit_fixed(
            full,
            self.annotators,
            fit_idx,
            records=self.records,
            status=self.status,
            reasons=self.reasons,
            notes=self.notes,
            x0=self.scores,
            a0=self.abilities[fit_idx],
            other_abilities=(self.abilities, self.ability_se),
        )


# ---------------------------------------------------------------------------------- the rater
@register_rater("am-elo")
@dataclass(frozen=True)
class AmElo(Rater):
    """am-ELO (am-ELO paper §4.2, eq. 4–7) with the Stable Arena screening (Alg. 3, docs/methods/annotators.md).

    Options:
        min_records: δ — annotators with fewer comparisons are left out of the fit (their
            ability is still estimated with the ratings held fixed, and reported).
        ability_threshold: ε on the mean-|a| = 1 scale — fitted annotators with ability below it
            are flagged (the paper's 0.005 on its Σθ = 1 scale is 0.005·M here).
        exclude_flagged: flagged annotators are excluded and the model refitted without them
            (one round); otherwise they are only reported ("warn").
        confidence: if set (e.g. 0.95), flagging also needs statistical confidence: the
            one-sided upper bound ability + z·se must lie below ε.
        normalization: ``"mean"`` (mean |θ| = C, Elo scale of m-ELO) or ``"sum"`` (paper,
            Σθ = 1).
        solver: ``"newton"`` (exact) or ``"adam"`` (reference-code reproduction: ``lr``,
            ``steps``, Xavier initialisation from ``seed``, or from m-ELO if ``init="m-elo"``).
        anchor: ``"MODEL=RATING"``.
    """

    min_records: int = 0
    ability_threshold: float = 0.0
    exclude_flagged: bool = False
    confidence: float | None = None
    normalization: str = "mean"
    solver: str = "newton"
    tol: float = 1e-9
    max_iter: int = 200
    lr: float = 0.1
    steps: int = 2000
    init: str = "random"
    seed: int = 0
    anchor: str | tuple[str, float] | None = None

    # ------------------------------------------------------------------ validation
    def _check(self) -> None:
        if not isinstance(self.min_records, (int, np.integer)) or self.min_records < 0:
            raise InputError(
                f"min_records must be a non-negative integer, not {self.min_records!r}."
            )
        if not math.isfinite(float(self.ability_threshold)):
            raise InputError(
                f"ability_threshold must be a finite number, not {self.ability_threshold!r}."
            )
        if self.confidence is not None and not (0.0 < float(self.confidence) < 1.0):
            raise InputError(
                f"confidence must lie strictly between 0 and 1 (e.g. 0.95), not {self.confidence!r}."
            )
        if self.normalization not in ("mean", "sum"):
            raise InputError(f"normalization must be 'mean' or 'sum', not {self.normalization!r}.")
        if self.solver not in ("newton", "adam"):
            raise InputError(f"solver must be 'newton' or 'adam', not {self.solver!r}.")
        if self.init not in ("random", "m-elo"):
            raise InputError(f"init must be 'random' or 'm-elo', not {self.init!r}.")
        if not (self.tol > 0 and self.max_iter >= 1 and self.steps >= 1 and self.lr > 0):
            raise InputError("tol, lr must be positive and max_iter, steps at least 1.")

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        data: Battles | PairCounts,
        *,
        exclude: tuple[str, ...] | frozenset[str] | Mapping[str, str] = (),
        start: AmEloFitted | None = None,
        leave_out: Mapping[str, str] | None = None,
    ) -> AmEloFitted:
        """Screen annotators, fit am-ELO, flag (and optionally exclude and refit).

        ``exclude`` names annotators to leave out beforehand (the Stable Arena loop uses it for
        annotators excluded in earlier rounds; a mapping: name → the reason shown, status
        ``excluded``); ``leave_out``: name → reason of annotators left out of this fit without
        being screened (status ``left_out``, like those below ``min_records``: e.g. accounts
        whose bounded-influence weight is 0 whatever their ability, :mod:`stablearena.crowd.board_rule`). ``start``: an earlier am-ELO result on data that
        overlap these (e.g. the log before its latest votes); the Newton solver starts from its
        scores and abilities, matched by model and annotator name (a new model starts at the
        average score, a new annotator at ability 1). The optimum is the same as from the
        default m-ELO start — the likelihood's maximum under the gauge is unique — only fewer
        iterations are needed (the live arena's warm-started refits).
        """
        self._check()
        counts, notes = _annotator_counts(data)
        names = counts.annotators  # type: ignore[assignment]
        kk = len(names)  # type: ignore[arg-type]
        records = np.bincount(counts.annotator, counts.totals, kk)  # type: ignore[arg-type]
        unknown_ex = sorted(set(exclude) - set(names))  # type: ignore[arg-type]
        if unknown_ex:
            raise InputError(f"cannot exclude unknown annotator(s) {unknown_ex[:5]}.")
        pre = np.array([n in set(exclude) for n in names], dtype=bool)  # type: ignore[union-attr]
        few = (records < self.min_records) & ~pre
        status = np.array(["included"] * kk, dtype=object)
        reasons = np.array([""] * kk, dtype=object)
        status[few] = "left_out"
        for k in np.flatnonzero(few):
            reasons[k] = f"left out: {records[k]:g} records < min_records {self.min_records}"
        status[pre] = "excluded"
        why = exclude if isinstance(exclude, Mapping) else {}
        for k in np.flatnonzero(pre):
            reasons[k] = why.get(names[k], "excluded in an earlier round")  # type: ignore[index]
        if leave_out:
            for k, name in enumerate(names):  # type: ignore[arg-type]
                if name in leave_out and status[k] == "included":
                    status[k] = "left_out"
                    reasons[k] = leave_out[name]
        fit_idx = np.flatnonzero(status == "included")
        if len(fit_idx) == 0:
            raise TooFewRecords(
                f"{counts.source}: no annotator has at least min_records={self.min_records} "
                f"comparisons (the most is {records.max(initial=0):g}); lower --min-records.",
                self.min_records,
                float(records.max(initial=0)),
            )
        x0, a0 = _warm_start(start, counts.models, [names[k] for k in fit_idx])  # type: ignore[index]
        fitted = self._fit_fixed(
            counts,
            names,
            fit_idx,
            records=records,
            status=status,
            reasons=reasons,
            notes=notes,
            x0=x0,
            a0=a0,
        )
        fitted = self._flag(fitted)
        if self.exclude_flagged and not fitted.convergence.converged:
            # never act on an unconverged fit (issue 25): its abilities are not the MLE's
            fitted = replace(
                fitted,
                notes=(
                    *fitted.notes,
                    "the fit did not converge, so no flagged annotator was excluded",
                ),
            )
        elif self.exclude_flagged and (np.array(fitted.status) == "flagged").any():
            st = np.array(fitted.status, dtype=object)
            rs = np.array(fitted.reasons, dtype=object)
            newly = st == "flagged"
            st[newly] = "excluded"
            for k in np.flatnonzero(newly):
                rs[k] = rs[k].replace("flagged:", "excluded:", 1) + "; refitted without it"
            keep = np.flatnonzero(st == "included")
            if len(keep) == 0:
                raise InputError(
                    "every fitted annotator was flagged; lower --ability-threshold or drop --exclude-flagged."
                )
            x0, a0 = _warm_start(fitted, counts.models, [names[k] for k in keep])  # type: ignore[index]
            fitted = self._fit_fixed(
                counts,
                names,
                keep,
                records=records,
                status=st,
                reasons=rs,
                notes=fitted.notes,
                x0=x0,
                a0=a0,
            )
            fitted = self._flag(fitted, refit=True)
        return fitted

    def fit_warm(self, data: Battles | PairCounts, start: Fitted) -> Fitted:
        """Refit warm-started from ``start`` when ``data`` has the rows of ``start.counts``."""
        if isinstance(start, AmEloFitted) and isinstance(data, PairCounts):
            try:
                return start.refit(data)
            except InputError:
                pass
        return self.fit(data)

    def _flag(self, fitted: AmEloFitted, refit: bool = False) -> AmEloFitted:
        eps = float(self.ability_threshold)
        # an ability within the solver's precision of ε is not below it: a judge who always
        # prefers the first answer, judged in both orders, has ability 0 up to rounding (±1e-11)
        below = eps - _FLAG_PRECISION
        st = np.array(fitted.status, dtype=object)
        rs = np.array(fitted.reasons, dtype=object)
        ab, se = fitted.abilities, fitted.ability_se
        z = normal_ppf(self.confidence) if self.confidence is not None else 0.0
        upper = ab + z * se
        for k in np.flatnonzero(st == "included"):
            if fitted.annotators[k] == UNKNOWN_ANNOTATOR and fitted.n_annotators == 1:
                rs[k] = "no annotator ids: every battle is from one 'unknown' annotator"
                continue
            low = ab[k] < below and upper[k] < below
            if low:
                st[k] = "flagged"
                conf = (
                    f", upper {self.confidence:.0%} bound {upper[k]:.3g}"
                    if self.confidence is not None
                    else ""
                )
                rs[k] = f"flagged: ability {ab[k]:.3g} < {eps:g}{conf}" + (
                    " (in the refit without the excluded)" if refit else ""
                )
            elif ab[k] < below:
                rs[k] = (
                    f"ok: ability {ab[k]:.3g} < {eps:g}, not significantly "
                    f"(upper {self.confidence:.0%} bound {upper[k]:.3g})"
                )
            else:
                rs[k] = f"ok: ability ≥ {eps:g}"
        return replace(fitted, status=tuple(st), reasons=tuple(rs))

    def _fit_fixed(
        self,
        counts: PairCounts,
        names: tuple[str, ...],
        fit_idx: np.ndarray,
        *,
        records: np.ndarray,
        status: Any,
        reasons: Any,
        notes: tuple[str, ...] = (),
        x0: np.ndarray | None = None,
        a0: np.ndarray | None = None,
        other_abilities: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> AmEloFitted:
        """Fit on the annotators ``fit_idx`` of ``counts`` (no screening)."""
        kk = len(names)
        kin = len(fit_idx)
        fc = _counts_of_annotators(counts, names, fit_idx)
        if fc.n_comparisons <= 0:
            raise InputError(f"{counts.source}: the annotators in the fit have no comparisons.")
        check = check_comparison_graph(fc, ties_count=True)
        notes = tuple(notes)
        if not check.ok:
            warnings.warn(check.message, StableArenaWarning, stacklevel=3)
            notes = (*notes, check.message)
        model_prior = None if check.ok else check.needs_prior
        rows = AmEloRows.from_counts(fc, n_annotators=kin)
        if self.solver == "adam":
            x, a, conv, prior_ties = self._solve_adam(rows, model_prior)
        else:
            x, a, conv, prior_ties = _solve_with_existence(
                rows, model_prior, self.tol, self.max_iter, x0, a0
            )
            if not conv.converged and (model_prior is None or not model_prior.all()):
                # The joint MLE can be infinite even when m-ELO's is finite: a model's only
                # losses may all come from annotators whose ability can shrink towards 0, so
                # its rating runs off. Keep every rating finite with m-ELO's existence prior.
                model_prior = np.ones(fc.n_models, dtype=bool)
                x, a, conv, prior_ties = _solve_with_existence(
                    rows, model_prior, self.tol, self.max_iter, None, None
                )
                msg = (
                    f"{counts.source}: am-ELO's maximum-likelihood ratings are infinite on these "
                    "data (some models' only losses or wins come from annotators whose ability "
                    "can shrink towards 0); every rating is kept finite by a weak prior — half a "
                    "virtual tie against the average model — so read extreme ratings as bounds."
                )
                warnings.warn(msg, StableArenaWarning, stacklevel=3)
                notes = (*notes, msg)
        if self.normalization == "sum" and not a.sum() > 1e-9 * len(a):
            raise InputError(
                f"{counts.source}: the paper's normalisation Σθ = 1 has no solution here: the "
                f"fitted abilities sum to {a.sum():.3g} (annotators who vote against the ranking "
                "cancel the others), so θ/Σθ is undefined. Use normalization='mean' (mean "
                "|ability| = 1, docs/methods/annotator-identification.md)."
            )
        if prior_ties.any():
            who = [names[fit_idx[k]] for k in np.flatnonzero(prior_ties)]
            msg = (
                f"{len(who)} annotator(s) voted all with (or all against) the ranking, so their "
                f"ability MLE is infinite ({', '.join(who[:6])}{' …' if len(who) > 6 else ''}); it is "
                f"finite through {ANNOTATOR_PRIOR_STRENGTH:g} virtual tie each — read it as a bound."
            )
            warnings.warn(msg, StableArenaWarning, stacklevel=3)
            notes = (*notes, msg)
        real_rows = AmEloRows.from_counts(fc, n_annotators=kin)
        loglik = am_elo_loglik(x, a, real_rows)
        # standard errors of the fitted abilities (gauge-constrained observed information)
        fit_rows = real_rows.with_virtual_ties(ANNOTATOR_PRIOR_STRENGTH * prior_ties)
        lap, b, dd = _neg_hessian_blocks(x, a, fit_rows, exact=True)
        if model_prior is not None:
            lap = lap - _prior_terms(x, model_prior.astype(float), PRIOR_STRENGTH)[2]
        try:
            act = real_rows.records() > 0
            _, var_a = _gauge_covariance(lap, b, np.maximum(dd, 1e-300), act, _gauge_signs(a, act))
        except np.linalg.LinAlgError:
            var_a = np.full(kin, np.inf)
        abilities = np.zeros(kk)
        se = np.zeros(kk)
        abilities[fit_idx] = a
        se[fit_idx] = np.minimum(np.sqrt(var_a), 1e6)
        others = np.setdiff1d(np.arange(kk), fit_idx)
        if len(others) and other_abilities is not None:
            abilities[others] = other_abilities[0][others]
            se[others] = other_abilities[1][others]
        elif len(others):
            oc = _counts_of_annotators(counts, names, others)
            orows = AmEloRows.from_counts(oc, n_annotators=len(others))
            oa, ose = abilities_given_scores(x, orows)
            abilities[others] = oa
            se[others] = ose
        m = fc.n_models
        battles = np.bincount(fc.i, fc.totals, m) + np.bincount(fc.j, fc.totals, m)
        if len(names) == 1 and names[0] == UNKNOWN_ANNOTATOR:
            se[:] = 0.0
        return AmEloFitted(
            method=self.name,
            models=fc.models,
            scores=x,
            loglik=loglik,
            n_comparisons=fc.n_comparisons,
            battles=battles,
            convergence=conv,
            params=self.get_params(),
            anchor=parse_anchor(self.anchor),
            notes=notes,
            counts=fc,
            annotators=tuple(names),
            abilities=abilities,
            ability_se=se,
            records=records,
            status=tuple(status),
            reasons=tuple(reasons),
            normalization=self.normalization,
            prior_ties=ANNOTATOR_PRIOR_STRENGTH * prior_ties if prior_ties.any() else None,
            model_prior=model_prior,
        )

    def _solve_adam(self, rows: AmEloRows, model_prior: np.ndarray | None):
        kin = rows.n_annotators
        if self.init == "m-elo":
            r0 = _m_elo_start(rows, model_prior) * kin
            th0 = np.full(kin, 1.0 / kin)
        else:
            r0 = th0 = None
        r, th, _ = adam_am_elo(
            rows,
            lr=self.lr,
            steps=self.steps,
            normalize=True,
            ratings0=r0,
            theta0=th0,
            seed=self.seed,
        )
        ssum = th.sum()
        if ssum == 0:
            raise InputError("the Adam reproduction ended with Σθ = 0; use solver='newton'.")
        a = kin * th / ssum
        x = r / kin
        x = x - x.mean()
        x, a = _normalise_abilities(x, a, np.ones(kin, dtype=bool))
        gx, ga = am_elo_gradient(x, a, rows)
        gnorm = float(np.sqrt(gx @ gx + (ga - ga.mean()) @ (ga - ga.mean()))) / rows.total
        conv = Convergence(
            False,
            self.steps,
            gnorm,
            "adam",
            f"reproduction mode: Adam lr={self.lr}, {self.steps} steps, init={self.init}",
        )
        return x, a, conv, np.zeros(kin, dtype=bool)


def _warm_start(
    start: AmEloFitted | None, models: tuple[str, ...], fit_annotators: list[str]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Starting (x, a) for a fit on ``models`` and ``fit_annotators`` from an earlier result:
    scores and abilities matched by name; a model or annotator ``start`` did not fit gets the
    average (score 0, ability 1). ``(None, None)`` (the m-ELO start) without a usable ``start``."""
    if start is None:
        return None, None
    if not isinstance(start, AmEloFitted):
        raise InputError(f"start must be an am-ELO result, not {type(start).__name__}.")
    where = {name: k for k, name in enumerate(start.models)}
    x0 = np.array([start.scores[where[n]] if n in where else 0.0 for n in models])
    fitted_ann = {start.annotators[k]: float(start.abilities[k]) for k in start._fit_annotators}
    a0 = np.array([fitted_ann.get(n, 1.0) for n in fit_annotators])
    if not (np.all(np.isfinite(x0)) and np.all(np.isfinite(a0))) or not np.abs(a0).mean() > 0:
        return None, None
    return x0 - x0.mean(), a0


def _solve_with_existence(
    rows: AmEloRows,
    model_prior: np.ndarray | None,
    tol: float,
    max_iter: int,
    x0: np.ndarray | None,
    a0: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, Convergence, np.ndarray]:
    """Newton solve; returns (x, a, convergence, mask of annotators given virtual ties)."""
    with single_threaded_blas():
        sol = solve_am_elo(rows, x0=x0, a0=a0, prior_mask=model_prior, tol=tol, max_iter=max_iter)
    return sol.x, sol.a, sol.convergence, sol.prior_ties > 0


def _annotator_counts(data: Battles | PairCounts) -> tuple[PairCounts, tuple[str, ...]]:
    """Pair × annotator counts; data without annotator ids → one 'unknown' annotator (noted)."""
    if isinstance(data, Battles) and data.annotator is None:
        c = as_counts(data)
    elif isinstance(data, PairCounts) and data.annotator is None:
        c = data
    else:
        return as_counts(data, by_annotator=True).nonempty(), ()
    note = (
        "the data has no annotator ids: every battle is attributed to one 'unknown' annotator, "
        "so am-ELO equals m-ELO here"
    )
    c = replace(
        c.nonempty(),
        annotator=np.zeros(len(c.nonempty()), dtype=np.int32),
        annotators=(UNKNOWN_ANNOTATOR,),
    )
    return c, (note,)


def _counts_of_annotators(
    counts: PairCounts, names: tuple[str, ...], idx: np.ndarray
) -> PairCounts:
    """The rows of ``counts`` (annotator positions in ``names``) judged by the annotators at
    ``idx``, numbered 0, 1, … in the order of ``idx`` and named accordingly."""
    remap = np.full(len(names), -1, dtype=np.int64)
    remap[idx] = np.arange(len(idx))
    fc = counts.take(remap[counts.annotator] >= 0)  # type: ignore[index]
    return replace(
        fc,
        annotator=remap[fc.annotator].astype(np.int32),  # type: ignore[index]
        annotators=tuple(names[k] for k in idx),
    )
