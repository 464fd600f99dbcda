"""Fisher information of Bradley–Terry-type models: a weighted graph Laplacian (docs/methods/uncertainty.md).

I(x) = Σ_rows w_r (e_i − e_j)(e_i − e_j)ᵀ with w_r = n_r c_r² p_r (1 − p_r), p_r = σ(c_r (x_i − x_j)):
the negative Hessian of the Bradley–Terry log-likelihood on the natural scale (C = 1; multiply by
C² for Elo points, or use c_r = θ_k for am-ELO). It is singular along 1, so only contrasts have
variances; :func:`laplacian_pinv` gives the covariance of mean-zero scores.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import lapack
from scipy.special import expit

__all__ = [
    "laplacian",
    "bt_information",
    "laplacian_pinv",
    "dense_bytes",
    "available_memory",
    "require_memory",
    "laplacian_pinv_trace",
    "empirical_bayes_scores",
]

#: Rows (or columns) of a dense matrix handled at once when one is filled in blocks.
_BLOCK: int = 512


def dense_bytes(m: int, copies: float = 1.0) -> int:
    """Bytes of ``copies`` dense m×m float64 matrices (for memory estimates and messages)."""
    return int(copies * 8 * m * m)


def available_memory() -> int | None:
    """Bytes of memory the system can give without swapping (``MemAvailable`` of
    /proc/meminfo; ``None`` where that is not known)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def require_memory(nbytes: int, what: str, hint: str) -> None:
    """Raise :class:`~stablearena.errors.InputError` before any work when ``what`` needs more
    memory (``nbytes``) than the system has available, naming both and what to do (``hint``)."""
    from ..errors import InputError

    free = available_memory()
    if free is not None and nbytes > free:
        raise InputError(
            f"{what} needs about {nbytes / 2**30:.1f} GiB of memory, and only "
            f"{free / 2**30:.1f} GiB is available; {hint}"
        )


