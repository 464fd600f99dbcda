"""The am-ELO perturbation protocol (am-ELO paper §5.5, Figures 6–7; docs/methods/metrics.md).

For each perturbation kind (random, equal, flip, mixed), each ratio of perturbed annotators and
each seed: perturb every vote of that fraction of the annotators
(:func:`stablearena.simulation.perturbation.perturb_annotators`), refit every method, and measure

1. **consistency** of each method's ranking with its own unperturbed ranking — the pairwise
   metric (docs/methods/metrics.md) between the two rating vectors;
2. for am-ELO, **precision / recall / F1** of the flagged annotators (ability < ε) against the
   perturbed ones, at each threshold ε (default 0 and the paper's 0.005 on its Σθ = 1 scale,
   i.e. 0.005·M on the mean-1 scale).

The ground truth of (2) is "perturbed = anomalous": the paper's F1 assumes that every annotator
it did not perturb votes with the consensus. On real data that is not so — on LLMFAO four of the
37 annotators with ≥ 50 records have negative ability before any perturbation (worker 15:
−0.53 ± 0.18 over 343 records) — and the paper's F1 would count finding them as false alarms,
while flipping one of them makes it look honest. So by default (``screen=True``) the protocol
starts where a Stable Arena publishes from: the clean log screened by
:func:`stablearena.crowd.screening.screen_log` (am-ELO, annotators with ability < 0 excluded, refitted,
repeated until nobody is flagged); the annotators screened out are listed in the result
(``screened_out``). ``screen=False`` runs on the unscreened log. Either way the result also
reports F1 over the annotators the unperturbed fit did not flag ("f1_unflagged") beside the
F1 over all of them.

Data: a real log (annotators with fewer than ``min_records`` records are removed first, as the
paper does) or a simulated arena of honest annotators
(:func:`stablearena.simulation.perturbation.simulate_arena`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ...analysis.metrics import detection_scores, pairwise_agreement
from ...crowd.screening import screen_log
from ...data.battles import Battles
from ...errors import ConvergenceError, InputError, StableArenaWarning
from ...raters import get_rater
from ..perturbation import PERTURBATIONS, perturb_annotators, simulate_arena

__all__ = [
    "PerturbationConfig",
    "PerturbationResult",
    "run_perturbation",
    "keep_annotators_with_records",
    "simulated_perturbation_arena",
]

METHODS: tuple[str, ...] = ("elo", "m-elo", "am-elo")


class ExperimentResult:
    """The ``to_dict`` of the am-ELO experiments' result dataclasses."""

    def to_dict(self) -> dict[str, Any]:
        """The result as plain dicts and lists (its config too), for JSON."""
        return asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class PerturbationConfig:
    """Options of the perturbation experiment (module docstring).

    ``thresholds``: ε values on the mean-1 ability scale; ``None`` = (0, 0.005·M), the paper's
    two thresholds. ``elo_shuffles``: online Elo is averaged over this many seeded orders (the
    same orders for the clean and the perturbed log). ``screen``: start from the log screened
    by the Stable Arena loop at ε = 0 (module docstring).
    """

    kinds: tuple[str, ...] = PERTURBATIONS
    ratios: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4)
    seeds: int = 5
    methods: tuple[str, ...] = METHODS
    thresholds: tuple[float, ...] | None = None
    min_records: int = 50
    elo_shuffles: int = 1000
    seed: int = 0
    screen: bool = True

    def check(self) -> None:
        bad = sorted(set(self.kinds) - set(PERTURBATIONS))
        if bad or not self.kinds:
            raise InputError(f"--kind must be among {', '.join(PERTURBATIONS)}, not {bad or '[]'}.")
        if not self.ratios or any(not (0 < r <= 0.5) for r in self.ratios):
            raise InputError(
                f"--ratios must lie in (0, 0.5] (up to half the annotators), not {self.ratios}."
            )
        if self.seeds < 1:
            raise InputError("--seeds must be at least 1.")
        unknown = sorted(set(self.methods) - set(METHODS))
        if unknown or "am-elo" not in self.methods:
            raise InputError(f"--methods must include am-elo and be among {', '.join(METHODS)}.")
        if self.min_records < 0 or self.elo_shuffles < 1:
            raise InputError("--min-records must be ≥ 0 and --elo-shuffles ≥ 1.")


