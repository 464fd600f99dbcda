"""The arena simulator: a selector picks pairs, an arena judges them, a rater refits (docs/methods/selection.md).

Two kinds of arena serve outcomes:

- :class:`SimulatedArena` ("simulation" mode): models of known strength. By default the outcome rule of
  docs/methods/selection.md (Fewer Battles App. C.2, reconstructed): with p = σ(C (r_i − r_j)), i wins with
  probability p², loses with (1 − p)², ties with 2p(1 − p) — the expected score is p. Annotator
  profiles (abilities θ_k, docs/methods/annotators.md) scale the log-odds by θ_k. :meth:`SimulatedArena.from_fitted`
  simulates from any fitted rater's own model instead — for a Rao–Kupper or Davidson fit with its
  own ties (``rule="model"``), optionally with annotator abilities (e.g. from am-ELO).
- :class:`ReplayArena` ("replay" mode): each chosen pair's outcome is drawn without replacement
  from that pair's real battles (a battle log or pair counts). When a pair's battles run out,
  :meth:`ReplayArena.play` returns ``None``; :func:`run_arena` then tells the selector (the
  pair is blocked in its :class:`~stablearena.design.selection.InformationTracker`) and it picks again.

:func:`run_arena` runs the loop: random initial battles, then the selector picks (one pair, or a
batch of K), the arena judges, and the ratings are refitted after each batch — m-ELO by exact
warm-started Newton (:func:`~stablearena.raters.bradley_terry.solve_bradley_terry`), online Elo
(``rater="elo"``) or any registered rater.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.special import logit

from .._threads import single_threaded_blas
from ..data.battles import Battles, Outcome, PairCounts, as_counts
from ..data.simulate import OUTCOME_RULES, OutcomeRule, outcome_probabilities, sample_outcomes
from ..design.selection import InformationTracker, Selector, get_selector
from ..errors import InputError, StableArenaWarning
from ..raters.base import DEFAULT_OFFSET, ELO_SCALE
from ..raters.refit import Refitter

__all__ = [
    "Arena",
    "SimulatedArena",
    "ReplayArena",
    "Refitter",
    "Snapshot",
    "ArenaRun",
    "run_arena",
]

# outcome codes seen from the other model: A <-> B, ties unchanged
_SWAP = np.array([Outcome.B, Outcome.A, Outcome.TIE, Outcome.TIE_BOTH_BAD], dtype=np.int8)


class Arena(ABC):
    """Serves outcomes for chosen pairs. ``models`` names the models (indices 0..m−1)."""

    models: tuple[str, ...]

    @property
    def n_models(self) -> int:
        return len(self.models)

    @abstractmethod
    def play(self, i: int, j: int, rng: np.random.Generator) -> int | None:
        """One battle of model i (as model_a) against j: an :class:`Outcome` code, or ``None``
        when the pair cannot be played (its real battles ran out)."""

    @abstractmethod
    def random_battles(
        self, n: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``n`` random battles (the protocol's initial ones): ``(model_a, model_b, outcome)``."""

    def available(self) -> np.ndarray | None:
        """m×m mask of pairs that can still be played (``None``: every pair, always)."""
        return None

    def copy(self) -> Arena:
        """An independent arena in the same state (a replay consumes its battles)."""
        return self

    def truth(self) -> np.ndarray:
        """Ground-truth scores (natural units, mean zero) the experiment scores rankings against."""
        raise NotImplementedError


