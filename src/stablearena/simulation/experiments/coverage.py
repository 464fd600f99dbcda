"""Calibration of the interval methods on simulated arenas with known truth (docs/methods/uncertainty.md).

Each arena draws ``n_models`` true Elo-scale ratings (normal, sd ``spread``), then ``n_battles``
battles with uniformly random pairs and Bradley–Terry outcomes without ties — judged, when
``annotators > 0``, by annotators of known abilities (uniform on [1 − s, 1 + s], rescaled to
mean exactly 1, so that the truth satisfies am-ELO's normalisation). The rater is fitted, and for
every interval method the experiment records whether the nominal ``level`` interval covers

- each true rating under the mean-zero normalisation (truth and estimate both shifted to mean
  1000), and
- each true difference R_i − R_j (i < j), which needs no normalisation.

The reported coverage is the fraction of covered intervals over all arenas, with a standard
error computed from the per-arena fractions (intervals within an arena are correlated).
Arenas are independent: arena a uses ``SeedSequence(seed, spawn_key=(a,))``, so the result does
not depend on the number of worker processes.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from ..._lifetime import exit_with_parent
from ...data.simulate import simulate_battles
from ...errors import InputError, StableArenaWarning
from ...raters import get_rater
from ...raters.base import DEFAULT_OFFSET
from ...raters.uncertainty import CI_METHODS, bootstrap, covariance

__all__ = ["CoverageConfig", "simulate_coverage_arena", "arena_coverage", "run_coverage"]


@dataclass(frozen=True)
class CoverageConfig:
    """Options of the coverage experiment (see the module docstring)."""

    arenas: int = 200
    n_models: int = 30
    n_battles: int = 5000
    rater: str = "m-elo"
    methods: tuple[str, ...] = ("fisher", "sandwich", "bootstrap")
    rounds: int = 1000
    level: float = 0.95
    spread: float = 200.0
    annotators: int = 0
    ability_spread: float = 0.5
    seed: int = 0

    def check(self) -> None:
        if self.arenas < 1 or self.n_models < 2 or self.n_battles < 1:
            raise InputError("coverage needs arenas ≥ 1, models ≥ 2 and battles ≥ 1.")
        unknown = [m for m in self.methods if m not in CI_METHODS]
        if unknown or not self.methods:
            raise InputError(
                f"interval methods must be among {', '.join(CI_METHODS)}; got {list(self.methods)}."
            )
        if not 0.0 < self.level < 1.0:
            raise InputError(f"level must lie strictly between 0 and 1, not {self.level}.")
        if "bootstrap" in self.methods and self.rounds < 2:
            raise InputError("the bootstrap needs at least 2 rounds.")
        if self.annotators < 0:
            raise InputError("annotators must be non-negative.")
        if not 0.0 <= self.ability_spread < 1.0:
            raise InputError(
                "ability_spread must lie in [0, 1) so that every annotator is honest (ability > 0)."
            )
        if self.spread <= 0:
            raise InputError("spread must be positive.")


def simulate_coverage_arena(
    config: CoverageConfig, arena: int
) -> tuple[Any, np.ndarray, np.ndarray | None]:
    """(battles, true ratings, true abilities or None) of arena number ``arena``."""
    rng = np.random.default_rng(np.random.SeedSequence(config.seed, spawn_key=(arena,)))
    truth = DEFAULT_OFFSET + config.spread * rng.standard_normal(config.n_models)
    abilities = None
    if config.annotators > 0:
        s = config.ability_spread
        abilities = rng.uniform(1 - s, 1 + s, config.annotators)
        abilities = abilities / abilities.mean()
    battles = simulate_battles(truth, config.n_battles, abilities=abilities, rule="bt", seed=rng)
    return battles, truth, abilities


def arena_coverage(config: CoverageConfig, arena: int) -> dict[str, Any]:
    """Coverage indicators and interval widths of every method on one arena."""
    battles, truth, _ = simulate_coverage_arena(config, arena)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StableArenaWarning)
        fitted = get_rater(config.rater).fit(battles)
    prior = any(issubclass(w.category, StableArenaWarning) for w in caught)
    m = fitted.n_models
    order = [battles.models.index(name) for name in fitted.models]
    r_true = truth[order]
    r_true = r_true - r_true.mean() + DEFAULT_OFFSET
    r_hat = np.asarray(fitted.ratings)
    r_hat = r_hat - r_hat.mean() + DEFAULT_OFFSET
    iu, ju = np.triu_indices(m, 1)
    d_true = r_true[iu] - r_true[ju]
    d_hat = r_hat[iu] - r_hat[ju]
    z = norm.ppf(0.5 + config.level / 2)
    a = (1 - config.level) / 2
    out: dict[str, Any] = {"arena": arena, "prior": prior}
    for method in config.methods:
        if method == "bootstrap":
            boot = bootstrap(fitted, rounds=config.rounds, seed=config.seed + arena, workers=1)
            rb = boot.ratings
            rb = rb - rb.mean(axis=1, keepdims=True) + DEFAULT_OFFSET
            lo, hi = np.quantile(rb, [a, 1 - a], axis=0)
            db = rb[:, iu] - rb[:, ju]
            dlo, dhi = np.quantile(db, [a, 1 - a], axis=0)
        else:
            cov = covariance(fitted, method)
            se = cov.se if fitted.anchor is None else _mean_zero_se(cov)
            lo, hi = r_hat - z * se, r_hat + z * se
            dse = cov.difference_se()[iu, ju]
            dlo, dhi = d_hat - z * dse, d_hat + z * dse
        out[method] = {
            "ratings": ((lo <= r_true) & (r_true <= hi)).tolist(),
            "differences": ((dlo <= d_true) & (d_true <= dhi)).tolist(),
            "rating_width": float(np.mean(hi - lo)),
            "difference_width": float(np.mean(dhi - dlo)),
        }
    return out


def _mean_zero_se(cov: Any) -> np.ndarray:
    m = cov.scores.shape[0]
    a = np.eye(m) - np.full((m, m), 1.0 / m)
    return np.sqrt(np.clip(np.diag(a @ cov.scores @ a.T), 0, None)) / cov.fitted.elo_scale


_CONFIG: CoverageConfig | None = None


def _init(config: CoverageConfig, parent: int) -> None:
    global _CONFIG
    exit_with_parent(parent)  # no orphan left computing when the command is killed
    _CONFIG = config


def _one(arena: int) -> dict[str, Any]:
    assert _CONFIG is not None  # set by _init
    return arena_coverage(_CONFIG, arena)


def run_coverage(
    config: CoverageConfig, *, workers: int | None = None, progress: bool = False
) -> dict[str, Any]:
    """Run the experiment; returns a JSON-ready summary.

    ``results``: one entry per (method, target) with ``coverage`` (fraction of intervals that
    cover the truth), its arena-clustered standard error ``se``, ``n_intervals`` and the mean
    interval width in Elo points.
    """
    config.check()
    start = time.perf_counter()
    if workers is None:
        workers = os.cpu_count() or 1
    workers = max(1, min(int(workers), config.arenas))
    rows = _run(config, workers, progress)
    rows.sort(key=lambda r: r["arena"])
    results = []
    for method in config.methods:
        for target in ("ratings", "differences"):
            per = np.array([np.mean(r[method][target]) for r in rows])
            n_int = int(sum(len(r[method][target]) for r in rows))
            covered = float(sum(np.sum(r[method][target]) for r in rows)) / n_int
            se = float(per.std(ddof=1) / np.sqrt(len(per))) if len(per) > 1 else float("nan")
            width_key = "rating_width" if target == "ratings" else "difference_width"
            results.append(
                {
                    "method": method,
                    "target": target,
                    "coverage": covered,
                    "se": se if np.isfinite(se) else 0.0,
                    "n_intervals": n_int,
                    "mean_width": float(np.mean([r[method][width_key] for r in rows])),
                }
            )
    return {
        "experiment": "coverage",
        "config": {**asdict(config), "methods": list(config.methods)},
        "nominal": config.level,
        "results": results,
        "arenas_with_prior": int(sum(r["prior"] for r in rows)),
        "seconds": time.perf_counter() - start,
        "workers": workers,
    }


def _run(config: CoverageConfig, workers: int, progress: bool) -> list[dict[str, Any]]:
    from ..._progress import counting_bar

    bar = counting_bar("coverage", enabled=progress)
    rows: list[dict[str, Any]] = []
    if workers == 1:
        with bar:
            tid = bar.add_task("arenas", total=config.arenas)
            for a in range(config.arenas):
                rows.append(arena_coverage(config, a))
                bar.advance(tid)
        return rows
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_init, initargs=(config, os.getpid())
    ) as ex:
        # submit (which forks the workers) before the progress bar starts its thread
        futures = [ex.submit(_one, a) for a in range(config.arenas)]
        with bar:
            tid = bar.add_task("arenas", total=config.arenas)
            for fut in futures:
                rows.append(fut.result())
                bar.advance(tid)
    return rows


def coverage_summary_lines(summary: dict[str, Any]) -> Sequence[str]:
    """Human-readable lines of a :func:`run_coverage` summary."""
    lines = []
    for r in summary["results"]:
        lines.append(
            f"{r['method']:>9} {r['target']:<11} coverage {r['coverage']:.4f} ± {r['se']:.4f} "
            f"({r['n_intervals']} intervals, mean width {r['mean_width']:.1f})"
        )
    return lines
