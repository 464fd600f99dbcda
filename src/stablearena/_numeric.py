"""Numerically stable logistic functions in plain NumPy (no SciPy import, no overflow warnings).

σ(z) = 1 / (1 + e^{−z}), ln σ(z) = −softplus(−z), softplus(z) = ln(1 + e^z) = max(z, 0) +
ln(1 + e^{−|z|}). Each is evaluated through e^{−|z|} ∈ (0, 1], which never overflows, so the
results are exact to rounding for every finite z (and the limits for ±inf). They stand in for
``scipy.special.expit`` / ``log_expit`` on the paths that must start fast (importing
``scipy.special`` costs about 0.3 s).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "ELO_SCALE",
    "DEFAULT_OFFSET",
    "expit",
    "log_expit",
    "softplus",
    "normal_ppf",
    "normal_sf",
]

#: C = ln(10)/400: natural log-odds per Elo point (400 points = 10:1 odds), docs/methods/ratings.md.
#: Defined here, below every layer, so that the data layer's simulators use the raters' scale;
#: :mod:`stablearena.raters.base` re-exports it.
ELO_SCALE: float = math.log(10.0) / 400.0
#: Elo-scale ratings are mean-zero scores / C plus this offset unless a model is anchored.
DEFAULT_OFFSET: float = 1000.0


def expit(z: Any) -> Any:
    """σ(z), elementwise; a float for a scalar argument."""
    x = np.asarray(z, dtype=float)
    e = np.exp(-np.abs(x))
    out = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return float(out) if out.ndim == 0 else out


def softplus(z: Any) -> Any:
    """ln(1 + e^z), elementwise; a float for a scalar argument."""
    x = np.asarray(z, dtype=float)
    out = np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))
    return float(out) if out.ndim == 0 else out


def log_expit(z: Any) -> Any:
    """ln σ(z) = −softplus(−z), elementwise; a float for a scalar argument."""
    x = np.asarray(z, dtype=float)
    out = np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))
    return float(out) if out.ndim == 0 else out


def normal_ppf(p: float) -> float:
    """Quantile Φ⁻¹(p) of the standard normal (``statistics.NormalDist``; no SciPy import)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(float(p))


def normal_sf(z: Any) -> Any:
    """Upper tail 1 − Φ(z) = ½ erfc(z/√2), elementwise (exact to rounding in both tails); a
    float for a scalar argument."""
    import math

    x = np.asarray(z, dtype=float)
    out = np.vectorize(lambda v: 0.5 * math.erfc(v / math.sqrt(2.0)), otypes=[float])(x)
    return float(out) if out.ndim == 0 else out
