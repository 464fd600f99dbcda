"""Interval coverage under the live arena's adaptive design, unweighted and inverse-propensity
weighted (docs/methods/uncertainty.md, sampling weights; bench/bench_ipw.py).

Each arena draws ``n_models`` true Elo-scale ratings (normal, sd ``spread``) and serves
``n_battles`` battles by the live arena's rule (:func:`stablearena.design.serving_draw.simulate_served`:
the ``strategy``'s pick with probability 1 − ``exploration``, a uniform pair otherwise, the
ratings refitted every ``refit_every`` battles), each vote from the Bradley–Terry truth
without ties. m-ELO is fitted three ways — unweighted; with w = 1/π (normalised to mean 1)
taken as frequency weights (what a ``weight`` column means); with the same w as sampling weights
(:meth:`stablearena.Battles.with_ipw`) — and for each variant the experiment records whether
the nominal ``level`` interval covers each true difference R_i − R_j (i < j) and each true
rating under the mean-1000 normalisation, and the intervals' widths.

Coverage is reported over all arenas with a standard error from the per-arena fractions
(intervals within an arena are correlated). Arena a uses ``SeedSequence(seed, spawn_key=(a,))``.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..._numeric import normal_ppf
from ...design.selection import get_selector
from ...design.serving_draw import simulate_served
from ...errors import InputError, StableArenaWarning
from ...raters import get_rater
from ...raters.base import DEFAULT_OFFSET, ELO_SCALE
from ...raters.uncertainty import covariance

__all__ = ["IPW_VARIANTS", "IpwCoverageConfig", "ipw_arena_coverage", "run_ipw_coverage"]

#: The analyses compared: (name, weights, covariance). ``frequency``: w = 1/π as frequency
#: weights (each battle counted w times); ``sampling``: the same w as sampling weights.
IPW_VARIANTS: tuple[tuple[str, str, str], ...] = (
    ("unweighted fisher", "none", "fisher"),
    ("unweighted sandwich", "none", "sandwich"),
    ("ipw as frequency, fisher", "frequency", "fisher"),
    ("ipw as frequency, sandwich", "frequency", "sandwich"),
    ("ipw sampling sandwich", "sampling", "sandwich"),
)


@dataclass(frozen=True)
class IpwCoverageConfig:
    """Options of the experiment (module docstring)."""

    arenas: int = 200
    n_models: int = 8
    n_battles: int = 1000
    strategy: str = "a-opt"
    exploration: float = 0.1
    refit_every: int = 50
    spread: float = 200.0
    level: float = 0.95
    seed: int = 0

    def check(self) -> None:
        if self.arenas < 1 or self.n_models < 2 or self.n_battles < 1 or self.refit_every < 1:
            raise InputError(
                "arenas, battles and refit_every must be ≥ 1 and models ≥ 2 "
                f"(got {self.arenas}, {self.n_battles}, {self.refit_every}, {self.n_models})."
            )
        if not 0.0 < self.level < 1.0:
            raise InputError(f"level must lie strictly between 0 and 1, not {self.level}.")


def ipw_arena_coverage(config: IpwCoverageConfig, arena: int) -> dict[str, Any]:
    """Per variant: the fraction of covered differences and ratings, the mean interval width
    (Elo points) and the root-mean-square error of the differences, on arena ``arena``."""
    rng = np.random.default_rng(np.random.SeedSequence(config.seed, spawn_key=(arena,)))
    truth = config.spread * rng.standard_normal(config.n_models)
    battles = simulate_served(
        truth * ELO_SCALE,
        get_selector(config.strategy),
        config.n_battles,
        exploration=config.exploration,
        refit_every=config.refit_every,
        seed=rng,
    )
    sampled = battles.with_ipw()
    data = {
        "none": battles,
        "frequency": replace(sampled, sampling_weights=False),
        "sampling": sampled,
    }
    z = normal_ppf(0.5 + config.level / 2)
    m = config.n_models
    iu, ju = np.triu_indices(m, 1)
    r_true = truth - truth.mean() + DEFAULT_OFFSET
    d_true = r_true[iu] - r_true[ju]
    rater = get_rater("m-elo")
    out: dict[str, Any] = {"arena": arena, "prior": False}
    fits: dict[str, Any] = {}
    for name, weights, kind in IPW_VARIANTS:
        if weights not in fits:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", StableArenaWarning)
                fits[weights] = rater.fit(data[weights])
            out["prior"] |= any(issubclass(w.category, StableArenaWarning) for w in caught)
        fitted = fits[weights]
        assert tuple(fitted.models) == tuple(battles.models)
        r_hat = np.asarray(fitted.ratings)
        r_hat = r_hat - r_hat.mean() + DEFAULT_OFFSET
        d_hat = r_hat[iu] - r_hat[ju]
        cov = covariance(fitted, kind)  # type: ignore[arg-type]
        se = cov.se
        dse = cov.difference_se()[iu, ju]
        out[name] = {
            "differences": float(np.mean(np.abs(d_hat - d_true) <= z * dse)),
            "ratings": float(np.mean(np.abs(r_hat - r_true) <= z * se)),
            "difference_width": float(np.mean(2 * z * dse)),
            "rating_width": float(np.mean(2 * z * se)),
            "difference_sq_error": float(np.mean((d_hat - d_true) ** 2)),
        }
    w = sampled.weight
    assert w is not None
    out["effective_battles"] = float(w.sum() ** 2 / (w * w).sum())
    out["explored"] = float(np.mean(battles.extra["strategy"] == "explore"))  # type: ignore[index]
    return out


def run_ipw_coverage(config: IpwCoverageConfig, *, progress: bool = False) -> dict[str, Any]:
    """Run every arena in this process (the design is sequential and each arena small) and
    summarise: per variant the mean coverage of differences and ratings ± their standard error
    over arenas, the mean interval widths, the RMSE of the differences; plus the mean effective
    number of battles of the weights, (Σw)²/Σw²."""
    config.check()
    start = time.perf_counter()
    rows = []
    for a in range(config.arenas):
        rows.append(ipw_arena_coverage(config, a))
        if progress:
            print(
                f"\r{a + 1}/{config.arenas} arenas, {time.perf_counter() - start:.0f} s",
                end="",
                flush=True,
                file=sys.stderr,
            )
    if progress:
        print(file=sys.stderr)
    n = len(rows)
    summary: dict[str, Any] = {
        "config": config.__dict__,
        "seconds": time.perf_counter() - start,
        "arenas_with_prior": int(sum(r["prior"] for r in rows)),
        "effective_battles": float(np.mean([r["effective_battles"] for r in rows])),
        "explored": float(np.mean([r["explored"] for r in rows])),
        "variants": {},
    }
    for name, _, _ in IPW_VARIANTS:
        v = {k: np.array([r[name][k] for r in rows]) for k in rows[0][name]}
        summary["variants"][name] = {
            "differences": float(v["differences"].mean()),
            "differences_se": float(v["differences"].std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0,
            "ratings": float(v["ratings"].mean()),
            "ratings_se": float(v["ratings"].std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0,
            "difference_width": float(v["difference_width"].mean()),
            "rating_width": float(v["rating_width"].mean()),
            "difference_rmse": float(np.sqrt(v["difference_sq_error"].mean())),
        }
    return summary
