"""Style-controlled (contextual) Bradley–Terry: m-ELO, BT and am-ELO with per-battle covariates.

Model (LMArena's style control, "Does style matter?", LMSYS blog 2024-08-28; arena-rank's
``ContextualBradleyTerry``; docs/methods/style.md), for a battle of model_a = A against model_b = B judged by
annotator k with standardised style differences z (battles × d)::

    P(A beats B | z, k) = σ(θ_k (x_A − x_B + γᵀz))

θ_k = 1 for style-controlled m-ELO (ties as half a win) and BT (ties dropped); for
style-controlled am-ELO θ_k is annotator k's ability (am-ELO paper §4.2, eq. 4) scaling the whole
logit, mean 1 over the fitted annotators. x are the style-controlled scores (natural log-odds,
mean zero; Elo ratings x / C + 1000 with C = ln10/400): the log-odds of A beating B when their
answers have the same (average) style. γ_f is the log-odds gained per standard deviation of the
normalised style difference f.

Objective, on rows r = (A, B, z, k) of battles with identical cells aggregated (n_r comparisons,
score s_r = wins + ½ ties of A), u_r = x_A − x_B + γᵀz_r, η_r = θ_k u_r::

    ℓ(x, γ, θ) = Σ_r [s_r η_r − n_r log(1 + e^{η_r})] − (λ/2)‖γ‖²                (penalty="gamma")
                                               − (λ/2)(‖x/ln 10‖² + ‖γ‖²)      (penalty="all")

``penalty="gamma"`` is arena-rank's choice (its loss is the *mean* over battles plus
(reg/2)‖γ‖², i.e. λ = reg × battles here); ``penalty="all"`` is FastChat's
(``fit_contextual_bt``: L2 reg 0.5 on every parameter, its rating parameter being x / ln 10);
``penalty="none"`` the plain maximum likelihood. The default is ``penalty="gamma"``, λ = 0.5:
the ratings are then exact maximum-likelihood ratings given γ (no shrinkage towards each other),
and γ is kept finite when a covariate separates the outcomes, at a cost of a relative shrinkage
λ/(λ + information of γ) (≈ 1·10⁻⁴ on 100,000 simulated battles, README).

With e_r = s_r − n_r p_r, w_r = n_r p_r (1 − p_r) and g_r = (e_A − e_B, z_r) (∂u_r/∂(x, γ)):
∇_(x,γ) ℓ = Σ θ_k e_r g_r, −∇²_(x,γ) ℓ = Σ θ_k² w_r g_r g_rᵀ (+ the penalty): a graph Laplacian
block for x, a dense d×d block for γ and an m×d cross block. Newton's method with a backtracking
line search on (x, γ) (on (x, γ, θ) for am-ELO, the annotator block eliminated by a Schur
complement) converges to ‖∇ℓ‖/n ≤ tol. Each iteration is one compiled pass over the rows.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
from numba import get_num_threads, njit, prange
from scipy.special import expit, log_expit

from .._numeric import normal_ppf
from .._threads import single_threaded_blas
from ..data.battles import Battles, Outcome, PairCounts
from ..data.graph import check_comparison_graph
from ..errors import ConvergenceError, InputError, StableArenaWarning
from ._newton import NO_PROGRESS, NewtonProblem, newton
from .annotator import (
    ANNOTATOR_PRIOR_STRENGTH,
    _gauge_signs,
    _orient,
    _pd_solve,
    separable_by_logit,
)
from .base import Convergence, Fitted, Rater, _freeze, parse_anchor, register_rater
from .bradley_terry import PRIOR_STRENGTH, _prior_terms

__all__ = [
    "PENALTIES",
    "DEFAULT_REG",
    "StyleRows",
    "style_rows",
    "style_loglik",
    "style_gradient",
    "style_hessian",
    "solve_style",
    "StyleFitted",
    "StyleMElo",
    "StyleBradleyTerry",
    "StyleAmElo",
]

Penalty = Literal["gamma", "all", "none"]
#: Penalty choices (module docstring).
PENALTIES: tuple[str, ...] = ("gamma", "all", "none")
#: Default λ: FastChat's 0.5, applied to γ only (arena-rank's choice of what to penalise).
DEFAULT_REG: float = 0.5
#: FastChat's rating parameter is x / ln 10 (base-10 logits): its penalty on ratings is on that.
_LN10: float = math.log(10.0)
#: Sampled battles used to decide whether aggregating identical cells pays off.
_AGG_SAMPLE: int = 4096
#: Rows above which Newton starts from a fit on a 1/16 subsample (see :func:`solve_style`).
_WARM_ROWS: int = 200_000
#: An |ability| this many times the average annotator's means no finite MLE (see am-ELO).
_RUNAWAY: float = 1000.0


# ---------------------------------------------------------------------------------- the rows
@dataclass(frozen=True, eq=False)
class StyleRows:
    """The likelihood's data: rows (a, b, z, annotator) with weighted outcome counts.

    ``a < b`` in every row (a row whose battle had the larger index first is stored with z
    negated and wins/losses swapped). ``wins``/``losses``/``ties`` count battles won by ``a``,
    by ``b`` and tied (ties are 0 for BT with ties dropped). ``k`` is the annotator (all 0 when
    the fit has none)."""

    n_models: int
    n_annotators: int
    a: np.ndarray
    b: np.ndarray
    z: np.ndarray
    k: np.ndarray
    wins: np.ndarray
    losses: np.ndarray
    ties: np.ndarray

    @cached_property
    def n(self) -> np.ndarray:
        """Comparisons per row."""
        return self.wins + self.losses + self.ties

    @cached_property
    def s(self) -> np.ndarray:
        """Score of a per row: wins + ½ ties."""
        return self.wins + 0.5 * self.ties

    @cached_property
    def total(self) -> float:
        return float(self.n.sum())

    @property
    def n_features(self) -> int:
        return self.z.shape[1]

    def __len__(self) -> int:
        return len(self.a)


def _aggregate(
    a: np.ndarray, b: np.ndarray, k: np.ndarray, z: np.ndarray, cols: list[np.ndarray]
) -> tuple[np.ndarray, ...]:
    """Sum ``cols`` over battles with identical (a, b, k, z) — when a sample of the battles shows
    that this shrinks the data (covariates on a coarse grid); per-battle rows otherwise."""
    n = len(a)
    if n == 0:
        return (a, b, k, z, *cols)
    take = min(n, _AGG_SAMPLE)
    sample = np.column_stack([a[:take], b[:take], k[:take], z[:take]])
    if len(np.unique(sample, axis=0)) > 0.5 * take:
        return (a, b, k, z, *cols)
    frame = pd.DataFrame(np.column_stack([a, b, k, z]))
    group = frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy()
    g = int(group.max()) + 1
    first = np.full(g, n, dtype=np.int64)
    np.minimum.at(first, group, np.arange(n))
    return (a[first], b[first], k[first], z[first], *(np.bincount(group, c, g) for c in cols))


def style_rows(
    battles: Battles,
    covariates: np.ndarray,
    *,
    ties: Literal["half", "drop"] = "half",
    annotator: np.ndarray | None = None,
    n_annotators: int = 1,
    mean: np.ndarray | None = None,
    std: np.ndarray | None = None,
) -> StyleRows:
    """Rows of the likelihood from battles and their covariates, standardised on the way as
    (z − ``mean``) / ``std`` when those are given.

    Ties of both kinds count as half a win (``ties="half"``) or are left out (``"drop"``);
    battles with zero weight are left out. Identical cells are aggregated (see
    :func:`_aggregate`)."""
    z = np.ascontiguousarray(covariates, dtype=float)
    d = z.shape[1]
    mu = np.zeros(d) if mean is None else np.asarray(mean, dtype=float)
    sd = np.ones(d) if std is None else np.asarray(std, dtype=float)
    n = len(battles)
    ann = np.zeros(0, dtype=np.int32) if annotator is None else np.asarray(annotator)
    weight = np.zeros(0) if battles.weight is None else np.asarray(battles.weight, dtype=float)
    a = np.empty(n, dtype=np.int32)
    b = np.empty(n, dtype=np.int32)
    k = np.zeros(n, dtype=np.int32)
    zz = np.empty_like(z)
    table = np.zeros((n, 3))
    used = _battle_rows(
        battles.model_a, battles.model_b, battles.outcome, weight, ann, z, mu, sd, ties == "half",
        a, b, k, zz, table,
    )  # fmt: skip
    a, b, k, zz, table = a[:used], b[:used], k[:used], zz[:used], table[:used]
    a, b, k, zz, win, loss, tie = _aggregate(a, b, k, zz, [table[:, 0], table[:, 1], table[:, 2]])
    return StyleRows(
        battles.n_models,
        n_annotators,
        np.ascontiguousarray(a),
        np.ascontiguousarray(b),
        np.ascontiguousarray(zz),
        np.ascontiguousarray(k),
        np.ascontiguousarray(win),
        np.ascontiguousarray(loss),
        np.ascontiguousarray(tie),
    )


@njit(cache=True)
def _battle_rows(
    model_a: np.ndarray,
    model_b: np.ndarray,
    outcome: np.ndarray,
    weight: np.ndarray,
    annotator: np.ndarray,
    z: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    ties_half: bool,
    a: np.ndarray,
    b: np.ndarray,
    k: np.ndarray,
    zz: np.ndarray,
    table: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """One pass over the battles: rows oriented a < b (z negated, wins and losses swapped when
    model_a had the larger index) and standardised, outcome weights in ``table`` (won by a, won by b, tied), rows
    that count for nothing (zero weight; ties when they are dropped) left out. Returns the number
    of rows written."""
    d = z.shape[1]
    has_w = len(weight) > 0
    has_k = len(annotator) > 0
    r = 0
    for t in range(len(model_a)):
        w = weight[t] if has_w else 1.0
        o = outcome[t]
        if w == 0.0 or (o >= 2 and not ties_half):
            continue
        x = model_a[t]
        y = model_b[t]
        flip = x > y
        a[r] = y if flip else x
        b[r] = x if flip else y
        if has_k:
            k[r] = annotator[t]
        sign = -1.0 if flip else 1.0
        for f in range(d):
            zz[r, f] = sign * (z[t, f] - mean[f]) / std[f]
        if o >= 2:
            table[r, 2] = w
        elif (o == 0) != flip:
            table[r, 0] = w
        else:
            table[r, 1] = w
        r += 1
    return r


# ---------------------------------------------------------------------------------- likelihood
def _penalty_weights(m: int, d: int, penalty: str, reg: float) -> np.ndarray:
    """Diagonal of the penalty's Hessian: λ on γ; with ``"all"`` also λ/ln²10 on x."""
    out = np.zeros(m + d)
    if penalty == "none":
        return out
    out[m:] = reg
    if penalty == "all":
        out[:m] = reg / _LN10**2
    return out


