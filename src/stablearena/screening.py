"""The Stable Arena framework: am-ELO with annotator screening over a growing log
(am-ELO paper, Algorithm 3 and §4.3; SPEC §3.4).

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from .battles import Battles
from .errors import InputError
from .raters.annotator import UNKNOWN_ANNOTATOR, AmElo, AmEloFitted

__all__ = ["Decision", "ArenaStep", "StableArena", "Policy"]

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
        ability_threshold: ε on the mean-1 ability scale (the paper's 0.005 on its Σθ = 1 scale
            with M annotators is 0.005·M here).
        policy: ``"warn"`` (report flagged annotators) or ``"exclude"`` (refit without them and
            keep them out of later fits).
        confidence: if set, flag only when ability + z·se < ε (one-sided, this level).
        **options: other :class:`~stablearena.raters.annotator.AmElo` options (``normalization``,
            ``tol``, ``anchor``, …).

    The object is the loop's state (the log so far and the excluded annotators); every
    :class:`ArenaStep` it returns is immutable.
    """

    def __init__(
        self,
        *,
        min_records: int = 50,
        ability_threshold: float = 0.0,
        policy: Policy = "warn",
        confidence: float | None = None,
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
        self.excluded: set[str] = set()
        self.history: list[ArenaStep] = []
        self._last: dict[str, str] = {}

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
        log = self.log
        fitted = self.rater.fit(log, exclude=frozenset(self.excluded & set(log.annotators)))  # type: ignore[arg-type]
        step = len(self.history) + 1
        decisions = []
        for k, name in enumerate(fitted.annotators):
            status = fitted.status[k]
            before = self._last.get(name)
            if status == "excluded" and before != "excluded":
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
            decisions.append(
                Decision(
                    step=step,
                    annotator=name,
                    status=status,
                    change=change,
                    records=int(round(fitted.records[k])),
                    ability=float(fitted.abilities[k]),
                    ability_se=float(fitted.ability_se[k]),
                    reason=fitted.reasons[k],
                )
            )
            self._last[name] = status
            if status == "excluded":
                self.excluded.add(name)
        out = ArenaStep(step, len(log), fitted, tuple(decisions))
        self.history.append(out)
        return out
