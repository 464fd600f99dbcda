"""The rule the live arena publishes its board by — one function, live and offline.

:func:`arena_fit` is what ``stablearena serve`` runs at every refit
(:func:`stablearena.service.refit.run_fit`) and what ``stablearena rank --method arena`` runs
on a log, so anybody can audit the published board from the exported votes:

1. **Accounts that weigh nothing are left out of the ability fit.** An account whose
   bounded-influence weight is 0 whatever its ability — age 0 under the age ramp — cannot move
   the board, so its votes are not in the am-ELO fit either (status ``left_out``): a flood of
   brand-new accounts can neither stop the fit converging nor drag the honest abilities down
   (issue 34: 6,400 such votes made the scale ×34 in 2 seeds of 10; ``bench/bench_flood.py``).
   **Young accounts** — a day of record or more but fewer than ``ramp_days`` — are left out of
   it too, and admitted afterwards with the abilities the fit gives them alone
   (:func:`stablearena.crowd.trust.admit_young`): they weigh in the board by the rule, but shape no
   other account's ability (accounts made for an attack lifted a target through the honest
   abilities although each weighed at most 1/7; docs/guides/rigging.md, "Young accounts").
2. **Stable Arena screening** (:class:`stablearena.crowd.screening.StableArena`): am-ELO with
   δ = ``min_records``, annotators below ε = ``ability_threshold`` flagged (``policy``
   ``"exclude"``: excluded and remembered by the live loop; ``"warn"``: shown).
3. **Influence screening** (``influence="exclude"``, the default): on a converged fit, accounts
   whose leave-one-out push on a model or whose concentration on one model is beyond its
   Bonferroni bound (:func:`stablearena.crowd.influence.account_influence`, abilities clipped to
   [0, 2]) are excluded from this fit and the screening step repeated once — the
   ``am-elo+screen+influence+bounded`` defence docs/guides/rigging.md measured. Decided afresh
   at every fit (nothing remembered), so the live board is the offline one.
4. **Bounded influence** (:func:`stablearena.crowd.trust.bounded_fit`): each account's weight capped
   at ``cap`` (at 1 before ``record_days`` of record), ramped over ``ramp_votes`` votes and
   ``ramp_days`` days of record; young accounts together at most ``young_share`` of any
   model's weighted votes.

The live arena then checks the result with :func:`stablearena.analysis.fitcheck.board_problems` before
publishing it; ``rank`` puts the same problems in the board's notes.

Account ages offline (:func:`log_accounts`): an account is created at its first vote in the
log, "now" is the time of the log's last vote (the board as of that vote, as the live arena
publishes it right after it), and — as live — accounts created in the arena's first
``ramp_days`` days (here: within ``ramp_days`` of the log's first vote) count as old.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np

from .. import choices
from ..errors import ConvergenceError, InputError

__all__ = [
    "ArenaRule",
    "ArenaFit",
    "AccountTimes",
    "arena_fit",
    "log_accounts",
    "weightless_accounts",
]

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class ArenaRule:
    """The options of the arena's rule; the defaults are the live arena's (``ArenaConfig``).

    ``min_records``, ``ability_threshold``, ``confidence``, ``policy``: the Stable Arena
    screening (δ, ε, the one-sided level, warn/exclude); ``influence``: ``"exclude"`` (act on
    influence flags) or ``"warn"`` (only show them); ``cap``, ``ramp_votes``, ``ramp_days``,
    ``record_days``, ``young_share``: bounded influence (None or 0: off;
    docs/guides/rigging.md)."""

    method: Literal["crowd", "am-elo"] = "crowd"
    min_records: int = 50
    ability_threshold: float = 0.0
    confidence: float | None = None
    policy: Literal["warn", "exclude"] = "exclude"
    influence: Literal["warn", "exclude"] = "exclude"
    cap: float | None = choices.TRUST_CAP
    ramp_votes: float | None = choices.TRUST_RAMP_VOTES
    ramp_days: float | None = choices.TRUST_RAMP_DAYS
    record_days: float | None = choices.TRUST_RECORD_DAYS
    young_share: float | None = choices.TRUST_YOUNG_SHARE
    model_votes: float | None = choices.CROWD_MODEL_VOTES
    flood_days: float | None = choices.CROWD_FLOOD_DAYS
    flood_level: float = 0.01

    def __post_init__(self) -> None:
        if self.method not in ("crowd", "am-elo"):
            raise InputError(f"method must be 'crowd' or 'am-elo', not {self.method!r}.")
        if self.policy not in ("warn", "exclude"):
            raise InputError(f"policy must be 'warn' or 'exclude', not {self.policy!r}.")
        if self.influence not in ("warn", "exclude"):
            raise InputError(f"influence must be 'warn' or 'exclude', not {self.influence!r}.")
        if self.young_share is not None and not 0 <= self.young_share < 1:
            raise InputError(
                f"young_share must lie in [0, 1) (0 or None: off), not {self.young_share!r}."
            )

    #: ArenaConfig key → field, where the names differ
    CONFIG_KEYS = {
        "ability_cap": "cap",
        "trust_ramp_votes": "ramp_votes",
        "trust_ramp_days": "ramp_days",
        "trust_record_days": "record_days",
        "trust_young_share": "young_share",
        "influence_policy": "influence",
        "board_rule": "method",
        "crowd_model_votes": "model_votes",
        "crowd_flood_days": "flood_days",
    }

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ArenaRule:
        """The rule of an arena configuration (``ArenaConfig`` as a dict, or a published fit's
        ``config``); a key it lacks — a fit published before the key existed — takes the value
        it had then: off for bounded influence and influence screening, the default otherwise."""
        known = {f.name for f in fields(cls)}
        kw: dict[str, Any] = {"cap": None, "ramp_votes": None, "ramp_days": None}
        kw["record_days"] = kw["young_share"] = None
        kw["influence"] = "warn"
        kw["method"] = "am-elo"  # a fit published before the crowd rule
        for key, value in config.items():
            name = cls.CONFIG_KEYS.get(key, key)
            if name in known:
                kw[name] = value
        kw["min_records"] = int(kw.get("min_records", cls.min_records))
        kw["ability_threshold"] = float(kw.get("ability_threshold", cls.ability_threshold))
        return cls(**kw)

    def crowd(self) -> Any:
        """The :class:`stablearena.crowd.rule.CrowdRule` of this rule (``method="crowd"``): ε, the
        confidence (0.95 when None), the cap, the per-model limit and the flood test."""
        from .rule import CrowdRule

        return CrowdRule(
            ability_threshold=float(self.ability_threshold),
            min_records=float(self.min_records),
            confidence=0.95 if self.confidence is None else float(self.confidence),
            # the crowd rule's own cap (the crowd's average vote), not the am-ELO rule's
            cap=choices.CROWD_CAP,
            model_votes=self.model_votes,
            flood_days=self.flood_days,
            flood_level=float(self.flood_level),
        )

    def trust(
        self,
        ages: Mapping[str, float] | None = None,
        active_days: Mapping[str, float] | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments of :func:`stablearena.crowd.trust.bounded_fit` for this rule and the
        accounts' ``ages`` (days since creation; None: no age ramp) and ``active_days``
        (distinct UTC days with a vote; passed only where ``bounded_fit`` takes it)."""
        out: dict[str, Any] = {
            "cap": self.cap,
            "ramp_votes": self.ramp_votes,
            "ramp_days": self.ramp_days,
            "record_days": self.record_days,
            "young_share": self.young_share,
            "ages": ages,
        }
        if ages is not None and active_days is not None:
            # an account that counts as old (imported, or of the arena's first days: age +∞)
            # keeps its full record; the day rules need ages (without them: no day rules, live
            # and offline alike)
            out["active_days"] = {
                n: math.inf if math.isinf(float(ages.get(n, 0.0))) else float(d)
                for n, d in active_days.items()
            }
        return out