def style_loglik(
    x: np.ndarray, gamma: np.ndarray, rows: StyleRows, theta: np.ndarray | None = None
) -> float:
    """Σ_r s_r η_r − n_r log(1 + e^{η_r}), η_r = θ_k (x_a − x_b + γᵀz_r) (no penalty)."""
    eta = x[rows.a] - x[rows.b] + rows.z @ gamma
    if theta is not None:
        eta = theta[rows.k] * eta
    return float(np.sum(rows.s * eta + rows.n * log_expit(-eta)))


def style_gradient(
    x: np.ndarray, gamma: np.ndarray, rows: StyleRows, theta: np.ndarray | None = None
) -> np.ndarray:
    """∇ of :func:`style_loglik` in (x, γ) — and θ when given (module docstring)."""
    m = rows.n_models
    u = x[rows.a] - x[rows.b] + rows.z @ gamma
    c = np.ones(len(u)) if theta is None else theta[rows.k]
    e = rows.s - rows.n * expit(c * u)
    ce = c * e
    gx = np.bincount(rows.a, ce, m) - np.bincount(rows.b, ce, m)
    parts = [gx, rows.z.T @ ce]
    if theta is not None:
        parts.append(np.bincount(rows.k, u * e, rows.n_annotators))
    return np.concatenate(parts)


def style_hessian(
    x: np.ndarray,
    gamma: np.ndarray,
    rows: StyleRows,
    theta: np.ndarray | None = None,
    *,
    exact: bool = True,
) -> np.ndarray:
    """Dense Hessian of :func:`style_loglik` in (x, γ[, θ]); ``exact=False``: −Fisher (drops the
    −e_r ∂u/∂(x, γ) term of the (x, γ)×θ block, which vanishes in expectation)."""
    m, d = rows.n_models, rows.n_features
    u = x[rows.a] - x[rows.b] + rows.z @ gamma
    c = np.ones(len(u)) if theta is None else theta[rows.k]
    p = expit(c * u)
    w = rows.n * p * (1 - p)
    e = rows.s - rows.n * p
    g = np.zeros((len(u), m + d))
    r = np.arange(len(u))
    g[r, rows.a] = 1.0
    g[r, rows.b] = -1.0
    g[:, m:] = rows.z
    h = -(g * (c * c * w)[:, None]).T @ g
    if theta is None:
        return h
    kk = rows.n_annotators
    onehot = np.zeros((len(u), kk))
    onehot[r, rows.k] = 1.0
    cross_w = c * w * u - (e if exact else 0.0)
    hxa = -(g * cross_w[:, None]).T @ onehot
    haa = -np.diag(np.bincount(rows.k, w * u * u, kk))
    return np.block([[h, hxa], [hxa.T, haa]])


@njit(cache=True)
def _pass(
    x: np.ndarray,
    gamma: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    z: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    s: np.ndarray,
    theta: np.ndarray,
    derivatives: bool,
    grad: np.ndarray,
    hess: np.ndarray,
    ga: np.ndarray,
    dd: np.ndarray,
    cross: np.ndarray,
    cross_e: np.ndarray,
) -> float:  # pragma: no cover - compiled
    """One pass over the rows: returns ℓ (no penalty); with ``derivatives`` fills
    ``grad`` = ∇_(x,γ)ℓ, ``hess`` = −∇²_(x,γ)ℓ (upper triangle of the γ block, then mirrored),
    and — when ``theta`` has more than one entry (am-ELO) — ``ga`` = ∂ℓ/∂θ, ``dd`` = −∂²ℓ/∂θ_k²,
    ``cross`` = Σ θ w u g e_kᵀ and ``cross_e`` = Σ e g e_kᵀ ((x, γ) × annotator blocks)."""
    m = len(x)
    d = len(gamma)
    ann = len(theta) > 1
    total = 0.0
    if derivatives:
        grad[:] = 0.0
        hess[:, :] = 0.0
        if ann:
            ga[:] = 0.0
            dd[:] = 0.0
            cross[:, :] = 0.0
            cross_e[:, :] = 0.0
    for r in range(len(a)):
        ia = a[r]
        ib = b[r]
        u = x[ia] - x[ib]
        for f in range(d):
            u += gamma[f] * z[r, f]
        c = theta[k[r]] if ann else 1.0
        eta = c * u
        # branch-free and stable: q = e^{-|η|} ≤ 1, softplus(η) = max(η, 0) + log1p(q),
        # p = σ(η) = (1 if η ≥ 0 else q) / (1 + q) (the sign of η is unpredictable row to row)
        q = np.exp(-abs(eta))
        softplus = max(eta, 0.0) + np.log1p(q)
        p = (1.0 if eta >= 0 else q) / (1.0 + q)
        total += s[r] * eta - n[r] * softplus
        if not derivatives:
            continue
        e = s[r] - n[r] * p
        w = n[r] * p * (1.0 - p)
        ce = c * e
        cw = c * c * w
        grad[ia] += ce
        grad[ib] -= ce
        hess[ia, ia] += cw
        hess[ib, ib] += cw
        hess[ia, ib] -= cw
        hess[ib, ia] -= cw
        for f in range(d):
            zf = z[r, f]
            grad[m + f] += ce * zf
            hess[ia, m + f] += cw * zf
            hess[ib, m + f] -= cw * zf
            for g2 in range(f, d):
                hess[m + f, m + g2] += cw * zf * z[r, g2]
        if ann:
            kr = k[r]
            ga[kr] += u * e
            dd[kr] += w * u * u
            t = c * w * u
            cross[ia, kr] += t
            cross[ib, kr] -= t
            cross_e[ia, kr] += e
            cross_e[ib, kr] -= e
            for f in range(d):
                cross[m + f, kr] += t * z[r, f]
                cross_e[m + f, kr] += e * z[r, f]
    if derivatives:
        for f in range(d):
            for i in range(m):
                hess[m + f, i] = hess[i, m + f]
            for g2 in range(f + 1, d):
                hess[m + g2, m + f] = hess[m + f, m + g2]
    return total


