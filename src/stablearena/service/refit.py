"""One refit of the live arena: the Stable Arena step (am-ELO Algorithm 3) on a snapshot of the
pair counts.

Kept free of the web stack so that it runs cheaply in a separate process (the default: a fit
then never competes with requests for Python's interpreter lock). A :class:`Snapshot` is the
counts table read in one transaction together with the newest vote id it includes; it turns
into the same :class:`~stablearena.battles.PairCounts` that ``stablearena rank`` builds from
the exported vote log (models and annotators in sorted name order, rows in key order), so the
published leaderboard is the one ``rank`` computes from the export — with the arena's bounded
influence applied on top (:func:`stablearena.trust.bounded_fit`; off with ``ability_cap``,
``trust_ramp_votes`` and ``trust_ramp_days`` 0; the age ramp reads each account's age from the
store, :func:`stablearena.service.store.account_ages`).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Any

from ..battles import PairCounts
from ..errors import ConvergenceError
from ..leaderboard import annotators_payload, leaderboard_payload
from ..screening import StableArena
from ..trust import bounded_fit
from .snapshot import SOURCE, Snapshot

__all__ = [
    "Snapshot",
    "FitOutput",
    "run_fit",
    "run_live_fit",
    "live_counts",
    "refit_published",
    "SOURCE",
]


@dataclass
class FitOutput:
    """What a refit publishes (``payload``, stored as JSON), the fitted object itself (``None``
    when not asked for: it holds every count) and the newest vote the fit includes."""

    payload: dict[str, Any]
    seconds: float
    fitted: Any = None
    as_of_vote: int = 0
    cpu_seconds: float = 0.0  # the fit's CPU time (its process, all threads)


#: The last fit of this process per arena (database): the warm start of the next one (the
#: optimum does not depend on the start, so any earlier fit of the arena will do).
_LAST: dict[str, Any] = {}


def arena_for(config: dict[str, Any], screening: dict[str, Any] | None) -> StableArena:
    """The Stable Arena loop with the arena's δ, ε, policy, restored to a published state."""
    arena = StableArena(
        min_records=int(config["min_records"]),
        ability_threshold=float(config["ability_threshold"]),
        policy=config["policy"],
        confidence=config.get("confidence"),
        reconsider=True,
    )
    if screening:
        arena.excluded = set(screening.get("excluded", ()))
        arena.excluded_records = dict(screening.get("excluded_records", {}))
        arena.last_status = dict(screening.get("last_status", {}))
    return arena


def refit_published(
    payload: dict[str, Any],
    counts: PairCounts,
    *,
    start: Any = None,
    config: dict[str, Any] | None = None,
) -> Any:
    """am-ELO fitted on ``counts`` with the screening state of a published fit (its ``config``
    — or ``config`` when it has none — and its excluded annotators), its weights bounded by the
    configuration's rule (:func:`trust_options`): the published fit itself when ``counts`` are
    the snapshot it was made from. ``start``: a warm start."""
    cfg = payload.get("config") or config or {}
    arena = arena_for(cfg, payload.get("screening"))
    fitted = arena.rater.fit(
        counts, exclude=frozenset(arena.excluded & set(counts.annotators or ())), start=start
    )
    return bounded_fit(fitted, **trust_options(cfg, published_ages(payload)))


def published_ages(payload: dict[str, Any]) -> dict[str, float] | None:
    """The account ages (days) a published fit's age ramp used: its annotators' ``age_days``
    (None there: an account that counts as old, +∞) — None when it used no age ramp."""
    ann = payload.get("annotators") or {}
    if not (ann.get("trust") or {}).get("ramp_days"):
        return None
    return {
        r["annotator"]: math.inf if r.get("age_days") is None else float(r["age_days"])
        for r in ann.get("annotators", ())
    }


def trust_options(config: dict[str, Any], ages: dict[str, float] | None = None) -> dict[str, Any]:
    """The bounded-influence rule of an arena configuration (``ability_cap``,
    ``trust_ramp_votes``, ``trust_ramp_days``; absent — a fit published before they existed —
    or 0: off) with the accounts' ``ages`` in days (None: no age ramp)."""
    return {
        "cap": config.get("ability_cap"),
        "ramp_votes": config.get("trust_ramp_votes"),
        "ramp_days": config.get("trust_ramp_days"),
        "ages": ages,
    }


def live_ages(engine: Any, config: dict[str, Any]) -> dict[str, float] | None:
    """Every account's age in days read through ``engine``
    (:func:`stablearena.service.store.account_ages`), or None when the configuration has no age
    ramp."""
    days = config.get("trust_ramp_days")
    if not days or days <= 0:
        return None
    from . import store

    with engine.connect() as conn:
        return store.account_ages(conn, float(days), time.time())


