"""Maximum-likelihood Bradley–Terry: m-ELO (ties as half) and BT (ties dropped), docs/methods/ratings.md.

ln L(x) = Σ_rows [s_r ln σ(c_r (x_i − x_j)) + (n_r − s_r) ln σ(c_r (x_j − x_i))]

with n_r comparisons and s_r = wins + ½ ties of i in row r and a per-row coefficient c_r (1 for
plain BT; an annotator's ability for am-ELO). With c_r = 1 and x = C·R this is m-ELO's
likelihood (am-ELO paper, eq. 3). Gradient ∂lnL/∂x_n = Σ_rows of n ± c_r (s_r − n_r p_r);
Hessian −Σ c_r² n_r p_r (1 − p_r)(e_i − e_j)(e_i − e_j)ᵀ, a weighted graph Laplacian, so lnL is
concave and Newton's method with a backtracking line search converges in a few iterations
(am-ELO paper, Thm 4.1 and §4.2). The shift is fixed by mean zero.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from .._numeric import expit, log_expit
from .._threads import single_threaded_blas
from ..data.battles import Battles, PairCounts, as_counts
from ..data.graph import check_comparison_graph
from ..errors import ConvergenceError, InputError, StableArenaWarning
from ._newton import NewtonProblem, newton
from .base import ELO_SCALE, Convergence, Fitted, Rater, parse_anchor, register_rater

__all__ = ["BTSolution", "solve_bradley_terry", "bradley_terry_loglik", "MElo", "BradleyTerry"]

#: Strength of the existence prior: α virtual comparisons, each a tie against the average model.
PRIOR_STRENGTH: float = 0.5


@dataclass(frozen=True)
class BTSolution:
    x: np.ndarray
    loglik: float
    convergence: Convergence


def bradley_terry_loglik(
    x: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    n: np.ndarray,
    s: np.ndarray,
    coef: np.ndarray | float = 1.0,
) -> float:
    """Σ s ln σ(z) + (n − s) ln σ(−z), z = coef·(x_i − x_j)."""
    z = coef * (x[i] - x[j])
    return float(np.sum(s * log_expit(z) + (n - s) * log_expit(-z)))


def _prior_terms(
    x: np.ndarray, mask: np.ndarray, alpha: float
) -> tuple[float, np.ndarray, np.ndarray]:
    """α[½ ln σ(d_m) + ½ ln σ(−d_m)], d_m = x_m − mean(x), for the models in ``mask``.

    Returns (value, gradient, Hessian) — the Hessian dense m×m. Shift-invariant by construction.
    """
    m = len(x)
    d = x - x.mean()
    q = expit(d)
    val = float(alpha * np.sum(mask * 0.5 * (log_expit(d) + log_expit(-d))))
    gm = mask * alpha * (0.5 - q)
    grad = gm - gm.sum() / m
    h = mask * alpha * q * (1 - q)
    hess = np.diag(h) - (h[:, None] + h[None, :]) / m + h.sum() / m**2
    return val, grad, -hess


def _row_sums(k: np.ndarray, m: int) -> Callable[[np.ndarray], np.ndarray]:
    """``w ↦ np.bincount(k, w, m)``: per-model sums of a row quantity over the rows whose index
    ``k`` names the model. When ``k`` is sorted — the ``i`` of count rows, which come in key
    order — each model's rows are contiguous and ``np.add.reduceat`` sums them; a ``bincount``
    over sorted indices adds into the same slot row after row, each addition waiting for the
    one before (20k rows: 66 µs against 6)."""
    if len(k) == 0 or not bool(np.all(k[1:] >= k[:-1])):
        return lambda w: np.bincount(k, w, m)
    # each model's first row by binary search (5 µs; finding where k changes took 50)
    starts = np.searchsorted(k, np.arange(m))
    has = starts < np.append(starts[1:], len(k))  # models with rows
    if has.all():
        return lambda w: np.add.reduceat(w, starts)
    first, starts = np.flatnonzero(has), starts[has]

    def sums(w: np.ndarray) -> np.ndarray:
        out = np.zeros(m)
        out[first] = np.add.reduceat(w, starts)
        return out

    return sums


def _bt_pass(
    x: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    n: np.ndarray,
    s: np.ndarray,
    c: np.ndarray | None,
    grad: np.ndarray,
    sum_i: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One pass over the rows: fills ``grad`` (∇lnL) and returns ``(z, e, w)`` for
    :func:`_bt_value` and :func:`_laplacian` (``sum_i``: :func:`_row_sums` of ``i``).

    z_r = c_r (x_i − x_j), e_r = exp(−|z_r|); p_r = σ(z_r) is σ(|z_r|) = 1/(1 + e_r) or
    σ(−|z_r|) = e_r/(1 + e_r) by the sign of z_r; ∂lnL/∂x_i = c_r (s_r − n_r p_r) (and minus
    that for x_j); the Hessian weight w_r = c_r² n_r p_r (1 − p_r) = c_r² n_r σ(|z_r|) σ(−|z_r|).
    ``c`` = None means c_r = 1. Vectorised NumPy (no compiled kernel, so the everyday path never
    waits for a compiler) over the pair counts (at most m(m − 1)/2 rows); one exponential per
    row, and lnL's logarithm only when it is asked for (:func:`_bt_value`).
    """
    m = len(x)
    z = x[i]
    z -= x[j]
    if c is not None:
        z *= c
    e = np.abs(z)
    np.negative(e, out=e)
    np.exp(e, out=e)
    big = 1.0 + e
    np.reciprocal(big, out=big)  # σ(|z|)
    small = e * big  # σ(−|z|)
    p = np.where(z >= 0, big, small)
    res = n * p
    np.subtract(s, res, out=res)
    if c is not None:
        res *= c
    grad[:] = (np.bincount(i, res, m) if sum_i is None else sum_i(res)) - np.bincount(j, res, m)
    w = small
    w *= big
    w *= n
    if c is not None:
        w *= c * c
    return z, e, w


