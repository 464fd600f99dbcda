"""The am-ELO prediction protocol (am-ELO paper §5.3, Table 2; docs/methods/metrics.md).

For each method (online Elo averaged over shuffles, m-ELO, am-ELO) predict every battle's
expected score P(model_a beats model_b) and compare it with the observed W ∈ {0, ½, 1}:

- **MSE** of the predicted probability against W (all battles, ties at ½);
- **AUC** of the predicted probability for the decisive battles (W = 1 vs W = 0).

Two settings are reported side by side:

- **in-sample**, as in the paper: fit on all battles, predict the same battles;
- **held-out**: K-fold cross-validation over battles (seeded); each fold is predicted by the
  fit on the other folds.

am-ELO predicts with the judging annotator's ability, σ(a_k (x_a − x_b)); an annotator absent
from the training folds is predicted as the average annotator (a = 1). Elo and m-ELO predict
σ(C (R_a − R_b)). As in the paper, annotators with fewer than ``min_records`` records are
removed first.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import expit

from ...analysis.metrics import prediction_auc, prediction_mse
from ...data.battles import Battles
from ...errors import InputError, StableArenaWarning
from ...raters import get_rater
from ...raters.annotator import AmEloFitted
from .perturbation import ExperimentResult, finish_protocol, start_protocol

__all__ = ["PredictionConfig", "PredictionResult", "predict_battles", "run_prediction"]

METHODS: tuple[str, ...] = ("elo", "m-elo", "am-elo")


@dataclass(frozen=True)
class PredictionConfig:
    methods: tuple[str, ...] = METHODS
    folds: int = 5
    min_records: int = 50
    elo_shuffles: int = 1000
    seed: int = 0

    def check(self) -> None:
        unknown = sorted(set(self.methods) - set(METHODS))
        if unknown or not self.methods:
            raise InputError(f"--methods must be among {', '.join(METHODS)}, not {unknown}.")
        if self.folds < 2:
            raise InputError("--folds must be at least 2.")
        if self.min_records < 0 or self.elo_shuffles < 1:
            raise InputError("--min-records must be ≥ 0 and --elo-shuffles ≥ 1.")


@dataclass(frozen=True)
class PredictionResult(ExperimentResult):
    """``table``: one record per method with in-sample and held-out MSE/AUC (mean, std over
    folds); ``folds``: the per-fold figures."""

    source: str
    n_models: int
    n_annotators: int
    n_battles: int
    table: list[dict[str, Any]]
    folds: list[dict[str, Any]]
    config: PredictionConfig
    seconds: float
    notes: list[str] = field(default_factory=list)


def _fit(method: str, battles: Battles, config: PredictionConfig) -> Any:
    if method == "elo":
        return get_rater("elo", shuffles=config.elo_shuffles, seed=config.seed).fit(battles)
    return get_rater(method).fit(battles)


def predict_battles(fitted: Any, battles: Battles) -> np.ndarray:
    """P(model_a beats model_b) for each battle of ``battles`` (matched to ``fitted`` by model
    and annotator names; am-ELO uses the judging annotator's ability, 1 if unknown to it)."""
    index = {name: k for k, name in enumerate(fitted.models)}
    try:
        pos = np.array([index[name] for name in battles.models])
    except KeyError as exc:
        raise InputError(f"model {exc.args[0]!r} was not in the fitted data.") from None
    ia, ib = pos[battles.model_a], pos[battles.model_b]
    if isinstance(fitted, AmEloFitted):
        ability = np.ones(len(battles))
        if battles.annotator is not None:
            ann = {name: k for k, name in enumerate(fitted.annotators)}
            fitted_ab = np.array(
                [fitted.abilities[ann[n]] if n in ann else 1.0 for n in battles.annotators]  # type: ignore[union-attr]
            )
            ability = fitted_ab[battles.annotator]
        return expit(ability * (fitted.scores[ia] - fitted.scores[ib]))
    return np.asarray(fitted.predict(ia, ib), dtype=float)


def _scores(fitted: Any, battles: Battles) -> dict[str, float]:
    p = predict_battles(fitted, battles)
    w = battles.weights()
    return {
        "mse": prediction_mse(p, battles.scores, w),
        "auc": prediction_auc(p, battles.scores, w),
    }


def run_prediction(
    battles: Battles, config: PredictionConfig | None = None, *, source: str = ""
) -> PredictionResult:
    """Run the Table 2 protocol (module docstring)."""
    config = config or PredictionConfig()
    data, t0 = start_protocol(battles, config, "the prediction experiment")
    n = len(data)
    if n < config.folds:
        raise InputError(f"{n} battles cannot be split into {config.folds} folds.")
    notes: list[str] = []
    fold_of = np.random.default_rng(config.seed).permutation(n) % config.folds
    fold_rows: list[dict[str, Any]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StableArenaWarning)
        insample = {m: _scores(_fit(m, data, config), data) for m in config.methods}
        dropped = 0
        for f in range(config.folds):
            train = data.take(fold_of != f).compact()
            test = data.take(fold_of == f)
            known = np.isin(np.array(test.models), np.array(train.models))
            ok = known[test.model_a] & known[test.model_b]
            dropped += int((~ok).sum())
            test = test.take(ok)
            for m in config.methods:
                sc = _scores(_fit(m, train, config), test)
                fold_rows.append({"fold": f, "method": m, "n_test": len(test), **sc})
    if dropped:
        notes.append(
            f"{dropped} held-out battles involved a model absent from their training folds and were skipped"
        )
    table = []
    for m in config.methods:
        rows = [r for r in fold_rows if r["method"] == m]
        mse = np.array([r["mse"] for r in rows])
        auc = np.array([r["auc"] for r in rows])
        table.append(
            {
                "method": m,
                "mse_in_sample": insample[m]["mse"],
                "auc_in_sample": insample[m]["auc"],
                "mse_held_out": float(mse.mean()),
                "mse_held_out_std": float(mse.std()),
                "auc_held_out": float(auc.mean()),
                "auc_held_out_std": float(auc.std()),
            }
        )
    return PredictionResult(
        table=table, folds=fold_rows, **finish_protocol(data, config, t0, source, notes, caught)
    )
