"""The pair-selection experiment of "Fewer Battles, More Gain" (Table 2 protocol, docs/methods/selection.md).

For each seed: start from ``init`` random battles (the same ones for every strategy); then each
strategy picks pairs (one at a time, or ``batch`` at a time), the ratings being refitted after
each pick or batch; at each recorded step the ranking is scored against the ground truth with
the pairwise metric (docs/methods/metrics.md), and the information the chosen battles carry is measured at the
ground truth with A-Info = 1/(2 tr I⁺) and D-Info = det(I_grounded)^(1/(N−1))
(:func:`stablearena.design.selection.a_info`, :func:`~stablearena.design.selection.d_info`; natural units).

Three kinds of arena:

- "replay" mode (a battle log or pair counts): outcomes are drawn without replacement from each
  pair's real battles; the ground truth is m-ELO on the full log. The initial battles are drawn
  uniformly from the log.
- "fitted" mode (a battle log and ``fit="rao-kupper"`` or ``"davidson"``): a simulation from the
  tie model fitted to the log (:func:`fitted_arena`): outcomes — wins, losses and ties — are drawn
  from the fitted model, judged, when the log names annotators, by annotators of the abilities
  am-ELO finds in it. A pair never runs out of battles, unlike in a replay. The ground truth is
  the fitted model's scores; the initial battles are uniformly random pairs.
- "simulation" mode (``n_models``): each seed draws true Elo-scale ratings
  (:func:`stablearena.data.simulate.random_ratings`, standard deviation ``spread``) and judges by
  the outcome rule of docs/methods/selection.md; the initial battles are uniformly random pairs.

Within a seed every strategy starts from the same initial battles and plays with *common random
numbers*: the k-th battle of a pair has the same outcome whichever strategy plays it
(:func:`stablearena.simulation.arena.run_arena`, ``outcome_seed``), so the differences between strategies
come from the pairs they choose, not from the luck of the draws. Each strategy's own random
choices come from a stream keyed by its name.

Summaries (:class:`SelectionExperiment`):

- ``mean``: the pairwise metric averaged over seeds and the protocol's ``steps`` (the paper's
  Table 2 figure).
- **Paired difference** from the ``baseline`` (random): per seed, the strategy's pairwise metric
  averaged over ``steps`` minus the baseline's; reported as the mean over seeds ± its standard
  error (sample standard deviation / √seeds) and the number of seeds the strategy won (strictly
  higher), tied and lost.
- **Battles-to-target** (:func:`battles_to_target`): the target is the baseline's pairwise
  metric at the last step, averaged over seeds. Each strategy's seed-mean curve is recorded every
  ``grid`` selected battles (and at 0, the shared start); its battles-to-target is the first
  point at which that curve reaches the target, interpolated linearly between the two recorded
  steps around the first crossing, and ``None`` when the curve stays below the target up to the
  last step. Its uncertainty is a paired bootstrap over seeds (the seeds resampled, the target
  and the curve recomputed from the same resample).
- **Pooled over arenas** (:func:`pooled_comparison`, ``stablearena experiment selection-pooled``):
  per pair of strategies, the per-arena paired differences pooled by a random-effects mean
  (:func:`stablearena.analysis.metrics.pooled_paired_difference`); :func:`choose_default` applies the
  rule of docs/methods/default-design.md to it.
- The growth of A-Info and D-Info: the information added per selected battle from the shared
  start to the last step (seed mean); ``max_model_share_over_median`` is the anchor-bias measure
  (how much more the most-chosen model battled than the median model).
"""

from __future__ import annotations

import os
import time
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..._lifetime import exit_with_parent
from ...analysis.metrics import paired_difference, pairwise_agreement, pooled_paired_difference
from ...data.battles import Battles, PairCounts
from ...data.simulate import OutcomeRule, random_ratings
from ...design.selection import Estimate, Selector, a_info, check_estimate, d_info, get_selector
from ...errors import InputError, StableArenaWarning
from ...raters.information import bt_information
from ..arena import Arena, ReplayArena, SimulatedArena, run_arena

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DEFAULT_STRATEGIES",
    "DEFAULT_STEPS",
    "DEFAULT_GRID",
    "FIT_FAMILIES",
    "SelectionExperiment",
    "battles_to_target",
    "choose_default",
    "fitted_arena",
    "run_selection_experiment",
    "selection_figure",
    "plot_selection_experiment",
    "pooled_comparison",
    "per_seed_means",
    "INCUMBENT",
    "RULE_THRESHOLD",
]

DEFAULT_STRATEGIES: tuple[str, ...] = (
    "random",
    "nearest",
    "ada-pair",
    "a-opt",
    "d-opt",
    "rank-opt",
)
DEFAULT_STEPS: tuple[int, ...] = (100, 200, 500, 1000)
#: Selected battles between two points of the recorded curves (battles-to-target, the figure).
DEFAULT_GRID: int = 50
#: Standard deviation of simulated true ratings, Elo points.
DEFAULT_SPREAD: float = 100.0
#: Tie models a "fitted" arena can be simulated from (single η; docs/methods/ties.md).
FIT_FAMILIES: tuple[str, ...] = ("rao-kupper", "davidson")
#: Rounding slack of "the curve reaches the target" (the baseline's own last point is the target).
TARGET_TOL: float = 1e-12
#: Bootstrap resamples of the seeds for the battles-to-target interval.
BOOTSTRAP_ROUNDS: int = 2000
#: The default design's incumbent (the "Fewer Battles, More Gain" paper's recommendation), which
#: :func:`choose_default` keeps unless a challenger beats it on the pooled evidence.
INCUMBENT: str = "d-opt"
#: Standard errors by which a challenger's pooled lead over the incumbent must exceed zero.
RULE_THRESHOLD: float = 2.0


