"""Fit many model configurations and compare them in one table (leaderbot Tables D.1–D.3).

A configuration is a rating method plus its tie and covariance structure
(:class:`ModelConfig`): ``m-elo`` (ties as half) and ``bt`` (ties dropped) with ``k_cov`` none,
0 or k; ``rao-kupper`` and ``davidson`` with ``k_tie`` and ``k_cov``. :func:`compare_models` fits
each on the same counts and reports, per configuration, the number of parameters, the fit metrics
of :func:`stablearena.analysis.metrics.fit_metrics` (NLL, cross-entropy per outcome, RMSE, KL/JS
divergence, AIC, BIC), the fit time and, with a held-out split, the same metrics on the test
counts. :func:`table_d1_configurations` lists the 30 configurations of leaderbot's Table D.1.

Tie models are fitted in increasing k_tie within each (method, k_cov). A nested configuration is
warm-started from the previous optimum (exactly the same likelihood with the extra columns of G
at 0), so its NLL can only decrease as k_tie grows; a leaderbot-form configuration from the
single-η fit with the same covariance (the path a fit from scratch takes anyway). Reported fit
times are those of each fit given its warm start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..choices import COMPARE_METHODS
from ..data.battles import Battles, PairCounts, as_counts
from ..errors import InputError
from ..raters.base import Fitted
from ..raters.ties import BT_RATERS, Davidson, RaoKupper, ThurstonianBT
from .metrics import fit_metrics, kendall_tau_matrix, split_counts

__all__ = [
    "ModelConfig",
    "Comparison",
    "configurations",
    "table_d1_configurations",
    "compare_models",
    "COMPARE_METHODS",
]


@dataclass(frozen=True)
class ModelConfig:
    """One configuration: ``method`` with ``k_tie`` (tie models only; None for BT), ``k_cov``
    (None = no covariance) and ``tie_form`` ("nested" or "leaderbot", used when k_tie > 0)."""

    method: str
    k_tie: int | None = None
    k_cov: int | None = None
    tie_form: str = "nested"

    def __post_init__(self) -> None:
        if self.method not in COMPARE_METHODS:
            raise InputError(
                f"unknown method {self.method!r}; choose from {', '.join(COMPARE_METHODS)}."
            )
        if self.method in BT_RATERS and self.k_tie is not None:
            raise InputError(f"{self.method} has no tie parameters; leave k_tie unset.")
        if self.method not in BT_RATERS and self.k_tie is None:
            object.__setattr__(self, "k_tie", 0)
        for name in ("k_tie", "k_cov"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, np.integer)) or v < 0):
                raise InputError(f"{name} must be a non-negative integer or None, got {v!r}.")
        if self.tie_form not in ("nested", "leaderbot"):
            raise InputError(f"tie_form must be 'nested' or 'leaderbot', not {self.tie_form!r}.")

    @property
    def label(self) -> str:
        parts = [self.method]
        if self.k_tie is not None:
            parts.append(f"k_tie={self.k_tie}")
        parts.append(f"k_cov={'none' if self.k_cov is None else self.k_cov}")
        return " ".join(parts)

    def rater(self) -> Any:
        """The rater fitting this configuration."""
        if self.method in BT_RATERS:
            if self.k_cov is None:
                return BT_RATERS[self.method]()
            return ThurstonianBT(
                ties="half" if self.method == "m-elo" else "drop", k_cov=self.k_cov
            )
        cls = RaoKupper if self.method == "rao-kupper" else Davidson
        return cls(k_tie=int(self.k_tie or 0), k_cov=self.k_cov, tie_form=self.tie_form)


def configurations(
    methods: Iterable[str],
    k_ties: Iterable[int] = (0,),
    k_covs: Iterable[int | None] = (None,),
    tie_form: str = "nested",
) -> list[ModelConfig]:
    """Every combination: BT methods once per k_cov, tie models once per (k_cov, k_tie)."""
    k_ties = sorted({int(k) for k in k_ties})
    k_covs = list(dict.fromkeys(k_covs))
    out = []
    for method in methods:
        for kc in k_covs:
            if method in BT_RATERS:
                out.append(ModelConfig(method, None, kc, tie_form))
            else:
                out.extend(ModelConfig(method, kt, kc, tie_form) for kt in k_ties)
    if not out:
        raise InputError("no configurations to compare.")
    return out


def table_d1_configurations(tie_form: str = "leaderbot") -> list[ModelConfig]:
    """The 30 configurations of leaderbot's Table D.1, in its order (IDs 1–30)."""
    out = [ModelConfig(m, None, kc, tie_form) for m in ("m-elo", "bt") for kc in (None, 0, 3)]
    for method in ("rao-kupper", "davidson"):
        out.extend(
            ModelConfig(method, kt, kc, tie_form) for kc in (None, 0, 3) for kt in (0, 1, 10, 20)
        )
    return out


@dataclass(frozen=True, eq=False)
class Comparison:
    """The result of :func:`compare_models`: one row per configuration, plus the fitted models."""

    configs: tuple[ModelConfig, ...]
    rows: tuple[dict[str, Any], ...]
    fitted: tuple[Fitted, ...] = field(repr=False)
    test_ratio: float | None = None
    split: str | None = None
    seconds: float = 0.0

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame(list(self.rows))

    def kendall(self) -> pd.DataFrame:
        """Kendall τ-b between the rankings of every pair of configurations."""
        return kendall_tau_matrix(self.fitted, [c.label for c in self.configs])

    def to_dict(self) -> dict[str, Any]:
        return {
            "configurations": [dict(r) for r in self.rows],
            "test_ratio": self.test_ratio,
            "split": self.split,
            "seconds": self.seconds,
        }