class SimulatedArena(Arena):
    """Models of known strength judged by the outcome rule of docs/methods/selection.md (or another rule).

    Args:
        true_ratings: Elo-scale ratings (C = ln10/400 per point).
        models: names (default ``model_000``…).
        rule: ``"paper"`` (default; ties with probability 2p(1 − p)), ``"bt"`` (no ties),
            ``"davidson"`` or ``"rao-kupper"`` with ``eta``
            (:func:`stablearena.data.simulate.sample_outcomes`).
        abilities, annotator_probs: optional annotator profiles — θ_k on the mean-1 scale and how
            often each judges; the log-odds of a battle judged by k are θ_k C (r_i − r_j).
    """

    def __init__(
        self,
        true_ratings: Sequence[float] | np.ndarray,
        *,
        models: Sequence[str] | None = None,
        rule: OutcomeRule = "paper",
        eta: float = 0.0,
        abilities: Sequence[float] | np.ndarray | None = None,
        annotator_probs: Sequence[float] | np.ndarray | None = None,
    ) -> None:
        r = np.asarray(true_ratings, dtype=float)
        if r.ndim != 1 or len(r) < 2 or not np.all(np.isfinite(r)):
            raise InputError("true_ratings must be at least two finite numbers.")
        if rule not in OUTCOME_RULES:
            raise InputError(
                f"outcome rule must be one of {', '.join(OUTCOME_RULES)}, not {rule!r}."
            )
        if rule == "rao-kupper" and not eta >= 0:
            raise InputError(f"the Rao–Kupper tie parameter eta must be >= 0, not {eta!r}.")
        self.models = (
            tuple(models) if models is not None else tuple(f"model_{k:03d}" for k in range(len(r)))
        )
        if len(self.models) != len(r):
            raise InputError(f"{len(self.models)} model names for {len(r)} ratings.")
        self.true_ratings = r
        self.rule = rule
        self.eta = float(eta)
        self._logodds: np.ndarray | None = None
        self.abilities = None if abilities is None else np.asarray(abilities, dtype=float)
        self.annotator_probs = None
        if self.abilities is not None:
            if (
                self.abilities.ndim != 1
                or len(self.abilities) == 0
                or not np.all(np.isfinite(self.abilities))
            ):
                raise InputError("abilities must be a non-empty list of finite numbers.")
            if annotator_probs is not None:
                p = np.asarray(annotator_probs, dtype=float)
                if p.shape != self.abilities.shape or np.any(p < 0) or not p.sum() > 0:
                    raise InputError(
                        "annotator_probs must give one non-negative weight per annotator."
                    )
                self.annotator_probs = p / p.sum()

    @classmethod
    def from_fitted(
        cls,
        fitted: Any,
        *,
        rule: OutcomeRule | Literal["model"] = "paper",
        eta: float = 0.0,
        abilities: Sequence[float] | np.ndarray | None = None,
        annotator_probs: Sequence[float] | np.ndarray | None = None,
    ) -> SimulatedArena:
        """Simulate from a fitted rater's own model.

        ``rule="model"``: a single-η Rao–Kupper or Davidson fit (docs/methods/ties.md) judges with its own
        win, loss and tie probabilities: the log-odds of (i, j) are z = x_i − x_j (its scores)
        and its fitted η decides the ties. Any other ``rule``: the log-odds are
        logit(fitted.predict(i, j)) (the model's expected score, so any rater works), judged by
        that rule. ``abilities`` / ``annotator_probs``: annotator profiles as in the constructor
        (a battle judged by k has log-odds θ_k z). The ground truth is the fitted model's
        scores."""
        m = fitted.n_models
        if rule == "model":
            family = getattr(fitted, "family", None)
            fitted_eta = getattr(fitted, "eta", None)
            single = getattr(fitted, "k_tie", None) == 0 and getattr(fitted, "k_cov", 0) is None
            if family not in ("rao-kupper", "davidson") or fitted_eta is None or not single:
                raise InputError(
                    "rule='model' simulates from a single-η Rao–Kupper or Davidson fit (no "
                    "factored ties, no covariance); fit get_rater('rao-kupper') or "
                    "get_rater('davidson'), or pass an outcome rule ('paper', 'bt', …)."
                )
            x = np.asarray(fitted.scores, dtype=float)
            arena = cls(
                DEFAULT_OFFSET + (x - x.mean()) / ELO_SCALE,
                models=fitted.models,
                rule=family,
                eta=float(fitted_eta),
                abilities=abilities,
                annotator_probs=annotator_probs,
            )
            z = x[:, None] - x[None, :]
        else:
            e = np.clip(np.asarray(fitted.win_matrix(), dtype=float), 1e-12, 1 - 1e-12)
            arena = cls(
                np.asarray(fitted.ratings, dtype=float),
                models=fitted.models,
                rule=rule,
                eta=eta,
                abilities=abilities,
                annotator_probs=annotator_probs,
            )
            z = logit(e)
            np.fill_diagonal(z, 0.0)
        if z.shape != (m, m) or not np.all(np.isfinite(z)):
            raise InputError("the fitted model's win matrix is not a finite m×m matrix.")
        arena._logodds = z
        return arena

    def _z(self, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self._logodds is not None:
            z = self._logodds[a, b]
        else:
            z = ELO_SCALE * (self.true_ratings[a] - self.true_ratings[b])
        if self.abilities is not None:
            k = rng.choice(len(self.abilities), len(z), p=self.annotator_probs)
            z = z * self.abilities[k]
        return z

    def outcome_matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """m×m probabilities that model i (as model_a) beats j, and that j beats i — the rest is
        a tie — averaged over the annotators (weighted by how often each judges)."""
        m = self.n_models
        if self._logodds is not None:
            z = self._logodds
        else:
            z = ELO_SCALE * (self.true_ratings[:, None] - self.true_ratings[None, :])
        if self.abilities is None:
            return outcome_probabilities(z, self.rule, self.eta)
        probs = (
            self.annotator_probs
            if self.annotator_probs is not None
            else np.full(len(self.abilities), 1.0 / len(self.abilities))
        )
        pa, pb = np.zeros((m, m)), np.zeros((m, m))
        for theta, w in zip(self.abilities, probs, strict=True):
            a, b = outcome_probabilities(theta * z, self.rule, self.eta)
            pa += w * a
            pb += w * b
        return pa, pb

    def play(self, i: int, j: int, rng: np.random.Generator) -> int | None:
        z = self._z(np.array([i]), np.array([j]), rng)
        return int(sample_outcomes(z, rng, self.rule, self.eta)[0])

    def random_battles(
        self, n: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        m = self.n_models
        a = rng.integers(0, m, n)
        b = rng.integers(0, m - 1, n)
        b = b + (b >= a)
        return a, b, sample_outcomes(self._z(a, b, rng), rng, self.rule, self.eta)

    def truth(self) -> np.ndarray:
        if self._logodds is not None:
            # scores whose differences best match the model's log-odds (exact for BT models)
            x = self._logodds.mean(axis=1)
        else:
            x = ELO_SCALE * self.true_ratings
        return x - x.mean()


class ReplayArena(Arena):
    """Replays a real arena: each pair's outcomes are drawn without replacement from its battles.

    Args:
        data: a battle log or pair counts (counts must be whole numbers: a weighted log cannot be
            replayed battle by battle).
    """

    def __init__(self, data: Battles | PairCounts) -> None:
        c = as_counts(data)
        table = np.column_stack([c.wins, c.losses, c.ties, c.ties_both_bad])
        if len(c) == 0 or table.sum() == 0:
            raise InputError(f"{c.source}: there are no battles to replay.")
        if not np.all(table == np.round(table)):
            raise InputError(
                f"{c.source}: replay needs whole battle counts, but some counts are fractional "
                "(a weighted log?). Replay an unweighted log."
            )
        self.models = c.models
        self.source = c.source
        self.counts = c
        m = c.n_models
        self._row = np.full((m, m), -1, dtype=np.int64)
        self._row[c.i, c.j] = np.arange(len(c))
        self._row[c.j, c.i] = np.arange(len(c))
        self._i = c.i.astype(np.int64)
        self._j = c.j.astype(np.int64)
        self.remaining = table.astype(np.int64)
        self._truth: np.ndarray | None = None

    def copy(self) -> ReplayArena:
        new = object.__new__(ReplayArena)
        new.__dict__.update(self.__dict__)
        new.remaining = self.remaining.copy()
        return new

    def left(self, i: int, j: int) -> int:
        """Battles of pair (i, j) not yet served."""
        r = self._row[i, j]
        return 0 if r < 0 else int(self.remaining[r].sum())

    def available(self) -> np.ndarray:
        m = self.n_models
        out = np.zeros((m, m), dtype=bool)
        ok = self.remaining.sum(axis=1) > 0
        out[self._i[ok], self._j[ok]] = True
        out[self._j[ok], self._i[ok]] = True
        return out

    def play(self, i: int, j: int, rng: np.random.Generator) -> int | None:
        r = self._row[i, j]
        if r < 0:
            return None
        left = self.remaining[r]
        total = int(left.sum())
        if total == 0:
            return None
        u = int(rng.integers(total))
        code = int(np.searchsorted(np.cumsum(left), u, side="right"))
        left[code] -= 1
        # the table is from the smaller index's view; i plays as model_a
        return code if i < j else int(_SWAP[code])

    def random_battles(
        self, n: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        flat = self.remaining.ravel()
        total = int(flat.sum())
        if n > total:
            raise InputError(
                f"{self.source}: asked for {n} initial battles, only {total} are left."
            )
        draw = rng.multivariate_hypergeometric(flat, n) if n else np.zeros_like(flat)
        self.remaining -= draw.reshape(self.remaining.shape)
        cells = np.repeat(np.arange(len(flat)), draw)
        rng.shuffle(cells)
        rows, codes = np.divmod(cells, 4)
        return self._i[rows], self._j[rows], codes.astype(np.int8)

    def truth(self) -> np.ndarray:
        """m-ELO scores of the full log (the paper's ground truth in "dataset" mode)."""
        if self._truth is None:
            from ..raters.bradley_terry import MElo

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StableArenaWarning)
                self._truth = np.asarray(MElo().fit(self.counts).scores)
        return self._truth


# ---------------------------------------------------------------------------------------------
# the loop
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Snapshot:
    """The state after ``step`` selected battles: scores (natural units) and battles per pair."""

    step: int
    scores: np.ndarray
    pair_battles: np.ndarray


@dataclass(frozen=True)
class ArenaRun:
    """What :func:`run_arena` did.

    Attributes:
        models: model names.
        battles: every battle in order, the ``n_init`` initial ones first.
        n_init: number of initial random battles.
        choices: m×m counts of the pairs the selector chose (row = smaller index).
        snapshots: state at each recorded step.
        exhausted: how many picks found their pair out of battles and were re-picked.
        warm_up: how many picks were random warm-up picks.
        scores: final scores (natural units).
    """

    models: tuple[str, ...]
    battles: Battles
    n_init: int
    choices: np.ndarray
    snapshots: dict[int, Snapshot]
    exhausted: int
    warm_up: int
    scores: np.ndarray = field(repr=False)


def run_arena(
    arena: Arena,
    selector: Selector | str,
    n_battles: int,
    *,
    init: int = 100,
    batch: int = 1,
    rater: str = "m-elo",
    record: Iterable[int] = (),
    exclude_models: Iterable[int | str] = (),
    seed: int | np.random.Generator = 0,
    init_seed: int | np.random.Generator | None = None,
    rater_options: dict[str, Any] | None = None,
    outcome_seed: int | Sequence[int] | None = None,
) -> ArenaRun:
    """Run an arena: ``init`` random battles, then ``n_battles`` chosen by ``selector``.

    The selector is asked for ``batch`` pairs at a time (fewer to land exactly on a recorded
    step); after each batch the ratings are refitted (:class:`Refitter`) and the selector's
    information is refreshed from the counts. A pick whose pair is out of battles (replay) is
    blocked in the tracker and re-picked. ``exclude_models`` are never chosen (an outage). The
    arena passed in is not consumed (a copy is played). ``init_seed``, when given, draws the
    initial battles from its own stream (so that several runs can share them); everything
    else uses ``seed``.

    ``outcome_seed``, when given, judges the selected battles with *common random numbers*: the
    k-th selected battle of pair {i, j} draws its outcome from a stream keyed by
    (``outcome_seed``, i, j, k) alone. Runs of different selectors from the same arena state and
    ``outcome_seed`` then see the same outcome whenever they play a pair for the k-th time (in a
    replay, the same real battle), so that their difference comes from the pairs they choose,
    not from the luck of the draws. Each outcome is still an independent draw from the arena's
    rule (in a replay, from the pair's battles without replacement).
    """
    with single_threaded_blas():
        return _run_arena(
            arena,
            selector,
            n_battles,
            init,
            batch,
            rater,
            record,
            exclude_models,
            seed,
            init_seed,
            rater_options,
            outcome_seed,
        )


def _outcome_key(outcome_seed: int | Sequence[int]) -> list[int]:
    key = [int(outcome_seed)] if np.ndim(outcome_seed) == 0 else [int(k) for k in outcome_seed]  # type: ignore[union-attr]
    if not key or min(key) < 0:
        raise InputError(f"outcome_seed must be non-negative integers, not {outcome_seed!r}.")
    return key


def _run_arena(
    arena: Arena,
    selector: Selector | str,
    n_battles: int,
    init: int,
    batch: int,
    rater: str,
    record: Iterable[int],
    exclude_models: Iterable[int | str],
    seed: int | np.random.Generator,
    init_seed: int | np.random.Generator | None,
    rater_options: dict[str, Any] | None,
    outcome_seed: int | Sequence[int] | None,
) -> ArenaRun:
    if n_battles < 0 or init < 0:
        raise InputError("n_battles and init must be non-negative.")
    if batch < 1:
        raise InputError("batch must be a positive integer.")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    sel = selector if isinstance(selector, Selector) else get_selector(selector)
    steps = sorted({int(s) for s in record})
    if steps and (steps[0] < 0 or steps[-1] > n_battles):
        raise InputError(f"recorded steps must lie in 0..{n_battles}, got {steps}.")
    arena = arena.copy()
    m = arena.n_models
    tracker = InformationTracker(arena.models, estimate=sel.estimate or "plug-in")
    avail = arena.available()
    if avail is not None:
        tracker.blocked |= ~avail
    for k in exclude_models:
        tracker.block_model(k)
    refit = Refitter(arena.models, rater, **(rater_options or {}))
    init_rng = rng if init_seed is None else np.random.default_rng(init_seed)
    a0, b0, o0 = arena.random_battles(init, init_rng)
    refit.add(a0, b0, o0)
    np.add.at(tracker.pair_battles, (a0, b0), 1.0)
    np.add.at(tracker.pair_battles, (b0, a0), 1.0)
    tracker.refresh(refit.fit())
    choices = np.zeros((m, m), dtype=np.int64)
    snapshots: dict[int, Snapshot] = {}
    n_exhausted = 0
    n_warm = 0
    key = None if outcome_seed is None else _outcome_key(outcome_seed)
    played = np.zeros((m, m), dtype=np.int64)  # selected battles per pair, for the streams

    def judge(i: int, j: int) -> int | None:
        if key is None:
            return arena.play(i, j, rng)
        lo, hi = min(i, j), max(i, j)
        code = arena.play(lo, hi, np.random.default_rng([*key, lo, hi, int(played[lo, hi])]))
        if code is None:
            return None
        played[lo, hi] += 1
        return code if i < j else int(_SWAP[code])

    def snap(t: int) -> None:
        snapshots[t] = Snapshot(t, tracker.scores.copy(), tracker.pair_battles.copy())

    if 0 in steps:
        snap(0)
    t = 0
    while t < n_battles:
        nxt = next((s for s in steps if s > t), n_battles)
        k = min(batch, n_battles - t, nxt - t)
        picks = sel.select(tracker, k, rng=rng)
        n_warm += int(picks.warm_up.sum())
        for i, j in picks.pairs:
            i, j = int(i), int(j)
            outcome = judge(i, j)
            while outcome is None:
                # the pair is out of battles: tell the selector and let it pick again
                n_exhausted += 1
                tracker.block_pair(i, j)
                again = sel.select(tracker, 1, rng=rng)
                i, j = (int(x) for x in again.pairs[0])
                n_warm += int(again.warm_up[0])
                outcome = judge(i, j)
            refit.add(np.array([i]), np.array([j]), np.array([outcome]))
            tracker.add(i, j)
            choices[i, j] += 1
            t += 1
        tracker.refresh(refit.fit())
        if t in steps:
            snap(t)
    return ArenaRun(
        models=arena.models,
        battles=refit.battles(),
        n_init=init,
        choices=choices,
        snapshots=snapshots,
        exhausted=n_exhausted,
        warm_up=n_warm,
        scores=tracker.scores.copy(),
    )