def _bt_value(z: np.ndarray, e: np.ndarray, n: np.ndarray, s: np.ndarray) -> float:
    """lnL = Σ s_r z_r − n_r softplus(z_r), softplus(z) = max(z, 0) + ln(1 + e^{−|z|}), from
    the ``z`` and ``e`` = e^{−|z|} of a :func:`_bt_pass`."""
    # element-wise sums, not np.dot: BLAS's ddot with several threads costs ~10 ms on a busy
    # machine, the sums ~0.03 ms
    softplus = np.log1p(e)
    softplus += np.maximum(z, 0.0)
    return float((s * z).sum() - (n * softplus).sum())


def _laplacian(w: np.ndarray, ij: np.ndarray, m: int) -> np.ndarray:
    """−∇²lnL: the graph Laplacian with weight w_r on edge (i_r, j_r), from one ``bincount``
    over the flat positions ``ij = i·m + j`` (computed once per fit by the caller)."""
    off = np.bincount(ij, w, m * m).reshape(m, m)
    off += off.T
    lap = np.negative(off, out=off)
    lap[np.diag_indices(m)] = -lap.sum(axis=1)
    return lap


def _bt_loglik(
    x: np.ndarray, i: np.ndarray, j: np.ndarray, n: np.ndarray, s: np.ndarray, c: np.ndarray | None
) -> float:
    """lnL alone (line-search trial points)."""
    z = x[i] - x[j]
    if c is not None:
        z *= c
    return _bt_value(z, np.exp(-np.abs(z)), n, s)


def _spd_solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Solve a x = b for the (shifted, positive definite) Laplacian ``a``; raises LinAlgError.

    One LU factorisation (LAPACK ``gesv``): NumPy has no triangular solve, and a Cholesky
    factor followed by two general solves costs three times as much."""
    x = np.linalg.solve(a, b)
    if not np.all(np.isfinite(x)):
        raise np.linalg.LinAlgError("non-finite Newton step")
    return x


def _start(
    m: int,
    i: np.ndarray,
    j: np.ndarray,
    n: np.ndarray,
    s: np.ndarray,
    c: np.ndarray | None,
    sum_i: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Newton's starting point: each model's log-odds ℓ_k of winning against the field
    (smoothed by ½), corrected for whom it met.

    Averaging P(k beats j) = σ(x_k − x_j) over opponents with mean μ_k and variance v_k gives
    about σ((x_k − μ_k)/√(1 + πv_k/8)) (the probit approximation of the logistic), so
    x_k ≈ μ_k + ℓ_k √(1 + πv_k/8), with μ_k, v_k the comparison-weighted mean and variance of
    the opponents' ℓ. On mixed schedules it starts Newton two to four times closer than ℓ alone,
    which often saves a step (any start converges). Divided by the mean |c_r| when rows are
    scaled.
    """
    by_i = sum_i or _row_sums(i, m)
    won = by_i(s) + np.bincount(j, n - s, m)
    played = by_i(n) + np.bincount(j, n, m)
    lo = np.log((won + 0.5) / (played - won + 0.5))
    lo -= lo.mean()
    li, lj = lo[i], lo[j]
    per = np.maximum(played, 1e-300)
    mu = (by_i(n * lj) + np.bincount(j, n * li, m)) / per
    sq = (by_i(n * lj * lj) + np.bincount(j, n * li * li, m)) / per
    var = np.maximum(sq - mu * mu, 0.0)
    x = mu + lo * np.sqrt(1.0 + np.pi / 8.0 * var)
    if c is not None:
        x /= max(float(np.mean(np.abs(c))), 1e-12)
    x -= x.mean()
    return x