@dataclass(frozen=True)
class AccountTimes:
    """Per account (by name): ``ages`` in days at ``now`` (+∞: counts as old) and
    ``active_days`` (distinct UTC days with at least one vote); ``now``: Unix seconds."""

    ages: dict[str, float]
    active_days: dict[str, float]
    now: float


def log_accounts(
    battles: Any, *, ramp_days: float | None = choices.TRUST_RAMP_DAYS, now: float | None = None
) -> AccountTimes:
    """Account ages and active days from a log's ``judge`` (account) and ``tstamp`` (Unix
    seconds) columns: an account is created at its first vote (nothing else is known of it),
    ``now`` defaults to the log's last vote, and an account whose first vote is within
    ``ramp_days`` days of the log's first vote counts as old (+∞; the live arena's founding
    accounts, :func:`stablearena.service.store.account_ages`). An :class:`InputError` naming
    the column when either is missing or a time is not a finite number."""
    src = getattr(battles, "source", "the log")
    if getattr(battles, "annotator", None) is None:
        raise InputError(
            f"{src}: no judge column (the account id of each vote), which the arena's rule "
            "needs to weigh accounts; add one (or name it with --col annotator=COLUMN), or "
            "rank with --method am-elo or m-elo."
        )
    t = getattr(battles, "timestamp", None)
    if t is None:
        raise InputError(
            f"{src}: no tstamp column (Unix seconds of each vote), which the arena's age ramp "
            "needs for account ages; add one (or name it with --col timestamp=COLUMN), or pass "
            "--ramp-days 0 to count every account as old (as `stablearena serve --import` does "
            "with the accounts of an imported log)."
        )
    t = np.asarray(t, dtype=float)
    bad = np.flatnonzero(~np.isfinite(t))
    if len(bad):
        raise InputError(
            f"{src}: tstamp of row {int(bad[0]) + 1} is {t[bad[0]]!r}, not a time in Unix "
            f"seconds ({len(bad):,} such rows); fix or drop those rows."
        )
    names = battles.annotators
    ann = np.asarray(battles.annotator, dtype=np.int64)
    k = len(names)
    first = np.full(k, np.inf)
    np.minimum.at(first, ann, t)
    day = np.floor(t / SECONDS_PER_DAY).astype(np.int64)
    pairs = np.unique(np.stack([ann, day]), axis=1)
    active = np.bincount(pairs[0], minlength=k).astype(float)
    now_s = float(t.max()) if now is None else float(now)
    founding = float(t.min()) + (ramp_days or 0.0) * SECONDS_PER_DAY
    ages = {}
    for i, name in enumerate(names):
        if not math.isfinite(first[i]):
            continue  # an account with no vote left in the log
        old = ramp_days is not None and ramp_days > 0 and first[i] <= founding
        ages[str(name)] = math.inf if old else max(now_s - first[i], 0.0) / SECONDS_PER_DAY
    return AccountTimes(
        ages,
        {str(names[i]): float(active[i]) for i in range(k) if math.isfinite(first[i])},
        now_s,
    )


