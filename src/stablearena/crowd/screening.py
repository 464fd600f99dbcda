"""The Stable Arena framework: am-ELO with annotator screening over a growing log
(am-ELO paper, Algorithm 3 and §4.3; docs/methods/annotators.md).

Each time a batch of battles arrives, :meth:`StableArena.update`

1. adds it to the log and counts every annotator's records;
2. leaves out of the fit, for now, annotators with fewer than δ = ``min_records`` records
   (their votes are kept and reconsidered once they have δ);
3. fits am-ELO (:class:`stablearena.raters.annotator.AmElo`) on the rest and publishes the
   ratings;
4. flags annotators whose ability is below ε = ``ability_threshold`` (optionally only when the
   upper ``confidence`` bound is below ε too); with ``policy="exclude"`` they are excluded —
   the model is refitted without them now, and their votes stay out of every later fit — with
   ``policy="warn"`` they are only reported.

Every step returns the ratings and one :class:`Decision` per annotator with its reason, plus
what changed since the previous step (a new annotator, one admitted after reaching δ, one
newly flagged or excluded).

:func:`screen_log` applies the same screening to a fixed log until nothing changes: fit,
exclude the flagged annotators, refit without them, and again, until no annotator in the fit is
flagged. Its result is the log a Stable Arena would publish from — e.g. the clean baseline of
the perturbation experiment (:mod:`stablearena.simulation.experiments.perturbation`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..data.battles import Battles, PairCounts
from ..errors import InputError, StableArenaWarning
from ..raters.annotator import UNKNOWN_ANNOTATOR, AmElo, AmEloFitted

__all__ = [
    "Decision",
    "ArenaStep",
    "StableArena",
    "Policy",
    "ScreenedLog",
    "screen_log",
    "converged_fit",
]

Policy = Literal["warn", "exclude"]


@dataclass(frozen=True)
class Decision:
    """What the loop did with one annotator at one step.

    ``status``: ``included`` / ``flagged`` / ``excluded`` / ``left_out`` (see
    :class:`~stablearena.raters.annotator.AmEloFitted`); ``change``, first that applies:
    ``"excluded"`` / ``"flagged"`` (newly), ``"new"`` (first seen), ``"admitted"`` (reached δ),
    ``"unflagged"``, or ``""`` (no change).
    """

    step: int
    annotator: str
    status: str
    change: str
    records: int
    ability: float
    ability_se: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "annotator": self.annotator,
            "status": self.status,
            "change": self.change,
            "records": self.records,
            "ability": self.ability,
            "ability_se": self.ability_se,
            "reason": self.reason,
        }


@dataclass(frozen=True, eq=False)
class ArenaStep:
    """One round of the loop: the published fit and every decision."""

    step: int
    n_battles: int
    fitted: AmEloFitted
    decisions: tuple[Decision, ...]

    @property
    def ratings(self) -> np.ndarray:
        return self.fitted.ratings

    def leaderboard(self) -> pd.DataFrame:
        return self.fitted.leaderboard()

    def changes(self) -> tuple[Decision, ...]:
        """Only the decisions that changed something this step."""
        return tuple(d for d in self.decisions if d.change)

    def decision_frame(self) -> pd.DataFrame:
        return pd.DataFrame([d.to_dict() for d in self.decisions])

    def to_dict(self) -> dict[str, Any]:
        out = self.fitted.to_dict()
        out["step"] = self.step
        out["decisions"] = [d.to_dict() for d in self.decisions]
        return out


class StableArena:
    """The Stable Arena loop (am-ELO Algorithm 3) over batches of battles.

    Args:
        min_records: δ, records an annotator needs before its votes enter the fit.
        ability_threshold: ε on the mean-|ability| = 1 scale (the paper's 0.005 on its Σθ = 1 scale
            with M annotators is 0.005·M here).
        policy: ``"warn"`` (report flagged annotators) or ``"exclude"`` (refit without them and
            keep them out of later fits).
        confidence: if set, flag only when ability + z·se < ε (one-sided, this level).
        reconsider: with ``policy="exclude"``, an excluded annotator who has new records since
            it was excluded, and whose ability (estimated with the ratings held fixed) is back at
            ε or above, is readmitted to the fit (decision change ``"readmitted"``); otherwise
            excluded annotators stay out of every later fit.
        **options: other :class:`~stablearena.raters.annotator.AmElo` options (``normalization``,
            ``tol``, ``anchor``, …).

    The object is the loop's state (the log so far, the excluded annotators with their records
    when excluded, each annotator's last status, the last fit); every :class:`ArenaStep` it
    returns is immutable. :meth:`update` appends a batch to the log the object keeps;
    :meth:`step` fits data the caller keeps (e.g. the live arena's pair counts), warm-started
    from the previous step.
    """

    def __init__(
        self,
        *,
        min_records: int = 50,
        ability_threshold: float = 0.0,
        policy: Policy = "warn",
        confidence: float | None = None,
        reconsider: bool = False,
        **options: Any,
    ) -> None:
        if policy not in ("warn", "exclude"):
            raise InputError(f"policy must be 'warn' or 'exclude', not {policy!r}.")
        bad = {"exclude_flagged", "min_records", "ability_threshold", "confidence"} & set(options)
        if bad:
            raise InputError(f"pass {sorted(bad)} as StableArena arguments, not options.")
        self.policy: Policy = policy
        self.rater = AmElo(
            min_records=min_records,
            ability_threshold=ability_threshold,
            exclude_flagged=(policy == "exclude"),
            confidence=confidence,
            **options,
        )
        self.rater._check()
        self._a: list[np.ndarray] = []
        self._b: list[np.ndarray] = []
        self._oc: list[np.ndarray] = []
        self._ann: list[np.ndarray] = []
        self._w: list[np.ndarray] = []
        self.reconsider = bool(reconsider)
        self.excluded: set[str] = set()
        #: records of each excluded annotator when it was excluded (for ``reconsider``)
        self.excluded_records: dict[str, float] = {}
        self.history: list[ArenaStep] = []
        #: each annotator's status at the last step
        self.last_status: dict[str, str] = {}
        self.last_fit: AmEloFitted | None = None

    @property
    def log(self) -> Battles:
        """Every battle received so far (annotator ``"unknown"`` where a batch had none)."""
        if not self._a:
            raise InputError("the arena has no battles yet; call update() with a batch first.")
        weights = np.concatenate(self._w)
        return Battles.from_arrays(
            np.concatenate(self._a),
            np.concatenate(self._b),
            np.concatenate(self._oc),
            annotator=np.concatenate(self._ann),
            weight=None if np.all(weights == 1.0) else weights,
            source="stable arena log",
        )

    def update(self, battles: Battles) -> ArenaStep:
        """Add a batch of battles, refit, screen, and return the step's ratings and decisions."""
        if not isinstance(battles, Battles):
            raise InputError(f"update() takes Battles, got {type(battles).__name__}.")
        if len(battles) == 0:
            raise InputError("the batch is empty.")
        names = np.array(battles.models, dtype=object)
        self._a.append(names[battles.model_a])
        self._b.append(names[battles.model_b])
        self._oc.append(battles.outcome.astype(np.int8))
        if battles.annotator is None:
            self._ann.append(np.full(len(battles), UNKNOWN_ANNOTATOR, dtype=object))
        else:
            self._ann.append(np.array(battles.annotators, dtype=object)[battles.annotator])
        self._w.append(battles.weights().astype(float))
        return self.step(self.log)

    def step(
        self,
        data: Battles | PairCounts,
        *,
        warm: bool = False,
        leave_out: Mapping[str, str] | None = None,
        exclude_now: Mapping[str, str] | None = None,
    ) -> ArenaStep:
        """One round of the loop on the whole current data (the log so far, or its pair counts
        per annotator): fit without the excluded annotators, flag, exclude (``policy``), and
        return the ratings and every decision. ``warm``: start the solver from the last fit
        (see :meth:`~stablearena.raters.annotator.AmElo.fit`'s ``start``: fewer iterations
        when the data changed little, but not guaranteed to reach the same maximum).
        ``leave_out`` (name → reason): annotators kept out of this step's fit without being
        screened (status ``left_out``); ``exclude_now`` (name → reason): excluded from this
        step's fit only (status ``excluded``, not remembered by the loop) — both used by
        :func:`stablearena.crowd.board_rule.arena_fit`."""
        present = set(data.annotators or ())
        start = self.last_fit if warm else None
        now = {n: r for n, r in (exclude_now or {}).items() if n in present}
        excl = {n: "excluded in an earlier round" for n in self.excluded & present} | now
        fitted = self.rater.fit(data, exclude=excl, start=start, leave_out=leave_out)
        readmitted: set[str] = set()
        if self.reconsider and self.excluded & present:
            eps = float(self.rater.ability_threshold)
            for k, name in enumerate(fitted.annotators):
                if (
                    name in self.excluded
                    and fitted.records[k] > self.excluded_records.get(name, np.inf)
                    and fitted.abilities[k] >= eps
                ):
                    readmitted.add(name)
            if readmitted:
                self.excluded -= readmitted
                excl = {n: "excluded in an earlier round" for n in self.excluded & present} | now
                fitted = self.rater.fit(data, exclude=excl, start=fitted, leave_out=leave_out)
        step = len(self.history) + 1
        decisions = []
        for k, name in enumerate(fitted.annotators):
            status = fitted.status[k]
            before = self.last_status.get(name)
            if name in readmitted and status != "excluded":
                change = "readmitted"
            elif status == "excluded" and before != "excluded":
                change = "excluded"
            elif status == "flagged" and before != "flagged":
                change = "flagged"
            elif before is None:
                change = "new"
            elif before == "left_out" and status == "included":
                change = "admitted"
            elif before == "flagged" and status == "included":
                change = "unflagged"
            else:
                change = ""
            reason = fitted.reasons[k]
            if change == "readmitted":
                reason = (
                    f"readmitted: ability {fitted.abilities[k]:.3g} ≥ "
                    f"{self.rater.ability_threshold:g} on new records; {reason}"
                )
            decisions.append(_decision(fitted, k, step, status, change, reason))
            self.last_status[name] = status
            if status == "excluded" and name not in self.excluded and name not in now:
                self.excluded.add(name)
                self.excluded_records[name] = float(fitted.records[k])
        n = len(data) if isinstance(data, Battles) else int(round(data.n_comparisons))
        out = ArenaStep(step, n, fitted, tuple(decisions))
        self.history.append(out)
        self.last_fit = fitted
        return out


@dataclass(frozen=True, eq=False)
class ScreenedLog:
    """A log screened by :func:`screen_log`.

    Attributes:
        battles: the battles of the annotators kept (models and annotators that no longer occur
            are dropped).
        fitted: am-ELO on the kept annotators (none of them flagged).
        removed: one :class:`Decision` per annotator removed — ``status`` ``"excluded"``
            (``step`` = the round in which it was flagged) or ``"left_out"`` (too few records).
        rounds: fits run (the last one flags nobody, unless ``max_rounds`` stopped the loop).
    """

    battles: Battles
    fitted: AmEloFitted
    removed: tuple[Decision, ...]
    rounds: int

    @property
    def excluded(self) -> list[str]:
        return [d.annotator for d in self.removed if d.status == "excluded"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "n_battles": len(self.battles),
            "n_annotators": len(self.battles.annotators or ()),
            "removed": [d.to_dict() for d in self.removed],
        }


def _decision(
    fitted: AmEloFitted, k: int, step: int, status: str, change: str, reason: str
) -> Decision:
    """Annotator k's :class:`Decision` as read off a fit."""
    return Decision(
        step=step,
        annotator=fitted.annotators[k],
        status=status,
        change=change,
        records=int(round(fitted.records[k])),
        ability=float(fitted.abilities[k]),
        ability_se=float(fitted.ability_se[k]),
        reason=reason,
    )


def converged_fit(
    rater: AmElo,
    data: Battles | PairCounts,
    *,
    exclude: frozenset[str] = frozenset(),
    start: AmEloFitted | None = None,
    leave_out: Mapping[str, str] | None = None,
) -> AmEloFitted:
    """``rater.fit`` (``leave_out``: name → reason, passed on) that screening may act on: when
    the fit has not converged it is continued (warm-started from the unconverged point), then
    tried from the deterministic m-ELO start;
    the first converged fit is returned, else the last one — which the caller must not screen
    on (check ``fitted.convergence.converged``). An unconverged am-ELO fit can give honest
    annotators spurious negative abilities (issue 25: 128 honest annotators excluded)."""
    fitted = rater.fit(data, exclude=exclude, start=start, leave_out=leave_out)
    for retry in (fitted, None):
        if fitted.convergence.converged:
            break
        if retry is None and start is None:
            break
        fitted = rater.fit(data, exclude=exclude, start=retry, leave_out=leave_out)
    return fitted


def _unflag(fitted: AmEloFitted) -> AmEloFitted:
    """The fit with every ``flagged`` annotator back to ``included`` (nothing acted on)."""
    from dataclasses import replace

    st = tuple("included" if s == "flagged" else s for s in fitted.status)
    rs = tuple(
        r.replace("flagged:", "not acted on (unconverged fit):", 1) if s == "flagged" else r
        for s, r in zip(fitted.status, fitted.reasons, strict=True)
    )
    return replace(fitted, status=st, reasons=rs)


def _influence_flagged(fitted: AmEloFitted) -> dict[int, str]:
    """Annotators (indices into ``fitted.annotators``) the influence screening flags on a
    converged fit, with the reason."""
    from .influence import INFLUENCE_ABILITY_CAP, account_influence, am_elo_covariance

    idx = fitted._fit_annotators
    a = np.clip(fitted.abilities[idx], 0.0, INFLUENCE_ABILITY_CAP)
    infl = account_influence(fitted.counts, fitted.scores, am_elo_covariance(fitted), a)
    reasons = infl.reasons(fitted.models)
    return {
        int(idx[k]): "excluded by influence: " + reasons[k].removeprefix("flagged: ")
        for k in np.flatnonzero(infl.flagged)
    }


def screen_log(
    battles: Battles,
    *,
    min_records: int = 50,
    ability_threshold: float = 0.0,
    confidence: float | None = None,
    max_rounds: int = 20,
    influence: bool = False,
    **options: Any,
) -> ScreenedLog:
    """Stable Arena screening of a fixed log, repeated until it changes nothing (am-ELO Alg. 3).

    Annotators with fewer than δ = ``min_records`` records are left out; am-ELO is fitted on the
    rest; annotators with ability below ε = ``ability_threshold`` (mean-|a| = 1 scale; with
    ``confidence``, only when the one-sided upper bound is below ε too) are excluded and the
    model refitted without them — which can push another annotator below ε — until a fit flags
    nobody. ``options`` go to :class:`~stablearena.raters.annotator.AmElo`.

    ``influence``: then, once, the influence screening of
    :func:`stablearena.crowd.influence.account_influence` on the converged fit — annotators whose
    one-Newton-step leave-one-out push on a model, or whose concentration on one model, is beyond
    its Bonferroni bound are excluded too (reason ``"influence: …"``) and the screening repeated
    (docs/guides/rigging.md).
    """
    if not isinstance(battles, Battles) or battles.annotator is None:
        raise InputError("screen_log() takes Battles with an annotator column.")
    if not isinstance(max_rounds, int) or max_rounds < 1:
        raise InputError(f"max_rounds must be a positive integer, not {max_rounds!r}.")
    rater = AmElo(
        min_records=min_records,
        ability_threshold=ability_threshold,
        confidence=confidence,
        **options,
    )
    excluded: dict[str, Decision] = {}
    rounds = 0
    previous: AmEloFitted | None = None
    influence_done = False
    while True:
        rounds += 1
        fitted = converged_fit(rater, battles, exclude=frozenset(excluded), start=previous)
        previous = fitted
        flagged = [k for k, st in enumerate(fitted.status) if st == "flagged"]
        if flagged and not fitted.convergence.converged:
            warnings.warn(
                f"screening round {rounds}: the am-ELO fit did not converge "
                f"({fitted.convergence.message or 'gradient above tolerance'}), also when "
                f"warm-started; its {len(flagged)} flagged annotator(s) are NOT excluded. Raise "
                "max_iter or check the data.",
                StableArenaWarning,
                stacklevel=2,
            )
            flagged = []
            fitted = _unflag(fitted)
        for k in flagged:
            reason = fitted.reasons[k].replace("flagged:", f"excluded in round {rounds}:", 1)
            excluded[fitted.annotators[k]] = _decision(
                fitted, k, rounds, "excluded", "excluded", reason
            )
        if not flagged and influence and not influence_done and fitted.convergence.converged:
            influence_done = True
            flagged = _influence_flagged(fitted)
            for k in flagged:
                excluded[fitted.annotators[k]] = _decision(
                    fitted, k, rounds, "excluded", "excluded", flagged[k]
                )
            if flagged:
                continue
        if not flagged:
            break
        if rounds >= max_rounds:
            warnings.warn(
                f"screening still flagged {len(flagged)} annotator(s) after {max_rounds} rounds; "
                "they are excluded, but the last fit was not checked again. Raise max_rounds.",
                StableArenaWarning,
                stacklevel=2,
            )
            break
    left_out = [
        _decision(fitted, k, rounds, "left_out", "", fitted.reasons[k])
        for k in range(len(fitted.annotators))
        if fitted.status[k] == "left_out"
    ]
    keep_names = {
        name for k, name in enumerate(fitted.annotators) if fitted.status[k] == "included"
    }
    keep = np.array([n in keep_names for n in battles.annotators], dtype=bool)  # type: ignore[union-attr]
    kept = battles.take(keep[battles.annotator]).compact()
    if flagged:  # stopped by max_rounds: the published fit is the one without them
        fitted = rater.fit(kept)
    return ScreenedLog(kept, fitted, (*excluded.values(), *left_out), rounds)
