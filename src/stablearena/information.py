"""Fisher information of Bradley–Terry-type models: a weighted graph Laplacian (docs/methods/uncertainty.md).

I(x) = Σ_rows w_r (e_i − e_j)(e_i − e_j)ᵀ with w_r = n_r c_r² p_r (1 − p_r), p_r = σ(c_r (x_i − x_j)):
the negative Hessian of the Bradley–Terry log-likelihood on the natural scale (C = 1; multiply by
C² for Elo points, or use c_r = θ_k for am-ELO). It is singular along 1, so only contrasts have
variances; :func:`laplacian_pinv` gives the covariance of mean-zero scores.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["laplacian", "bt_information", "laplacian_pinv", "empirical_bayes_scores"]


def laplacian(m: int, i: np.ndarray, j: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Dense m×m weighted graph Laplacian Σ_r w_r (e_i − e_j)(e_i − e_j)ᵀ (rows may repeat)."""
    w = np.asarray(w, dtype=float)
    ij = i.astype(np.int64) * m + j
    ji = j.astype(np.int64) * m + i
    off = np.bincount(ij, w, m * m) + np.bincount(ji, w, m * m)
    lap = -off.reshape(m, m).astype(float)  # float even with no rows (bincount gives int then)
    lap[np.diag_indices(m)] += np.bincount(i, w, m) + np.bincount(j, w, m)
    lap += 0.0  # turns -0.0 into 0.0
    return lap


def bt_information(
    scores: np.ndarray, i: np.ndarray, j: np.ndarray, n: np.ndarray, coef: np.ndarray | float = 1.0
) -> np.ndarray:
    """Fisher information of the scores (natural units) for ``n`` comparisons per row."""
    c = np.asarray(coef, dtype=float)
    p = expit(c * (scores[i] - scores[j]))
    return laplacian(len(scores), i, j, n * c * c * p * (1 - p))


def laplacian_pinv(lap: np.ndarray) -> np.ndarray:
    """Moore–Penrose pseudo-inverse of a connected graph's Laplacian: (L + 11ᵀ/m)⁻¹ − 11ᵀ/m.

    This is the covariance of mean-zero scores when ``lap`` is their Fisher information.
    """
    m = lap.shape[0]
    j = np.full((m, m), 1.0 / m)
    return np.linalg.inv(lap + j) - j


#: Smallest prior variance of the scores (natural units²) that :func:`empirical_bayes_scores`
#: estimates: below it the data show no spread beyond noise and every score shrinks to ~0.
MIN_PRIOR_VARIANCE: float = 1e-6


def empirical_bayes_scores(
    scores: np.ndarray, info: np.ndarray, covariance: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Posterior mean of the true scores under a fitted normal prior (empirical Bayes).

    With x̂ ≈ N(r, I⁺) (the fitted mean-zero scores and the inverse of their Fisher information
    ``info``) and the prior r ~ N(0, τ² P) on mean-zero scores (P = I − 11ᵀ/m), the posterior
    mean is the ridge estimate

        r̃ = (I + τ⁻² 1)⁻¹ I x̂,

    each direction of the information shrunk by τ²λ/(τ²λ + 1). τ² is the method-of-moments
    estimate E‖x̂‖² = (m − 1) τ² + tr I⁺, i.e. τ̂² = max((‖x̂‖² − tr I⁺)/(m − 1),
    ``MIN_PRIOR_VARIANCE``) (James & Stein 1961; Efron & Morris 1973). Early in an arena, when
    the maximum-likelihood scores are mostly noise, r̃ pulls them towards the average; once
    the data are strong it is x̂. ``covariance``: I⁺ if already computed (block-wise when the
    comparison graph is disconnected). Returns (r̃, τ̂²).
    """
    x = np.asarray(scores, dtype=float)
    x = x - x.mean()
    m = len(x)
    if m < 2:
        return x, 0.0
    cov = laplacian_pinv(info) if covariance is None else covariance
    tau2 = max((float(x @ x) - float(np.trace(cov))) / (m - 1), MIN_PRIOR_VARIANCE)
    shrunk = np.linalg.solve(info + np.eye(m) / tau2, info @ x)
    return shrunk - shrunk.mean(), tau2