def weightless_accounts(
    counts: Any,
    rule: ArenaRule,
    ages: Mapping[str, float] | None = None,
) -> dict[str, str]:
    """Accounts of ``counts`` whose bounded-influence weight is 0 whatever their ability (name →
    reason): the rule's factors other than the ability
    (:func:`stablearena.crowd.trust.account_weights` at ability 1, no cap) are 0 — under the age
    ramp, an account of age 0 (a name ``ages`` lacks is new: age 0). Read on ages, not active
    days: every account with a vote has an active day, so by those nobody would be weightless."""
    from .trust import account_weights

    if ages is None or not rule.ramp_days or rule.ramp_days <= 0:
        return {}
    names = list(counts.annotators or ())
    if not names:
        return {}
    votes = np.bincount(counts.annotator, counts.totals, len(names))
    t = np.array([float(ages.get(n, 0.0)) for n in names])
    w = account_weights(
        np.ones(len(names)),
        votes,
        cap=None,
        ramp_votes=rule.ramp_votes,
        ages=t,
        ramp_days=rule.ramp_days,
    )
    return {
        n: f"left out: weight 0 under bounded influence (age {t[k]:.3g} days), not in the fit"
        for k, n in enumerate(names)
        if w[k] == 0 and votes[k] > 0
    }


@dataclass(frozen=True, eq=False)
class ArenaFit:
    """:func:`arena_fit`'s result: ``step`` (the screened am-ELO step: abilities, statuses,
    decisions), ``fitted`` (the published board: ``step.fitted`` under bounded influence),
    ``trust`` (the keyword arguments ``fitted`` was bounded with), ``weightless`` (accounts
    left out at weight 0, name → reason), ``influence_excluded`` (name → reason)."""

    step: Any
    fitted: Any
    trust: dict[str, Any]
    weightless: dict[str, str] = field(default_factory=dict)
    influence_excluded: dict[str, str] = field(default_factory=dict)
    young: dict[str, str] = field(default_factory=dict)
    admitted: Any = None

    @property
    def accounts(self) -> Any:
        """The fit whose accounts and abilities the board was weighed by: ``step.fitted`` with
        the young accounts admitted (:func:`stablearena.crowd.trust.admit_young`)."""
        return self.admitted if self.admitted is not None else self.step.fitted

    @property
    def converged(self) -> bool:
        """Whether the am-ELO step and the bounded fit both converged."""
        return bool(self.step.fitted.convergence.converged) and bool(
            self.fitted.convergence.converged
        )


