"""Tie and covariance models: Rao–Kupper, Davidson, factored ties, Thurstonian covariance.

One module for the whole leaderbot family (Ameli, Zhuang, Stoica & Mahoney, "A Statistical
Framework for Ranking LLM-Based Chatbots", ICLR 2025; docs/methods/ties.md). With π_i = e^{x_i} and a
pair-specific tie threshold η_ij:

- **Rao–Kupper** (Rao & Kupper 1967; leaderbot eq. 4, 11):
  P(i≻j) = σ(u − η), P(i≺j) = σ(−u − η), P(i∼j) = (e^{2η} − 1) σ(u − η) σ(−u − η),
  with the model's constraint η_ij ≥ 0 enforced exactly on every compared pair (leaderbot
  instead uses |η_ij| clipped at 0.01, which lets a fit wander between sign patterns).
- **Davidson** (Davidson 1970; leaderbot eq. 5, 12): with Z = e^{u/2} + e^{−u/2} + e^{η},
  P(i≻j) = e^{u/2}/Z, P(i≺j) = e^{−u/2}/Z, P(i∼j) = e^{η}/Z, η ∈ ℝ.
- **Bradley–Terry** (for the covariance variants of m-ELO and BT): P(i≻j) = σ(u), with ties
  counted as half a win each (``"bt-half"``) or dropped (``"bt-drop"``).

Here u = x_i − x_j, or with the Thurstonian covariance (k_cov ≥ 0; leaderbot §2.4, eq. 9–13)
u = z_ij = (μ_i − μ_j)/√s_ij, s_ij = d_i + d_j + ‖λ_i − λ_j‖², Σ = D + ΛΛᵀ (d_i = t_i² ≥ 0,
Λ an m×k_cov matrix). The tie thresholds are

- k_tie = 0: one η for every pair (the original models);
- k_tie > 0, ``tie_form="nested"`` (default): H = η_0 11ᵀ + GΦᵀ + ΦGᵀ, so each larger k_tie
  contains every smaller one (docs/methods/ties.md);
- k_tie > 0, ``tie_form="leaderbot"``: H = GΦᵀ + ΦGᵀ (leaderbot eq. 6–7), which does not
  contain the single-η model;

with G an m×k_tie parameter matrix and Φ the first k_tie columns of the orthonormal DCT-IV
basis φ_ac = √(2/m) cos(π/(4m)(2a−1)(2c−1)) (leaderbot eq. 8). Φ depends on the order of the
models: the same data in another model order gives a (slightly) different factored model.

Likelihood (leaderbot eq. 1) on the pair counts w (i won), l (j won), t (ties, both kinds):
ln L = Σ_pairs w ln P(i≻j) + l ln P(i≺j) + t ln P(i∼j). Every quantity is a function of three
per-pair *primitives* — d = μ_i − μ_j, s = s_ij and h = η_ij before the link — so the gradient
and the exact Hessian follow by the chain rule from the 3×3 per-pair derivatives of the outcome
log-probabilities (``_link``) and the sparse Jacobians of the primitives (``_TieEngine``).

Symmetries of the likelihood and how they are fixed *exactly* at the returned optimum
(leaderbot §2.5 and App. C.4): shift μ → μ + c1 (Σμ = 0), scale (μ, Σ) → (tμ, t²Σ)
(trace(PΣP) = 1, P = I − 11ᵀ/m), translation λ_a → λ_a + c (1ᵀΛ = 0). The optimiser works on
the unconstrained parameters; the exact group transformations that restore the constraints leave
the likelihood unchanged, so they are applied after convergence (and to every warm start) rather
than as soft penalties. Two further symmetries are fixed for reporting: rotations Λ → ΛQ (Λ's
columns are made orthogonal and sorted by norm) and G → G + ΦA, A antisymmetric (ΦᵀG is made
symmetric), neither of which changes η_ij or s_ij.

Solvers: without covariance every model here is concave in its parameters (Rao–Kupper on its
feasible set η ≥ 0), so ``solver="newton"`` solves it exactly with the analytic Hessian, a
projection off the symmetry directions, an active set for Rao–Kupper thresholds at 0 and a
backtracking line search. With covariance the likelihood is not concave: preconditioned L-BFGS
(analytic gradient) is run from the covariance-free optimum, then damped Newton steps (with an
escape from the spurious stationary points of d = t² at t = 0) finish.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from .._progress import report
from .._threads import single_threaded_blas
from ..data.battles import Battles, PairCounts, as_counts
from ..data.graph import check_comparison_graph
from ..errors import InputError, StableArenaWarning
from ._newton import NewtonProblem, newton
from .base import ELO_SCALE, Convergence, Fitted, Rater, parse_anchor, register_rater
from .bradley_terry import PRIOR_STRENGTH, BradleyTerry, MElo, _prior_terms
from .information import laplacian

__all__ = [
    "dct_basis",
    "TieSpec",
    "TieFitted",
    "RaoKupper",
    "Davidson",
    "ThurstonianBT",
    "fit_tie_model",
]

Family = Literal["rao-kupper", "davidson", "bt-half", "bt-drop"]
TieForm = Literal["nested", "leaderbot"]

_FAMILIES = ("rao-kupper", "davidson", "bt-half", "bt-drop")
_TIE_FAMILIES = ("rao-kupper", "davidson")


def dct_basis(m: int, k: int) -> np.ndarray:
    """The first ``k`` columns of the orthonormal m×m DCT-IV matrix (leaderbot eq. 8).

    φ_ac = √(2/m) cos(π/(4m) (2a − 1)(2c − 1)), a = 1..m, c = 1..k; ΦᵀΦ = I_k.
    """
    if not 0 <= k <= m:
        raise InputError(f"k_tie must lie in 0..{m} (the number of models), got {k}.")
    a = np.arange(1, m + 1, dtype=float)[:, None]
    c = np.arange(1, k + 1, dtype=float)[None, :]
    return np.sqrt(2.0 / m) * np.cos(np.pi / (4.0 * m) * (2 * a - 1) * (2 * c - 1))


# ---------------------------------------------------------------------------------------------
# model specification and parameter layout
# ---------------------------------------------------------------------------------------------


def _is_count(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0


@dataclass(frozen=True)
class TieSpec:
    """Which model of the family, and where each block sits in the parameter vector θ.

    θ = [μ (m) | tie block | t = √d (m) | Λ (m·k_cov, row-major)], the tie block being
    [η] (k_tie = 0), [η_0, G (m·k_tie, row-major)] (nested) or [G] (leaderbot); Bradley–Terry
    families have no tie block, covariance-free models no t, Λ. (d = t² as in leaderbot: a variance
    the data push to 0 is then reached at t = 0 instead of at ln d = −∞.)
    """

    family: Family
    m: int
    k_tie: int = 0
    k_cov: int | None = None
    tie_form: TieForm = "nested"

    def __post_init__(self) -> None:
        if self.family not in _FAMILIES:
            raise InputError(
                f"unknown tie-model family {self.family!r}; one of {', '.join(_FAMILIES)}."
            )
        if self.tie_form not in ("nested", "leaderbot"):
            raise InputError(f"tie_form must be 'nested' or 'leaderbot', not {self.tie_form!r}.")
        if not _is_count(self.k_tie):
            raise InputError(f"k_tie must be a non-negative integer, got {self.k_tie!r}.")
        object.__setattr__(self, "k_tie", int(self.k_tie))
        if self.has_ties and self.k_tie > self.m:
            raise InputError(f"k_tie = {self.k_tie} exceeds the number of models ({self.m}).")
        if self.k_cov is not None:
            if not _is_count(self.k_cov):
                raise InputError(
                    f"k_cov must be None or a non-negative integer, got {self.k_cov!r}."
                )
            object.__setattr__(self, "k_cov", int(self.k_cov))
            if self.k_cov >= self.m:
                raise InputError(
                    f"k_cov = {self.k_cov} must be smaller than the number of models ({self.m})."
                )

    # ---- blocks
    @property
    def has_ties(self) -> bool:
        return self.family in _TIE_FAMILIES

    @property
    def has_cov(self) -> bool:
        return self.k_cov is not None

    @property
    def has_eta0(self) -> bool:
        """A shared threshold parameter: η (k_tie = 0) or η_0 (nested factored form)."""
        return self.has_ties and (self.k_tie == 0 or self.tie_form == "nested")

    @property
    def n_g(self) -> int:
        return self.m * self.k_tie if self.has_ties else 0

    @property
    def kc(self) -> int:
        return self.k_cov or 0

    @property
    def mu(self) -> slice:
        return slice(0, self.m)

    @property
    def eta0(self) -> int | None:
        return self.m if self.has_eta0 else None

    @property
    def g(self) -> slice:
        start = self.m + int(self.has_eta0)
        return slice(start, start + self.n_g)

    @property
    def sd(self) -> slice:
        start = self.g.stop
        return slice(start, start + (self.m if self.has_cov else 0))

    @property
    def lam(self) -> slice:
        start = self.sd.stop
        return slice(start, start + self.m * self.kc)

    @property
    def n_params(self) -> int:
        """Length of θ (leaderbot's count, plus η_0 in the nested form)."""
        return self.lam.stop

    def symmetry_count(self) -> int:
        """Dimension of the group of exact symmetries (see :meth:`_TieEngine.symmetry_directions`)."""
        n = 1  # shift of μ
        if self.has_ties and self.k_tie > 1:
            n += self.k_tie * (self.k_tie - 1) // 2  # G → G + ΦA, A antisymmetric
        if self.has_cov:
            n += 1 + self.kc + self.kc * (self.kc - 1) // 2  # scale, translation, rotation of Λ
        return n

    @property
    def n_free_params(self) -> int:
        """Identifiable parameters: len(θ) minus the dimension of the symmetry group.

        This is the k of AIC/BIC (a symmetry direction is not a free parameter).
        """
        return self.n_params - self.symmetry_count()

    def label(self) -> str:
        parts = [self.family]
        if self.has_ties:
            parts.append(f"k_tie={self.k_tie}" + ("" if self.k_tie == 0 else f" ({self.tie_form})"))
        parts.append(f"k_cov={'none' if self.k_cov is None else self.k_cov}")
        return ", ".join(parts)


# ---------------------------------------------------------------------------------------------
# per-pair log-likelihood in the link variables (u, h) and its derivatives
# ---------------------------------------------------------------------------------------------


@dataclass
class _LinkDerivs:
    value: np.ndarray
    du: np.ndarray
    dh: np.ndarray | None
    duu: np.ndarray | None = None
    duh: np.ndarray | None = None
    dhh: np.ndarray | None = None


def _safe_mul(count: np.ndarray, x: np.ndarray) -> np.ndarray:
    """count·x with 0·(±inf) = 0 (an outcome never observed contributes nothing)."""
    with np.errstate(invalid="ignore"):
        out = count * x
    return np.where(count > 0, out, 0.0)


def _link(
    family: str,
    u: np.ndarray,
    h: np.ndarray | None,
    w: np.ndarray,
    lo: np.ndarray,
    t: np.ndarray,
    order: int,
) -> _LinkDerivs:
    """ℓ = w ln P(i≻j) + lo ln P(i≺j) + t ln P(i∼j) per row, and derivatives in (u, h).

    ``order`` 1 gives ℓ_u, ℓ_h; 2 adds ℓ_uu, ℓ_uh, ℓ_hh. Formulas (σ = logistic):

    Rao–Kupper, η = h ≥ 0 (|h| in the formulas; h < 0 is infeasible), a = u − η, b = −u − η:
      ℓ = (w+t) ln σ(a) + (lo+t) ln σ(b) + t ln(e^{2η} − 1)
      ℓ_u = (w+t)σ(−a) − (lo+t)σ(−b);   ℓ_η = −(w+t)σ(−a) − (lo+t)σ(−b) + t(1 + coth η)
      ℓ_uu = −(w+t)σ(a)σ(−a) − (lo+t)σ(b)σ(−b);  ℓ_uη = (w+t)σ(a)σ(−a) − (lo+t)σ(b)σ(−b)
      ℓ_ηη = ℓ_uu − t/sinh²η;  derivatives in h carry sign(h).
    Davidson, with P_w, P_l, P_t the three probabilities and n = w + lo + t:
      ℓ_u = (w − lo)/2 − n(P_w − P_l)/2;  ℓ_h = t − nP_t
      ℓ_uu = −n[(P_w + P_l) − (P_w − P_l)²]/4;  ℓ_uh = nP_t(P_w − P_l)/2;  ℓ_hh = −nP_t(1 − P_t)
    Bradley–Terry with s = w + t/2, n = w + lo + t ("bt-half") or s = w, n = w + lo ("bt-drop"):
      ℓ = s ln σ(u) + (n − s) ln σ(−u);  ℓ_u = s − nσ(u);  ℓ_uu = −nσ(u)σ(−u).
    """
    if family == "rao-kupper":
        sg = np.where(h < 0, -1.0, 1.0)
        eta = np.abs(h)
        a = u - eta
        b = -u - eta
        wt, lt = w + t, lo + t
        with np.errstate(divide="ignore"):
            log_tie = 2.0 * eta + np.log(-np.expm1(-2.0 * eta))
        value = wt * log_expit(a) + lt * log_expit(b) + _safe_mul(t, log_tie)
        sa, sb = expit(-a), expit(-b)  # σ(−a) = 1 − σ(a)
        with np.errstate(divide="ignore"):
            coth1 = 2.0 / -np.expm1(-2.0 * eta)  # 1 + coth η
        du = wt * sa - lt * sb
        deta = -wt * sa - lt * sb + _safe_mul(t, coth1)
        out = _LinkDerivs(value, du, sg * deta)
        if order >= 2:
            va, vb = sa * (1.0 - sa), sb * (1.0 - sb)
            out.duu = -wt * va - lt * vb
            out.duh = sg * (wt * va - lt * vb)
            with np.errstate(divide="ignore", over="ignore"):
                csch2 = 1.0 / np.sinh(eta) ** 2
            out.dhh = out.duu - _safe_mul(t, csch2)
        return out
    if family == "davidson":
        half = 0.5 * u
        log_z = np.logaddexp(np.logaddexp(half, -half), h)
        pw, pl, pt = np.exp(half - log_z), np.exp(-half - log_z), np.exp(h - log_z)
        n = w + lo + t
        value = (w - lo) * half + t * h - n * log_z
        out = _LinkDerivs(value, 0.5 * (w - lo) - 0.5 * n * (pw - pl), t - n * pt)
        if order >= 2:
            out.duu = -0.25 * n * ((pw + pl) - (pw - pl) ** 2)
            out.duh = 0.5 * n * pt * (pw - pl)
            out.dhh = -n * pt * (1.0 - pt)
        return out
    if family in ("bt-half", "bt-drop"):
        if family == "bt-half":
            s, n = w + 0.5 * t, w + lo + t
        else:
            s, n = w, w + lo
        value = s * log_expit(u) + (n - s) * log_expit(-u)
        p = expit(u)
        out = _LinkDerivs(value, s - n * p, None)
        if order >= 2:
            out.duu = -n * p * (1.0 - p)
        return out
    raise InputError(f"unknown tie-model family {family!r}.")


def _probabilities(family: str, u: np.ndarray, h: np.ndarray | None) -> np.ndarray:
    """(rows, 3) array of P(i≻j), P(i≺j), P(i∼j); the tie column is 0 for Bradley–Terry."""
    if family == "rao-kupper":
        eta = np.maximum(
            h, 0.0
        )  # ≥ 0 on compared pairs; a never-compared pair's may extrapolate below
        pw, pl = expit(u - eta), expit(-u - eta)
        pt = np.clip(1.0 - pw - pl, 0.0, 1.0)
    elif family == "davidson":
        half = 0.5 * u
        log_z = np.logaddexp(np.logaddexp(half, -half), h)
        pw, pl, pt = np.exp(half - log_z), np.exp(-half - log_z), np.exp(h - log_z)
    else:
        pw = expit(u)
        pl = expit(-u)
        pt = np.zeros_like(pw)
    return np.column_stack([pw, pl, pt])


# ---------------------------------------------------------------------------------------------
# the engine: primitives, log-likelihood, gradient, Hessian on aggregated rows
# ---------------------------------------------------------------------------------------------


#: Rao–Kupper thresholds held at 0 may come out of exact reparameterisations at ±1e-17; values
#: above −_H_ROUNDING count as feasible (they enter the formulas as |h|).
_H_ROUNDING = 1e-10


@dataclass
class _Kinks:
    rows: np.ndarray
    c: np.ndarray
    h: np.ndarray
    bound: np.ndarray
    lh: np.ndarray


class _TieEngine:
    """Log-likelihood of one :class:`TieSpec` on aggregated rows (i < j, counts w, lo, t)."""

    def __init__(
        self,
        spec: TieSpec,
        i: np.ndarray,
        j: np.ndarray,
        w: np.ndarray,
        lo: np.ndarray,
        t: np.ndarray,
        prior_mask: np.ndarray | None = None,
    ):
        self.spec = spec
        self.i = np.asarray(i, dtype=np.int64)
        self.j = np.asarray(j, dtype=np.int64)
        self.w, self.lo, self.t = (np.asarray(a, dtype=float) for a in (w, lo, t))
        self.R = len(self.i)
        self.phi = dct_basis(spec.m, spec.k_tie) if spec.has_ties and spec.k_tie > 0 else None
        self.prior_mask = (
            None if prior_mask is None or not np.any(prior_mask) else prior_mask.astype(float)
        )
        if spec.family == "bt-drop":
            self.n_obs = float(np.sum(self.w + self.lo))
        else:
            self.n_obs = float(np.sum(self.w + self.lo + self.t))
        self._jd: sp.csr_matrix | None = None
        self._jh: sp.csr_matrix | None = None

    # ---- parameter blocks
    def blocks(self, theta: np.ndarray) -> dict[str, Any]:
        s = self.spec
        out: dict[str, Any] = {"mu": theta[s.mu]}
        if s.has_ties:
            out["eta0"] = theta[s.eta0] if s.has_eta0 else 0.0
            out["G"] = theta[s.g].reshape(s.m, s.k_tie) if s.k_tie > 0 else None
        if s.has_cov:
            out["sd"] = theta[s.sd]
            out["lam"] = theta[s.lam].reshape(s.m, s.kc)
        return out

    def h_matrix(self, theta: np.ndarray) -> np.ndarray | None:
        """m×m matrix of h_ij (the tie thresholds η_ij); None for Bradley–Terry."""
        s = self.spec
        if not s.has_ties:
            return None
        b = self.blocks(theta)
        hm = np.full((s.m, s.m), float(b["eta0"]))
        if b["G"] is not None:
            gp = b["G"] @ self.phi.T
            hm += gp + gp.T
        return hm

    def s_matrix(self, theta: np.ndarray) -> np.ndarray | None:
        """m×m matrix S = [s_ij], s_ij = d_i + d_j + ‖λ_i − λ_j‖² (zero diagonal); None without covariance."""
        if not self.spec.has_cov:
            return None
        b = self.blocks(theta)
        d = b["sd"] ** 2
        lam = b["lam"]
        sq = np.sum(lam * lam, axis=1)
        smat = d[:, None] + d[None, :] + sq[:, None] + sq[None, :] - 2.0 * lam @ lam.T
        np.fill_diagonal(smat, 0.0)
        return np.maximum(smat, 0.0)

    def primitives(
        self, theta: np.ndarray, i: np.ndarray | None = None, j: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Per-row d = μ_i − μ_j, s = s_ij (None without covariance), h = η_ij (None for BT)."""
        s = self.spec
        i = self.i if i is None else i
        j = self.j if j is None else j
        b = self.blocks(theta)
        mu = b["mu"]
        d = mu[i] - mu[j]
        h = None
        if s.has_ties:
            h = np.full(len(i), float(b["eta0"]))
            if b["G"] is not None:
                g, phi = b["G"], self.phi
                h = h + np.einsum("rc,rc->r", g[i], phi[j]) + np.einsum("rc,rc->r", g[j], phi[i])
        svar = None
        if s.has_cov:
            dd = b["sd"] ** 2
            svar = dd[i] + dd[j]
            if s.kc:
                diff = b["lam"][i] - b["lam"][j]
                svar = svar + np.einsum("rc,rc->r", diff, diff)
        return d, svar, h

    def _u(self, d: np.ndarray, svar: np.ndarray | None) -> np.ndarray:
        return d if svar is None else d / np.sqrt(svar)

    # ---- value and gradient
    def loglik(self, theta: np.ndarray, with_prior: bool = True) -> float:
        d, svar, h = self.primitives(theta)
        if self.spec.family == "rao-kupper" and np.any(h < -_H_ROUNDING):
            return -np.inf  # Rao–Kupper needs η_ij = h_ij ≥ 0
        val = float(
            np.sum(_link(self.spec.family, self._u(d, svar), h, self.w, self.lo, self.t, 0).value)
        )
        if with_prior and self.prior_mask is not None:
            val += _prior_terms(theta[self.spec.mu], self.prior_mask, PRIOR_STRENGTH)[0]
        return val

    def _primitive_derivs(self, theta: np.ndarray, order: int) -> tuple[Any, ...]:
        """Derivatives of ℓ per row in the primitives (d, s, h), by the chain rule through u = d/√s."""
        d, svar, h = self.primitives(theta)
        u = self._u(d, svar)
        ld = _link(self.spec.family, u, h, self.w, self.lo, self.t, order)
        if svar is None:
            first = (ld.du, None, ld.dh)
            second = (ld.duu, None, None, ld.duh, None, ld.dhh) if order >= 2 else None
            return ld.value, first, second, svar
        rs = 1.0 / np.sqrt(svar)
        l_d = ld.du * rs
        l_s = -0.5 * ld.du * u / svar
        first = (l_d, l_s, ld.dh)
        second = None
        if order >= 2:
            l_dd = ld.duu / svar
            l_ds = -0.5 * (ld.duu * u + ld.du) * rs / svar
            l_ss = u / svar**2 * (0.25 * ld.duu * u + 0.75 * ld.du)
            l_dh = None if ld.duh is None else ld.duh * rs
            l_sh = None if ld.duh is None else -0.5 * ld.duh * u / svar
            second = (l_dd, l_ds, l_ss, l_dh, l_sh, ld.dhh)
        return ld.value, first, second, svar

    def value_and_grad(
        self, theta: np.ndarray, with_prior: bool = True
    ) -> tuple[float, np.ndarray]:
        """ln L and ∇ ln L (analytic)."""
        s = self.spec
        m = s.m
        value, (l_d, l_s, l_h), _, _ = self._primitive_derivs(theta, 1)
        if s.family == "rao-kupper" and np.any(self.primitives(theta)[2] < -_H_ROUNDING):
            value = np.full_like(value, -np.inf)  # infeasible: η_ij = h_ij < 0
        grad = np.zeros(s.n_params)
        grad[s.mu] = np.bincount(self.i, l_d, m) - np.bincount(self.j, l_d, m)
        if s.has_ties:
            if s.has_eta0:
                grad[s.eta0] = np.sum(l_h)
            if s.k_tie > 0:
                wmat = self._pair_matrix(l_h)
                grad[s.g] = (wmat @ self.phi).ravel()
        if s.has_cov:
            b = self.blocks(theta)
            grad[s.sd] = 2.0 * b["sd"] * (np.bincount(self.i, l_s, m) + np.bincount(self.j, l_s, m))
            if s.kc:
                grad[s.lam] = (2.0 * laplacian(m, self.i, self.j, l_s) @ b["lam"]).ravel()
        val = float(np.sum(value))
        if with_prior and self.prior_mask is not None:
            pv, pg, _ = _prior_terms(theta[s.mu], self.prior_mask, PRIOR_STRENGTH)
            val += pv
            grad[s.mu] += pg
        return val, grad

    def _pair_matrix(self, vals: np.ndarray) -> np.ndarray:
        """Symmetric m×m matrix with vals summed into (i, j) and (j, i)."""
        m = self.spec.m
        flat = np.bincount(self.i * m + self.j, vals, m * m) + np.bincount(
            self.j * m + self.i, vals, m * m
        )
        return flat.reshape(m, m)

    # ---- Jacobians of the primitives and the exact Hessian
    def _jac_d(self) -> sp.csr_matrix:
        if self._jd is None:
            r = np.arange(self.R)
            self._jd = sp.csr_matrix(
                (np.r_[np.ones(self.R), -np.ones(self.R)], (np.r_[r, r], np.r_[self.i, self.j])),
                shape=(self.R, self.spec.n_params),
            )
        return self._jd

    def _jac_h(self) -> sp.csr_matrix:
        if self._jh is None:
            s = self.spec
            r = np.arange(self.R)
            rows, cols, vals = [], [], []
            if s.has_eta0:
                rows.append(r)
                cols.append(np.full(self.R, s.eta0))
                vals.append(np.ones(self.R))
            if s.k_tie > 0:
                k = s.k_tie
                kk = np.arange(k)
                start = s.g.start
                rows += [np.repeat(r, k), np.repeat(r, k)]
                cols += [
                    (start + self.i[:, None] * k + kk).ravel(),
                    (start + self.j[:, None] * k + kk).ravel(),
                ]
                vals += [self.phi[self.j].ravel(), self.phi[self.i].ravel()]
            self._jh = sp.csr_matrix(
                (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                shape=(self.R, s.n_params),
            )
        return self._jh

    def _jac_s(self, theta: np.ndarray) -> sp.csr_matrix:
        s = self.spec
        b = self.blocks(theta)
        dd = 2.0 * b["sd"]  # ∂s_ij/∂t_i
        r = np.arange(self.R)
        rows = [r, r]
        cols = [s.sd.start + self.i, s.sd.start + self.j]
        vals = [dd[self.i], dd[self.j]]
        if s.kc:
            k = s.kc
            kk = np.arange(k)
            diff = 2.0 * (b["lam"][self.i] - b["lam"][self.j])
            rows += [np.repeat(r, k), np.repeat(r, k)]
            cols += [
                (s.lam.start + self.i[:, None] * k + kk).ravel(),
                (s.lam.start + self.j[:, None] * k + kk).ravel(),
            ]
            vals += [diff.ravel(), -diff.ravel()]
        return sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(self.R, s.n_params),
        )

    def hessian(self, theta: np.ndarray, with_prior: bool = True) -> np.ndarray:
        """Exact Hessian of ln L: Jᵀ Q J, J the stacked sparse Jacobians of the per-row primitives
        (d, s, h) and Q their per-row 3×3 second derivatives, plus the curvature of s in (t, Λ)
        weighted by ∂ℓ/∂s. Assembled sparse, returned dense."""
        s = self.spec
        m = s.m
        _, first, second, _ = self._primitive_derivs(theta, 2)
        l_s = first[1]
        l_dd, l_ds, l_ss, l_dh, l_sh, l_hh = second
        mats = [self._jac_d()]
        names = ["d"]
        if s.has_cov:
            mats.append(self._jac_s(theta))
            names.append("s")
        if s.has_ties:
            mats.append(self._jac_h())
            names.append("h")
        q = {
            ("d", "d"): l_dd,
            ("d", "s"): l_ds,
            ("s", "s"): l_ss,
            ("d", "h"): l_dh,
            ("s", "h"): l_sh,
            ("h", "h"): l_hh,
        }
        blocks = [[sp.diags(q[(a, c)] if (a, c) in q else q[(c, a)]) for c in names] for a in names]
        jac = sp.vstack(mats, format="csr")
        hess = jac.T @ (sp.bmat(blocks, format="csr") @ jac)
        if s.has_cov:
            node = np.bincount(self.i, l_s, m) + np.bincount(self.j, l_s, m)
            extra = sp.diags(
                np.r_[np.zeros(s.sd.start), 2.0 * node, np.zeros(s.n_params - s.sd.stop)]
            )
            hess = hess + extra
            if s.kc:
                lap = sp.csr_matrix(2.0 * laplacian(m, self.i, self.j, l_s))
                lam_block = sp.kron(lap, sp.eye(s.kc), format="csr")
                hess = hess + sp.block_diag(
                    [sp.csr_matrix((s.lam.start, s.lam.start)), lam_block], format="csr"
                )
        out = hess.toarray()
        if with_prior and self.prior_mask is not None:
            out[s.mu, s.mu] += _prior_terms(theta[s.mu], self.prior_mask, PRIOR_STRENGTH)[2]
        return out

    def outcome_score_matrix(self, theta: np.ndarray) -> np.ndarray:
        """(rows, 3, P): gradient of ln P(outcome | row) for win, loss, tie (see TieFitted.score_contributions)."""
        s = self.spec
        R = self.R
        d, svar, h = self.primitives(theta)
        u = self._u(d, svar)
        jd = self._jac_d()
        js = self._jac_s(theta) if s.has_cov else None
        jh = self._jac_h() if s.has_ties else None
        out = np.zeros((R, 3, s.n_params))
        one, zero = np.ones(R), np.zeros(R)
        for k, (w, lo, t) in enumerate(((one, zero, zero), (zero, one, zero), (zero, zero, one))):
            ld = _link(s.family, u, h, w, lo, t, 1)
            if svar is None:
                g_d, g_s = ld.du, None
            else:
                g_d = ld.du / np.sqrt(svar)
                g_s = -0.5 * ld.du * u / svar
            block = jd.multiply(g_d[:, None])
            if js is not None:
                block = block + js.multiply(g_s[:, None])
            if jh is not None:
                block = block + jh.multiply(ld.dh[:, None])
            out[:, k, :] = sp.csr_matrix(block).toarray()
        return out

    def symmetry_directions(self, theta: np.ndarray) -> np.ndarray:
        """P × n_sym matrix of the tangent vectors of the likelihood's symmetry group at θ.

        Shift of μ; G → G + ΦA (A antisymmetric); and with covariance the scale
        (μ, t, Λ) → (cμ, ct, cΛ), the translations of Λ's columns and Λ → Λ e^{A}.
        """
        s = self.spec
        m = s.m
        dirs = []
        v = np.zeros(s.n_params)
        v[s.mu] = 1.0
        dirs.append(v)
        if s.has_ties and s.k_tie > 1:
            for a in range(s.k_tie):
                for c in range(a + 1, s.k_tie):
                    amat = np.zeros((s.k_tie, s.k_tie))
                    amat[a, c], amat[c, a] = 1.0, -1.0
                    v = np.zeros(s.n_params)
                    v[s.g] = (self.phi @ amat).ravel()
                    dirs.append(v)
        if s.has_cov:
            b = self.blocks(theta)
            v = np.zeros(s.n_params)
            v[s.mu] = b["mu"]
            v[s.sd] = b["sd"]
            if s.kc:
                v[s.lam] = b["lam"].ravel()
            dirs.append(v)
            for c in range(s.kc):
                v = np.zeros(s.n_params)
                e = np.zeros((m, s.kc))
                e[:, c] = 1.0
                v[s.lam] = e.ravel()
                dirs.append(v)
            for a in range(s.kc):
                for c in range(a + 1, s.kc):
                    amat = np.zeros((s.kc, s.kc))
                    amat[a, c], amat[c, a] = 1.0, -1.0
                    v = np.zeros(s.n_params)
                    v[s.lam] = (b["lam"] @ amat).ravel()
                    dirs.append(v)
        return np.column_stack(dirs)

    # ---- Rao–Kupper kinks
    def kink_rows(
        self,
        theta: np.ndarray,
        *,
        step: np.ndarray | None = None,
        exclude: np.ndarray | None = None,
        band: float = 1e-3,
    ) -> np.ndarray:
        """Rao–Kupper rows without ties at the |h| kink: |h_r| ≤ ``band``, or (with ``step``) whose
        h changes sign on θ + step. Empty for the other families."""
        if self.spec.family != "rao-kupper" or not np.any(self.t == 0):
            return np.zeros(0, dtype=np.int64)
        _, _, h = self.primitives(theta)
        if step is None:
            hit = np.abs(h) <= band
        else:
            hit = h * (h + self._jac_h() @ step) < 0
        hit &= self.t == 0
        if exclude is not None and len(exclude):
            hit[exclude] = False
        return np.flatnonzero(hit)

    def kink_terms(self, theta: np.ndarray, rows: np.ndarray) -> _Kinks:
        """For held ``rows``: C = ∂h/∂θ (dense), h, the multiplier bound D = wσ(−u) + lσ(u)
        (= −∂ℓ/∂η at η = 0) and the rows' ℓ_h (their slope, removed from the gradient)."""
        if len(rows) == 0:
            z = np.zeros(0)
            return _Kinks(np.zeros(0, dtype=np.int64), np.zeros((0, self.spec.n_params)), z, z, z)
        d, svar, h = self.primitives(theta)
        u = self._u(d, svar)[rows]
        bound = self.w[rows] * expit(-u) + self.lo[rows] * expit(u)
        ld = _link("rao-kupper", u, h[rows], self.w[rows], self.lo[rows], self.t[rows], 1)
        return _Kinks(rows, self._jac_h()[rows].toarray(), h[rows], bound, ld.dh)

    def escape_variance_saddles(self, theta: np.ndarray) -> np.ndarray:
        """With d = t², t_i = 0 is stationary whatever the data say, and near it ∂ℓ/∂t_i = 2t_i ∂ℓ/∂d_i
        is tiny: when the data want a larger variance (∂ℓ/∂d_i > 0) a small t_i is a saddle that
        Newton in t leaves only slowly. For such models (d_i ≤ 1% of the mean variance) take a
        safeguarded Newton step in d_i itself, d_i − ℓ_d/ℓ_dd with the diagonal second derivative,
        halved until ln L increases. Returns θ (the same object if nothing moved)."""
        s = self.spec
        if not s.has_cov:
            return theta
        t = theta[s.sd]
        dvar = t**2
        small = dvar <= 1e-2 * max(float(dvar.mean()), 1e-300)
        if not small.any():
            return theta
        _, first, second, _ = self._primitive_derivs(theta, 2)
        l_s, l_ss = first[1], second[2]
        pull = np.bincount(self.i, l_s, s.m) + np.bincount(self.j, l_s, s.m)  # ∂ℓ/∂d_i
        curv = np.bincount(self.i, l_ss, s.m) + np.bincount(self.j, l_ss, s.m)  # ∂²ℓ/∂d_i²
        move = small & (pull > 0) & (curv < 0)
        if not move.any():
            return theta
        target = np.where(move, dvar - pull / np.where(move, curv, -1.0), dvar)
        base = self.loglik(theta)
        step = 1.0
        for _ in range(30):
            th = np.array(theta, copy=True)
            th[s.sd] = np.where(move, np.sqrt(dvar + step * (target - dvar)), t)
            if self.loglik(th) > base:
                return th
            step *= 0.5
        return theta

    def kink_crossing(self, theta: np.ndarray, step: np.ndarray, held: np.ndarray) -> float:
        """Largest t ≤ 1 keeping every Rao–Kupper threshold feasible on θ + t·step: a row without
        ties (other than ``held``) may go down to exactly 0, a row with ties (whose likelihood is
        −∞ at 0) only 90% of the way (fraction to the boundary). inf when no row limits the step."""
        if self.spec.family != "rao-kupper":
            return np.inf
        _, _, h = self.primitives(theta)
        dh = self._jac_h() @ step
        down = dh < 0
        down[held] = False
        if not down.any():
            return np.inf
        reach = np.maximum(h[down], 0.0) / -dh[down]
        reach = np.where(self.t[down] > 0, 0.9 * reach, reach)
        return float(reach.min())

    # ---- exact constraints
    def normalize(self, theta: np.ndarray) -> np.ndarray:
        """Apply the symmetry transformations that put θ in canonical form (likelihood unchanged):
        Σμ = 0; 1ᵀΛ = 0, Λ's columns orthogonal and sorted by norm; trace(PΣP) = 1; ΦᵀG symmetric."""
        s = self.spec
        th = np.array(theta, dtype=float, copy=True)
        th[s.mu] -= th[s.mu].mean()
        if s.has_ties and s.k_tie > 1:
            g = th[s.g].reshape(s.m, s.k_tie)
            bmat = self.phi.T @ g
            g = g - self.phi @ (0.5 * (bmat - bmat.T))
            th[s.g] = g.ravel()
        if s.has_cov:
            lam = th[s.lam].reshape(s.m, s.kc)
            if s.kc:
                lam = lam - lam.mean(axis=0)
                _, _, vt = np.linalg.svd(lam, full_matrices=False)
                lam = lam @ vt.T  # orthogonal columns, largest first
                big = lam[np.argmax(np.abs(lam), axis=0), np.arange(s.kc)]
                lam = lam * np.where(big < 0, -1.0, 1.0)  # deterministic column signs
            th[s.sd] = np.abs(th[s.sd])  # t → −t leaves d = t² unchanged
            d = th[s.sd] ** 2
            tr = (
                (1.0 - 1.0 / s.m) * d.sum()
                + float(np.sum(lam * lam))
                - float(np.sum(lam.sum(axis=0) ** 2)) / s.m
            )
            scale = 1.0 / np.sqrt(tr)
            th[s.mu] *= scale
            th[s.sd] *= scale
            th[s.lam] = (lam * scale).ravel()
        return th

    def constraint_residuals(self, theta: np.ndarray) -> dict[str, float]:
        """|Σμ|, |trace(PΣP) − 1| and ‖1ᵀΛ‖ at θ (the last two only with covariance)."""
        s = self.spec
        out = {"sum_scores": float(abs(np.sum(theta[s.mu])))}
        if s.has_cov:
            sigma = np.diag(theta[s.sd] ** 2)
            lam = theta[s.lam].reshape(s.m, s.kc)
            if s.kc:
                sigma = sigma + lam @ lam.T
            p = np.eye(s.m) - 1.0 / s.m
            out["trace_centered_cov"] = float(abs(np.trace(p @ sigma @ p) - 1.0))
            out["lambda_column_sums"] = float(np.linalg.norm(lam.sum(axis=0))) if s.kc else 0.0
        return out


# ---------------------------------------------------------------------------------------------
# solvers
# ---------------------------------------------------------------------------------------------


def _orthonormal(cols: np.ndarray) -> np.ndarray:
    q, r = np.linalg.qr(cols)
    keep = np.abs(np.diag(r)) > 1e-12 * max(1.0, float(np.abs(np.diag(r)).max()))
    return q[:, keep]


#: Newton stops (not converged) when ln L improved by < 1e-12 per comparison over this many steps.
_STALL_STEPS = 25

#: Relative ridge added to the Newton system (times the mean curvature).
_RIDGE = 1e-9


class _TieProblem(NewtonProblem):
    """:func:`_newton` for the Newton driver: the point θ, ln L and its gradient there, the
    symmetry directions and the rows held on their kink."""

    #: Armijo's test allows the rounding level of the summed log-likelihood
    noise = 1e-13
    min_t = 1e-12

    def __init__(self, engine: _TieEngine, theta: np.ndarray, label: str, tol: float) -> None:
        self.engine, self.theta, self.label, self.tol = engine, theta, label, tol
        self.n = max(engine.n_obs, 1.0)
        self.f, self.g = engine.value_and_grad(theta)
        self.history = [self.f]
        self.steps = 0

    def prepare(self) -> None:
        escaped = self.engine.escape_variance_saddles(self.theta)
        if escaped is not self.theta:
            self.theta = escaped
            self.f, self.g = self.engine.value_and_grad(escaped)

    def gradient_norm(self) -> float:
        engine, theta = self.engine, self.theta
        self.nmat = _orthonormal(engine.symmetry_directions(theta))
        self.kinks = engine.kink_terms(theta, engine.kink_rows(theta))
        gnorm, self.on_kink = _kkt_residual(self.g, self.nmat, self.kinks)
        gnorm /= self.n
        report(
            f"{self.label} iteration {self.steps}, gradient {gnorm:.1e} per comparison "
            f"(target {self.tol:.0e})"
        )
        self.gnorm = gnorm
        return gnorm

    def at_optimum(self, gnorm: float, tol: float) -> bool:
        return gnorm <= tol and self.on_kink

    def check(self, iteration: int) -> str | None:
        history, n = self.history, self.n
        if len(history) > _STALL_STEPS and (history[-1] - history[-1 - _STALL_STEPS]) / n < 1e-12:
            return (
                f"stalled: NLL per comparison changed by < 1e-12 over the last {_STALL_STEPS} "
                f"Newton steps (gradient norm {self.gnorm:.2g})"
            )
        return None

    def direction(self) -> float:
        engine, theta, g, nmat = self.engine, self.theta, self.g, self.nmat
        self.steps += 1
        # Jacobi scaling: solve for D^{1/2} p with D = |diag(−H)|, so that blocks whose curvature
        # differs by orders of magnitude (μ, G, t, Λ; a vanishing variance) are treated alike
        a = -engine.hessian(theta)
        dg = np.abs(np.diag(a))
        scale = np.sqrt(np.maximum(dg, 1e-12 * max(float(dg.max()), 1e-300)))
        a /= np.outer(scale, scale)
        nhat = _orthonormal(nmat * scale[:, None]) if nmat.shape[1] else nmat
        a += nhat @ nhat.T
        a[np.diag_indices_from(a)] += _RIDGE
        fac = None
        delta = 0.0
        while delta <= 1e6:
            try:
                fac = cho_factor(a + delta * np.eye(len(a)), check_finite=False)
                break
            except LinAlgError:
                delta = 1e-8 if delta == 0.0 else delta * 10.0
        step, held = _kkt_step(engine, theta, g, nmat, fac, scale, self.kinks)
        self.step = step
        self.t_max = min(1.0, engine.kink_crossing(theta, step, held))
        return max(float(g @ step), 0.0)

    def trial(self, t: float) -> float:
        return self.engine.loglik(self.theta + t * self.step)

    def max_step(self) -> float:
        return self.t_max

    def accept(self, t: float, f: float | None) -> None:
        self.theta = self.theta + t * self.step
        self.f, self.g = self.engine.value_and_grad(self.theta)
        self.history.append(self.f)


def _newton(
    engine: _TieEngine, theta: np.ndarray, *, tol: float, max_iter: int, label: str = "newton"
) -> tuple[np.ndarray, Convergence]:
    """Damped Newton ascent with the exact Hessian on the complement of the symmetry directions.

    Each step solves (Â + N̂N̂ᵀ + εI + δI) p̂ = D^{-1/2} P_N g for p = D^{-1/2} p̂, where
    Â = D^{-1/2}(−H)D^{-1/2} is the Hessian with unit diagonal (Jacobi scaling, D = |diag H|),
    N̂ an orthonormal basis of the scaled symmetry directions (along which ln L is constant, so −H
    is singular there), ε = ``_RIDGE`` a tiny ridge for directions the data barely determine and
    δ ≥ 0 raised from 0 only when the matrix is not positive definite (away from a maximum of a
    non-concave likelihood); then a backtracking (Armijo) line search.

    Rao–Kupper thresholds must satisfy η_ij = h_ij ≥ 0, a polyhedron in θ (h is linear); without
    covariance the problem is then the maximisation of a concave function over it — one optimum,
    found deterministically. Steps stop before a threshold of a pair with ties reaches 0 (its
    likelihood is −∞ there; fraction to the boundary). A pair without ties pulls its threshold
    down to exactly 0 (its term decreases in η): rows without ties within 10⁻³ of 0, or that a
    step would carry below it, are held at h_r = 0 by linear constraints (KKT system through the
    Schur complement, same factorisation); a row is released when its multiplier shows the rest of
    the likelihood pulling it up harder than its own slope D_r = wσ(−u) + lσ(u). Converged when the
    projected KKT residual per comparison ≤ ``tol`` and every held row sits at 0 with an admissible
    multiplier.
    """
    problem = _TieProblem(engine, theta, label, tol)
    conv = newton(problem, tol=tol, max_iter=max_iter, solver=label)
    return problem.theta, conv


def _kkt_residual(g: np.ndarray, nmat: np.ndarray, kinks: _Kinks) -> tuple[float, bool]:
    """‖projected gradient‖ with the held rows' slopes replaced by least-squares multipliers,
    and whether every held row is on its kink with an admissible multiplier."""
    gt = g - kinks.c.T @ kinks.lh
    gp = gt - nmat @ (nmat.T @ gt)
    if len(kinks.rows) == 0:
        return float(np.linalg.norm(gp)), True
    cp = kinks.c - (kinks.c @ nmat) @ nmat.T
    mult = np.linalg.lstsq(cp.T, gp, rcond=None)[0]
    ok = bool(np.all(np.abs(kinks.h) <= 1e-12)) and bool(np.all(mult <= kinks.bound * (1 + 1e-9)))
    return float(np.linalg.norm(gp - cp.T @ mult)), ok


def _kkt_step(
    engine: _TieEngine,
    theta: np.ndarray,
    g: np.ndarray,
    nmat: np.ndarray,
    fac: Any,
    scale: np.ndarray,
    kinks: _Kinks,
) -> tuple[np.ndarray, np.ndarray]:
    """Newton step with the kinked rows held at h = 0.

    Returns (step, considered rows): every row that was held at some point — those still held
    end on the kink, those released were pulled off it and may cross it freely."""
    rows = kinks.rows
    considered = rows
    for _ in range(20):
        kk = engine.kink_terms(theta, rows)
        gt = g - kk.c.T @ kk.lh
        gp = gt - nmat @ (nmat.T @ gt)
        if fac is None:
            return gp / scale**2, considered
        # in scaled variables p̂ = D^{1/2} p: Â p̂ = D^{-1/2} g, constraints (C D^{-1/2}) p̂ = −h
        step = cho_solve(fac, gp / scale, check_finite=False)
        if len(rows):
            chat = kk.c / scale
            y = cho_solve(fac, chat.T, check_finite=False)
            mult = np.linalg.lstsq(chat @ y, chat @ step + kk.h, rcond=None)[0]
            pull = mult > kk.bound * (1 + 1e-9)
            if pull.any():  # the rest of the likelihood pulls these thresholds up off 0: release
                rows = rows[~pull]
                continue
            step = step - y @ mult
        step = step / scale
        step -= nmat @ (nmat.T @ step)
        crossing = engine.kink_rows(theta, step=step, exclude=considered)
        if len(crossing) == 0:
            return step, considered
        rows = np.union1d(rows, crossing)
        considered = np.union1d(considered, crossing)
    return step, considered


def _lbfgs(
    engine: _TieEngine, theta: np.ndarray, *, max_iter: int, tol: float
) -> tuple[np.ndarray, int, str]:
    """L-BFGS (scipy) on the negative log-likelihood per comparison, analytic gradient, in
    variables scaled by the square root of the Hessian's diagonal at the start (a diagonal
    preconditioner: the blocks μ, t, Λ, G differ in curvature by orders of magnitude)."""
    n = max(engine.n_obs, 1.0)
    diag = np.abs(np.diag(engine.hessian(theta))) / n
    scale = np.sqrt(np.maximum(diag, 1e-8 * max(float(diag.max()), 1e-12)))

    def fun(y: np.ndarray) -> tuple[float, np.ndarray]:
        v, g = engine.value_and_grad(y / scale)
        if not np.isfinite(v):
            return np.inf, np.zeros_like(y)
        return -v / n, -(g / scale) / n

    calls = [0]

    def progress(_: np.ndarray) -> None:
        calls[0] += 1
        if calls[0] % 10 == 0:
            report(f"L-BFGS iteration {calls[0]} of at most {max_iter}")

    res = minimize(
        fun,
        theta * scale,
        jac=True,
        callback=progress,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "maxcor": 30, "ftol": 1e-15, "gtol": tol, "maxls": 50},
    )
    return res.x / scale, int(res.nit), str(res.message)


# ---------------------------------------------------------------------------------------------
# fitted result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False, kw_only=True)
class TieFitted(Fitted):
    """A fitted tie / covariance model (see the module docstring for the formulas).

    Beyond :class:`~stablearena.raters.base.Fitted`: ``spec`` (family, k_tie, k_cov, tie form),
    ``theta`` (the full parameter vector, constraints satisfied), ``constraints`` (their residuals
    at the returned optimum) and ``prior_mask`` (models that needed the existence prior).
    ``scores`` are μ (x without covariance), mean zero; with covariance they are on the scale
    fixed by trace(PΣP) = 1 and P(i≻j) depends on z_ij = (μ_i − μ_j)/√s_ij, so ``ratings`` are
    μ/(C√s̄) + 1000 (see :attr:`elo_scale`): Elo points for a pair of average variance s̄.
    """

    spec: TieSpec
    theta: np.ndarray
    constraints: Mapping[str, float] = field(default_factory=dict)
    prior_mask: np.ndarray | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        th = np.array(self.theta, dtype=float, copy=True)
        if not np.all(np.isfinite(th)):
            raise AssertionError("internal error: non-finite parameters in a fitted tie model")  # noqa: TRY003
        th.flags.writeable = False
        object.__setattr__(self, "theta", th)

    # ---- engine on the fitted rows
    def _engine(self) -> _TieEngine:
        eng = self.__dict__.get("_engine_cache")
        if eng is None:
            eng = _engine_for(self.counts, self.spec, self.prior_mask)
            object.__setattr__(self, "_engine_cache", eng)
        return eng

    # ---- description
    @property
    def elo_scale(self) -> float:
        """Natural units per Elo point of ``ratings``: C, or with covariance C·√s̄ (s̄ the mean of
        s_ij over the comparisons), so that rating differences read as Elo points for a pair of
        typical variance: P(i≻j) = σ(z_ij) with z_ij ≈ C (R_i − R_j) when s_ij = s̄."""
        if not self.spec.has_cov:
            return ELO_SCALE
        eng = self._engine()
        _, svar, _ = eng.primitives(np.asarray(self.theta))
        n = eng.w + eng.lo + eng.t
        return ELO_SCALE * float(np.sqrt(np.sum(n * svar) / np.sum(n)))

    @property
    def family(self) -> str:
        return self.spec.family

    @property
    def k_tie(self) -> int | None:
        return self.spec.k_tie if self.spec.has_ties else None

    @property
    def k_cov(self) -> int | None:
        return self.spec.k_cov

    @property
    def tie_form(self) -> str | None:
        return self.spec.tie_form if self.spec.has_ties and self.spec.k_tie > 0 else None

    @property
    def outcome_space(self) -> str:
        """``"ties"`` (three outcomes), ``"half"`` (ties as half) or ``"drop"`` (ties ignored)."""
        return {"bt-half": "half", "bt-drop": "drop"}.get(self.spec.family, "ties")

    @property
    def n_params(self) -> int:
        """Length of the parameter vector (leaderbot's count; +1 for η_0 in the nested form)."""
        return self.spec.n_params

    @property
    def n_free_params(self) -> int:
        """Identifiable parameters (length of θ minus the symmetry dimensions): the k of AIC/BIC."""
        return self.spec.n_free_params

    @property
    def aic(self) -> float:
        """AIC = 2k − 2 ln L, ln L the total log-likelihood, k = :attr:`n_free_params`."""
        return 2.0 * self.n_free_params - 2.0 * self.loglik

    @property
    def bic(self) -> float:
        """BIC = k ln n − 2 ln L, n the number of comparisons."""
        return self.n_free_params * float(np.log(max(self.n_comparisons, 1.0))) - 2.0 * self.loglik

    @property
    def eta(self) -> float | None:
        """The single tie threshold η (k_tie = 0) or the shared η_0 (nested form); else None."""
        if not self.spec.has_eta0:
            return None
        return float(self.theta[self.spec.eta0])

    # ---- model matrices
    def tie_thresholds(self) -> np.ndarray | None:
        """m×m matrix of the tie thresholds η_ij; None for Bradley–Terry. (Rao–Kupper thresholds
        are ≥ 0 on compared pairs; for pairs never compared the factor model may extrapolate
        below 0, which is shown as 0.)"""
        hm = self._engine().h_matrix(np.asarray(self.theta))
        if hm is None:
            return None
        return np.maximum(hm, 0.0) if self.spec.family == "rao-kupper" else hm

    def dissimilarity(self) -> np.ndarray | None:
        """The identifiable m×m matrix S = [s_ij] = Var(x_i − x_j) (None without covariance)."""
        return self._engine().s_matrix(np.asarray(self.theta))

    def thurstonian_covariance(self) -> np.ndarray | None:
        """Σ = D + ΛΛᵀ under the constraints (one member of the class with the same S); None without covariance."""
        s = self.spec
        if not s.has_cov:
            return None
        lam = self.theta[s.lam].reshape(s.m, s.kc)
        return np.diag(self.theta[s.sd] ** 2) + lam @ lam.T

    def covariance_factors(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(d, Λ): the diagonal of D and the m×k_cov factor matrix; None without covariance."""
        s = self.spec
        if not s.has_cov:
            return None
        return self.theta[s.sd] ** 2, self.theta[s.lam].reshape(s.m, s.kc).copy()

    # ---- prediction
    def _indices(self, x: Any) -> np.ndarray:
        arr = np.asarray(x)
        if arr.dtype.kind in "iu":
            return arr.astype(np.int64)
        return np.vectorize(self.index, otypes=[np.int64])(arr)

    def outcome_probabilities(self, i: Any, j: Any) -> np.ndarray:
        """Array (…, 3) of P(i≻j), P(i≺j), P(i∼j) for model indices or names (any order, i ≠ j).

        For the Bradley–Terry families the tie column is 0 (the model has no tie outcome).
        """
        ii, jj = np.broadcast_arrays(self._indices(i), self._indices(j))
        shape = ii.shape
        ii, jj = ii.ravel(), jj.ravel()
        same = ii == jj
        eng = self._engine()
        d, svar, h = eng.primitives(np.asarray(self.theta), ii, jj)
        if svar is not None:
            svar = np.where(same, 1.0, svar)  # d = 0 there: a model against itself is an even match
        probs = _probabilities(self.spec.family, eng._u(d, svar), h)
        return probs.reshape(*shape, 3)

    def predict(self, i: Any, j: Any) -> np.ndarray | float:
        """Expected score of i against j: P(i≻j) + ½ P(i∼j) (½ on the diagonal)."""
        p = self.outcome_probabilities(i, j)
        out = p[..., 0] + 0.5 * p[..., 2]
        return float(out) if np.ndim(out) == 0 else out

    # ---- information / uncertainty contract
    def parameters(self) -> np.ndarray:
        """θ at the optimum: [μ (m) | η or (η_0,) G | t = √d (m) | Λ], constraints satisfied."""
        return np.array(self.theta, copy=True)

    def hessian(self) -> np.ndarray:
        """Exact (analytic) Hessian of the total log-likelihood (plus the existence prior when it was
        used) with respect to :meth:`parameters`. Singular along the symmetry directions (shift;
        G → G + ΦA; with covariance scale, translation and rotation of Λ)."""
        with single_threaded_blas():
            return self._engine().hessian(np.asarray(self.theta))

    def score_contributions(self) -> tuple[np.ndarray, np.ndarray]:
        """``G`` (rows, 3, n_params): ∇_θ ln P(outcome | row) for win (i), loss (i), tie; and ``N``
        (rows, 3): the counts of each. Σ N g gᵀ is the meat of the sandwich estimator.

        Rows are the fitted pair rows (``counts`` with the rows the family uses). For
        ``bt-half`` a tie's gradient is the mean of the win and loss gradients (a tie scores ½);
        for ``bt-drop`` it is 0.
        """
        eng = self._engine()
        return eng.outcome_score_matrix(np.asarray(self.theta)), np.column_stack(
            [eng.w, eng.lo, eng.t]
        )

    def symmetry_directions(self) -> np.ndarray:
        """Orthonormal basis (n_params × n_sym) of the directions along which ln L is constant."""
        return _orthonormal(self._engine().symmetry_directions(np.asarray(self.theta)))

    def refit(self, counts: PairCounts) -> TieFitted:
        """Fit the same model with the same options to other counts (e.g. a bootstrap resample of
        the same rows), warm-started from this result."""
        rater = _RATERS_BY_METHOD[self.method](**dict(self.params))
        return rater.fit(counts, init=self)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        th = self.tie_thresholds()
        eng = self._engine()
        out.update(
            {
                "family": self.family,
                "k_tie": self.k_tie,
                "k_cov": self.k_cov,
                "tie_form": self.tie_form,
                "n_params": self.n_params,
                "n_free_params": self.n_free_params,
                "loglik": float(self.loglik),
                "aic": float(self.aic),
                "bic": float(self.bic),
                "eta": self.eta,
                "constraint_residuals": {k: float(v) for k, v in self.constraints.items()},
            }
        )
        if th is not None:
            vals = th[eng.i, eng.j]
            out["tie_threshold_range"] = [
                float(vals.min()),
                float(np.median(vals)),
                float(vals.max()),
            ]
        return out


# ---------------------------------------------------------------------------------------------
# fitting
# ---------------------------------------------------------------------------------------------


def _rows(counts: PairCounts, family: str) -> PairCounts:
    c = counts.collapse()
    n = c.wins + c.losses if family == "bt-drop" else c.wins + c.losses + c.all_ties
    return c.take(n > 0)


def _engine_for(counts: PairCounts, spec: TieSpec, prior_mask: np.ndarray | None) -> _TieEngine:
    c = _rows(counts, spec.family)
    return _TieEngine(spec, c.i, c.j, c.wins, c.losses, c.all_ties, prior_mask)


def _initial_eta(family: str, tie_fraction: float) -> float:
    """η that reproduces the overall tie fraction between equal models (u = 0):
    Rao–Kupper P(tie) = tanh(η/2); Davidson P(tie) = e^η/(2 + e^η)."""
    tau = float(np.clip(tie_fraction, 1e-6, 1 - 1e-6))
    return (
        2.0 * float(np.arctanh(tau))
        if family == "rao-kupper"
        else float(np.log(2.0 * tau / (1.0 - tau)))
    )


#: Initial Λ (relative to the common variance d) when a covariance model starts from scratch.
_LAMBDA_START = 0.3


def _embed(theta: np.ndarray, src: TieSpec, dst: TieSpec, phi_dst: np.ndarray | None) -> np.ndarray:
    """Map the parameters of a fitted ``src`` model into a starting point for ``dst``.

    Scores are copied. A nested tie block is padded with zero columns of G (the same
    likelihood). A leaderbot-form G is started from a single η along the first DCT column φ_1
    (positive everywhere): G = c1e_1ᵀ gives η_ab = c(φ_1a + φ_1b) > 0, c = η/(2 mean φ_1). A covariance-free model
    becomes a covariance model with equal variances d = 1/(m − 1) (trace(PΣP) = 1 without Λ), a
    small centred DCT Λ, and μ = x√(2d) so that z_ij ≈ x_i − x_j.
    """
    m = dst.m
    out = np.zeros(dst.n_params)
    mu = np.array(theta[src.mu], dtype=float, copy=True)
    if dst.has_ties:
        same_family = src.has_ties and src.family == dst.family
        eta = float(theta[src.eta0]) if same_family and src.has_eta0 else None
        if eta is not None and dst.family == "rao-kupper":
            eta = abs(eta)
        g_src = theta[src.g].reshape(m, src.k_tie) if same_family and src.k_tie > 0 else None
        if eta is None and g_src is None:
            eta = 0.5 if dst.family == "rao-kupper" else 0.0
        if dst.has_eta0:
            out[dst.eta0] = 0.0 if eta is None else eta
        if dst.k_tie > 0:
            g = np.zeros((m, dst.k_tie))
            if g_src is not None and src.tie_form == dst.tie_form:
                k = min(src.k_tie, dst.k_tie)
                g[:, :k] = g_src[:, :k]
            elif dst.tie_form == "leaderbot" and eta is not None:
                g[:, 0] = abs(eta) / (2.0 * float(phi_dst[:, 0].mean()))
            out[dst.g] = g.ravel()
    if dst.has_cov:
        if src.has_cov:
            out[dst.mu] = mu
            out[dst.sd] = theta[src.sd]
            lam = np.zeros((m, dst.kc))
            k = min(src.kc, dst.kc)
            if k:
                lam[:, :k] = theta[src.lam].reshape(m, src.kc)[:, :k]
            if dst.kc > k:
                extra = dct_basis(m, dst.kc)[:, k:]
                size = np.sqrt(float(np.mean(theta[src.sd] ** 2)) * m)
                lam[:, k:] = _LAMBDA_START * size * (extra - extra.mean(axis=0))
            out[dst.lam] = lam.ravel()
        else:
            d0 = 1.0 / (m - 1)
            out[dst.sd] = np.sqrt(d0)
            if dst.kc:
                basis = dct_basis(m, dst.kc)
                out[dst.lam] = (
                    _LAMBDA_START * np.sqrt(d0 * m) * (basis - basis.mean(axis=0))
                ).ravel()
            out[dst.mu] = mu * np.sqrt(2.0 * d0)
    elif src.has_cov:
        out[dst.mu] = mu / np.sqrt(2.0 * float(np.mean(theta[src.sd] ** 2)))
    else:
        out[dst.mu] = mu
    return out


#: Order in which a fit from scratch adds structure to the single-η model.
_STAGE_ORDER = "cov-first"

#: L-BFGS iterations before Newton takes over in ``solver="auto"`` with covariance.
_LBFGS_WARMUP = 400


def _solve(
    engine: _TieEngine, theta: np.ndarray, solver: str, tol: float, max_iter: int
) -> tuple[np.ndarray, Convergence]:
    """Maximise ln L from ``theta``.

    ``"newton"``: :func:`_newton` throughout. ``"lbfgs"``: L-BFGS to ``tol`` or ``max_iter``, then at
    most 20 Newton steps. ``"auto"``: Newton without covariance (concave); with covariance
    ``_LBFGS_WARMUP`` preconditioned L-BFGS iterations (cheap, far from the optimum) then Newton.
    """
    if solver not in ("auto", "newton", "lbfgs"):
        raise InputError(f"solver must be 'auto', 'newton' or 'lbfgs', not {solver!r}.")
    if solver == "newton" or (solver == "auto" and not engine.spec.has_cov):
        return _newton(engine, theta, tol=tol, max_iter=min(max_iter, 500))
    warm = max_iter if solver == "lbfgs" else min(max_iter, _LBFGS_WARMUP)
    theta, nit, msg = _lbfgs(engine, engine.normalize(theta), max_iter=warm, tol=tol)
    polish = 20 if solver == "lbfgs" else min(max_iter, 500)
    theta, conv = _newton(
        engine, engine.normalize(theta), tol=tol, max_iter=polish, label="lbfgs+newton"
    )
    message = conv.message or ("" if conv.converged else f"L-BFGS: {msg}")
    return theta, Convergence(
        conv.converged, nit + conv.iterations, conv.grad_norm, "lbfgs+newton", message
    )


def fit_tie_model(
    data: Battles | PairCounts,
    *,
    family: Family,
    k_tie: int = 0,
    k_cov: int | None = None,
    tie_form: TieForm = "nested",
    solver: str = "auto",
    tol: float = 1e-9,
    max_iter: int = 20000,
    anchor: str | tuple[str, float] | None = None,
    method: str | None = None,
    params: Mapping[str, Any] | None = None,
    init: TieFitted | None = None,
) -> TieFitted:
    """Fit one model of the family by maximum likelihood on the pair counts.

    Ties of both kinds count as ties (drop both-bad votes beforehand to leave them out). Without
    ``init`` the fit starts from the simplest model and adds structure: the single-η model
    (Newton from x = 0 and the η that matches the overall tie rate), then the factored ties
    (nested: G = 0, i.e. exactly the single-η optimum), then the covariance. With ``init`` (a fitted
    model of the same family on the same models) it starts from that result instead.
    Raises :class:`InputError` for unusable input and
    :class:`~stablearena.errors.DisconnectedGraphError` for a disconnected comparison graph.
    """
    counts = as_counts(data).collapse()
    spec = TieSpec(family, counts.n_models, k_tie, k_cov, tie_form)  # validates the options
    rows = _rows(counts, family)
    if len(rows) == 0:
        raise InputError(f"{counts.source}: no comparisons to fit.")
    if spec.has_ties:
        n_ties = float(rows.all_ties.sum())
        n_decisive = float((rows.wins + rows.losses).sum())
        if n_ties <= 0:
            raise InputError(
                f"{counts.source}: the data have no ties, so a tie model ({family}) cannot estimate a "
                "tie threshold; use m-elo or bt."
            )
        if n_decisive <= 0:
            raise InputError(
                f"{counts.source}: every comparison is a tie; no model can rank these models."
            )
    check = check_comparison_graph(counts, ties_count=family != "bt-drop")
    notes: tuple[str, ...] = ()
    prior_mask = None
    if not check.ok:
        warnings.warn(check.message, StableArenaWarning, stacklevel=3)
        notes = (check.message,)
        prior_mask = check.needs_prior
    anchor_t = parse_anchor(anchor)
    if anchor_t is not None and anchor_t[0] not in counts.models:
        raise InputError(
            f"anchor model {anchor_t[0]!r} is not among the models of {counts.source}."
        )
    engine = _TieEngine(spec, rows.i, rows.j, rows.wins, rows.losses, rows.all_ties, prior_mask)
    with single_threaded_blas():
        if init is not None:
            if tuple(init.models) != tuple(counts.models) or init.spec.m != spec.m:
                raise InputError(
                    "init must be a model fitted on the same models, in the same order."
                )
            theta0 = _embed(np.asarray(init.theta), init.spec, spec, engine.phi)
            theta, conv = _solve(engine, theta0, solver, tol, max_iter)
        else:
            theta, conv = _fit_from_scratch(rows, spec, engine, solver, tol, max_iter, prior_mask)
        theta = engine.normalize(theta)
    loglik = engine.loglik(theta, with_prior=False)
    if not np.isfinite(loglik):
        raise InputError(
            f"{counts.source}: the fitted likelihood is not finite; the data cannot support {spec.label()}."
        )
    degenerate = _degenerate_covariance(engine, theta, counts.models)
    if degenerate:
        warnings.warn(degenerate, StableArenaWarning, stacklevel=3)
        notes = (*notes, degenerate)
    battles = np.bincount(engine.i, engine.w + engine.lo + engine.t, spec.m) + np.bincount(
        engine.j, engine.w + engine.lo + engine.t, spec.m
    )
    return TieFitted(
        method=method or family,
        models=counts.models,
        scores=theta[spec.mu],
        loglik=loglik,
        n_comparisons=engine.n_obs,
        battles=battles,
        convergence=conv,
        params=dict(params or {}),
        anchor=anchor_t,
        notes=notes,
        counts=counts,
        spec=spec,
        theta=theta,
        constraints=engine.constraint_residuals(theta),
        prior_mask=prior_mask,
    )


def _degenerate_covariance(engine: _TieEngine, theta: np.ndarray, models: tuple[str, ...]) -> str:
    """A message when compared pairs have (numerically) vanishing variance s_ij: models that
    collapse to zero variance and equal means make z_ij = 0/0, the likelihood's supremum lies on a
    singular boundary and no finite maximum exists (the fit then stalls rather than converges)."""
    if not engine.spec.has_cov:
        return ""
    _, svar, _ = engine.primitives(theta)
    tiny = svar <= 1e-10 * float(np.median(svar))
    if not tiny.any():
        return ""
    involved = sorted({models[k] for k in np.r_[engine.i[tiny], engine.j[tiny]]})
    shown = ", ".join(involved[:6]) + (" …" if len(involved) > 6 else "")
    return (
        f"degenerate covariance fit: {int(tiny.sum())} compared pair(s) have vanishing variance "
        f"s_ij (models {shown} collapse to zero variance and equal scores), so the likelihood has no "
        f"finite maximum for k_cov={engine.spec.k_cov}; use a smaller k_cov, no covariance, or more data."
    )


def _fit_from_scratch(
    rows: PairCounts,
    spec: TieSpec,
    engine: _TieEngine,
    solver: str,
    tol: float,
    max_iter: int,
    prior_mask: np.ndarray | None,
) -> tuple[np.ndarray, Convergence]:
    """Single-η model → covariance → factored ties, each stage started from the previous optimum.

    The covariance is added before the factored thresholds: on the 2024 Chatbot Arena data this
    order reaches better optima of the non-concave covariance models than the reverse. The
    covariance likelihood has several local maxima (on that data, other starts of Λ end up to 1e-5
    per comparison apart, some of them on the singular boundary flagged by
    :func:`_degenerate_covariance`); one deterministic start is used."""
    stages = [TieSpec(spec.family, spec.m, 0, None, spec.tie_form)]
    order = ("cov", "ties") if _STAGE_ORDER == "cov-first" else ("ties", "cov")
    k_tie, k_cov = 0, None
    for what in order:
        if what == "cov" and spec.has_cov:
            k_cov = spec.k_cov
        elif what == "ties" and spec.has_ties and spec.k_tie > 0:
            k_tie = spec.k_tie
        else:
            continue
        stages.append(TieSpec(spec.family, spec.m, k_tie, k_cov, spec.tie_form))
    theta = np.zeros(stages[0].n_params)
    if stages[0].has_ties:
        n = rows.wins + rows.losses + rows.all_ties
        theta[stages[0].eta0] = _initial_eta(spec.family, float(rows.all_ties.sum() / n.sum()))
    prev = stages[0]
    iterations = 0
    conv = Convergence(False, 0, np.inf, "newton")
    for k, stage in enumerate(stages):
        eng = (
            engine
            if stage == spec
            else _TieEngine(
                stage, rows.i, rows.j, rows.wins, rows.losses, rows.all_ties, prior_mask
            )
        )
        if k > 0:
            theta = _embed(theta, prev, stage, eng.phi)
        theta, conv = _solve(eng, theta, solver if stage == spec else "auto", tol, max_iter)
        iterations += conv.iterations
        prev = stage
    return theta, Convergence(conv.converged, iterations, conv.grad_norm, conv.solver, conv.message)


# ---------------------------------------------------------------------------------------------
# raters
# ---------------------------------------------------------------------------------------------


class _TieRater(Rater):
    family: str

    def _fit(
        self, data: Battles | PairCounts, family: str, init: TieFitted | None, **spec: Any
    ) -> TieFitted:
        return fit_tie_model(
            data,
            family=family,  # type: ignore[arg-type]
            solver=self.solver,  # type: ignore[attr-defined]
            tol=self.tol,  # type: ignore[attr-defined]
            max_iter=self.max_iter,  # type: ignore[attr-defined]
            anchor=self.anchor,  # type: ignore[attr-defined]
            method=self.name,
            params=self.get_params(),
            init=init,
            **spec,
        )


@dataclass(frozen=True)
class _FactoredTieRater(_TieRater):
    """The options and the fit of :class:`RaoKupper` and :class:`Davidson`; the tie-model
    family is the rater's registered name."""

    k_tie: int = 0
    k_cov: int | None = None
    tie_form: str = "nested"
    solver: str = "auto"
    tol: float = 1e-9
    max_iter: int = 20000
    anchor: str | tuple[str, float] | None = None

    def fit(self, data: Battles | PairCounts, *, init: TieFitted | None = None) -> TieFitted:
        return self._fit(
            data, self.name, init, k_tie=self.k_tie, k_cov=self.k_cov, tie_form=self.tie_form
        )


@register_rater("rao-kupper")
@dataclass(frozen=True)
class RaoKupper(_FactoredTieRater):
    """Rao–Kupper model with ties (Rao & Kupper 1967; leaderbot eq. 4, 6–13), docs/methods/ties.md.

    P(i≻j) = σ(u − η_ij), P(i≺j) = σ(−u − η_ij), P(i∼j) = (e^{2η_ij} − 1)σ(u − η_ij)σ(−u − η_ij),
    u = x_i − x_j (or z_ij with covariance). Options: ``k_tie`` (0 = one η; k > 0 factored
    thresholds), ``tie_form`` ("nested" adds a shared η_0 so larger k_tie nests smaller;
    "leaderbot" reproduces leaderbot), ``k_cov`` (None = no covariance, 0 = diagonal, k = diagonal
    + rank k), ``solver`` ("auto", "newton", "lbfgs"), ``tol`` (gradient norm per comparison),
    ``max_iter``, ``anchor`` ("MODEL=RATING").
    """


@register_rater("davidson")
@dataclass(frozen=True)
class Davidson(_FactoredTieRater):
    """Davidson model with ties (Davidson 1970; leaderbot eq. 5, 6–13), docs/methods/ties.md.

    P(i≻j) = e^{u/2}/Z, P(i≺j) = e^{−u/2}/Z, P(i∼j) = e^{η_ij}/Z, Z = e^{u/2} + e^{−u/2} + e^{η_ij}.
    Options as :class:`RaoKupper`.
    """


@register_rater("bt-cov")
@dataclass(frozen=True)
class ThurstonianBT(_TieRater):
    """Bradley–Terry with Thurstonian covariance (leaderbot eq. 10, 13): P(i≻j) = σ(z_ij),
    z_ij = (μ_i − μ_j)/√s_ij — the covariance variants of m-ELO (``ties="half"``) and BT
    (``ties="drop"``), rows 2–3 and 5–6 of leaderbot's Table D.1.

    ``k_cov=None`` gives plain m-ELO / BT (same optimum as :class:`~stablearena.raters.MElo` and
    :class:`~stablearena.raters.BradleyTerry`, as a :class:`TieFitted`).
    """

    ties: str = "half"
    k_cov: int | None = 0
    solver: str = "auto"
    tol: float = 1e-9
    max_iter: int = 20000
    anchor: str | tuple[str, float] | None = None

    def fit(self, data: Battles | PairCounts, *, init: TieFitted | None = None) -> TieFitted:
        if self.ties not in ("half", "drop"):
            raise InputError(f"ties must be 'half' (m-elo) or 'drop' (bt), not {self.ties!r}.")
        return self._fit(data, f"bt-{self.ties}", init, k_cov=self.k_cov)


_RATERS_BY_METHOD: dict[str, type[_TieRater]] = {
    "rao-kupper": RaoKupper,
    "davidson": Davidson,
    "bt-cov": ThurstonianBT,
}

#: The foundation raters a covariance-free Bradley–Terry configuration maps to.
BT_RATERS: dict[str, type[Rater]] = {"m-elo": MElo, "bt": BradleyTerry}