class _BTProblem(NewtonProblem):
    """:func:`solve_bradley_terry` for the Newton driver: the current point x, its gradient
    ``g`` and evaluated ``point``; lnL + prior ``f`` once something needed it."""

    def __init__(
        self,
        x: np.ndarray,
        g: np.ndarray,
        g_new: np.ndarray,
        m: int,
        total: float,
        evaluate: Callable[[np.ndarray, np.ndarray], tuple],
        value: Callable[[tuple], float],
        hessian: Callable[[tuple], np.ndarray],
        objective: Callable[[np.ndarray], float],
        tol: float,
    ) -> None:
        self.m, self.total, self.tol = m, total, tol
        self.evaluate, self._value, self.hessian, self.objective = (
            evaluate,
            value,
            hessian,
            objective,
        )
        self.x, self.g, self.g_new = x, g, g_new
        self.point = evaluate(x, g)
        self.f: float | None = None

    def gradient_norm(self) -> float:
        return float(np.linalg.norm(self.g)) / self.total

    def value(self) -> float:
        if self.f is None:
            self.f = self._value(self.point)
        return self.f

    def direction(self) -> float:
        m = self.m
        lap = self.hessian(self.point)
        # the Laplacian is singular along 1; adding a multiple of 11ᵀ leaves the step ⊥ 1
        shift = max(float(np.trace(lap)) / m, 1e-12)
        lap += shift / m
        try:
            step = _spd_solve(lap, self.g)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(lap, self.g, rcond=None)[0]
        step -= step.mean()
        self.step = step
        self.slope = float(self.g @ step)
        return self.slope

    def trial(self, t: float) -> float:
        return self.objective(self.x + t * self.step)

    def full(self) -> float:
        return self._value(self.point_new)

    def full_gradient_norm(self) -> float:
        return float(np.linalg.norm(self.g_new)) / self.total

    def ascends(self) -> bool:
        # the full step: its derivatives are reused. φ(t) = lnL(x + t·step) is concave, so
        # φ(1) − φ(0) ≥ φ'(1) = ∇lnL(xn)·step: when that is ≥ 10⁻⁴ φ'(0) the full step passes
        # Armijo's test without lnL. A full step that lands within the tolerance (the usual
        # last step, where both sides of Armijo's test are rounding noise) is taken as well:
        # it ends the solve, so lnL there is not needed to compare
        self.point_new = self.evaluate(self.x + self.step, self.g_new)
        if self.full_gradient_norm() <= self.tol:
            return True
        return float(self.g_new @ self.step) >= 1e-4 * self.slope

    def accept(self, t: float, f: float | None) -> None:
        self.x = self.x + t * self.step
        if t < 1.0:
            self.point_new = self.evaluate(self.x, self.g_new)
        self.f, self.point = f, self.point_new
        self.g, self.g_new = self.g_new, self.g