@dataclass(frozen=True)
class PerturbationResult(ExperimentResult):
    """``summary``: one record per (kind, ratio), averaged over seeds; ``runs``: one per seed."""

    source: str
    n_models: int
    n_annotators: int
    n_battles: int
    thresholds: tuple[float, ...]
    baseline_flagged: dict[str, list[str]]
    summary: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    config: PerturbationConfig
    seconds: float
    notes: list[str] = field(default_factory=list)
    screened_out: list[dict[str, Any]] = field(default_factory=list)


def start_protocol(
    battles: Battles, config: Any, experiment: str = "the perturbation experiment"
) -> tuple[Battles, float]:
    """The common start of the am-ELO protocols: check ``config``, note the start time
    (``time.perf_counter()``, returned second) and keep the annotators with at least
    ``config.min_records`` records (:func:`keep_annotators_with_records`)."""
    config.check()
    t0 = time.perf_counter()
    return keep_annotators_with_records(battles, config.min_records, experiment), t0


def finish_protocol(
    data: Battles,
    config: Any,
    t0: float,
    source: str,
    notes: list[str],
    caught: Sequence[warnings.WarningMessage],
) -> dict[str, Any]:
    """The common end of the am-ELO protocols (their start: :func:`start_protocol`): a note
    appended to ``notes`` on the warnings ``caught`` during the fits (how many distinct ones,
    and the first), and the fields every result has — ``source`` (the log's by default), the
    sizes of the log ``data``, ``config``, the seconds since ``t0`` and ``notes``."""
    msgs = sorted({str(w.message) for w in caught})
    if msgs:
        notes.append(f"{len(msgs)} distinct warning(s) during the fits, e.g.: {msgs[0]}")
    return {
        "source": source or data.source,
        "n_models": data.n_models,
        "n_annotators": len(data.annotators),  # type: ignore[arg-type]
        "n_battles": len(data),
        "config": config,
        "seconds": time.perf_counter() - t0,
        "notes": notes,
    }


def keep_annotators_with_records(
    battles: Battles, min_records: int, experiment: str = "the perturbation experiment"
) -> Battles:
    """The battles of annotators with at least ``min_records`` records (am-ELO §5.1 filter);
    ``experiment`` names the caller in messages."""
    if battles.annotator is None:
        raise InputError(
            f"{battles.source}: {experiment} needs an annotator column "
            "(map it with --col annotator=NAME)."
        )
    rec = np.bincount(battles.annotator, battles.weights(), len(battles.annotators))  # type: ignore[arg-type]
    keep = rec[battles.annotator] >= min_records
    if not keep.any():
        raise InputError(
            f"{battles.source}: no annotator has {min_records} records (most: {rec.max():g}); "
            "lower --min-records."
        )
    return battles.take(keep).compact()


def simulated_perturbation_arena(
    n_models: int = 20, n_annotators: int = 100, n_battles: int = 20_000, seed: int = 0
) -> Battles:
    """The simulated arena of the acceptance test: honest annotators of abilities U(0.5, 1.5)."""
    return simulate_arena(n_models, n_battles, profiles={"honest": n_annotators}, seed=seed).battles


def _fit(method: str, battles: Battles, config: PerturbationConfig) -> Any:
    if method == "elo":
        return get_rater("elo", shuffles=config.elo_shuffles, seed=config.seed).fit(battles)
    return get_rater(method).fit(battles)


def _label(eps: float) -> str:
    return f"{eps:.4g}"