ProgressCallback = Callable[[int, int, ModelConfig], None]


def _fit_order(configs: Sequence[ModelConfig]) -> list[int]:
    """Fit nested tie models in increasing k_tie within each (method, k_cov) so each can warm-start
    from the previous one; other configurations keep their order."""
    return sorted(
        range(len(configs)),
        key=lambda k: (
            configs[k].method,
            -1 if configs[k].k_cov is None else configs[k].k_cov,
            configs[k].tie_form,
            configs[k].k_tie or 0,
        ),
    )


def compare_models(
    data: Battles | PairCounts,
    configs: Sequence[ModelConfig],
    *,
    test_ratio: float | None = None,
    split: str = "battle",
    seed: int | None = 0,
    progress: bool | ProgressCallback = False,
) -> Comparison:
    """Fit every configuration on ``data`` (or on its training part when ``test_ratio`` is given)
    and tabulate parameters, fit metrics and fit time.

    ``split``: "battle" (each comparison held out with probability ``test_ratio``) or "pair"
    (whole pairs held out, as leaderbot does); see :func:`stablearena.analysis.metrics.split_counts`.
    ``progress``: ``True`` shows a progress bar on stderr; a callable is called as
    ``progress(done, total, config)`` after each fit.
    """
    if not configs:
        raise InputError("no configurations to compare.")
    counts = as_counts(data).collapse()
    train, test = (
        (counts, None)
        if test_ratio is None
        else split_counts(counts, test_ratio, by=split, seed=seed)
    )
    order = _fit_order(configs)
    fitted: list[Fitted | None] = [None] * len(configs)
    rows: list[dict[str, Any] | None] = [None] * len(configs)
    start = time.perf_counter()
    bar = _ProgressBar(len(configs)) if progress is True else None
    callback = progress if callable(progress) else None
    previous: dict[tuple[str, int | None, str], Any] = {}
    try:
        for done, k in enumerate(order, start=1):
            cfg = configs[k]
            if bar is not None:
                bar.show(cfg)
            rater = cfg.rater()
            key = (cfg.method, cfg.k_cov, cfg.tie_form)
            init = (
                previous.get(key) if cfg.method not in BT_RATERS and (cfg.k_tie or 0) > 0 else None
            )
            t0 = time.perf_counter()
            fit = rater.fit(train, init=init) if init is not None else rater.fit(train)
            seconds = time.perf_counter() - t0
            if cfg.method not in BT_RATERS and (cfg.tie_form == "nested" or not cfg.k_tie):
                previous[key] = fit  # nested: the last fit; leaderbot form: the single-η fit
            fitted[k] = fit
            rows[k] = _row(cfg, fit, seconds, test)
            if bar is not None:
                bar.advance()
            if callback is not None:
                callback(done, len(configs), cfg)
    finally:
        if bar is not None:
            bar.close()
    return Comparison(
        configs=tuple(configs),
        rows=tuple(r for r in rows if r is not None),
        fitted=tuple(f for f in fitted if f is not None),
        test_ratio=test_ratio,
        split=split if test_ratio is not None else None,
        seconds=time.perf_counter() - start,
    )


def _row(cfg: ModelConfig, fit: Fitted, seconds: float, test: PairCounts | None) -> dict[str, Any]:
    met = fit_metrics(fit)
    n_params = getattr(fit, "n_params", len(fit.models))
    row: dict[str, Any] = {
        "model": cfg.label,
        "method": cfg.method,
        "k_tie": cfg.k_tie,
        "k_cov": cfg.k_cov,
        "tie_form": cfg.tie_form if (cfg.k_tie or 0) > 0 else None,
        "n_params": int(n_params),
        "n_free_params": met["n_params"],
        "nll": met["nll"],
        "ce_win": met["ce_win"],
        "ce_loss": met["ce_loss"],
        "ce_tie": met["ce_tie"],
        "rmse_win": met["rmse_win"],
        "rmse_loss": met["rmse_loss"],
        "rmse_tie": met["rmse_tie"],
        "rmse": met["rmse"],
        "kld": met["kld"],
        "jsd": met["jsd"],
        "aic": met["aic"],
        "bic": met["bic"],
        "seconds": seconds,
        "converged": bool(fit.convergence.converged),
    }
    if test is not None:
        tm = fit_metrics(fit, test)
        for name in ("nll", "rmse_win", "rmse_loss", "rmse_tie", "rmse", "kld", "jsd"):
            row[f"test_{name}"] = tm[name]
    return row


class _ProgressBar:
    """A Rich progress bar on stderr (one step per configuration)."""

    def __init__(self, total: int):
        from .._progress import counting_bar

        self._progress = counting_bar(
            "[bold]fitting[/bold] {task.description}", elapsed=True, transient=False
        )
        self._progress.start()
        self._task = self._progress.add_task("", total=total)

    def show(self, cfg: ModelConfig) -> None:
        self._progress.update(self._task, description=cfg.label)

    def advance(self) -> None:
        self._progress.advance(self._task)

    def close(self) -> None:
        self._progress.update(self._task, description="done")
        self._progress.stop()