def solve_bradley_terry(
    m: int,
    i: np.ndarray,
    j: np.ndarray,
    n: np.ndarray,
    s: np.ndarray,
    *,
    coef: np.ndarray | float = 1.0,
    x0: np.ndarray | None = None,
    prior_mask: np.ndarray | None = None,
    prior_strength: float = PRIOR_STRENGTH,
    tol: float = 1e-9,
    max_iter: int = 100,
    raise_on_failure: bool = False,
) -> BTSolution:
    """Newton's method with backtracking for the (row-weighted) Bradley–Terry likelihood.

    Works on aggregated rows (pairs, or pair × annotator); ``n`` comparisons and score ``s`` of
    ``i`` per row. Converged when ‖∇ lnL‖₂ / Σn ≤ ``tol``. The returned x has mean zero.
    The caller must have checked that the comparison graph is connected
    (:func:`stablearena.data.graph.check_comparison_graph`) and pass ``prior_mask`` where the MLE is
    infinite. Each iteration is one vectorised pass over the rows (gradient and Hessian
    weights; lnL only when the line search needs it) and one LU solve of an m×m system, on one
    BLAS thread.
    """
    total = float(np.sum(n))
    if total <= 0:
        raise InputError("no comparisons to fit.")
    i = np.ascontiguousarray(i, dtype=np.int64)
    j = np.ascontiguousarray(j, dtype=np.int64)
    n = np.ascontiguousarray(n, dtype=float)
    s = np.ascontiguousarray(s, dtype=float)
    c: np.ndarray | None = None
    if not (np.ndim(coef) == 0 and float(coef) == 1.0):  # type: ignore[arg-type]
        c = np.ascontiguousarray(np.broadcast_to(np.asarray(coef, dtype=float), n.shape))
    sum_i = _row_sums(i, m)
    if x0 is None:
        x = _start(m, i, j, n, s, c, sum_i)
    else:
        x = np.asarray(x0, dtype=float) - np.mean(x0)
    use_prior = prior_mask is not None and bool(np.any(prior_mask))
    mask = np.asarray(prior_mask, dtype=float) if use_prior else None
    g = np.empty(m)
    g_new = np.empty(m)

    ij = i * m + j

    def evaluate(x: np.ndarray, g: np.ndarray) -> tuple:
        """Fill ``g`` with ∇(lnL + prior) at x; return what :func:`value` and the Laplacian need."""
        z, e, w = _bt_pass(x, i, j, n, s, c, g, sum_i)
        prior = None
        if use_prior:
            prior = _prior_terms(x, mask, prior_strength)  # type: ignore[arg-type]
            g += prior[1]
        return z, e, w, prior

    def value(point: tuple) -> float:
        """lnL + prior at an evaluated point."""
        z, e, _, prior = point
        return _bt_value(z, e, n, s) + (prior[0] if use_prior else 0.0)

    def hessian(point: tuple) -> np.ndarray:
        """−∇²(lnL + prior) at an evaluated point."""
        lap = _laplacian(point[2], ij, m)
        if use_prior:
            lap -= point[3][2]
        return lap

    def objective(x: np.ndarray) -> float:
        val = _bt_loglik(x, i, j, n, s, c)
        if use_prior:
            val += _prior_terms(x, mask, prior_strength)[0]  # type: ignore[arg-type]
        return val

    with single_threaded_blas():
        problem = _BTProblem(x, g, g_new, m, total, evaluate, value, hessian, objective, tol)
        conv = newton(problem, tol=tol, max_iter=max_iter)
    x, point = problem.x, problem.point
    converged, message, gnorm = conv.converged, conv.message, conv.grad_norm
    if not converged and raise_on_failure:
        raise ConvergenceError(
            f"Bradley–Terry Newton solver did not converge: {message}, |g|/n = {gnorm:.3g}"
        )
    # lnL is shift-invariant: its value at x is that at x − mean(x)
    return BTSolution(x - x.mean(), _bt_value(point[0], point[1], n, s), conv)


def _adam_bradley_terry(
    m: int, i: np.ndarray, j: np.ndarray, n: np.ndarray, s: np.ndarray, *, lr: float, steps: int
) -> BTSolution:
    """The am-ELO reference code's m-ELO: Adam (β = 0.9, 0.999, ε = 1e-8) on the mean
    binary cross-entropy, ratings in Elo points starting at 0, ``steps`` full-batch steps.

    A reproduction mode: it stops short of the optimum (docs/methods/ratings.md)."""
    total = float(np.sum(n))
    r = np.zeros(m)
    mom = np.zeros(m)
    vel = np.zeros(m)
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, steps + 1):
        p = expit(ELO_SCALE * (r[i] - r[j]))
        res = s - n * p
        # gradient of the mean BCE loss with respect to Elo-point ratings
        g = -ELO_SCALE * (np.bincount(i, res, m) - np.bincount(j, res, m)) / total
        mom = b1 * mom + (1 - b1) * g
        vel = b2 * vel + (1 - b2) * g * g
        r -= lr * (mom / (1 - b1**t)) / (np.sqrt(vel / (1 - b2**t)) + eps)
    x = ELO_SCALE * (r - r.mean())
    p = expit(x[i] - x[j])
    res = s - n * p
    g = np.bincount(i, res, m) - np.bincount(j, res, m)
    conv = Convergence(
        False,
        steps,
        float(np.linalg.norm(g)) / total,
        "adam",
        f"reproduction mode: Adam lr={lr}, {steps} steps",
    )
    return BTSolution(x, bradley_terry_loglik(x, i, j, n, s), conv)