def laplacian(m: int, i: np.ndarray, j: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Dense m×m weighted graph Laplacian Σ_r w_r (e_i − e_j)(e_i − e_j)ᵀ (rows may repeat).

    Built in place: one m×m array (8·m² bytes) and nothing else of that size."""
    w = np.asarray(w, dtype=float)
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    lap = np.zeros((m, m))
    flat = lap.reshape(-1)
    # the off-diagonal entries: a bincount over the (sparse) rows' distinct positions each way
    for key in (i * m + j, j * m + i):
        pos, inv = np.unique(key, return_inverse=True)
        flat[pos] -= np.bincount(inv, w, len(pos))
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


def _fill_lower(a: np.ndarray) -> None:
    """Copy the upper triangle of the square array ``a`` onto its lower one, in blocks (no m×m
    temporary)."""
    m = a.shape[0]
    step = 128  # temporaries of at most 128 × m entries
    for lo in range(0, m, step):
        hi = min(lo + step, m)
        a[hi:, lo:hi] = a[lo:hi, hi:].T
        blk = a[lo:hi, lo:hi]
        blk[...] = np.triu(blk) + np.triu(blk, 1).T


def laplacian_pinv(lap: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """Moore–Penrose pseudo-inverse of a connected graph's Laplacian: (L + s 11ᵀ/m)⁻¹ − 11ᵀ/(s m)
    for any s > 0 (s = the mean diagonal of L, which keeps the sum well scaled; s = 1 before).

    This is the covariance of mean-zero scores when ``lap`` is their Fisher information.
    L + s 11ᵀ/m is positive definite for a connected graph, so it is inverted by its Cholesky
    factor (LAPACK potrf + potri: m³ flops, half of an LU inverse's 2m³, in the one m×m array;
    ``overwrite=True`` reuses ``lap``'s own memory — it is then destroyed). When the factor
    does not exist (a graph connected only by underflowed weights, or not at all) the LU inverse
    is used as before (it may raise ``numpy.linalg.LinAlgError`` or give non-finite values).
    """
    m = lap.shape[0]
    shift = _shift(lap)
    inplace = overwrite and lap.flags.c_contiguous and lap.dtype == np.float64
    a = lap if inplace else np.array(lap, dtype=np.float64, order="C")
    a += shift / m
    # a C-ordered symmetric array is its own transpose, which LAPACK reads in place (Fortran order)
    c, info = lapack.dpotrf(a.T, lower=0, overwrite_a=1, clean=0)
    if info == 0:
        c, info = lapack.dpotri(c, lower=0, overwrite_c=1)
    if info != 0:
        if inplace:
            raise np.linalg.LinAlgError(
                "the information matrix is not positive definite on the contrasts (a graph "
                "connected only through weights that underflowed to 0, or not connected)."
            )
        j = np.full((m, m), 1.0 / m)
        return np.linalg.inv(lap + j) - j
    _fill_lower(c)  # LAPACK wrote the upper triangle
    out = np.ascontiguousarray(c.T)  # the same memory when LAPACK worked in place
    out -= 1.0 / (shift * m)
    return out


def _shift(lap: np.ndarray) -> float:
    """s in L⁺ = (L + s 11ᵀ/m)⁻¹ − 11ᵀ/(s m) (any s > 0): the mean diagonal of L, so that the
    added direction is on the scale of the others (with s = 1, weights of 10⁴ lose 7 digits)."""
    m = lap.shape[0]
    s = float(np.trace(lap)) / max(m, 1)
    return s if np.isfinite(s) and s > 0 else 1.0


#: Smallest prior variance of the scores (natural units²) that :func:`empirical_bayes_scores`
#: estimates: below it the data show no spread beyond noise and every score shrinks to ~0.
MIN_PRIOR_VARIANCE: float = 1e-6


def laplacian_pinv_trace(lap: np.ndarray) -> float | None:
    """tr L⁺ of a connected graph's Laplacian without forming L⁺: tr (L + s 11ᵀ/m)⁻¹ − 1/s,
    the squared Frobenius norm of the inverse Cholesky factor minus 1/s (potrf + trtri: 2m³/3
    flops in one m×m copy; s as in :func:`laplacian_pinv`). ``None`` when L + s 11ᵀ/m is not
    positive definite."""
    m = lap.shape[0]
    shift = _shift(lap)
    a = np.array(lap, dtype=np.float64, order="F")
    a += shift / m
    c, info = lapack.dpotrf(a, lower=0, overwrite_a=1, clean=1)
    if info != 0:
        return None
    r, info = lapack.dtrtri(c, lower=0, overwrite_c=1)
    if info != 0:
        return None
    total = 0.0
    for lo in range(
        0, m, 64
    ):  # the upper triangle (clean=1 zeroed the lower), 64 columns at a time
        blk = r[: lo + 64, lo : lo + 64]
        total += float(np.einsum("ij,ij->", blk, blk))
    return total - 1.0 / shift


def empirical_bayes_scores(
    scores: np.ndarray,
    info: np.ndarray,
    covariance: np.ndarray | None = None,
    *,
    trace: float | None = None,
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
    comparison graph is disconnected); or ``trace``: tr I⁺ alone, which is all that is read of
    it (:func:`laplacian_pinv_trace`). Returns (r̃, τ̂²).
    """
    x = np.asarray(scores, dtype=float)
    x = x - x.mean()
    m = len(x)
    if m < 2:
        return x, 0.0
    if trace is None:
        cov = laplacian_pinv(info) if covariance is None else covariance
        trace = float(np.trace(cov))
        del cov
    tau2 = max((float(x @ x) - float(trace)) / (m - 1), MIN_PRIOR_VARIANCE)
    # I + τ⁻² 1 is positive definite: solved by its Cholesky factor, in one m×m copy
    a = np.array(info, dtype=np.float64, order="F")
    a[np.diag_indices(m)] += 1.0 / tau2
    rhs = info @ x
    c, info_ = lapack.dpotrf(a, lower=0, overwrite_a=1, clean=0)
    if info_ == 0:
        shrunk, info_ = lapack.dpotrs(c, rhs, lower=0)
    if info_ != 0:
        shrunk = np.linalg.solve(info + np.eye(m) / tau2, rhs)
    return shrunk - shrunk.mean(), tau2
