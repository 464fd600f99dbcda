"""The pair-selection experiment of "Fewer Battles, More Gain" (Table 2 protocol, SPEC §5).

For each seed: start from ``init`` random battles (the same ones for every strategy); then each
strategy picks pairs (one at a time, or ``batch`` at a time), the ratings being refitted after
each pick or batch; at each recorded step the ranking is scored against the ground truth with
the pairwise metric (SPEC §6), and the information the chosen battles carry is measured at the
ground truth with A-Info = 1/(2 tr I⁺) and D-Info = det(I_grounded)^(1/(N−1))
(:func:`stablearena.selection.a_info`, :func:`~stablearena.selection.d_info`; natural units).

- "replay" mode (a battle log or pair counts): outcomes are drawn without replacement from each
  pair's real battles; the ground truth is m-ELO on the full log. The initial battles are drawn
  uniformly from the log.
- "simulation" mode (``n_models``): each seed draws true Elo-scale ratings
  (:func:`stablearena.simulate.random_ratings`, standard deviation ``spread``) and judges by
  SPEC §5's rule; the initial battles are uniformly random pairs.

Within a seed every strategy starts from the same initial battles and plays with *common random
numbers*: the k-th battle of a pair has the same outcome whichever strategy plays it
(:func:`stablearena.arena.run_arena`, ``outcome_seed``), so the differences between strategies
come from the pairs they choose, not from the luck of the draws. Each strategy's own random
choices come from a stream keyed by its name.

``mean`` is the pairwise metric averaged over seeds and recorded steps (the paper's Table 2
figure). The growth of A-Info and D-Info is summarised as the information added per selected
battle from the shared start to the last step (seed mean); ``max_model_share_over_median`` is
the anchor-bias measure (how much more the most-chosen model battled than the median model).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..arena import Arena, ReplayArena, SimulatedArena, run_arena
from ..battles import Battles, PairCounts
from ..errors import InputError
from ..information import bt_information
from ..metrics import pairwise_agreement
from ..selection import Estimate, Selector, a_info, check_estimate, d_info, get_selector
from ..simulate import OutcomeRule, random_ratings

__all__ = [
    "DEFAULT_STRATEGIES",
    "DEFAULT_STEPS",
    "SelectionExperiment",
    "run_selection_experiment",
    "plot_selection_experiment",
]

DEFAULT_STRATEGIES: tuple[str, ...] = ("random", "nearest", "ada-pair", "a-opt", "d-opt")
DEFAULT_STEPS: tuple[int, ...] = (100, 200, 500, 1000)
#: Standard deviation of simulated true ratings, Elo points.
DEFAULT_SPREAD: float = 100.0


@dataclass(frozen=True)
class SelectionExperiment:
    """Result of :func:`run_selection_experiment`.

    Attributes:
        pairwise, a_info, d_info: ``{strategy: array (seeds, steps)}``.
        steps: the recorded steps (number of selected battles after the initial ones).
        choices: ``{strategy: (m, m) array}`` — how often each pair was chosen, summed over
            seeds, rows and columns ordered by true strength (best first).
        info_at_start: ``(seeds, 2)`` A-Info and D-Info of the initial battles.
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
    settings: dict[str, Any] = field(default_factory=dict)
    exhausted: dict[str, int] = field(default_factory=dict)
    warm_up: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def mean_pairwise(self, strategy: str) -> float:
        return float(self.pairwise[strategy].mean())

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
        "mean": float}}, "settings": …, "summary": …}`` (the issue's JSON, plus settings and a
        summary of growth rates)."""

        def per_step(arr: np.ndarray) -> dict[str, list[float]]:
            return {str(s): [float(v) for v in arr[:, k]] for k, s in enumerate(self.steps)}

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
            "settings": dict(self.settings),
            "summary": {
                name: {
                    "mean_pairwise": self.mean_pairwise(name),
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


def _info_at(truth: np.ndarray, pair_battles: np.ndarray) -> tuple[float, float]:
    iu, ju = np.nonzero(np.triu(pair_battles, 1))
    info = bt_information(truth, iu, ju, pair_battles[iu, ju])
    return a_info(info), d_info(info)


def run_selection_experiment(
    data: Battles | PairCounts | None = None,
    *,
    n_models: int | None = None,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    init: int = 100,
    steps: Sequence[int] = DEFAULT_STEPS,
    seeds: int = 5,
    batch: int = 1,
    rater: str = "m-elo",
    spread: float = DEFAULT_SPREAD,
    rule: OutcomeRule = "paper",
    estimate: Estimate = "empirical-bayes",
    seed: int = 0,
    progress: Callable[[str, int], None] | None = None,
) -> SelectionExperiment:
    """Run the selection experiment in replay mode (``data``) or simulation mode (``n_models``).

    ``estimate``: the design estimate of the strategies that take one (a-opt, d-opt; see
    :class:`~stablearena.selection.InformationTracker`). ``progress(strategy, seed)`` is called
    after each run.
    """
    if (data is None) == (n_models is None):
        raise InputError("give either a battle log (replay mode) or n_models (simulation mode).")
    if not strategies:
        raise InputError("name at least one strategy.")
    check_estimate(estimate)

    def selector(name: str) -> Selector:
        cls = type(get_selector(name))  # unknown names fail here, before any work
        takes = "estimate" in {f.name for f in fields(cls)}
        return get_selector(name, estimate=estimate) if takes else get_selector(name)

    for name in strategies:
        selector(name)
    step_list = tuple(sorted({int(s) for s in steps}))
    if not step_list or step_list[0] < 1:
        raise InputError(f"steps must be positive integers, got {list(steps)}.")
    if seeds < 1 or init < 0 or batch < 1:
        raise InputError("seeds and batch must be at least 1, init at least 0.")
    if n_models is not None and n_models < 2:
        raise InputError("simulation mode needs at least two models.")
    if not (np.isfinite(spread) and spread >= 0):
        raise InputError("spread must be a finite non-negative number of Elo points.")
    n_steps = step_list[-1]
    replay = ReplayArena(data) if data is not None else None
    m = replay.n_models if replay is not None else int(n_models)  # type: ignore[arg-type]
    shape = (seeds, len(step_list))
    pw = {s: np.zeros(shape) for s in strategies}
    ai = {s: np.zeros(shape) for s in strategies}
    di = {s: np.zeros(shape) for s in strategies}
    choices = {s: np.zeros((m, m)) for s in strategies}
    start_info = np.zeros((seeds, 2))
    exhausted = dict.fromkeys(strategies, 0)
    warm = dict.fromkeys(strategies, 0)
    seconds = dict.fromkeys(strategies, 0.0)
    for sd in range(seeds):
        arena: Arena
        if replay is not None:
            arena = replay
        else:
            ratings = random_ratings(m, spread=spread, seed=np.random.default_rng([seed, sd, 1]))
            arena = SimulatedArena(ratings, rule=rule)
        truth = arena.truth()
        rank = np.empty(m, dtype=np.int64)
        rank[np.argsort(-truth, kind="stable")] = np.arange(m)
        for name in strategies:
            tick = time.perf_counter()
            run = run_arena(
                arena,
                selector(name),
                n_steps,
                init=init,
                batch=batch,
                rater=rater,
                record=(0, *step_list),
                # the same initial battles for every strategy of a seed, and the same outcome for
                # the k-th battle of a pair (common random numbers); the strategy's own stream
                # (keyed by its name, so that the list of strategies does not change it) for
                # its random choices
                init_seed=np.random.default_rng([seed, sd, 2]),
                outcome_seed=[seed, sd, 4],
                seed=np.random.default_rng([seed, sd, 3, zlib.crc32(name.encode())]),
            )
            seconds[name] += time.perf_counter() - tick
            exhausted[name] += run.exhausted
            warm[name] += run.warm_up
            start_info[sd] = _info_at(truth, run.snapshots[0].pair_battles)
            for c, s in enumerate(step_list):
                snap = run.snapshots[s]
                pw[name][sd, c] = pairwise_agreement(truth, snap.scores)
                ai[name][sd, c], di[name][sd, c] = _info_at(truth, snap.pair_battles)
            ch = run.choices + run.choices.T
            choices[name] += ch[np.ix_(np.argsort(rank), np.argsort(rank))]
            if progress is not None:
                progress(name, sd)
    settings: dict[str, Any] = {
        "mode": "replay" if replay is not None else "simulation",
        "n_models": m,
        "init": init,
        "steps": list(step_list),
        "seeds": seeds,
        "batch": batch,
        "rater": rater,
        "estimate": estimate,
        "outcomes": "common random numbers: the k-th battle of a pair has the same outcome for "
        "every strategy of a seed",
        "seed": seed,
        "units": "natural log-odds (multiply A-Info and D-Info by C² = (ln10/400)² for Elo points)",
    }
    if replay is not None:
        settings["source"] = replay.source
        settings["n_battles_in_log"] = int(replay.remaining.sum())
        settings["ground_truth"] = "m-ELO on the full log"
    else:
        settings["spread"] = spread
        settings["rule"] = rule
        settings["ground_truth"] = "true ratings, drawn per seed"
    return SelectionExperiment(
        strategies=tuple(strategies),
        steps=step_list,
        pairwise=pw,
        a_info=ai,
        d_info=di,
        choices=choices,
        info_at_start=start_info,
        settings=settings,
        exhausted=exhausted,
        warm_up=warm,
        seconds=seconds,
    )


def plot_selection_experiment(result: SelectionExperiment, path: str | Path) -> Path:
    """PNG: pairwise / A-Info / D-Info against selected battles (seed mean ± sd), and a heatmap
    per strategy of how often each pair was chosen (models ordered by true strength)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = result.strategies
    ncol = max(3, len(names))
    fig, axes = plt.subplots(2, ncol, figsize=(3.6 * ncol, 7.2), squeeze=False)
    x = np.array(result.steps)
    for ax, (key, label) in zip(
        axes[0],
        (("pairwise", "pairwise metric"), ("a_info", "A-Info"), ("d_info", "D-Info")),
        strict=False,
    ):
        for name in names:
            arr = getattr(result, key)[name]
            mu, sd = arr.mean(axis=0), arr.std(axis=0)
            ax.errorbar(x, mu, yerr=sd, marker="o", ms=3, capsize=2, label=name)
        ax.set_xlabel("selected battles")
        ax.set_title(label)
    axes[0][0].legend(fontsize=7)
    for ax in axes[0][3:]:
        ax.axis("off")
    for ax, name in zip(axes[1], names, strict=False):
        im = ax.imshow(result.choices[name], cmap="viridis", interpolation="nearest")
        ax.set_title(f"{name}: pair choices", fontsize=9)
        ax.set_xlabel("model (by true strength)")
        ax.set_ylabel("model (by true strength)")
        fig.colorbar(im, ax=ax, fraction=0.046)
    for ax in axes[1][len(names) :]:
        ax.axis("off")
    s = result.settings
    fig.suptitle(
        f"pair selection, {s.get('mode')} mode, {s.get('n_models')} models, init {s.get('init')}, "
        f"{s.get('seeds')} seeds, batch {s.get('batch')}, rater {s.get('rater')}",
        fontsize=10,
    )
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