def fit_bradley_terry_counts(
    counts: PairCounts,
    *,
    method: str,
    ties: Literal["half", "drop"],
    solver: str,
    tol: float,
    max_iter: int,
    lr: float,
    steps: int,
    anchor: tuple[str, float] | None,
    params: dict,
    x0: np.ndarray | None = None,
) -> Fitted:
    """Shared body of :class:`MElo` and :class:`BradleyTerry` (``x0``: Newton's starting point)."""
    c = counts.collapse()
    if ties == "half":
        n, s = c.totals, c.score
    else:
        n, s = c.wins + c.losses, c.wins
    keep = n > 0
    i, j = c.i, c.j
    if not keep.all():  # (no copies when every row counts)
        i, j, n, s = i[keep], j[keep], n[keep], s[keep]
    check = check_comparison_graph(c, ties_count=(ties == "half"))
    notes: tuple[str, ...] = ()
    if not check.ok:
        warnings.warn(check.message, StableArenaWarning, stacklevel=3)
        notes = (check.message,)
    m = c.n_models
    if solver == "newton":
        sol = solve_bradley_terry(
            m,
            i,
            j,
            n,
            s,
            x0=x0,
            prior_mask=None if check.ok else check.needs_prior,
            tol=tol,
            max_iter=max_iter,
        )
    elif solver == "adam":
        sol = _adam_bradley_terry(m, i, j, n, s, lr=lr, steps=steps)
    else:
        raise InputError(f"solver must be 'newton' or 'adam', not {solver!r}.")
    battles = _row_sums(i, m)(n) + np.bincount(j, n, m)
    return Fitted(
        method=method,
        models=c.models,
        scores=sol.x,
        loglik=sol.loglik,
        n_comparisons=float(n.sum()),
        battles=battles,
        convergence=sol.convergence,
        params=params,
        anchor=anchor,
        notes=notes,
        counts=c,
    )


@dataclass(frozen=True)
class _BradleyTerryRater(Rater):
    """Options and fitting shared by :class:`MElo` and :class:`BradleyTerry`."""

    ties: ClassVar[Literal["half", "drop"]]

    solver: str = "newton"
    tol: float = 1e-9
    max_iter: int = 100
    lr: float = 0.1
    steps: int = 2000
    anchor: str | tuple[str, float] | None = None

    def _fit(self, data: Battles | PairCounts, x0: np.ndarray | None) -> Fitted:
        return fit_bradley_terry_counts(
            as_counts(data),
            method=self.name,
            ties=self.ties,
            solver=self.solver,
            tol=self.tol,
            max_iter=self.max_iter,
            lr=self.lr,
            steps=self.steps,
            anchor=parse_anchor(self.anchor),
            params=self.get_params(),
            x0=x0,
        )

    def fit(self, data: Battles | PairCounts) -> Fitted:
        return self._fit(data, None)

    def fit_warm(self, data: Battles | PairCounts, start: Fitted) -> Fitted:
        """:meth:`fit` with Newton started from ``start.scores`` (bootstrap refits)."""
        return self._fit(data, _warm_start(start, data))


@register_rater("m-elo")
@dataclass(frozen=True)
class MElo(_BradleyTerryRater):
    """m-ELO: maximum-likelihood Bradley–Terry with ties as half a win (am-ELO paper §4.1, eq. 3).

    P(i beats j) = σ(C (R_i − R_j)), C = ln10/400; ln L = Σ W ln P + (1 − W) ln(1 − P).
    ``solver="newton"`` (default) solves exactly to ``tol`` (gradient norm per comparison);
    ``solver="adam"`` reproduces the am-ELO reference code (Adam, ``lr`` 0.1, ``steps`` 2,000).
    ``anchor``: ``"MODEL=RATING"`` fixes one model's rating; default mean 1000.
    """

    ties: ClassVar[Literal["half", "drop"]] = "half"


@register_rater("bt")
@dataclass(frozen=True)
class BradleyTerry(_BradleyTerryRater):
    """Bradley–Terry maximum likelihood with ties dropped (only decisive battles count).

    Same solver and options as :class:`MElo`; ``n_comparisons`` counts decisive battles only.
    """

    ties: ClassVar[Literal["half", "drop"]] = "drop"


def _warm_start(start: Fitted, data: Battles | PairCounts) -> np.ndarray | None:
    """``start.scores`` when ``data`` has the same models, else ``None`` (a cold start)."""
    return np.asarray(start.scores) if tuple(start.models) == tuple(data.models) else None