def arena_fit(
    counts: Any,
    rule: ArenaRule,
    *,
    ages: Mapping[str, float] | None = None,
    active_days: Mapping[str, float] | None = None,
    arena: Any = None,
    warm: bool = False,
) -> ArenaFit:
    """The arena's board on ``counts`` (pair counts per annotator) under ``rule`` (module
    docstring): weightless accounts out, Stable Arena screening, influence screening, bounded
    influence. ``ages``/``active_days``: per account (None: no age ramp; :func:`log_accounts`
    offline, the store live). ``arena``: the live loop's :class:`~stablearena.crowd.screening.
    StableArena` (its excluded annotators; a fresh one by default), ``warm``: start from its
    last fit (on a :class:`~stablearena.errors.ConvergenceError`, again from the m-ELO start).
    """
    from .screening import StableArena, _influence_flagged
    from .trust import admit_young, bounded_fit, young_names

    if rule.method == "crowd":
        return _crowd_arena_fit(counts, rule, ages=ages, active_days=active_days, arena=arena)

    def new_arena() -> StableArena:
        return StableArena(
            min_records=int(rule.min_records),
            ability_threshold=float(rule.ability_threshold),
            policy=rule.policy,
            confidence=rule.confidence,
            reconsider=True,
        )

    if arena is None:
        arena = new_arena()
    state = (set(arena.excluded), dict(arena.excluded_records), dict(arena.last_status))

    def restore() -> None:
        arena.excluded = set(state[0])
        arena.excluded_records = dict(state[1])
        arena.last_status = dict(state[2])

    weightless = weightless_accounts(counts, rule, ages)
    trust = rule.trust(ages, active_days)
    young = {
        n: why
        for n, why in young_names(
            counts,
            ages=trust.get("ages"),
            active_days=trust.get("active_days"),
            ramp_days=rule.ramp_days,
            min_records=rule.min_records,
        ).items()
        if n not in weightless
    }
    leave = {**weightless, **young}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit's notes carry every warning
        try:
            step = arena.step(counts, warm=warm and arena.last_fit is not None, leave_out=leave)
        except ConvergenceError:
            if not warm or arena.last_fit is None:
                raise
            # a start far from the optimum (e.g. before a big import) can lead Newton astray:
            # the deterministic m-ELO start decides whether the maximum exists
            restore()
            arena.last_fit = None
            step = arena.step(counts, leave_out=leave)
        flagged: dict[str, str] = {}
        if rule.influence == "exclude" and step.fitted.convergence.converged:
            found = _influence_flagged(step.fitted)
            flagged = {step.fitted.annotators[k]: why for k, why in found.items()}
            if flagged:
                arena.history.pop()  # the step is taken again without them
                restore()
                step = arena.step(counts, warm=True, leave_out=leave, exclude_now=flagged)
    admitted = admit_young(step.fitted, counts, young)
    fitted = bounded_fit(admitted, **trust)
    return ArenaFit(step, fitted, trust, weightless, flagged, young, admitted)


@dataclass(frozen=True, eq=False)
class CrowdStep:
    """The crowd rule's stand-in for the Stable Arena step (:class:`~stablearena.crowd.screening.
    ArenaStep`): its ``fitted`` board; nothing is remembered between fits, so no changes."""

    fitted: Any
    crowd: Any = None

    def changes(self) -> tuple[Any, ...]:
        return ()


def _crowd_arena_fit(
    counts: Any,
    rule: ArenaRule,
    *,
    ages: Mapping[str, float] | None,
    active_days: Mapping[str, float] | None,
    arena: Any,
) -> ArenaFit:
    """:func:`arena_fit` under ``method="crowd"``: :func:`stablearena.crowd.rule.crowd_fit` with
    the rule's options; the days of record are active days (ages without them), an account
    that counts as old (age +∞) established. ``arena``'s last fit, when it rates the same
    models, is the scores' warm start."""
    from .rule import crowd_fit

    days: dict[str, float] | None = None
    if active_days is not None:
        days = {
            n: math.inf if ages is not None and math.isinf(float(ages.get(n, 0.0))) else float(d)
            for n, d in active_days.items()
        }
    elif ages is not None:
        days = {n: float(v) for n, v in ages.items()}
    x0 = None
    last = getattr(arena, "last_fit", None) if arena is not None else None
    if last is not None and tuple(last.models) == tuple(counts.models):
        x0 = np.asarray(last.scores, float)
    got = crowd_fit(counts, rule.crowd(), active_days=days, x0=x0)
    trust = {
        "cap": rule.cap,
        "ramp_votes": None,
        "ramp_days": None,
        "record_days": None,
        "young_share": None,
        "ages": None,
    }
    return ArenaFit(CrowdStep(got.fitted, got), got.fitted, trust, admitted=got.fitted)