@njit(parallel=True, cache=True)
def _pass_split(
    x: np.ndarray,
    gamma: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    z: np.ndarray,
    k: np.ndarray,
    n: np.ndarray,
    s: np.ndarray,
    theta: np.ndarray,
    derivatives: bool,
    grad: np.ndarray,
    hess: np.ndarray,
    ga: np.ndarray,
    dd: np.ndarray,
    cross: np.ndarray,
    cross_e: np.ndarray,
    parts: int,
) -> float:  # pragma: no cover - compiled
    """:func:`_pass` over ``parts`` contiguous slices of the rows on the cores, each into its
    own accumulators, then summed (every output of the pass is a sum over rows)."""
    rows = len(a)
    totals = np.zeros(parts)
    grads = np.zeros((parts,) + grad.shape)
    hesss = np.zeros((parts,) + hess.shape)
    gas = np.zeros((parts,) + ga.shape)
    dds = np.zeros((parts,) + dd.shape)
    crosses = np.zeros((parts,) + cross.shape)
    cross_es = np.zeros((parts,) + cross_e.shape)
    for c in prange(parts):
        lo = rows * c // parts
        hi = rows * (c + 1) // parts
        totals[c] = _pass(x, gamma, a[lo:hi], b[lo:hi], z[lo:hi], k[lo:hi], n[lo:hi],
                          s[lo:hi], theta, derivatives, grads[c], hesss[c], gas[c], dds[c],
                          crosses[c], cross_es[c])  # fmt: skip
    if derivatives:
        grad[:] = grads.sum(axis=0)
        hess[:, :] = hesss.sum(axis=0)
        if len(theta) > 1:
            ga[:] = gas.sum(axis=0)
            dd[:] = dds.sum(axis=0)
            cross[:, :] = crosses.sum(axis=0)
            cross_e[:, :] = cross_es.sum(axis=0)
    return totals.sum()


#: rows from which a pass is split over the cores (below it, thread start-up costs more)
_SPLIT_ROWS = 200_000


def _row_pass(*args: Any) -> float:
    """:func:`_pass`, or :func:`_pass_split` over the cores numba may use on many rows."""
    parts = get_num_threads()
    if parts > 1 and len(args[2]) >= _SPLIT_ROWS:
        return float(_pass_split(*args, parts))
    return float(_pass(*args))


@dataclass(frozen=True)
class StyleSolution:
    """Result of :func:`solve_style`: scores x (mean zero), γ, abilities θ (None without
    annotators), the penalised objective and log-likelihood, and how the solver ended."""

    x: np.ndarray
    gamma: np.ndarray
    theta: np.ndarray | None
    loglik: float
    objective: float
    convergence: Convergence


class _Objective:
    """ℓ, its gradient and negative Hessian (penalty and existence prior included) for a fixed
    set of rows; the compiled pass does the row work."""

    def __init__(
        self,
        rows: StyleRows,
        penalty: str,
        reg: float,
        prior_mask: np.ndarray | None,
        annotators: bool,
    ) -> None:
        self.rows = rows
        self.m, self.d = rows.n_models, rows.n_features
        self.kk = rows.n_annotators if annotators else 0
        self.pen = _penalty_weights(self.m, self.d, penalty, reg)
        self.last_loglik = self.last_value = float("nan")
        self.prior = (
            None if prior_mask is None or not np.any(prior_mask) else prior_mask.astype(float)
        )
        self.args = (_ints(rows.a), _ints(rows.b), rows.z, _ints(rows.k), rows.n, rows.s)
        p = self.m + self.d
        self.grad = np.empty(p)
        self.hess = np.empty((p, p))
        kk = max(self.kk, 1)
        self.ga = np.empty(kk)
        self.dd = np.empty(kk)
        self.cross = np.empty((p, kk))
        self.cross_e = np.empty((p, kk))

    def _theta(self, theta: np.ndarray | None) -> np.ndarray:
        return np.ones(1) if theta is None else np.asarray(theta, dtype=float)

    def value(self, x: np.ndarray, gamma: np.ndarray, theta: np.ndarray | None = None) -> float:
        ll = _row_pass(x, gamma, *self.args, self._theta(theta), False, self.grad, self.hess,
                   self.ga, self.dd, self.cross, self.cross_e)  # fmt: skip
        return ll - self._penalty_value(x, gamma)

    def _penalty_value(self, x: np.ndarray, gamma: np.ndarray) -> float:
        v = 0.5 * float(np.sum(self.pen * np.concatenate([x, gamma]) ** 2))
        if self.prior is not None:
            v -= _prior_terms(x, self.prior, PRIOR_STRENGTH)[0]
        return v

    def derivatives(
        self, x: np.ndarray, gamma: np.ndarray, theta: np.ndarray | None = None
    ) -> float:
        """Objective; fills ``grad``/``hess`` (and the annotator blocks) in place."""
        ll = _row_pass(x, gamma, *self.args, self._theta(theta), True, self.grad, self.hess,
                   self.ga, self.dd, self.cross, self.cross_e)  # fmt: skip
        self.last_loglik = ll
        params = np.concatenate([x, gamma])
        self.grad -= self.pen * params
        self.hess[np.diag_indices_from(self.hess)] += self.pen
        if self.prior is not None:
            _, pg, ph = _prior_terms(x, self.prior, PRIOR_STRENGTH)
            self.grad[: self.m] += pg
            self.hess[: self.m, : self.m] -= ph
        self.last_value = ll - self._penalty_value(x, gamma)
        return self.last_value


def _ints(a: np.ndarray) -> np.ndarray:
    """Contiguous int32 codes (the compiled pass indexes with them; no copy when they are)."""
    return np.ascontiguousarray(a, dtype=np.int32)


def _every(rows: StyleRows, step: int) -> StyleRows:
    """Every ``step``-th row (a warm-start subsample)."""
    sl = slice(None, None, step)
    return replace(
        rows,
        a=np.ascontiguousarray(rows.a[sl]),
        b=np.ascontiguousarray(rows.b[sl]),
        z=np.ascontiguousarray(rows.z[sl]),
        k=np.ascontiguousarray(rows.k[sl]),
        wins=rows.wins[sl].copy(),
        losses=rows.losses[sl].copy(),
        ties=rows.ties[sl].copy(),
    )


class _StyleProblem(NewtonProblem):
    """:func:`solve_style` for the Newton driver: the point (x, γ) and the objective ``obj``
    holding the derivatives there."""

    def __init__(
        self, obj: _Objective, x: np.ndarray, gamma: np.ndarray, free_shift: bool, total: float
    ) -> None:
        self.obj, self.x, self.gamma = obj, x, gamma
        self.free_shift, self.total = free_shift, total
        self.f = obj.derivatives(x, gamma)

    def gradient_norm(self) -> float:
        self.g = self.obj.grad.copy()
        return float(np.linalg.norm(self.g)) / self.total

    def direction(self) -> float:
        obj, g, m = self.obj, self.g, self.obj.m
        h = obj.hess.copy()
        if self.free_shift:
            shift = max(float(np.trace(h[:m, :m])) / m, 1e-12)
            h[:m, :m] += shift / m
        try:
            step = np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(h, g, rcond=None)[0]
        if self.free_shift:
            step[:m] -= step[:m].mean()
        self.step = step
        return float(g @ step)

    def trial(self, t: float) -> float:
        m, step = self.obj.m, self.step
        return self.obj.value(self.x + t * step[:m], self.gamma + t * step[m:])

    def full(self) -> float:
        m, step = self.obj.m, self.step
        return self.obj.derivatives(self.x + step[:m], self.gamma + step[m:])

    def full_gradient_norm(self) -> float:
        return float(np.linalg.norm(self.obj.grad)) / self.total

    def accept(self, t: float, f: float | None) -> None:
        m, step = self.obj.m, self.step
        self.x = self.x + t * step[:m]
        self.gamma = self.gamma + t * step[m:]
        if self.free_shift:
            self.x -= self.x.mean()  # a shift leaves the objective and its derivatives unchanged
        # a full step has its derivatives from the line search
        self.f = self.obj.last_value if t == 1.0 else self.obj.derivatives(self.x, self.gamma)

    def finish(self, message: str) -> str:
        if message == NO_PROGRESS:  # the line search left the derivatives elsewhere
            self.f = self.obj.derivatives(self.x, self.gamma)
        return message