def battles_to_target(steps: Sequence[int], curve: Sequence[float], target: float) -> float | None:
    """Selected battles at which a curve first reaches ``target``, by linear interpolation.

    ``steps`` are increasing recorded steps and ``curve`` the (seed-mean) pairwise metric at
    them. With k the first index where ``curve[k] >= target`` (up to ``TARGET_TOL``, so that
    the baseline reaches its own target however the mean was summed): ``steps[0]`` if k = 0, else
    t_{k−1} + (target − c_{k−1}) / (c_k − c_{k−1}) · (t_k − t_{k−1}) — the point where the
    segment from the last step below the target to the first at or above it crosses the
    target. ``None`` when the curve never reaches it.
    """
    t = np.asarray(steps, dtype=float)
    c = np.asarray(curve, dtype=float)
    if t.shape != c.shape or t.ndim != 1 or len(t) == 0:
        raise InputError("steps and curve must be one-dimensional and of the same length.")
    hit = np.flatnonzero(c >= target - TARGET_TOL)
    if len(hit) == 0:
        return None
    k = int(hit[0])
    if k == 0:
        return float(t[0])
    frac = min(max((target - c[k - 1]) / (c[k] - c[k - 1]), 0.0), 1.0)
    return float(t[k - 1] + frac * (t[k] - t[k - 1]))


@dataclass(frozen=True)
class SelectionExperiment:
    """Result of :func:`run_selection_experiment`.

    Attributes:
        pairwise, a_info, d_info: ``{strategy: array (seeds, steps)}``.
        steps: the protocol's recorded steps (number of selected battles after the initial ones).
        curve_steps: the steps of the curves: 0 (the shared start), every ``grid`` selected
            battles, and the protocol's steps.
        curves: ``{strategy: array (seeds, curve_steps)}``, the pairwise metric along the way.
        expected: ``{strategy: array (seeds, steps)}``, the expected pairwise metric of the
            chosen battles in the normal approximation (:class:`RankingAsymptotics`; simulated
            arenas only, else empty): the design's effect without the noise of the outcomes.
        bound: per seed for which it was computed (``bound_seeds``), what no design can beat in
            that approximation: the best E[pairwise] of any allocation of the same number of
            battles (``best``; at every recorded step: ``best_by_step``), E[pairwise] of the
            same battles spread evenly over the pairs (``uniform``, ``uniform_by_step``: what
            random pairs give, to first order), ``best_gain`` = the mean over the steps of the
            difference (the largest mean gain over random any design can expect), and the
            fewest battles any allocation needs to reach the baseline's E[pairwise] at the
            last step.
        choices: ``{strategy: (m, m) array}`` — how often each pair was chosen, summed over
            seeds, rows and columns ordered by true strength (best first).
        info_at_start: ``(seeds, 2)`` A-Info and D-Info of the initial battles.
        baseline: the strategy the paired differences and the target refer to (``None`` when
            it was not run).
        settings: the options and data description.
        exhausted, warm_up, seconds: per strategy, summed over seeds.
    """

    strategies: tuple[str, ...]
    steps: tuple[int, ...]
    pairwise: dict[str, np.ndarray]
    a_info: dict[str, np.ndarray]
    d_info: dict[str, np.ndarray]
    choices: dict[str, np.ndarray] = field(repr=False)
    info_at_start: np.ndarray = field(repr=False)
    curve_steps: tuple[int, ...] = ()
    curves: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    baseline: str | None = None
    expected: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    bound: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    exhausted: dict[str, int] = field(default_factory=dict)
    warm_up: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def n_seeds(self) -> int:
        return int(next(iter(self.pairwise.values())).shape[0])

    def mean_pairwise(self, strategy: str) -> float:
        return float(self.pairwise[strategy].mean())

    def paired(
        self, strategy: str, what: Literal["pairwise", "expected"] = "pairwise"
    ) -> dict[str, float | int] | None:
        """Paired difference from the baseline: per seed, the mean over ``steps`` of the
        strategy's pairwise metric (or, ``what="expected"``, its expected pairwise metric)
        minus the baseline's. Returns the mean over seeds, its standard error (sample
        sd/√seeds; 0 with one seed), and the seeds won / tied / lost."""
        table = self.pairwise if what == "pairwise" else self.expected
        if self.baseline is None or strategy not in table:
            return None
        return paired_difference(table[strategy].mean(axis=1) - table[self.baseline].mean(axis=1))

    def target(self, seeds: np.ndarray | None = None) -> float | None:
        """The baseline's pairwise metric at the last step, averaged over (these) seeds."""
        if self.baseline is None:
            return None
        last = self.curves[self.baseline][:, -1]
        return float(np.mean(last if seeds is None else last[seeds]))

    def battles_to_target(self, strategy: str) -> dict[str, Any] | None:
        """Selected battles the strategy needs to reach the baseline's last-step pairwise metric
        (:func:`battles_to_target` on the seed-mean curve), as a fraction of the last step too,
        with a paired bootstrap over seeds: the 2.5% and 97.5% quantiles (``None`` for a bound
        beyond the last step) and the share of resamples in which the target is reached."""
        if self.baseline is None:
            return None
        last = self.curve_steps[-1]
        curve = self.curves[strategy]
        point = battles_to_target(self.curve_steps, curve.mean(axis=0), self.target())  # type: ignore[arg-type]
        rng = np.random.default_rng(zlib.crc32(strategy.encode()))
        n = curve.shape[0]
        boot = np.full(BOOTSTRAP_ROUNDS, np.inf)
        for b in range(BOOTSTRAP_ROUNDS):
            idx = rng.integers(0, n, n)
            v = battles_to_target(self.curve_steps, curve[idx].mean(axis=0), self.target(idx))  # type: ignore[arg-type]
            if v is not None:
                boot[b] = v
        lo, hi = np.quantile(boot, [0.025, 0.975], method="inverted_cdf")
        return {
            "battles": point,
            "fraction": None if point is None else point / last,
            "low": float(lo) if np.isfinite(lo) else None,
            "high": float(hi) if np.isfinite(hi) else None,
            "reached_share": float(np.mean(np.isfinite(boot))),
        }

    def growth(self, strategy: str, what: Literal["a_info", "d_info"]) -> float:
        """Information added per selected battle, seed mean: (value at the last step − value
        after the shared initial battles) / last step. The start is the same for every strategy,
        so this ranks the strategies as their final information does; unlike a fitted slope it is
        not misled when a graph that is still disconnected early on (information 0) catches up."""
        end = getattr(self, what)[strategy][:, -1]
        start = self.info_at_start[:, 0 if what == "a_info" else 1]
        return float(np.mean(end - start) / self.steps[-1])

    def model_share_ratio(self, strategy: str) -> float | None:
        """max / median over models of the selected battles each took part in (summed over
        seeds): the anchor-bias measure (with equal strengths a fair design gives about 1).
        ``None`` when the median model was never chosen."""
        per_model = self.choices[strategy].sum(axis=1)
        med = float(np.median(per_model))
        return float(per_model.max() / med) if med > 0 else None

    def to_dict(self) -> dict[str, Any]:
        """``{"strategies": {name: {"pairwise": {step: [per seed]}, "a_info": …, "d_info": …,
        "mean": float}}, "curves": {"steps": […], name: {"mean": […], "se": […], "per_seed":
        [[…]]}}, "expected": {name: {step: [per seed]}}, "settings": …, "bound": […],
        "summary": {name: {…, "paired": …, "battles_to_target": …}}}``."""

        def per_step(arr: np.ndarray) -> dict[str, list[float]]:
            return {str(s): [float(v) for v in arr[:, k]] for k, s in enumerate(self.steps)}

        def se(arr: np.ndarray) -> list[float]:
            n = arr.shape[0]
            return [
                float(v) for v in (arr.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else 0 * arr[0])
            ]

        curves: dict[str, Any] = {"steps": list(self.curve_steps)}
        for name in self.strategies:
            curves[name] = {
                "mean": [float(v) for v in self.curves[name].mean(axis=0)],
                "se": se(self.curves[name]),
                "per_seed": self.curves[name].tolist(),
            }
        return {
            "strategies": {
                name: {
                    "pairwise": per_step(self.pairwise[name]),
                    "a_info": per_step(self.a_info[name]),
                    "d_info": per_step(self.d_info[name]),
                    "mean": self.mean_pairwise(name),
                }
                for name in self.strategies
            },
            "curves": curves,
            "expected": {name: per_step(arr) for name, arr in self.expected.items()},
            "settings": dict(self.settings),
            "bound": list(self.bound),
            "summary": {
                name: {
                    "mean_pairwise": self.mean_pairwise(name),
                    "paired": self.paired(name),
                    "battles_to_target": self.battles_to_target(name),
                    "expected_pairwise": (
                        float(self.expected[name].mean()) if name in self.expected else None
                    ),
                    "paired_expected": self.paired(name, "expected"),
                    "a_info_growth": self.growth(name, "a_info"),
                    "d_info_growth": self.growth(name, "d_info"),
                    "max_model_share_over_median": self.model_share_ratio(name),
                    "exhausted_picks": int(self.exhausted.get(name, 0)),
                    "warm_up_picks": int(self.warm_up.get(name, 0)),
                    "seconds": float(self.seconds.get(name, 0.0)),
                }
                for name in self.strategies
            },
        }


