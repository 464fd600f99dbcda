"""Fisher information of Bradley–Terry-type models: a weighted graph Laplacian (SPEC §4).

I(x) = Σ_rows w_r (e_i − e_j)(e_i − e_j)ᵀ with w_r = n_r c_r² p_r (1 − p_r), p_r = σ(c_r (x_i − x_j)):
the negative Hessian of the Bradley–Terry log-likelihood on the natural scale (C = 1; multiply by
C² for Elo points, or use c_r = θ_k for am-ELO). It is singular along 1, so only contrasts have
variances; :func:`laplacian_pinv` gives the covariance of mean-zero scores.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = ["laplacian", "bt_information", "laplacian_pinv"]


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