def solve_style(
    rows: StyleRows,
    *,
    penalty: Penalty = "gamma",
    reg: float = DEFAULT_REG,
    prior_mask: np.ndarray | None = None,
    x0: np.ndarray | None = None,
    gamma0: np.ndarray | None = None,
    tol: float = 1e-9,
    max_iter: int = 100,
) -> StyleSolution:
    """Maximise the penalised style-controlled likelihood in (x, γ) by Newton's method.

    Converged when ‖∇‖ / Σn ≤ ``tol`` (the gradient of the penalised objective). The x-shift is
    free unless ``penalty="all"``; the step is then taken on Σx = 0 (the Hessian is singular
    along it, so a multiple of 11ᵀ is added to the x block, which leaves a step ⊥ 1 unchanged).
    ``prior_mask``: models that get m-ELO's existence prior (their MLE is infinite)."""
    m, d = rows.n_models, rows.n_features
    total = rows.total
    if total <= 0:
        raise InputError("no comparisons to fit.")
    if x0 is None and gamma0 is None and len(rows) >= _WARM_ROWS:
        # Newton from a fit on every 16th row: its optimum is within a few standard errors of
        # the full one, so the full data need two or three passes instead of four or five
        part = _every(rows, 16)
        warm = solve_style(
            part, penalty=penalty, reg=reg / 16, prior_mask=prior_mask, tol=tol, max_iter=max_iter
        )
        x0, gamma0 = warm.x, warm.gamma
    obj = _Objective(rows, penalty, reg, prior_mask, annotators=False)
    if x0 is None:
        won = np.bincount(rows.a, rows.s, m) + np.bincount(rows.b, rows.n - rows.s, m)
        played = np.bincount(rows.a, rows.n, m) + np.bincount(rows.b, rows.n, m)
        x = np.log((won + 0.5) / (played - won + 0.5))
    else:
        x = np.asarray(x0, dtype=float).copy()
    x -= x.mean()
    gamma = np.zeros(d) if gamma0 is None else np.asarray(gamma0, dtype=float).copy()
    free_shift = penalty != "all"
    with single_threaded_blas():
        problem = _StyleProblem(obj, x, gamma, free_shift, total)
        conv = newton(problem, tol=tol, max_iter=max_iter)
    x, gamma, f = problem.x, problem.gamma, problem.f
    return StyleSolution(x, gamma, None, obj.last_loglik, f, conv)


# ---------------------------------------------------------------------------------- am-ELO
def _separable(x: np.ndarray, gamma: np.ndarray, rows: StyleRows) -> np.ndarray:
    """Annotators whose ability MLE is infinite at (x, γ): every comparison they judged went to
    the side with the larger u = x_a − x_b + γᵀz (→ +∞), or every one to the smaller (→ −∞)."""

    u = x[rows.a] - x[rows.b] + rows.z @ gamma
    return separable_by_logit(u, rows.s, rows.n, rows.k, rows.n_annotators)


def _with_virtual_ties(rows: StyleRows, weight: np.ndarray) -> StyleRows:
    """``weight[k]`` virtual ties for annotator k, spread over its rows in proportion to battles
    (am-ELO's treatment of annotators whose ability MLE is infinite)."""
    if not np.any(weight):
        return rows
    rec = np.bincount(rows.k, rows.n, rows.n_annotators)
    share = np.where(rec[rows.k] > 0, rows.n / np.maximum(rec[rows.k], 1e-300), 0.0)
    return replace(rows, ties=rows.ties + weight[rows.k] * share)