def per_seed_means(result: SelectionExperiment | Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Per strategy, each seed's pairwise metric averaged over the recorded steps — the
    quantity the paired differences compare — from a :class:`SelectionExperiment` or from its
    :meth:`~SelectionExperiment.to_dict` (the JSON that ``stablearena experiment selection
    --format json`` writes)."""
    if isinstance(result, SelectionExperiment):
        return {name: arr.mean(axis=1) for name, arr in result.pairwise.items()}
    try:
        return {
            name: np.mean([np.asarray(v, dtype=float) for v in entry["pairwise"].values()], axis=0)
            for name, entry in result["strategies"].items()
        }
    except (KeyError, TypeError, AttributeError, ValueError):
        raise InputError(
            "not a selection experiment's result: expected the JSON that `stablearena "
            "experiment selection --format json` writes ({'strategies': {name: {'pairwise': "
            "{step: [per seed]}}}})."
        ) from None


def _comparisons(
    names: Sequence[str], baseline: str | None, incumbent: str
) -> list[tuple[str, str]]:
    """(strategy, reference) pairs: each strategy against the baseline, then each pair of the
    others (the incumbent always the reference, so that a positive difference favours the
    challenger)."""
    others = [n for n in names if n != baseline]
    out = [(n, baseline) for n in others] if baseline in names else []
    for k, a in enumerate(others):
        for b in others[k + 1 :]:
            out.append((a, b) if b == incumbent else (b, a))
    return out


def pooled_comparison(
    arenas: Sequence[SelectionExperiment | Mapping[str, Any]],
    *,
    labels: Sequence[str] | None = None,
    strategies: Sequence[str] | None = None,
    baseline: str | None = "random",
    incumbent: str = INCUMBENT,
    threshold: float = RULE_THRESHOLD,
) -> dict[str, Any]:
    """Pairwise metric differences between strategies, pooled over arenas.

    For every (strategy, reference) pair — each strategy minus ``baseline``, then each pair of
    the others with the ``incumbent`` as the reference — the per-seed differences of the
    seed's pairwise metric averaged over the steps are summarised per arena (mean ± SE, seeds
    won) and pooled by :func:`stablearena.analysis.metrics.pooled_paired_difference` (DerSimonian–Laird
    random-effects mean over the arenas; sign test over arena × seed). ``rule``: the outcome of
    :func:`choose_default` (``None`` when the incumbent was not run). Every arena must have run
    every strategy compared (``strategies``; default: those of the first arena).
    """
    if len(arenas) == 0:
        raise InputError("pooled_comparison() needs at least one arena's result.")
    means = [per_seed_means(a) for a in arenas]
    names = list(strategies) if strategies is not None else list(means[0])
    if labels is None:
        labels = [f"arena {k + 1}" for k in range(len(arenas))]
    if len(labels) != len(arenas):
        raise InputError(f"{len(labels)} labels for {len(arenas)} arenas.")
    for label, m in zip(labels, means, strict=True):
        missing = [n for n in names if n not in m]
        if missing:
            raise InputError(
                f"{label} has no results for {', '.join(missing)}: pool arenas that ran the "
                "same strategies (or name the common ones with strategies=)."
            )
    rows = []
    for a, b in _comparisons(names, baseline, incumbent):
        pooled = pooled_paired_difference([m[a] - m[b] for m in means])
        rows.append({"strategy": a, "reference": b, **pooled})
    return {
        "arenas": list(labels),
        "seeds": [int(len(m[names[0]])) for m in means],
        "strategies": names,
        "baseline": baseline if baseline in names else None,
        "comparisons": rows,
        "rule": choose_default(rows, incumbent, threshold) if incumbent in names else None,
    }


def choose_default(
    comparisons: Sequence[Mapping[str, Any]],
    incumbent: str = INCUMBENT,
    threshold: float = RULE_THRESHOLD,
) -> dict[str, Any]:
    """The rule of docs/methods/default-design.md: the ``incumbent`` stays the default unless a
    challenger's pooled difference from it (``comparisons`` rows with ``reference`` =
    incumbent, as :func:`pooled_comparison` makes them) is at least ``threshold`` standard
    errors above zero: mean ≥ threshold · SE with SE > 0. Of several such challengers the one
    with the largest mean/SE wins. Returns the ``default``, and per challenger its mean, SE,
    z = mean/SE and whether it beat the incumbent."""
    challengers: dict[str, dict[str, Any]] = {}
    for row in comparisons:
        if row["reference"] != incumbent:
            continue
        mean, se = float(row["mean_diff"]), float(row["se"])
        z = mean / se if se > 0 else None
        challengers[row["strategy"]] = {
            "mean_diff": mean,
            "se": se,
            "z": z,
            "beats_incumbent": bool(se > 0 and mean >= threshold * se),
        }
    winners = [n for n, c in challengers.items() if c["beats_incumbent"]]
    default = max(winners, key=lambda n: challengers[n]["z"]) if winners else incumbent
    return {
        "incumbent": incumbent,
        "threshold": threshold,
        "default": default,
        "challengers": challengers,
    }


def _info_at(truth: np.ndarray, pair_battles: np.ndarray) -> tuple[float, float]:
    iu, ju = np.nonzero(np.triu(pair_battles, 1))
    info = bt_information(truth, iu, ju, pair_battles[iu, ju])
    return a_info(info), d_info(info)


def fitted_arena(
    data: Battles | PairCounts,
    family: str = "rao-kupper",
    *,
    annotators: bool = True,
) -> tuple[SimulatedArena, dict[str, Any]]:
    """A simulated arena from a tie model fitted to a real log (the experiment's "fitted" mode).

    The single-η Rao–Kupper or Davidson model (docs/methods/ties.md) is fitted to ``data`` (ties, of both
    kinds, as ties) and judges every battle with its own win, loss and tie probabilities
    (:meth:`SimulatedArena.from_fitted`, ``rule="model"``). When the log names annotators (and
    ``annotators``), each battle is judged by an annotator drawn in proportion to their records
    in the log, with the ability am-ELO gives them (docs/methods/annotators.md): the log-odds of annotator k are
    θ_k (x_i − x_j). The abilities are rescaled to a record-weighted mean of 1, so that the
    average battle discriminates as the fitted tie model does; annotators with θ_k ≤ 0 (random
    or adversarial voters in the log) keep their sign. Returns the arena and a description.
    """
    from ...raters.base import get_rater

    if family not in FIT_FAMILIES:
        raise InputError(f"fit must be one of {', '.join(FIT_FAMILIES)}, not {family!r}.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fitted = get_rater(family).fit(data)
    desc: dict[str, Any] = {
        "family": family,
        "eta": float(fitted.eta),
        "nll_per_comparison": float(fitted.nll),
        "annotators": 0,
    }
    abilities = probs = None
    if annotators and getattr(data, "annotator", None) is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StableArenaWarning)
            am = get_rater("am-elo").fit(data)
        rec = np.asarray(am.records, dtype=float)
        keep = rec > 0
        ab = np.asarray(am.abilities, dtype=float)[keep]
        mean = float(np.average(ab, weights=rec[keep]))
        if not mean > 0:
            raise InputError(
                f"{getattr(data, 'source', 'the log')}: the annotators' abilities average "
                f"{mean:.3g} (weighted by records), so the log has no consensus to simulate; "
                "pass annotators=False to simulate the tie model alone."
            )
        abilities, probs = ab / mean, rec[keep]
        desc.update(
            annotators=int(keep.sum()),
            ability_scale=1.0 / mean,
            share_of_battles_by_nonpositive_abilities=float(
                rec[keep][abilities <= 0].sum() / rec[keep].sum()
            ),
        )
    arena = SimulatedArena.from_fitted(
        fitted, rule="model", abilities=abilities, annotator_probs=probs
    )
    return arena, desc


def _selector(name: str, estimate: Estimate) -> Selector:
    cls = type(get_selector(name))  # unknown names fail here, before any work
    takes = "estimate" in {f.name for f in fields(cls)}
    return get_selector(name, estimate=estimate) if takes else get_selector(name)


@dataclass(frozen=True)
class _SeedJob:
    sd: int
    seed: int
    strategies: tuple[str, ...]
    steps: tuple[int, ...]
    curve_steps: tuple[int, ...]
    init: int
    batch: int
    rater: str
    estimate: Estimate
    arena: Arena | None
    n_models: int
    spread: float
    rule: OutcomeRule
    bound: bool = False
    baseline: str | None = None


def _run_seed(job: _SeedJob) -> dict[str, Any]:
    """Every strategy of one seed (a unit of work for the process pool)."""
    from ..._threads import single_threaded_blas

    with warnings.catch_warnings(), single_threaded_blas():
        warnings.simplefilter("ignore", StableArenaWarning)
        return _run_seed_inner(job)


def _run_seed_inner(job: _SeedJob) -> dict[str, Any]:
    seed, sd = job.seed, job.sd
    arena = job.arena
    if arena is None:
        ratings = random_ratings(
            job.n_models, spread=job.spread, seed=np.random.default_rng([seed, sd, 1])
        )
        arena = SimulatedArena(ratings, rule=job.rule)
    truth = arena.truth()
    m = arena.n_models
    asym = RankingAsymptotics.of(arena) if isinstance(arena, SimulatedArena) else None
    rank = np.empty(m, dtype=np.int64)
    rank[np.argsort(-truth, kind="stable")] = np.arange(m)
    order = np.argsort(rank)
    out: dict[str, Any] = {}
    for name in job.strategies:
        tick = time.perf_counter()
        run = run_arena(
            arena,
            _selector(name, job.estimate),
            job.curve_steps[-1],
            init=job.init,
            batch=job.batch,
            rater=job.rater,
            record=job.curve_steps,
            # the same initial battles for every strategy of a seed, and the same outcome for
            # the k-th battle of a pair (common random numbers); the strategy's own stream
            # (keyed by its name, so that the list of strategies does not change it) for
            # its random choices
            init_seed=np.random.default_rng([seed, sd, 2]),
            outcome_seed=[seed, sd, 4],
            seed=np.random.default_rng([seed, sd, 3, zlib.crc32(name.encode())]),
        )
        seconds = time.perf_counter() - tick
        ch = run.choices + run.choices.T
        info = np.array([_info_at(truth, run.snapshots[s].pair_battles) for s in job.steps])
        out[name] = {
            "expected": np.array(
                [
                    np.nan
                    if asym is None
                    else asym.expected_pairwise(run.snapshots[s].pair_battles)
                    for s in job.steps
                ]
            ),
            "curve": np.array(
                [pairwise_agreement(truth, run.snapshots[s].scores) for s in job.curve_steps]
            ),
            "a_info": info[:, 0],
            "d_info": info[:, 1],
            "start": np.array(_info_at(truth, run.snapshots[0].pair_battles)),
            "choices": ch[np.ix_(order, order)],
            "exhausted": run.exhausted,
            "warm_up": run.warm_up,
            "seconds": seconds,
        }
    if job.bound and asym is not None:
        total = job.init + job.steps[-1]
        totals = [job.init + s for s in job.steps]
        best_by_step = [asym.best_allocation(t)[0] for t in totals]
        uniform_by_step = [asym.uniform_pairwise(t) for t in totals]
        bound: dict[str, Any] = {
            "battles": total,
            "best": best_by_step[-1],
            "uniform": uniform_by_step[-1],
            # per recorded step (init + step battles): what no design beats, and even pairs
            "best_by_step": best_by_step,
            "uniform_by_step": uniform_by_step,
            "best_gain": float(np.mean(best_by_step) - np.mean(uniform_by_step)),
        }
        if job.baseline in out:
            target = float(out[job.baseline]["expected"][-1])
            least = asym.least_battles(target, total)
            bound.update(
                target=target,
                least_battles=least,
                least_selected=None if least is None else least - job.init,
            )
        out["_bound"] = bound
    return out


def run_selection_experiment(
    data: Battles | PairCounts | None = None,
    *,
    n_models: int | None = None,
    fit: str | None = None,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    init: int = 100,
    steps: Sequence[int] = DEFAULT_STEPS,
    grid: int = DEFAULT_GRID,
    seeds: int = 5,
    batch: int = 1,
    rater: str = "m-elo",
    spread: float = DEFAULT_SPREAD,
    rule: OutcomeRule = "paper",
    estimate: Estimate = "empirical-bayes",
    baseline: str = "random",
    seed: int = 0,
    workers: int = 1,
    bound_seeds: int = 0,
    progress: Callable[[str, int], None] | None = None,
) -> SelectionExperiment:
    """Run the selection experiment: replay ``data``, simulate from a ``fit`` of it
    ("rao-kupper" or "davidson"; :func:`fitted_arena`), or simulate ``n_models``.

    ``estimate``: the design estimate of the strategies that take one (a-opt, d-opt, rank-opt;
    see :class:`~stablearena.design.selection.InformationTracker`). ``grid``: selected battles between
    two points of the curves (battles-to-target). ``baseline``: the strategy the paired
    differences and battles-to-target refer to. ``workers``: processes running seeds in parallel
    (the figures do not depend on it). ``bound_seeds``: for that many seeds of a simulated arena,
    also compute :meth:`RankingAsymptotics.best_allocation` and
    :meth:`~RankingAsymptotics.least_battles` (seconds to minutes per seed). ``progress(strategy, seed)`` is called after each run
    (after each seed's last strategy when ``workers > 1``).
    """
    if (data is None) == (n_models is None):
        raise InputError(
            "give either a battle log (replay or fitted mode) or n_models (simulation mode)."
        )
    if fit is not None and data is None:
        raise InputError("fit= simulates from a model fitted to a battle log: give the log too.")
    if not strategies:
        raise InputError("name at least one strategy.")
    check_estimate(estimate)
    for name in strategies:
        _selector(name, estimate)
    step_list = tuple(sorted({int(s) for s in steps}))
    if not step_list or step_list[0] < 1:
        raise InputError(f"steps must be positive integers, got {list(steps)}.")
    if seeds < 1 or init < 0 or batch < 1:
        raise InputError("seeds and batch must be at least 1, init at least 0.")
    if grid < 1:
        raise InputError(f"grid must be a positive number of battles, not {grid}.")
    if workers < 1:
        raise InputError(f"workers must be at least 1, not {workers}.")
    if n_models is not None and n_models < 2:
        raise InputError("simulation mode needs at least two models.")
    if not (np.isfinite(spread) and spread >= 0):
        raise InputError("spread must be a finite non-negative number of Elo points.")
    n_steps = step_list[-1]
    curve_steps = tuple(sorted({0, *range(grid, n_steps + 1, grid), *step_list}))
    settings: dict[str, Any] = {}
    arena: Arena | None = None
    if data is not None and fit is not None:
        arena, desc = fitted_arena(data, fit)
        settings.update(mode="fitted", source=getattr(data, "source", None), fit=desc)
        settings["ground_truth"] = f"scores of the {fit} model fitted to the log"
    elif data is not None:
        replay = ReplayArena(data)
        arena = replay
        settings.update(mode="replay", source=replay.source)
        settings["n_battles_in_log"] = int(replay.remaining.sum())
        settings["ground_truth"] = "m-ELO on the full log"
    else:
        settings.update(mode="simulation", spread=spread, rule=rule)
        settings["ground_truth"] = "true ratings, drawn per seed"
    m = arena.n_models if arena is not None else int(n_models)  # type: ignore[arg-type]
    jobs = [
        _SeedJob(
            sd,
            seed,
            tuple(strategies),
            step_list,
            curve_steps,
            init,
            batch,
            rater,
            estimate,
            arena,
            m,
            spread,
            rule,
            sd < bound_seeds,
            baseline,
        )
        for sd in range(seeds)
    ]
    per_seed: list[dict[str, Any]] = []
    if workers == 1 or seeds == 1:
        for job in jobs:
            per_seed.append(_run_seed(job))
            if progress is not None:
                for name in strategies:
                    progress(name, job.sd)
    else:
        with ProcessPoolExecutor(
            max_workers=min(workers, seeds, os.cpu_count() or 1),
            initializer=exit_with_parent,  # no orphan left computing when the command is killed
            initargs=(os.getpid(),),
        ) as pool:
            for job, res in zip(jobs, pool.map(_run_seed, jobs), strict=True):
                per_seed.append(res)
                if progress is not None:
                    for name in strategies:
                        progress(name, job.sd)
    idx = [curve_steps.index(s) for s in step_list]

    def stack(name: str, key: str) -> np.ndarray:
        return np.array([r[name][key] for r in per_seed])

    curves = {s: stack(s, "curve") for s in strategies}
    expected = {s: stack(s, "expected") for s in strategies}
    if np.isnan(next(iter(expected.values()))).all():
        expected = {}
    settings.update(
        n_models=m,
        init=init,
        steps=list(step_list),
        grid=grid,
        seeds=seeds,
        batch=batch,
        rater=rater,
        estimate=estimate,
        baseline=baseline if baseline in strategies else None,
        outcomes="common random numbers: the k-th battle of a pair has the same outcome for "
        "every strategy of a seed",
        seed=seed,
        units="natural log-odds (multiply A-Info and D-Info by C² = (ln10/400)² for Elo points)",
    )
    return SelectionExperiment(
        strategies=tuple(strategies),
        steps=step_list,
        pairwise={s: curves[s][:, idx] for s in strategies},
        a_info={s: stack(s, "a_info") for s in strategies},
        d_info={s: stack(s, "d_info") for s in strategies},
        choices={s: stack(s, "choices").sum(axis=0) for s in strategies},
        info_at_start=stack(strategies[0], "start"),
        curve_steps=curve_steps,
        curves=curves,
        baseline=baseline if baseline in strategies else None,
        expected=expected,
        bound=[r["_bound"] for r in per_seed if "_bound" in r],
        settings=settings,
        exhausted={s: int(stack(s, "exhausted").sum()) for s in strategies},
        warm_up={s: int(stack(s, "warm_up").sum()) for s in strategies},
        seconds={s: float(stack(s, "seconds").sum()) for s in strategies},
    )


def selection_figure(result: SelectionExperiment) -> Figure:
    """The experiment as one matplotlib figure, every panel filled.

    Top row: the pairwise metric against selected battles (seed mean ± standard error, the
    target as a dashed line, each strategy's battles-to-target marked on it); the paired
    difference from the baseline (seed mean ± standard error); battles-to-target per strategy
    (bars with the bootstrap 95% interval; hatched when the target is not reached); A-Info and
    D-Info of the chosen battles at the ground truth (seed mean ± sd). Bottom row: how often each
    pair was chosen, one heatmap per strategy (models ordered by true strength). Without a
    baseline the two baseline panels are left out (not drawn empty).
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    names = result.strategies
    colours = matplotlib.colormaps["tab10"].colors
    colour = {name: colours[k % len(colours)] for k, name in enumerate(names)}
    base = result.baseline
    top = (
        ["pairwise", "a_info", "d_info"]
        if base is None
        else ["pairwise", "paired", "target", "a_info", "d_info"]
    )
    ncol = max(len(top), len(names))
    fig = Figure(figsize=(3.6 * ncol, 7.6), layout="constrained")
    upper, lower = fig.subfigures(2, 1, height_ratios=[1.0, 1.0])
    axes = upper.subplots(1, len(top), squeeze=False)[0]
    x = np.array(result.curve_steps)
    n = result.n_seeds
    target = result.target()
    reach = {name: result.battles_to_target(name) for name in names} if base else {}
    for ax, kind in zip(axes, top, strict=True):
        if kind == "pairwise":
            for name in names:
                arr = result.curves[name]
                mu = arr.mean(axis=0)
                se = arr.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.zeros_like(mu)
                ax.plot(x, mu, color=colour[name], lw=1.4, label=name)
                ax.fill_between(x, mu - se, mu + se, color=colour[name], alpha=0.15, lw=0)
                hit = reach.get(name)
                if target is not None and hit and hit["battles"] is not None:
                    ax.plot([hit["battles"]], [target], "o", color=colour[name], ms=4)
            if target is not None:
                ax.axhline(target, color="0.3", ls="--", lw=0.8)
            ax.set_ylabel("pairwise metric (seed mean ± SE)", fontsize=8)
            ax.set_title("pairwise metric vs ground truth", fontsize=9)
            ax.legend(fontsize=7, loc="lower right")
        elif kind == "paired":
            for name in names:
                if name == base:
                    continue
                d = result.curves[name] - result.curves[base]  # type: ignore[index]
                mu = d.mean(axis=0)
                se = d.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.zeros_like(mu)
                ax.plot(x, mu, color=colour[name], lw=1.4, label=name)
                ax.fill_between(x, mu - se, mu + se, color=colour[name], alpha=0.15, lw=0)
            ax.axhline(0.0, color=colour[base], lw=1.0)  # type: ignore[index]
            ax.set_ylabel(f"pairwise − {base} (paired, mean ± SE)", fontsize=8)
            ax.set_title(f"paired difference from {base}", fontsize=9)
        elif kind == "target":
            last = result.curve_steps[-1]
            ypos = np.arange(len(names))
            for k, name in enumerate(names):
                hit = reach[name]
                val = hit["battles"]
                ax.barh(
                    k,
                    last if val is None else val,
                    color=colour[name],
                    alpha=0.35 if val is None else 0.8,
                    hatch="//" if val is None else None,
                )
                lo = hit["low"] if hit["low"] is not None else last
                hi = hit["high"] if hit["high"] is not None else last
                centre = last if val is None else val
                ax.errorbar(
                    centre,
                    k,
                    xerr=[[max(centre - lo, 0.0)], [max(hi - centre, 0.0)]],
                    color="0.2",
                    capsize=3,
                    lw=0.9,
                )
                label = f"> {last}" if val is None else f"{val:.0f} ({val / last:.0%})"
                ax.text(last * 1.02, k, label, va="center", fontsize=7)
            ax.axvline(last * 2 / 3, color="0.5", ls=":", lw=0.8)
            ax.set_yticks(ypos, names, fontsize=8)
            ax.set_xlim(0, last * 1.35)
            ax.invert_yaxis()
            ax.set_title(f"battles to reach {base}'s last-step metric", fontsize=9)
        else:
            label = "A-Info" if kind == "a_info" else "D-Info"
            xs = np.array(result.steps)
            for name in names:
                arr = getattr(result, kind)[name]
                ax.errorbar(
                    xs,
                    arr.mean(axis=0),
                    yerr=arr.std(axis=0),
                    marker="o",
                    ms=3,
                    capsize=2,
                    color=colour[name],
                    label=name,
                )
            ax.set_ylabel(f"{label} at the truth (mean ± sd)", fontsize=8)
            ax.set_title(f"{label} of the chosen battles", fontsize=9)
        ax.set_xlabel("selected battles", fontsize=8)
        ax.tick_params(labelsize=7)
    hax = lower.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(hax, names, strict=True):
        im = ax.imshow(result.choices[name], cmap="viridis", interpolation="nearest")
        ax.set_title(f"{name}: pair choices", fontsize=9)
        ax.set_xlabel("model (by true strength)", fontsize=8)
        ax.set_ylabel("model (by true strength)", fontsize=8)
        ax.tick_params(labelsize=7)
        lower.colorbar(im, ax=ax, fraction=0.046)
    s = result.settings
    what = f"{s.get('source')}, " if s.get("source") else ""
    fig.suptitle(
        f"pair selection, {s.get('mode')} mode: {what}{s.get('n_models')} models, init "
        f"{s.get('init')}, {s.get('seeds')} seeds paired by seed, batch {s.get('batch')}, "
        f"rater {s.get('rater')}",
        fontsize=10,
    )
    return fig


def plot_selection_experiment(result: SelectionExperiment, path: str | Path) -> Path:
    """Write :func:`selection_figure` to ``path`` (PNG, SVG or PDF by its suffix)."""
    fig = selection_figure(result)
    out = Path(path)
    fig.savefig(out, dpi=100)
    return out


def _sandwich(
    m: int, i: np.ndarray, j: np.ndarray, n: np.ndarray, sens: np.ndarray, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For ``n`` battles of the (connected) pairs (i, j) with per-battle sensitivity ``sens``
    and score variance ``var``: A = H⁺, C = A B A (the sandwich covariance) and the variance of
    each listed pair's difference."""
    from ...raters.information import laplacian, laplacian_pinv

    a = laplacian_pinv(laplacian(m, i, j, n * sens))
    c = a @ laplacian(m, i, j, n * var) @ a
    d = np.diag(c)
    return a, c, np.maximum(d[i] + d[j] - 2.0 * c[i, j], 1e-300)


# ---------------------------------------------------------------------------------------------
# the normal approximation of the ranking's errors (a low-noise view, and what no design can beat)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankingAsymptotics:
    """Normal approximation of the errors of the m-ELO ranking in a simulated arena.

    Under the arena's outcome law a battle of (i, j) scores W ∈ {0, ½, 1} with mean e_ij and
    variance v_ij (annotators mixed in). m-ELO (Bradley–Terry, ties as half) converges to the
    limit x̄ that solves its likelihood equations at the expected scores (on a balanced design;
    x̄ is the truth itself when the arena is a Bradley–Terry one), and with n_ij battles per pair
    its covariance is the sandwich Σ(n) = H⁺ B H⁺, H = Σ n_ij h_ij u uᵀ, h_ij = p̄_ij (1 − p̄_ij),
    p̄_ij = σ(x̄_i − x̄_j), B = Σ n_ij v_ij u uᵀ, u = e_i − e_j (docs/methods/uncertainty.md). The expected pairwise
    metric of an allocation is then

        E[pairwise](n) = 1 − mean_{i<j} Φ(−s_ij (x̄_i − x̄_j) / σ_ij(n)),

    s_ij the sign of the true gap (a pair in different components of the comparison graph
    counts ½). It depends on the outcomes only through n, so it measures a design without the
    noise of the realized metric. :meth:`best_allocation` minimises it over every allocation of a
    number of battles to pairs with the truth known — a bound, in this approximation, on what
    any selection strategy can reach.
    """

    truth: np.ndarray
    limit: np.ndarray
    sens: np.ndarray
    var: np.ndarray

    @classmethod
    def of(cls, arena: SimulatedArena) -> RankingAsymptotics:
        from ...raters.bradley_terry import solve_bradley_terry

        m = arena.n_models
        pa, pb = arena.outcome_matrices()
        # i as model_a or as model_b, equally often
        win = 0.5 * (pa + pb.T)
        tie = 1.0 - 0.5 * (pa + pb) - 0.5 * (pa.T + pb.T)
        e = win + 0.5 * tie
        v = win + 0.25 * tie - e * e
        iu, ju = np.triu_indices(m, 1)
        sol = solve_bradley_terry(m, iu, ju, np.ones(len(iu)), e[iu, ju])
        x = sol.x - sol.x.mean()
        p = 1.0 / (1.0 + np.exp(-(x[:, None] - x[None, :])))
        return cls(truth=arena.truth(), limit=x, sens=p * (1.0 - p), var=np.maximum(v, 0.0))

    @property
    def n_models(self) -> int:
        return len(self.limit)

    def _pairs(self) -> tuple[np.ndarray, np.ndarray]:
        return np.triu_indices(self.n_models, 1)

    def _gap(self) -> np.ndarray:
        iu, ju = self._pairs()
        return np.sign(self.truth[iu] - self.truth[ju]) * (self.limit[iu] - self.limit[ju])

    def _parts(self, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A = H⁺, C = A B A and the pair variances σ² (vector over i < j) for connected n."""
        iu, ju = self._pairs()
        return _sandwich(self.n_models, iu, ju, n, self.sens[iu, ju], self.var[iu, ju])

    def expected_pairwise(self, pair_battles: np.ndarray) -> float:
        """E[pairwise] of the battles ``pair_battles`` (m×m, symmetric, counts per pair)."""
        from scipy.stats import norm

        from ...data.graph import components

        iu, ju = self._pairs()
        m = self.n_models
        n = np.asarray(pair_battles, dtype=float)[iu, ju]
        labels = components(m, iu[n > 0], ju[n > 0])
        gap = self._gap()
        out = np.full(len(iu), 0.5)
        for g in range(int(labels.max()) + 1):
            idx = np.flatnonzero(labels == g)
            if len(idx) < 2:
                continue
            pos = np.full(m, -1)
            pos[idx] = np.arange(len(idx))
            keep = (labels[iu] == g) & (labels[ju] == g)
            i, j = iu[keep], ju[keep]
            *_, v = _sandwich(len(idx), pos[i], pos[j], n[keep], self.sens[i, j], self.var[i, j])
            out[keep] = norm.cdf(-gap[keep] / np.sqrt(v))
        return float(1.0 - out.mean())

    def _objective(self, n: np.ndarray) -> tuple[float, np.ndarray]:
        """Σ_{i<j} Φ(−g_ij/σ_ij) and its gradient in n (vector over i < j).

        With A = H⁺, C = A B A and L_c = Σ c_ij u uᵀ, c_ij = ∂Φ/∂σ² = φ(z) z/(2σ²), z = g/σ:
        ∂/∂n_k = −2 h_k u_kᵀ A L_c C u_k + v_k u_kᵀ A L_c A u_k.
        """
        from scipy.stats import norm

        from ...raters.information import laplacian

        iu, ju = self._pairs()
        a, c, var = self._parts(n)
        z = self._gap() / np.sqrt(var)
        cw = norm.pdf(z) * z / (2.0 * var)
        lc = laplacian(self.n_models, iu, ju, cw)
        m1 = a @ lc @ c
        m2 = a @ lc @ a

        def quad(mat: np.ndarray) -> np.ndarray:
            return mat[iu, iu] + mat[ju, ju] - mat[iu, ju] - mat[ju, iu]

        grad = -2.0 * self.sens[iu, ju] * quad(m1) + self.var[iu, ju] * quad(m2)
        return float(norm.cdf(-z).sum()), grad

    def uniform_pairwise(self, total: float) -> float:
        """E[pairwise] when ``total`` battles are spread evenly over all pairs (what uniformly
        random pairs give on average, to first order)."""
        iu, _ = self._pairs()
        f, _ = self._objective(np.full(len(iu), total / len(iu)))
        return 1.0 - f / len(iu)

    def best_allocation(self, total: float, max_iter: int = 2000) -> tuple[float, np.ndarray]:
        """The largest E[pairwise] of any allocation of ``total`` battles (continuous counts,
        found by L-BFGS over a softmax parameterisation from the even allocation), and that
        allocation as an m×m matrix."""
        from scipy.optimize import minimize

        iu, ju = self._pairs()
        k = len(iu)

        def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
            w = np.exp(theta - theta.max())
            share = w / w.sum()
            f, g = self._objective(total * share)
            gn = total * g
            return f, share * (gn - float(share @ gn))

        from ..._threads import single_threaded_blas

        with single_threaded_blas():  # small dense products: one thread is 20× faster under load
            res = minimize(
                fun, np.zeros(k), jac=True, method="L-BFGS-B", options={"maxiter": max_iter}
            )
        w = np.exp(res.x - res.x.max())
        n = total * w / w.sum()
        alloc = np.zeros((self.n_models, self.n_models))
        alloc[iu, ju] = n
        return 1.0 - float(res.fun) / k, alloc + alloc.T

    def least_battles(self, target: float, upper: float, tol: float = 0.01) -> float | None:
        """Fewest battles (to relative ``tol``) whose best allocation reaches E[pairwise]
        ``target``, searched below ``upper``; ``None`` when even ``upper`` battles cannot."""
        if self.best_allocation(upper)[0] < target:
            return None
        lo, hi = 0.0, float(upper)
        while hi - lo > tol * upper:
            mid = 0.5 * (lo + hi)
            if mid > 0 and self.best_allocation(mid)[0] >= target:
                hi = mid
            else:
                lo = mid
        return hi
