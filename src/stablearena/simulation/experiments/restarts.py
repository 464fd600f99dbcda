"""The am-ELO convergence protocol (am-ELO paper §5.4, Figure 5; docs/methods/annotators.md).

Five random restarts of each gradient method, run as the paper's reference code does (Adam,
learning rate 0.1, full batch, mean binary cross-entropy, Xavier-uniform initialisation; see
:func:`stablearena.raters.annotator.adam_am_elo`):

- ``m-elo (adam)``: logit C (R_i − R_j);
- ``am-elo (adam)``: logit θ_k/Σθ · (R_i − R_j) — with normalisation;
- ``am-elo w/o norm (adam)``: logit θ_k (R_i − R_j).

Every ``record_every`` epochs the experiment records the mean loss over the restarts and the
**consistency** of their rankings (the pairwise metric averaged over all pairs of restarts,
docs/methods/metrics.md) — a reversed ranking counts as disagreement, so without normalisation the consistency
settles where the restarts split into the two orientations (the paper's 0.4 for a 2/3 split).

Reference lines (final values only): online Elo over as many random orders as restarts, and the
exact Newton am-ELO and m-ELO, which are deterministic (consistency 1 by construction) and give
the optimal loss the gradient methods approach.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...analysis.metrics import consistency
from ...data.battles import Battles
from ...errors import InputError, StableArenaWarning
from ...raters import ELO_SCALE, get_rater
from ...raters.annotator import AmEloRows, adam_am_elo, am_elo_loglik
from .perturbation import ExperimentResult, finish_protocol, start_protocol

__all__ = ["RestartsConfig", "RestartsResult", "run_restarts"]

ADAM_METHODS: tuple[str, ...] = ("m-elo (adam)", "am-elo (adam)", "am-elo w/o norm (adam)")


@dataclass(frozen=True)
class RestartsConfig:
    restarts: int = 5
    steps: int = 2000
    lr: float = 0.1
    record_every: int = 20
    min_records: int = 50
    seed: int = 0

    def check(self) -> None:
        if self.restarts < 2:
            raise InputError("--restarts must be at least 2 (consistency compares restarts).")
        if self.steps < 1 or self.lr <= 0 or self.record_every < 1:
            raise InputError("--steps and --record-every must be ≥ 1 and --lr positive.")
        if self.min_records < 0:
            raise InputError("--min-records must be ≥ 0.")


@dataclass(frozen=True)
class RestartsResult(ExperimentResult):
    """``epochs`` and, per Adam method, ``loss`` and ``consistency`` at those epochs;
    ``final``: one record per method (including the Elo and exact references)."""

    source: str
    n_models: int
    n_annotators: int
    n_battles: int
    epochs: list[int]
    curves: dict[str, dict[str, list[float]]]
    final: list[dict[str, Any]]
    config: RestartsConfig
    seconds: float
    notes: list[str] = field(default_factory=list)


def _mean_bce(rows: AmEloRows, x: np.ndarray, a: np.ndarray) -> float:
    return -am_elo_loglik(x, a, rows) / rows.total


def run_restarts(
    battles: Battles, config: RestartsConfig | None = None, *, source: str = ""
) -> RestartsResult:
    """Run the Figure 5 protocol (module docstring)."""
    config = config or RestartsConfig()
    data, t0 = start_protocol(battles, config, "the restarts experiment")
    rows = AmEloRows.from_counts(data.counts(by_annotator=True))
    kk = rows.n_annotators
    curves: dict[str, dict[str, list[float]]] = {}
    final: list[dict[str, Any]] = []
    epochs: list[int] = []
    for method in ADAM_METHODS:
        histories = []
        for r in range(config.restarts):
            rng = np.random.default_rng([config.seed, r])
            kwargs: dict[str, Any] = {}
            if method.startswith("m-elo"):
                kwargs = {
                    "normalize": False,
                    "train_theta": False,
                    "theta0": np.full(kk, ELO_SCALE),
                }
            elif "w/o norm" in method:
                kwargs = {"normalize": False}
            _, _, hist = adam_am_elo(
                rows,
                lr=config.lr,
                steps=config.steps,
                seed=rng,
                record_every=config.record_every,
                **kwargs,
            )
            histories.append(hist)
        epochs = [h[0] for h in histories[0]]
        loss = [float(np.mean([hist[t][1] for hist in histories])) for t in range(len(epochs))]
        cons = [consistency([hist[t][2] for hist in histories]) for t in range(len(epochs))]
        curves[method] = {"loss": loss, "consistency": cons}
        final.append(
            {
                "method": method,
                "loss": loss[-1],
                "consistency": cons[-1],
                "restarts": config.restarts,
            }
        )
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StableArenaWarning)
        # online Elo: as many random orders as restarts
        elo_runs = [
            get_rater("elo", shuffles=1, seed=config.seed * 1000 + r).fit(data)
            for r in range(config.restarts)
        ]
        ones = np.ones(kk)
        elo_loss = float(np.mean([_mean_bce(rows, f.ratings * ELO_SCALE, ones) for f in elo_runs]))
        final.append(
            {
                "method": "elo (random orders)",
                "loss": elo_loss,
                "consistency": consistency([f.ratings for f in elo_runs]),
                "restarts": config.restarts,
            }
        )
        for name in ("m-elo", "am-elo"):
            exact = [get_rater(name).fit(data) for _ in range(config.restarts)]
            a = exact[0].abilities if name == "am-elo" else ones
            final.append(
                {
                    "method": f"{name} (newton)",
                    "loss": _mean_bce(rows, exact[0].scores, a),
                    "consistency": consistency([f.ratings for f in exact]),
                    "restarts": config.restarts,
                }
            )
    return RestartsResult(
        epochs=epochs,
        curves=curves,
        final=final,
        **finish_protocol(data, config, t0, source, notes, caught),
    )