def run_perturbation(
    battles: Battles, config: PerturbationConfig | None = None, *, source: str = ""
) -> PerturbationResult:
    """Run the protocol on ``battles`` (filtered to annotators with ≥ ``min_records`` records)."""
    config = config or PerturbationConfig()
    data, t0 = start_protocol(battles, config)
    screened_out: list[dict[str, Any]] = []
    if config.screen:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StableArenaWarning)
            screened = screen_log(data, min_records=config.min_records)
        data = screened.battles
        screened_out = [d.to_dict() for d in screened.removed]
    kk = len(data.annotators)  # type: ignore[arg-type]
    if kk < 2:
        raise InputError("the perturbation experiment needs at least two annotators.")
    thresholds = config.thresholds if config.thresholds is not None else (0.0, 0.005 * kk)
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StableArenaWarning)
        clean = {m: _fit(m, data, config) for m in config.methods}
        base_ab = clean["am-elo"].abilities
        baseline = {
            _label(e): [data.annotators[k] for k in np.flatnonzero(base_ab < e)] for e in thresholds
        }  # type: ignore[index]
        runs: list[dict[str, Any]] = []
        for kind in config.kinds:
            for ratio in config.ratios:
                for s in range(config.seeds):
                    p = perturb_annotators(
                        data,
                        kind,
                        ratio,
                        seed=[config.seed, s, PERTURBATIONS.index(kind), int(round(ratio * 1e6))],
                    )
                    rec: dict[str, Any] = {
                        "kind": kind,
                        "ratio": ratio,
                        "seed": s,
                        "perturbed": p.perturbed_names,
                    }
                    for m in config.methods:
                        try:
                            fitted = _fit(m, p.battles, config)
                        except ConvergenceError as exc:
                            # e.g. am-ELO when the perturbed annotators' summed ability matches
                            # the honest ones': no maximum-likelihood solution. The run is
                            # reported as failed, never averaged in as a number.
                            rec[f"failed_{m}"] = str(exc)
                            continue
                        rec[f"consistency_{m}"] = pairwise_agreement(
                            clean[m].ratings, fitted.ratings
                        )
                        if m == "am-elo":
                            ab = fitted.abilities
                            for e in thresholds:
                                flagged = ab < e
                                sc = detection_scores(flagged, p.perturbed)
                                lab = _label(e)
                                rec[f"precision@{lab}"] = sc["precision"]
                                rec[f"recall@{lab}"] = sc["recall"]
                                rec[f"f1@{lab}"] = sc["f1"]
                                fresh = base_ab >= e
                                rec[f"f1_unflagged@{lab}"] = detection_scores(
                                    flagged[fresh], p.perturbed[fresh]
                                )["f1"]
                    runs.append(rec)
    for m in config.methods:
        bad = [r for r in runs if f"failed_{m}" in r]
        if bad:
            notes.append(
                f"{m} found no maximum-likelihood solution in {len(bad)} of {len(runs)} perturbed "
                f"logs (first: {bad[0]['kind']} {bad[0]['ratio']:g}, seed {bad[0]['seed']}: "
                f"{bad[0][f'failed_{m}']}); those runs are counted in failed_{m} and left out "
                "of that method's means."
            )
    summary = _summarise(runs, config, thresholds)
    return PerturbationResult(
        thresholds=tuple(float(e) for e in thresholds),
        baseline_flagged=baseline,
        summary=summary,
        runs=runs,
        screened_out=screened_out,
        **finish_protocol(data, config, t0, source, notes, caught),
    )


def _summarise(
    runs: Sequence[dict[str, Any]], config: PerturbationConfig, thresholds: Sequence[float]
) -> list[dict[str, Any]]:
    out = []
    for kind in config.kinds:
        for ratio in config.ratios:
            group = [r for r in runs if r["kind"] == kind and r["ratio"] == ratio]
            rec: dict[str, Any] = {"kind": kind, "ratio": ratio, "seeds": len(group)}
            # each figure is a mean over the seeds whose fit succeeded; "failed_<method>"
            # counts the others (None where no seed succeeded)
            for m in config.methods:
                vals = np.array([r[f"consistency_{m}"] for r in group if f"failed_{m}" not in r])
                rec[f"consistency_{m}"] = float(vals.mean()) if len(vals) else None
                rec[f"consistency_{m}_std"] = float(vals.std()) if len(vals) else None
                rec[f"failed_{m}"] = len(group) - len(vals)
            inc_m = rec.get("consistency_m-elo")
            inc_a = rec["consistency_am-elo"]
            if inc_m is not None and inc_a is not None:
                inc_m, inc_a = 1.0 - inc_m, 1.0 - inc_a
                # None when m-ELO itself never changed (the ratio is undefined)
                rec["inconsistency_am_over_m"] = float(inc_a / inc_m) if inc_m > 0 else None
            ok = [r for r in group if "failed_am-elo" not in r]
            for e in thresholds:
                lab = _label(e)
                for key in ("precision", "recall", "f1", "f1_unflagged"):
                    rec[f"{key}@{lab}"] = (
                        float(np.mean([r[f"{key}@{lab}"] for r in ok])) if ok else None
                    )
            out.append(rec)
    return out