def run_fit(
    snapshot: Snapshot,
    config: dict[str, Any],
    screening: dict[str, Any] | None,
    arena_id: str = "",
    ages: dict[str, float] | None = None,
) -> FitOutput:
    """Fit am-ELO with the Stable Arena screening on ``snapshot``, bound each account's weight
    (:func:`stablearena.trust.bounded_fit` with the arena's ``ability_cap`` and
    ``trust_ramp_votes``) and build the payload: ``leaderboard`` (the ``rank --method am-elo
    --format json`` contract, of the bounded fit), ``annotators`` (the ``annotators --format
    json`` contract with each decision's reason, each account's weight, influence and trust
    reason), ``screening`` (the
    loop's state, restored by the next refit in any worker), ``scores`` (natural units, by
    model name, for the information tracker). ``ages``: the accounts' ages in days for the age
    ramp (:func:`live_ages`; None: no age ramp)."""
    t0, c0 = time.perf_counter(), time.process_time()
    arena = arena_for(config, screening)
    if config.get("warm_start", False) and arena_id in _LAST:
        arena.last_fit = _LAST[arena_id]
    counts = snapshot.counts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit's notes carry every warning
        try:
            step = arena.step(counts, warm=arena.last_fit is not None)
        except ConvergenceError:
            if arena.last_fit is None:
                raise
            # a start far from the optimum (e.g. before a big import) can lead Newton astray:
            # the deterministic m-ELO start decides whether the maximum exists
            arena = arena_for(config, screening)
            step = arena.step(counts, warm=False)
    _LAST[arena_id] = step.fitted
    trust = trust_options(config, ages)
    fitted = bounded_fit(step.fitted, **trust)
    leaderboard = leaderboard_payload(fitted, counts, source=SOURCE)
    annotators = annotators_payload(
        step.fitted,
        source=SOURCE,
        ability_threshold=float(config["ability_threshold"]),
        normalization=fitted.normalization,
        trust=trust,
    )
    annotators["policy"] = config["policy"]
    annotators["min_records"] = int(config["min_records"])
    annotators["changes"] = [d.to_dict() for d in step.changes()]
    payload = {
        "leaderboard": leaderboard,
        "annotators": annotators,
        "screening": {
            "excluded": sorted(arena.excluded),
            "excluded_records": arena.excluded_records,
            "last_status": arena.last_status,
        },
        "scores": {name: float(x) for name, x in zip(fitted.models, fitted.scores, strict=True)},
        "n_votes": snapshot.n_votes,
        "config": dict(config),
    }
    return FitOutput(
        payload,
        time.perf_counter() - t0,
        fitted,
        snapshot.as_of_vote,
        time.process_time() - c0,
    )


#: The fit process's own live counts and engine per database (:func:`run_live_fit`).
_LIVE: dict[str, tuple[Any, Any]] = {}


def live_counts(db: str) -> tuple[Any, Any]:
    """This process's engine and :class:`~stablearena.service.counts.LiveCounts` of ``db``
    (made on first use; the counts are read in full at their first update)."""
    from . import store
    from .counts import LiveCounts

    got = _LIVE.get(db)
    if got is None:
        got = _LIVE[db] = (store.make_engine(db), LiveCounts())
    return got


def run_live_fit(
    db: str, config: dict[str, Any], screening: dict[str, Any] | None, want_fitted: bool
) -> FitOutput:
    """:func:`run_fit` on the fit process's own live counts of ``db``
    (:class:`stablearena.service.counts.LiveCounts`: read in full once, then brought up to date
    from the votes recorded since the last fit), so that nothing the size of the counts
    crosses between the processes: the API process sends the settings and gets the payload
    back (its size grows with models and annotators, not votes) — and the fitted object only
    when ``want_fitted`` (the dashboard is drawing)."""
    engine, live = live_counts(db)
    if not live.loaded:
        live.load(engine)  # once per process: not part of the fit's cost (refit pacing)
    t0, c0 = time.perf_counter(), time.process_time()
    snap = live.snapshot(engine)  # reads only the votes since the last fit
    if snap.empty:
        return FitOutput({}, time.perf_counter() - t0, None, snap.as_of_vote)
    out = run_fit(snap, config, screening, db, live_ages(engine, config))
    if not want_fitted:
        out.fitted = None
    out.seconds, out.cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    return out


def warm_up_worker() -> bool:
    """Imported and compiled once when the fit process starts (so the first refit is quick);
    one BLAS thread (the process shares the machine with the API workers; its matrices are a
    few hundred rows, where more threads mostly spin)."""
    import scipy.stats  # noqa: F401  (the influence test's binomial tails: ~1 s on first use)
    from threadpoolctl import threadpool_limits

    from .. import influence  # noqa: F401
    from ..raters import annotator  # noqa: F401

    threadpool_limits(1)
    return True