def _am_step(
    obj: _Objective, cross: np.ndarray, active: np.ndarray, free_shift: bool, sign: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Newton step (dθ_model = (dx, dγ), da) maximising the quadratic model subject to sᵀda = 0,
    s the signs of the abilities (the gauge mean |θ| = 1, as in am-ELO:
    :func:`stablearena.raters.annotator._gauge_signs`), and Σdx = 0 when the shift is free. With
    −H = [[A, B], [Bᵀ, D]], D diagonal, eliminating da by the Schur complement gives
    (A − B D⁻¹ Bᵀ + c cᵀ/sᵀu) dθ = g − B D⁻¹ g_a + c (uᵀg_a)/sᵀu, u = D⁻¹s, c = B u; then
    da = D⁻¹(g_a − Bᵀ dθ) − λu. ``None`` when not positive definite."""
    m = obj.m
    dd = np.maximum(obj.dd, 1e-300)
    dinv = np.where(active, 1.0 / dd, 0.0)
    u = dinv * sign
    su = float((u * sign).sum())
    ga = np.where(active, obj.ga, 0.0)
    schur = obj.hess - (cross * dinv) @ cross.T
    c = cross @ u
    schur += np.outer(c, c) / su
    ga_s = dinv * ga
    rhs = obj.grad - cross @ ga_s + c * ((sign * ga_s).sum() / su)
    if free_shift:
        schur[:m, :m] += max(float(np.mean(np.abs(np.diag(schur)))), 1e-12) / m
    dth = _pd_solve(schur, rhs)
    if dth is None:
        return None
    if free_shift:
        dth[:m] -= dth[:m].mean()
    t = dinv * (ga - cross.T @ dth)
    da = t - ((sign * t).sum() / su) * u
    return dth, da


class _StyleAmEloProblem(NewtonProblem):
    """:func:`solve_style_am_elo` for the Newton driver: the point (x, γ, θ) on Σ s_k θ_k = M
    (mean |θ| = 1, s the signs of θ; and
    Σx = 0 when the shift is free), the annotators given virtual ties, Gauss–Newton steps."""

    def __init__(
        self,
        objective_for: Callable[[np.ndarray], _Objective],
        virtual: np.ndarray,
        data_rows: StyleRows,
        x: np.ndarray,
        gamma: np.ndarray,
        theta: np.ndarray,
        active: np.ndarray,
        free_shift: bool,
        total: float,
    ) -> None:
        self.objective_for, self.virtual, self.data_rows = objective_for, virtual, data_rows
        self.x, self.gamma, self.theta = x, gamma, theta
        self.active, self.free_shift, self.total = active, free_shift, total
        self.kk = data_rows.n_annotators
        self.sign = _gauge_signs(theta, active)
        self.obj = objective_for(virtual)
        self.f = self.obj.derivatives(x, gamma, theta)

    def _projected_norm(self) -> tuple[np.ndarray, float]:
        obj, act = self.obj, self.active
        ga = np.where(act, obj.ga, 0.0)
        pga = np.where(act, ga - self.sign * ((self.sign * ga)[act].mean()), 0.0)
        return ga, math.sqrt(float(obj.grad @ obj.grad) + float(pga @ pga)) / self.total

    def prepare(self) -> None:
        if self.kk > 1 and np.any(np.abs(self.theta) > 3.0):
            new = (
                _separable(self.x, self.gamma, self.data_rows)
                & (np.abs(self.theta) > 3.0)
                & ~self.virtual
            )
            if new.any():
                self.virtual |= new
                self.obj = self.objective_for(self.virtual)
                self.f = self.obj.derivatives(self.x, self.gamma, self.theta)

    def gradient_norm(self) -> float:
        self.ga, gnorm = self._projected_norm()
        return gnorm

    def check(self, iteration: int) -> str | None:
        if np.max(np.abs(self.theta)) > _RUNAWAY:
            raise ConvergenceError(
                "style-controlled am-ELO has no maximum-likelihood solution on these data: "
                f"an ability ran off to {np.max(np.abs(self.theta)):.3g} × the average after "
                f"{iteration} iterations. Add battles per annotator, raise --min-records, or use "
                "m-elo."
            )
        return None

    def direction(self) -> float | str:
        obj, active = self.obj, self.active
        g_all = np.concatenate([obj.grad, self.ga])
        step = _am_step(obj, obj.cross - obj.cross_e, active, self.free_shift, self.sign)
        if step is None or float(g_all @ np.concatenate(step)) <= 0:
            self.fisher_steps += 1
            step = _am_step(obj, obj.cross, active, self.free_shift, self.sign)
            if step is not None and float(g_all @ np.concatenate(step)) <= 0:
                step = None
        if step is None:
            return "neither the Hessian nor the Fisher matrix is definite on the constraint set"
        dth, da = self.step = step
        return float(g_all @ np.concatenate([dth, da]))

    def trial(self, t: float) -> float:
        (dth, da), m = self.step, self.obj.m
        return self.obj.value(self.x + t * dth[:m], self.gamma + t * dth[m:], self.theta + t * da)

    def full(self) -> float:
        (dth, da), m = self.step, self.obj.m
        return self.obj.derivatives(self.x + dth[:m], self.gamma + dth[m:], self.theta + da)

    def full_gradient_norm(self) -> float:
        return self._projected_norm()[1]

    def accept(self, t: float, f: float | None) -> None:
        (dth, da), m, active = self.step, self.obj.m, self.active
        self.x = self.x + t * dth[:m]
        self.gamma = self.gamma + t * dth[m:]
        theta = self.theta + t * da
        if self.free_shift:
            self.x -= self.x.mean()
        sign = self.sign
        if np.array_equal(_gauge_signs(theta, active), sign):
            self.theta = np.where(active, theta - sign * ((sign * theta)[active].mean() - 1.0), 1.0)
        else:  # an ability changed sign: back onto mean |θ| = 1 with the new signs
            scale = float(np.abs(theta[active]).mean())
            self.x, self.gamma = self.x * scale, self.gamma * scale
            self.theta = np.where(active, theta / scale, 1.0)
            self.sign = _gauge_signs(self.theta, active)
        self.f = self.obj.derivatives(self.x, self.gamma, self.theta)


def solve_style_am_elo(
    rows: StyleRows,
    *,
    penalty: Penalty = "gamma",
    reg: float = DEFAULT_REG,
    prior_mask: np.ndarray | None = None,
    x0: np.ndarray | None = None,
    gamma0: np.ndarray | None = None,
    theta0: np.ndarray | None = None,
    tol: float = 1e-9,
    max_iter: int = 200,
) -> tuple[StyleSolution, np.ndarray]:
    """Exact joint maximiser of the style-controlled am-ELO objective in (x, γ, θ) under Σx = 0
    (unless ``penalty="all"``) and mean |θ| = 1 over annotators with comparisons, the sign chosen
    so that most votes come from annotators of positive ability (as am-ELO,
    docs/methods/annotator-identification.md).

    Starts from style-controlled m-ELO (pooled) with θ = 1. Newton steps with the exact Hessian,
    the Gauss–Newton (Fisher) matrix where that is not definite, backtracking line search.
    Annotators whose votes all go with (or all against) the model become separable as their
    ability runs off; they get ½ virtual tie each (as in am-ELO). Converged when the gradient
    projected on the constraint set has norm ≤ ``tol`` × comparisons. Returns the solution and the
    virtual ties given to each annotator."""
    kk = rows.n_annotators
    total = rows.total
    data_rows = rows
    active = np.bincount(rows.k, rows.n, kk) > 0
    if x0 is None or gamma0 is None:
        pooled = solve_style(rows, penalty=penalty, reg=reg, prior_mask=prior_mask, tol=tol)
        x0, gamma0 = pooled.x, pooled.gamma
    x = np.asarray(x0, dtype=float).copy()
    gamma = np.asarray(gamma0, dtype=float).copy()
    theta = np.ones(kk) if theta0 is None else np.where(active, np.asarray(theta0, float), 1.0)
    theta = np.where(active, theta / np.abs(theta[active]).mean(), 1.0)
    free_shift = penalty != "all"

    virtual = np.zeros(kk, dtype=bool)
    if kk > 1:
        virtual = _separable(x, gamma, data_rows)

    def objective_for(v: np.ndarray) -> _Objective:
        r = _with_virtual_ties(data_rows, ANNOTATOR_PRIOR_STRENGTH * v)
        return _Objective(r, penalty, reg, prior_mask, annotators=True)

    with single_threaded_blas():
        problem = _StyleAmEloProblem(
            objective_for, virtual, data_rows, x, gamma, theta, active, free_shift, total
        )
        conv = newton(problem, tol=tol, max_iter=max_iter)
    x, gamma, theta, f, virtual = (
        problem.x,
        problem.gamma,
        problem.theta,
        problem.f,
        problem.virtual,
    )
    if _orient(x, theta, np.bincount(rows.k, rows.n, kk))[1] is not theta:
        x, gamma, theta = -x, -gamma, -theta  # the same objective (penalty and prior are even)
    sol = StyleSolution(x, gamma, theta, style_loglik(x, gamma, data_rows, theta), f, conv)
    return sol, ANNOTATOR_PRIOR_STRENGTH * virtual.astype(float)


# ---------------------------------------------------------------------------------- results
def _outer(
    rows: StyleRows,
    v: np.ndarray,
    v_cross: np.ndarray | None = None,
    v_ann: np.ndarray | None = None,
) -> np.ndarray:
    """Σ_r v_r g_r g_rᵀ with g_r = (e_a − e_b, z_r), bordered (when ``v_cross`` is given) by the
    annotator blocks Σ v_cross g_r e_kᵀ and diag Σ v_ann — vectorised, no rows × parameters
    matrix (the shape of −H and of the sandwich's meat)."""
    from .information import laplacian

    m, d = rows.n_models, rows.n_features
    z = rows.z
    top = np.zeros((m + d, m + d))
    top[:m, :m] = laplacian(m, rows.a, rows.b, v)
    vz = v[:, None] * z
    top[:m, m:] = _scatter_diff(rows, vz, m)
    top[m:, :m] = top[:m, m:].T
    top[m:, m:] = z.T @ vz
    if v_cross is None:
        return top
    kk = rows.n_annotators
    cz = v_cross[:, None] * z
    xa = np.zeros((m + d, kk))
    xa[:m] = (
        np.bincount(rows.a * kk + rows.k, v_cross, m * kk)
        - np.bincount(rows.b * kk + rows.k, v_cross, m * kk)
    ).reshape(m, kk)
    for f in range(d):
        xa[m + f] = np.bincount(rows.k, cz[:, f], kk)
    aa = np.diag(np.bincount(rows.k, v_ann, kk))  # type: ignore[arg-type]
    return np.block([[top, xa], [xa.T, aa]])


def _scatter_diff(rows: StyleRows, vals: np.ndarray, m: int) -> np.ndarray:
    """m × d matrix Σ_r (e_a − e_b) vals_rᵀ."""
    out = np.zeros((m, vals.shape[1]))
    np.add.at(out, rows.a, vals)
    np.subtract.at(out, rows.b, vals)
    return out


@dataclass(frozen=True, eq=False, kw_only=True)
class StyleFitted(Fitted):
    """A fitted style-controlled model: ratings x with the style coefficients γ (besides the
    attributes of :class:`~stablearena.raters.base.Fitted`, whose ``scores``/``ratings`` are the
    style-controlled ones).

    Attributes:
        gamma: γ, log-odds per standard deviation of each normalised style difference.
        features: covariate names, in the order of ``gamma``.
        z_mean, z_std: the standardisation z = (difference − mean) / std (over the fitted battles).
        penalty, reg: the L2 penalty (module docstring).
        rows: the aggregated rows the likelihood was evaluated on.
        raw: the same method fitted without style control on the same battles (for the rank
            shift), or ``None``.
        prior_mask: models that needed m-ELO's existence prior.
    """

    gamma: np.ndarray
    features: tuple[str, ...]
    z_mean: np.ndarray
    z_std: np.ndarray
    penalty: str = "gamma"
    reg: float = DEFAULT_REG
    rows: StyleRows = field(repr=False)
    raw: Fitted | None = field(default=None, repr=False)
    prior_mask: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._freeze_finite("gamma", "z_mean", "z_std")

    def _freeze_finite(self, *names: str) -> None:
        """Read-only float copies of these array fields (a non-finite value is a bug)."""
        for name in names:
            arr = _freeze(getattr(self, name))
            if not np.all(np.isfinite(arr)):
                raise AssertionError(f"internal error: non-finite {name} in a style-controlled fit")
            object.__setattr__(self, name, arr)

    # ------------------------------------------------------------------ model pieces
    def _theta(self) -> np.ndarray | None:
        return None

    @property
    def n_features(self) -> int:
        return len(self.features)

    def _u(self) -> np.ndarray:
        r = self.rows
        return self.scores[r.a] - self.scores[r.b] + r.z @ self.gamma

    def predict(self, i: Any, j: Any, z: np.ndarray | None = None) -> np.ndarray | float:
        """Expected score of i against j: σ(x_i − x_j + γᵀz), z standardised style differences
        (default 0: both answers of the average style difference, the style-controlled
        prediction)."""
        ii = np.vectorize(self.index)(i) if not isinstance(i, np.ndarray) else i
        jj = np.vectorize(self.index)(j) if not isinstance(j, np.ndarray) else j
        extra = 0.0 if z is None else np.asarray(z, dtype=float) @ self.gamma
        out = expit(self.scores[ii] - self.scores[jj] + extra)
        return float(out) if np.ndim(out) == 0 else out

    # ------------------------------------------------------------------ information contract
    def parameters(self) -> np.ndarray:
        """(x, γ) at the optimum (am-ELO: then the fitted annotators' abilities)."""
        return np.concatenate([self.scores, self.gamma])

    def _penalty_hessian(self) -> np.ndarray:
        m, d = self.n_models, self.n_features
        h = np.diag(_penalty_weights(m, d, self.penalty, self.reg))
        if self.prior_mask is not None and self.prior_mask.any():
            h[:m, :m] -= _prior_terms(self.scores, self.prior_mask.astype(float), PRIOR_STRENGTH)[2]
        return h

    def hessian(self) -> np.ndarray:
        """Exact Hessian of the penalised objective in :meth:`parameters` (penalty and existence
        prior included): −Σ w g gᵀ − diag(penalty); singular along the shift of x unless
        ``penalty="all"``."""
        p = expit(self._u())
        w = self.rows.n * p * (1 - p)
        return -_outer(self.rows, w) - self._penalty_hessian()

    def _q(self, p: np.ndarray) -> np.ndarray:
        """Σ_outcomes N (W − p)² per row (the sandwich's meat weight)."""
        r = self.rows
        return r.wins * (1 - p) ** 2 + r.losses * p**2 + r.ties * (0.5 - p) ** 2

    def outer_product(self) -> np.ndarray:
        """Σ_rows Σ_outcomes N g gᵀ of the per-comparison scores (the sandwich's meat)."""
        return _outer(self.rows, self._q(expit(self._u())))

    def score_contributions(self) -> tuple[np.ndarray, np.ndarray]:
        """Not materialised (rows × outcomes × parameters is large); use :meth:`outer_product`."""
        raise NotImplementedError("use outer_product() for the meat of a style-controlled fit")

    def gauge_constraints(self) -> np.ndarray:
        """Σx = 0 (the shift; with ``penalty="all"`` the fit satisfies it as well)."""
        g = np.zeros((len(self.parameters()), 1))
        g[: self.n_models, 0] = 1.0
        return g

    def dispersion(self) -> float:
        """Pearson dispersion Σ N (W − p)² / (p(1 − p)) / (n − #free parameters) when the fit
        has ties scored as ½, else 1 (see :meth:`Fitted.dispersion`)."""
        r = self.rows
        if r.ties.sum() <= 0:
            return 1.0
        theta = self._theta()
        u = self._u()
        p = expit(u if theta is None else theta[r.k] * u)
        pearson = float(np.sum(self._q(p) / np.maximum(p * (1 - p), 1e-300)))
        free = len(self.parameters()) - self.gauge_constraints().shape[1]
        dof = r.total - free
        return pearson / dof if dof > 0 else 1.0

    def refit(self, counts: PairCounts) -> Fitted:
        raise NotImplementedError(
            "a style-controlled fit depends on per-battle covariates, which pair counts do not "
            "carry; refit_table() refits its own rows"
        )

    def resampling_table(self) -> np.ndarray:
        """The likelihood's rows (pair × style cell [× annotator]) as rows × 4 counts: a
        battle bootstrap resamples battles among them, covariates and all (the rows are the
        battles, those with identical covariates aggregated)."""
        r = self.rows
        return np.column_stack([r.wins, r.losses, r.ties, np.zeros(len(r))])

    def _resampled(self, table: np.ndarray) -> tuple[StyleRows, np.ndarray | None]:
        """This fit's rows with the counts ``table`` (rows × 4), and the models that need the
        existence prior there: the full data's, plus any that never won or never lost in the
        resample (a :class:`StableArenaWarning` says so)."""
        r = self.rows
        rows = replace(r, wins=table[:, 0], losses=table[:, 1], ties=table[:, 2] + table[:, 3])
        m = self.n_models
        score = np.bincount(rows.a, rows.s, m) + np.bincount(rows.b, rows.n - rows.s, m)
        played = np.bincount(rows.a, rows.n, m) + np.bincount(rows.b, rows.n, m)
        prior = self.prior_mask
        if self.penalty != "all":
            extreme = (played > 0) & ((score <= 0) | (score >= played))
            if extreme.any():
                prior = extreme if prior is None else (prior | extreme)
                warnings.warn(
                    f"{int(extreme.sum())} model(s) never won or never lost in this resample: "
                    "existence prior",
                    StableArenaWarning,
                    stacklevel=3,
                )
        return rows, prior

    def refit_table(self, table: np.ndarray) -> StyleFitted:
        """The same model refitted (Newton, warm-started from this fit) on its rows with the
        counts ``table`` (a bootstrap resample). A model that never won or never lost in the
        resample gets m-ELO's existence prior; no convergence raises
        :class:`ConvergenceError`. The z standardisation stays the full data's, as the rows are
        the same battles."""
        rows, prior = self._resampled(table)
        sol, extra = self._solve_on(rows, prior)
        if not sol.convergence.converged:
            raise ConvergenceError(f"style refit did not converge: {sol.convergence.message}")
        return replace(
            self,
            scores=sol.x,
            gamma=sol.gamma,
            loglik=sol.loglik,
            convergence=sol.convergence,
            rows=rows,
            raw=None,
            prior_mask=prior,
            **extra,
        )

    def _warm_start(self, prior: np.ndarray | None) -> dict[str, Any]:
        """The solver options of a refit: this fit's penalty, tolerance and optimum as start."""
        return {
            "penalty": self.penalty,
            "reg": self.reg,
            "prior_mask": prior,
            "x0": np.asarray(self.scores, dtype=float),
            "gamma0": np.asarray(self.gamma, dtype=float),
            "tol": float(self.params.get("tol", 1e-9)),
        }

    def _solve_on(self, rows: StyleRows, prior: np.ndarray | None) -> tuple[Any, dict[str, Any]]:
        """The solution on ``rows`` and the further fields of the refitted result."""
        max_iter = int(self.params.get("max_iter", 100))
        return solve_style(rows, **self._warm_start(prior), max_iter=max_iter), {}

    # ------------------------------------------------------------------ presentation
    def style_table(self, level: float = 0.95) -> pd.DataFrame:
        """One row per covariate: ``feature, coef`` (γ), Fisher and sandwich standard errors and
        intervals at ``level``, and the standardisation ``mean, std``."""
        from .uncertainty import covariance

        m, d = self.n_models, self.n_features
        z = normal_ppf(0.5 + level / 2)
        out: dict[str, Any] = {"feature": list(self.features), "coef": self.gamma.copy()}
        for kind in ("fisher", "sandwich"):
            cov = covariance(self, kind).params  # type: ignore[arg-type]
            se = np.sqrt(np.clip(np.diag(cov)[m : m + d], 0.0, None))  # type: ignore[index]
            out[f"se_{kind}"] = se
            out[f"ci_low_{kind}"] = self.gamma - z * se
            out[f"ci_high_{kind}"] = self.gamma + z * se
        out["mean"] = self.z_mean
        out["std"] = self.z_std
        return pd.DataFrame(out)

    def _raw_columns(self) -> dict[str, np.ndarray] | None:
        """Per model (in ``models`` order) the uncontrolled rating and rank and the rank shift
        (raw rank − style-controlled rank: positive = moves up under style control)."""
        if self.raw is None:
            return None
        where = {n: k for k, n in enumerate(self.raw.models)}
        idx = np.array([where[n] for n in self.models])
        raw_rank = np.empty(self.raw.n_models, dtype=np.int64)
        raw_rank[self.raw.order()] = np.arange(1, self.raw.n_models + 1)
        rank = np.empty(self.n_models, dtype=np.int64)
        rank[self.order()] = np.arange(1, self.n_models + 1)
        return {
            "raw_rating": np.asarray(self.raw.ratings)[idx],
            "raw_rank": raw_rank[idx],
            "rank_shift": raw_rank[idx] - rank,
        }

    def leaderboard(self) -> pd.DataFrame:
        """Columns ``rank, model, rating, battles`` (style-controlled), then ``raw_rating,
        raw_rank, rank_shift`` when the uncontrolled fit is kept."""
        lb = super().leaderboard()
        cols = self._raw_columns()
        if cols is not None:
            order = self.order()
            for name, vals in cols.items():
                lb[name] = vals[order]
        return lb

    def to_dict(self, level: float = 0.95) -> dict[str, Any]:
        """The ``rank`` JSON contract plus new keys: per model ``raw_rating, raw_rank,
        rank_shift``; ``"style"``: the covariates with γ, Fisher and sandwich intervals, the
        standardisation and the penalty."""
        out = super().to_dict()
        cols = self._raw_columns()
        if cols is not None:
            where = {n: k for k, n in enumerate(self.models)}
            for entry in out["models"]:
                k = where[entry["model"]]
                entry["raw_rating"] = float(cols["raw_rating"][k])
                entry["raw_rank"] = int(cols["raw_rank"][k])
                entry["rank_shift"] = int(cols["rank_shift"][k])
        tab = self.style_table(level)
        out["style"] = {
            "level": level,
            "penalty": self.penalty,
            "reg": self.reg,
            "scale": "log-odds per standard deviation of the normalised difference (a − b)/(a + b + 1)",
            "raw_method": None if self.raw is None else self.raw.method,
            "features": [
                {k: (float(v) if k != "feature" else str(v)) for k, v in row.items()}
                for row in tab.to_dict(orient="records")
            ],
        }
        return out


@dataclass(frozen=True, eq=False, kw_only=True)
class StyleAmEloFitted(StyleFitted):
    """Style-controlled am-ELO: :class:`StyleFitted` plus each annotator's ability θ_k (mean |θ| 1),
    which scales the whole logit σ(θ_k (x_A − x_B + γᵀz)).

    ``prior_ties``: virtual ties given to annotators whose ability MLE is infinite (or None)."""

    annotators: tuple[str, ...]
    abilities: np.ndarray
    records: np.ndarray
    prior_ties: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._freeze_finite("abilities", "records")

    def _solve_on(self, rows: StyleRows, prior: np.ndarray | None) -> tuple[Any, dict[str, Any]]:
        """The joint refit of a bootstrap round: ratings, γ and every annotator's ability
        (warm-started from this fit; an annotator whose votes all go one way gets its half
        virtual tie as in the fit)."""
        sol, virtual = solve_style_am_elo(
            rows,
            **self._warm_start(prior),
            theta0=np.asarray(self.abilities, dtype=float),
            max_iter=int(self.params.get("max_iter", 200)),
        )
        return sol, {
            "abilities": sol.theta,
            "records": np.bincount(rows.k, rows.n, rows.n_annotators),
            "prior_ties": virtual if virtual.any() else None,
        }

    @property
    def n_annotators(self) -> int:
        return len(self.annotators)

    def _theta(self) -> np.ndarray:
        return np.asarray(self.abilities)

    def _info_rows(self) -> StyleRows:
        """Rows with the virtual ties of the fit (the objective the solver maximised)."""
        if self.prior_ties is None:
            return self.rows
        return _with_virtual_ties(self.rows, self.prior_ties)

    def parameters(self) -> np.ndarray:
        return np.concatenate([self.scores, self.gamma, self.abilities])

    def hessian(self) -> np.ndarray:
        """Exact Hessian in (x, γ, θ) of the penalised objective (virtual ties included)."""
        r = self._info_rows()
        theta = self._theta()
        u = self.scores[r.a] - self.scores[r.b] + r.z @ self.gamma
        c = theta[r.k]
        p = expit(c * u)
        w = r.n * p * (1 - p)
        e = r.s - r.n * p
        h = -_outer(r, c * c * w, c * w * u - e, w * u * u)
        k = self.n_models + self.n_features
        h[:k, :k] -= self._penalty_hessian()
        return h

    def outer_product(self) -> np.ndarray:
        r = self.rows
        theta = self._theta()
        u = self._u()
        c = theta[r.k]
        q = self._q(expit(c * u))
        return _outer(r, c * c * q, c * u * q, u * u * q)

    def gauge_constraints(self) -> np.ndarray:
        """Σx = 0 and Σ s_k θ_k = M, s the signs of θ (the scale: mean |θ| = 1)."""
        m = self.n_models
        g = np.zeros((len(self.parameters()), 2))
        g[:m, 0] = 1.0
        theta = np.asarray(self.abilities, dtype=float)
        g[m + self.n_features :, 1] = _gauge_signs(theta, np.ones(len(theta), dtype=bool))
        return g

    def predict(
        self, i: Any, j: Any, z: np.ndarray | None = None, annotator: Any = None
    ) -> np.ndarray | float:
        """σ(θ (x_i − x_j + γᵀz)) with θ the annotator's ability (1, the average, by default)."""
        base = np.asarray(super().predict(i, j, z), dtype=float)
        if annotator is None:
            return float(base) if base.ndim == 0 else base
        k = self.annotators.index(str(annotator))
        logit = np.log(base) - np.log1p(-base)
        out = expit(self.abilities[k] * logit)
        return float(out) if np.ndim(out) == 0 else out

    def annotator_table(self) -> pd.DataFrame:
        """``annotator, records, ability`` and its Fisher standard error, lowest ability first."""
        from .uncertainty import covariance

        cov = covariance(self, "fisher").params
        k0 = self.n_models + self.n_features
        se = np.sqrt(np.clip(np.diag(cov)[k0:], 0.0, None))  # type: ignore[index]
        order = np.lexsort((np.array(self.annotators), self.abilities))
        return pd.DataFrame(
            {
                "annotator": [self.annotators[k] for k in order],
                "records": self.records[order],
                "ability": self.abilities[order],
                "ability_se": se[order],
            }
        )

    def to_dict(self, level: float = 0.95) -> dict[str, Any]:
        out = super().to_dict(level)
        out["annotators"] = [
            {
                "annotator": str(r.annotator),
                "records": float(r.records),
                "ability": float(r.ability),
                "ability_se": float(r.ability_se),
            }  # fmt: skip
            for r in self.annotator_table().itertuples(index=False)
        ]
        return out


# ---------------------------------------------------------------------------------- raters
@njit(cache=True)
def _moments(z: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """Column means and population standard deviations over the rows in ``mask`` (all rows
    when it is empty), two passes for accuracy."""
    n, d = z.shape
    use_all = len(mask) == 0
    mean = np.zeros(d)
    count = 0
    for r in range(n):
        if use_all or mask[r]:
            count += 1
            for f in range(d):
                mean[f] += z[r, f]
    mean /= max(count, 1)
    var = np.zeros(d)
    for r in range(n):
        if use_all or mask[r]:
            for f in range(d):
                q = z[r, f] - mean[f]
                var[f] += q * q
    return mean, np.sqrt(var / max(count, 1))


def standardization(
    z: np.ndarray, names: Sequence[str], source: str, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(mean, std) per column over the battles (``mask``: the battles in the fit) — population
    std, as FastChat and arena-rank; a constant covariate cannot be told apart from the ratings
    and is an error."""
    mean, std = _moments(
        np.ascontiguousarray(z, dtype=float), np.zeros(0, np.bool_) if mask is None else mask
    )
    const = np.flatnonzero(~(std > 1e-12 * np.maximum(1.0, np.abs(mean))))
    if len(const):
        raise InputError(
            f"{source}: covariate {names[const[0]]!r} is the same in every battle of the fit "
            f"(value {mean[const[0]]:.6g}), so its effect cannot be estimated; leave it out."
        )
    return mean, std


@dataclass(frozen=True)
class _StyleRater(Rater):
    """Options shared by the style-controlled raters.

    Options:
        features: names of the battles' covariates to use (default: all of them).
        penalty, reg: L2 penalty ``"gamma"`` (default, arena-rank's choice), ``"all"`` (FastChat)
            or ``"none"``, and its strength λ on the summed log-likelihood (module docstring).
        standardize: standardise each covariate over the battles (default; LMArena does).
        raw: also fit the method without style control, for the rank shift.
        tol, max_iter: Newton tolerance (‖∇‖ per comparison) and iteration budget.
        anchor: ``"MODEL=RATING"``.
    """

    ties: ClassVar[Literal["half", "drop"]] = "half"
    raw_method: ClassVar[str] = "m-elo"

    features: tuple[str, ...] | None = None
    penalty: str = "gamma"
    reg: float = DEFAULT_REG
    standardize: bool = True
    raw: bool = True
    tol: float = 1e-9
    max_iter: int = 100
    anchor: str | tuple[str, float] | None = None

    def _check(self, data: Any) -> Battles:
        if self.penalty not in PENALTIES:
            raise InputError(
                f"penalty must be one of {', '.join(PENALTIES)}, not {self.penalty!r}."
            )
        if not (math.isfinite(float(self.reg)) and self.reg >= 0):
            raise InputError(f"reg must be a finite non-negative number, not {self.reg!r}.")
        if not (self.tol > 0 and self.max_iter >= 1):
            raise InputError("tol must be positive and max_iter at least 1.")
        if not isinstance(data, Battles):
            raise InputError(
                "style control needs a battle log with per-battle covariates; pair counts have none "
                "(read the log with its style columns, see stablearena.data.style_features)."
            )
        if data.covariates is None or data.covariate_names is None:
            raise InputError(
                f"{data.source}: the battles have no covariates; add them with "
                "stablearena.data.style_features.add_covariates (CLI: --style or --covariate)."
            )
        if len(data) == 0:
            raise InputError(f"{data.source}: the battle log is empty.")
        return data

    def _design(
        self, battles: Battles
    ) -> tuple[np.ndarray, tuple[str, ...], np.ndarray, np.ndarray]:
        names = tuple(battles.covariate_names)  # type: ignore[arg-type]
        cols = list(range(len(names)))
        if self.features is not None:
            unknown = [f for f in self.features if f not in names]
            if unknown:
                raise InputError(
                    f"{battles.source}: unknown covariate(s) {unknown}; the battles have {list(names)}."
                )
            cols = [names.index(f) for f in self.features]
        z = np.asarray(battles.covariates, dtype=float)
        if cols != list(range(z.shape[1])):
            z = z[:, cols]
        used = tuple(names[c] for c in cols)
        if self.standardize:
            in_fit = battles.weights() > 0
            if self.ties == "drop":
                in_fit &= battles.outcome < Outcome.TIE
            mean, std = standardization(z, used, battles.source, None if in_fit.all() else in_fit)
        else:
            mean, std = np.zeros(len(cols)), np.ones(len(cols))
        return z, used, mean, std

    def _prepare(self, battles: Battles, by_annotator: bool) -> tuple[StyleRows, Any, tuple]:
        z, used, mean, std = self._design(battles)
        ann = battles.annotator if by_annotator else None
        kk = len(battles.annotators) if by_annotator else 1  # type: ignore[arg-type]
        rows = style_rows(
            battles, z, ties=self.ties, annotator=ann, n_annotators=kk, mean=mean, std=std
        )
        if rows.total <= 0:
            raise InputError(f"{battles.source}: no comparisons to fit.")
        counts = battles.counts()
        check = check_comparison_graph(counts, ties_count=(self.ties == "half"))
        notes: tuple[str, ...] = ()
        prior = None
        if not check.ok and self.penalty != "all":
            warnings.warn(check.message, StableArenaWarning, stacklevel=4)
            notes = (check.message,)
            prior = check.needs_prior
        return rows, counts, (used, mean, std, prior, notes)

    def _raw(self, counts: PairCounts) -> Fitted | None:
        if not self.raw:
            return None
        from .base import get_rater

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StableArenaWarning)
            return get_rater(self.raw_method, tol=self.tol, anchor=self.anchor).fit(counts)

    def fit(self, data: Battles | PairCounts) -> StyleFitted:
        battles = self._check(data)
        rows, counts, (used, mean, std, prior, notes) = self._prepare(battles, False)
        sol = solve_style(
            rows,
            penalty=self.penalty,  # type: ignore[arg-type]
            reg=float(self.reg),
            prior_mask=prior,
            tol=self.tol,
            max_iter=self.max_iter,
        )
        return StyleFitted(
            **self._result_fields(battles, rows, counts, sol, used, mean, std, prior, notes)
        )

    def _result_fields(
        self,
        battles: Battles,
        rows: StyleRows,
        counts: PairCounts,
        sol: StyleSolution,
        used: tuple[str, ...],
        mean: np.ndarray,
        std: np.ndarray,
        prior: np.ndarray | None,
        notes: tuple[str, ...],
    ) -> dict[str, Any]:
        """The fields every style-controlled result has."""
        m = battles.n_models
        return {
            "method": self.name,
            "models": battles.models,
            "scores": sol.x,
            "loglik": sol.loglik,
            "n_comparisons": rows.total,
            "battles": np.bincount(rows.a, rows.n, m) + np.bincount(rows.b, rows.n, m),
            "convergence": sol.convergence,
            "params": self.get_params(),
            "anchor": parse_anchor(self.anchor),
            "notes": notes,
            "counts": counts,
            "gamma": sol.gamma,
            "features": used,
            "z_mean": mean,
            "z_std": std,
            "penalty": self.penalty,
            "reg": float(self.reg),
            "rows": rows,
            "raw": self._raw(counts),
            "prior_mask": prior,
        }


@register_rater("style-m-elo")
@dataclass(frozen=True)
class StyleMElo(_StyleRater):
    """Style-controlled m-ELO: σ(x_A − x_B + γᵀz), ties as half a win (LMArena's default board;
    module docstring). Options: see :class:`_StyleRater`."""

    ties: ClassVar[Literal["half", "drop"]] = "half"
    raw_method: ClassVar[str] = "m-elo"


@register_rater("style-bt")
@dataclass(frozen=True)
class StyleBradleyTerry(_StyleRater):
    """Style-controlled Bradley–Terry with ties dropped (decisive battles only)."""

    ties: ClassVar[Literal["half", "drop"]] = "drop"
    raw_method: ClassVar[str] = "bt"


@register_rater("style-am-elo")
@dataclass(frozen=True)
class StyleAmElo(_StyleRater):
    """Style-controlled am-ELO: σ(θ_k (x_A − x_B + γᵀz)), the annotator's ability θ_k (mean 1)
    scaling the whole logit, ties as half (am-ELO paper eq. 4 with LMArena's style term). Every
    annotator with comparisons is fitted; data without annotator ids are one annotator."""

    ties: ClassVar[Literal["half", "drop"]] = "half"
    raw_method: ClassVar[str] = "am-elo"
    max_iter: int = 200

    def fit(self, data: Battles | PairCounts) -> StyleAmEloFitted:
        battles = self._check(data)
        notes0: tuple[str, ...] = ()
        if battles.annotator is None:
            battles = replace(
                battles,
                annotator=np.zeros(len(battles), dtype=np.int32),
                annotators=("unknown",),
            )
            notes0 = (
                "the data has no annotator ids: one 'unknown' annotator, so this is style-controlled m-ELO",
            )
        rows, _, (used, mean, std, prior, notes) = self._prepare(battles, True)
        sol, virtual = solve_style_am_elo(
            rows,
            penalty=self.penalty,  # type: ignore[arg-type]
            reg=float(self.reg),
            prior_mask=prior,
            tol=self.tol,
            max_iter=self.max_iter,
        )
        notes = (*notes0, *notes)
        if virtual.any():
            who = [battles.annotators[k] for k in np.flatnonzero(virtual)]  # type: ignore[index]
            msg = (
                f"{len(who)} annotator(s) voted all with (or all against) the model, so their "
                f"ability MLE is infinite ({', '.join(who[:6])}{' …' if len(who) > 6 else ''}); "
                "each is kept finite by half a virtual tie — read it as a bound."
            )
            warnings.warn(msg, StableArenaWarning, stacklevel=2)
            notes = (*notes, msg)
        counts = battles.counts(by_annotator=True)
        return StyleAmEloFitted(
            **self._result_fields(battles, rows, counts, sol, used, mean, std, prior, notes),
            annotators=tuple(battles.annotators),  # type: ignore[arg-type]
            abilities=sol.theta,  # type: ignore[arg-type]
            records=np.bincount(rows.k, rows.n, rows.n_annotators),
            prior_ties=virtual if virtual.any() else None,
        )
