"""One refit of the live arena: the Stable Arena step (am-ELO Algorithm 3) on a snapshot of the
pair counts.

Kept free of the web stack so that it runs cheaply in a separate process (the default: a fit
then never competes with requests for Python's interpreter lock). A :class:`Snapshot` is the
counts table read in one transaction together with the newest vote id it includes; it turns
into the same :class:`~stablearena.data.battles.PairCounts` that ``stablearena rank`` builds from
the exported vote log (models and annotators in sorted name order, rows in key order), so the
published leaderboard is the one ``rank`` computes from the export — with the arena's bounded
influence applied on top (:func:`stablearena.crowd.trust.bounded_fit`; off with ``ability_cap``,
``trust_ramp_votes`` and ``trust_ramp_days`` 0; the age ramp reads each account's age from the
store, :func:`stablearena.service.store.account_ages`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..analysis.leaderboard import annotators_payload, leaderboard_payload
from ..crowd.screening import StableArena
from ..crowd.trust import (
    account_weights,
    admit_young,
    bounded_fit,
    bounded_information,
    bounded_rows,
    one_step_update,
    record_days_of,
)
from ..data.battles import PairCounts
from ..raters.base import Fitted
from .snapshot import SOURCE, Snapshot

__all__ = [
    "Snapshot",
    "FitOutput",
    "UpdateBase",
    "UPDATE_METHOD",
    "merge_update",
    "run_fit",
    "run_live_fit",
    "run_update",
    "run_live_update",
    "live_counts",
    "live_ages",
    "live_active_days",
    "trust_options",
    "refit_published",
    "SOURCE",
]

#: The ``method`` of a published one-step update (:func:`run_update`) in the ``fits`` table.
UPDATE_METHOD = "am-elo one-step"
#: The ability a new account (not in the full fit) is weighed with in a one-step update, by
#: :func:`stablearena.crowd.trust.account_weights` (am-ELO's abilities have mean 1).
NEW_ACCOUNT_ABILITY = 1.0


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


@dataclass
class UpdateBase:
    """What a one-step update of the last full fit needs (kept by the process that fitted):
    the bounded fit (``fitted``: scores θ*, models, battles), its information H* at θ*
    (:func:`stablearena.crowd.trust.bounded_information`), each account's weight, and the rule for
    an account the fit did not weigh."""

    fitted: Any
    information: Any
    position: dict[str, int]  # model name → position in the fit
    weights: dict[str, float]  # fitted accounts' w_k (frozen)
    records: dict[str, float]  # accounts of the data not in the fit: their votes then
    excluded: frozenset[str]  # screened out: weight 0
    min_records: int
    trust: dict[str, Any]
    n_votes: int
    as_of_vote: int  # the newest vote of the full fit (which published fit this is)
    young: frozenset[str] = frozenset()  # fitted accounts under the young-share cap
    young_factors: Any = None  # f_m per model of the fit (None: the cap is off)
    # the crowd rule (docs/methods/crowd.md): weights are frequency weights (a row's votes
    # times w_k), and an account the fit did not weigh votes with the crowd's weight
    frequency: bool = False
    new_weight: float | None = None
    # the crowd rule's per-model limit: the limit and each account's weighted votes per model
    # at the full fit (name → {model position: w_k Σ n}); None: no limit
    model_votes: float | None = None
    model_volume: dict[str, dict[int, float]] | None = None


def _crowd_update_base(got: Any, fitted: Any, snap: Snapshot) -> UpdateBase:
    """The :class:`UpdateBase` of a crowd-rule fit: its information at the row weights
    (−H of :class:`stablearena.crowd.rule.CrowdFitted`), each account's weight, a new account at the
    crowd's weight 1. Between full fits an update applies neither the per-model limit nor the
    flood test; the next full fit does."""
    crowd = got.step.crowd
    limit = fitted.params.get("model_votes")
    volume: dict[str, dict[int, float]] | None = None
    if limit:
        from ..crowd.rule import account_model_volume

        c = fitted.counts
        w = np.array([crowd.weights[n] for n in c.annotators])
        m = len(fitted.models)
        uk, _, tot = account_model_volume(
            c.annotator, c.i, c.j, w[c.annotator.astype(np.int64)] * c.totals, m
        )
        volume = {}
        for kk, t in zip(uk.tolist(), tot.tolist(), strict=True):
            volume.setdefault(c.annotators[kk // m], {})[kk % m] = t
    return UpdateBase(
        fitted=fitted,
        information=-np.asarray(fitted.hessian(), dtype=float),
        position={name: k for k, name in enumerate(fitted.models)},
        weights={n: float(w) for n, w in crowd.weights.items() if n not in crowd.flagged},
        records={},
        excluded=frozenset(crowd.flagged),
        min_records=0,
        trust={},
        n_votes=snap.n_votes,
        as_of_vote=snap.as_of_vote,
        frequency=True,
        new_weight=1.0,
        model_votes=float(limit) if limit else None,
        model_volume=volume,
    )


def _crowd_update_factors(
    base: UpdateBase, names: Any, ann: np.ndarray, i: np.ndarray, j: np.ndarray, vol: np.ndarray
) -> np.ndarray:
    """The per-model limit on an update's rows (the crowd rule): a new row of account k on
    models (i, j) scaled by min(1, limit / C_km) for the smaller of its two models, C_km the
    account's weighted votes on m at the full fit plus those since (``vol``: each row's
    w_k n). The full fit's own rows keep their factors until the next full fit."""
    limit, old = base.model_votes, base.model_volume or {}
    if not limit:
        return np.ones(len(i))
    from ..crowd.rule import account_model_volume

    m = len(base.fitted.models)
    uk, inv, tot = account_model_volume(ann, i, j, vol, m)
    prior = np.array(
        [old.get(names[kk // m], {}).get(kk % m, 0.0) for kk in uk.tolist()], dtype=float
    )
    f = np.minimum(1.0, limit / np.maximum(tot + prior, 1e-300))
    return np.minimum(f[inv[: len(i)]], f[inv[len(i) :]])


#: The base of the last full fit of this process per arena (:func:`run_update`).
_BASE: dict[str, UpdateBase] = {}


def _update_base(
    step_fitted: Any, fitted: Any, trust: dict[str, Any], config: dict[str, Any], snap: Snapshot
) -> Any:
    """The :class:`UpdateBase` of a full fit (``None`` when the weighted votes leave a model
    out: then no update until the next full fit); ``trust``: the rule the fit was bounded by
    (:func:`trust_options`, the accounts' ages included)."""
    from ..errors import DisconnectedGraphError

    try:
        info = bounded_information(step_fitted, fitted.scores, **trust)
    except DisconnectedGraphError:
        return None
    names = step_fitted.annotators
    fit_idx = step_fitted._fit_annotators
    rows = bounded_rows(step_fitted, **trust)
    w = rows.weights
    young = (
        frozenset()
        if rows.young is None
        else frozenset(names[k] for k, y in zip(fit_idx.tolist(), rows.young, strict=True) if y)
    )
    return UpdateBase(
        fitted=fitted,
        information=info,
        position={name: k for k, name in enumerate(fitted.models)},
        weights={names[k]: float(x) for k, x in zip(fit_idx.tolist(), w, strict=True)},
        records={
            names[k]: float(step_fitted.records[k])
            for k in range(len(names))
            if not step_fitted.included[k]
        },
        excluded=frozenset(
            names[k] for k in range(len(names)) if step_fitted.status[k] == "excluded"
        ),
        min_records=int(config["min_records"]),
        trust=trust,
        n_votes=snap.n_votes,
        as_of_vote=snap.as_of_vote,
        young=young,
        young_factors=rows.factors,
    )


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
    screening = payload.get("screening") or {}
    if screening.get("rule") == "crowd":
        from ..crowd.board_rule import ArenaRule
        from ..crowd.rule import crowd_fit

        # the accounts the fit found new are new again (days 0), the others established
        new = set(screening.get("new", ()))
        days = {n: 0.0 if n in new else math.inf for n in counts.annotators or ()}
        x0 = None if start is None else getattr(start, "scores", None)
        if x0 is not None and len(x0) != counts.n_models:
            x0 = None
        return crowd_fit(counts, ArenaRule.from_config(cfg).crowd(), active_days=days, x0=x0).fitted
    arena = arena_for(cfg, screening)
    present = set(counts.annotators or ())
    young = {n: "young: left out of the ability fit" for n in screening.get("young", ())}
    # what the published fit left out: screened out (remembered or by influence), weight 0
    excluded = {
        n: "excluded" for n in (arena.excluded | set(screening.get("influence_excluded", ())))
    }
    fitted = arena.rater.fit(
        counts,
        exclude={n: r for n, r in excluded.items() if n in present},
        start=start,
        leave_out={n: "left out: weight 0" for n in screening.get("weightless", ())} | young,
    )
    fitted = admit_young(fitted, counts, young)
    return bounded_fit(fitted, **trust_options(cfg, published_ages(payload)))


def _crowd_screening(got: Any) -> dict[str, Any]:
    """What the crowd rule decided at a fit (nothing for the am-ELO rule): the accounts it found
    new, the models whose new accounts' votes it set aside (model → z), the accounts capped on
    some model (name → models) and the ability spread τ (docs/methods/crowd.md)."""
    crowd = getattr(got.step, "crowd", None)
    if crowd is None:
        return {}
    return {
        "rule": "crowd",
        "new": sorted(crowd.new),
        "floods": dict(crowd.floods),
        "capped": dict(crowd.capped),
        "prior_sd": crowd.prior_sd,
    }


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
    ``trust_ramp_votes``, ``trust_ramp_days``, ``trust_record_days``; absent — a fit published before they existed —
    or 0: off) with the accounts' ``ages`` in days (None: no age ramp):
    :meth:`stablearena.crowd.board_rule.ArenaRule.trust`."""
    from ..crowd.board_rule import ArenaRule

    return ArenaRule.from_config(config).trust(ages)


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


def live_active_days(engine: Any, config: dict[str, Any]) -> dict[str, float] | None:
    """Every account's distinct days with a vote (:func:`stablearena.service.store.
    account_active_days`): the days of record of the arena's trust rule."""
    from . import store

    with engine.connect() as conn:
        return store.account_active_days(conn)


def run_fit(
    snapshot: Snapshot,
    config: dict[str, Any],
    screening: dict[str, Any] | None,
    arena_id: str = "",
    ages: dict[str, float] | None = None,
    active_days: dict[str, float] | None = None,
) -> FitOutput:
    """The arena's rule (:func:`stablearena.crowd.board_rule.arena_fit` with
    :meth:`~stablearena.crowd.board_rule.ArenaRule.from_config`: weight-0 accounts left out, Stable
    Arena screening, influence screening, bounded influence — the rule ``stablearena rank
    --method arena`` applies to a log) on ``snapshot``, and the payload: ``leaderboard`` (the
    ``rank --format json`` contract, of the bounded fit), ``annotators`` (the ``annotators
    --format json`` contract with each decision's reason, each account's weight, influence and
    trust reason), ``screening`` (the loop's state, restored by the next refit in any worker),
    ``scores`` (natural units, by model name, for the information tracker). ``ages``: the
    accounts' ages in days for the age ramp (:func:`live_ages`; None: no age ramp);
    ``active_days``: their distinct days with a vote (:func:`live_active_days`)."""
    from ..crowd.board_rule import ArenaRule, arena_fit

    t0, c0 = time.perf_counter(), time.process_time()
    arena = arena_for(config, screening)
    if config.get("warm_start", False) and arena_id in _LAST:
        arena.last_fit = _LAST[arena_id]
    counts = snapshot.counts()
    rule = ArenaRule.from_config(config)
    got = arena_fit(
        counts,
        rule,
        ages=ages,
        active_days=active_days,
        arena=arena,
        warm=arena.last_fit is not None,
    )
    step, fitted, trust = got.step, got.fitted, got.trust
    _LAST[arena_id] = step.fitted
    leaderboard = leaderboard_payload(fitted, counts, source=SOURCE)
    annotators = annotators_payload(
        got.accounts,
        source=SOURCE,
        ability_threshold=float(config["ability_threshold"]),
        normalization=fitted.normalization,
        trust=trust,
    )
    annotators["policy"] = config["policy"]
    annotators["influence_policy"] = rule.influence
    annotators["min_records"] = int(config["min_records"])
    annotators["changes"] = [d.to_dict() for d in step.changes()]
    _BASE[arena_id] = (
        _crowd_update_base(got, fitted, snapshot)
        if getattr(got.step, "crowd", None) is not None
        else _update_base(got.accounts, fitted, trust, config, snapshot)
    )
    payload = {
        "leaderboard": leaderboard,
        "annotators": annotators,
        "screening": {
            "excluded": sorted(arena.excluded),
            "excluded_records": arena.excluded_records,
            "last_status": arena.last_status,
            "influence_excluded": dict(got.influence_excluded),
            "weightless": sorted(got.weightless),
            "young": sorted(got.young),
            **_crowd_screening(got),
        },
        "scores": {name: float(x) for name, x in zip(fitted.models, fitted.scores, strict=True)},
        "n_votes": snapshot.n_votes,
        "config": dict(config),
        # whether both the am-ELO step and the bounded fit converged (stablearena.analysis.fitcheck)
        "converged": got.converged,
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


def probe_flagged(engine: Any) -> dict[str, str]:
    """The judges their probe battles flag (stablearena.judging.probes, its default threshold): name →
    reason. Their votes are left out of every fit and update."""
    from ..judging.probes import DEFAULT_THRESHOLD, DEFAULT_Z
    from . import store

    with engine.connect() as conn:
        return store.probes.flagged_judges(conn, DEFAULT_THRESHOLD, DEFAULT_Z)


def live_counts(db: str) -> tuple[Any, Any]:
    """This process's engine and :class:`~stablearena.service.counts.LiveCounts` of ``db``
    (made on first use; the counts are read in full at their first update)."""
    from . import store
    from .counts import LiveCounts

    got = _LIVE.get(db)
    if got is None:
        got = _LIVE[db] = (store.make_engine(db), LiveCounts(journal=True))
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
    snap = live.snapshot(engine, mark=True)  # reads only the votes since the last fit
    snap = snap.without(probe_flagged(engine))  # judges that follow notes weigh nothing
    if snap.empty:
        return FitOutput({}, time.perf_counter() - t0, None, snap.as_of_vote)
    out = run_fit(
        snap,
        config,
        screening,
        db,
        live_ages(engine, config),
        live_active_days(engine, config),
    )
    if not want_fitted:
        out.fitted = None
    out.seconds, out.cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    return out


def _new_account_weight(name: str, votes: float, trust: dict[str, Any]) -> float:
    """The weight of an account the full fit did not weigh: the rule
    (:func:`stablearena.crowd.trust.account_weights`) with ability :data:`NEW_ACCOUNT_ABILITY`, its
    ``votes`` and — under an age ramp — its age at the full fit (an account created since:
    age 0)."""
    ages = trust.get("ages")
    age = None if ages is None else np.array([float(ages.get(name, 0.0))])
    w = account_weights(
        np.array([NEW_ACCOUNT_ABILITY]),
        np.array([votes]),
        cap=trust["cap"],
        ramp_votes=trust["ramp_votes"],
        ages=age,
        ramp_days=trust.get("ramp_days"),
    )
    return float(w[0])


def _young_in_update(names: Any, base: UpdateBase) -> np.ndarray:
    """Whether each account of an update's votes is young for the young-share cap: a fitted
    account as the full fit found it; one the fit did not weigh by its days of record then
    (active days when the rule counts them, else its age; an account created since: 0)."""
    if base.young_factors is None:
        return np.zeros(len(names), dtype=bool)
    t = record_days_of(names, base.trust.get("ages"), base.trust.get("active_days"))
    ramp = base.trust.get("ramp_days") or 0.0
    return np.array(
        [
            n in base.young if n in base.weights else t is not None and t[k] < ramp
            for k, n in enumerate(names)
        ],
        dtype=bool,
    )


def run_update(
    delta: Snapshot, arena_id: str, full_fit: dict[str, Any], want_fitted: bool = False
) -> FitOutput:
    """The last full fit of this process (:func:`run_fit` on ``arena_id``) updated by the votes
    since (``delta``: the change of each cell, :meth:`~stablearena.service.counts.LiveCounts.
    delta`) with one Newton step (:func:`stablearena.crowd.trust.one_step_update`): the accounts'
    weights frozen at the full fit's, an account the fit did not weigh weighed by the rule
    with ability :data:`NEW_ACCOUNT_ABILITY` and its votes (0 below ``min_records`` or when
    screened out), models the fit does not know left out. Costs the cells changed and M³, not
    the arena's C. The payload holds only what changes — the leaderboard's models, battles,
    fit statistics and ``update`` (``"one-step"``), the ``full_fit`` it starts from (given:
    ``id``, ``as_of_vote``, ``n_votes``, ``fitted_at``) and ``votes_since_full_fit`` — and is
    completed from the full fit's by :func:`merge_update`. An empty payload when this process
    has no base (it did not make the last full fit)."""
    t0, c0 = time.perf_counter(), time.process_time()
    base = _BASE.get(arena_id)
    if base is None or base.as_of_vote != int(full_fit["as_of_vote"]):
        return FitOutput({}, time.perf_counter() - t0, None, delta.as_of_vote)
    fitted = base.fitted
    tot = delta.wins + delta.losses + delta.ties + delta.ties_both_bad
    since = int(round(float(tot.sum())))
    pos = np.array([base.position.get(name, -1) for name in delta.model_names], dtype=np.int64)
    pi, pj = pos[delta.i], pos[delta.j]
    ann = np.asarray(delta.annotator, dtype=np.int64)
    votes = np.bincount(ann, tot, len(delta.annotator_names))
    coef = np.zeros(len(delta.annotator_names))
    use = np.zeros(len(delta.annotator_names), dtype=bool)
    for k in np.unique(ann).tolist():
        name = delta.annotator_names[k]
        w = base.weights.get(name)
        if w is not None:
            coef[k], use[k] = w, True
        elif name not in base.excluded and base.new_weight is not None:
            coef[k], use[k] = base.new_weight, True
        elif name not in base.excluded:
            n = base.records.get(name, 0.0) + votes[k]
            if n >= base.min_records:
                coef[k] = _new_account_weight(name, n, base.trust)
                use[k] = True
    young = _young_in_update(delta.annotator_names, base)
    keep = (pi >= 0) & (pj >= 0) & use[ann] & ((tot != 0) | (delta.wins != delta.losses))
    # rows oriented as the fit's: i is the lower position
    swap = pi > pj
    i, j = np.where(swap, pj, pi)[keep], np.where(swap, pi, pj)[keep]
    win_i = np.where(swap, delta.losses, delta.wins)[keep]
    n = tot[keep]
    s = win_i + 0.5 * (delta.ties + delta.ties_both_bad)[keep]
    row_coef = coef[ann[keep]]
    if base.young_factors is not None:  # young accounts' rows scaled by the full fit's f_m
        f = np.asarray(base.young_factors)
        row_coef = np.where(young[ann[keep]], row_coef * np.minimum(f[i], f[j]), row_coef)
    if base.frequency:  # the crowd rule's weights count votes, at most its limit per model
        row_coef = row_coef * _crowd_update_factors(
            base, delta.annotator_names, ann[keep], i, j, row_coef * n
        )
        one = one_step_update(fitted.scores, base.information, i, j, n * row_coef, s * row_coef)
    else:
        one = one_step_update(fitted.scores, base.information, i, j, n, s, row_coef)
    m = len(fitted.models)
    battles = fitted.battles + np.bincount(i, n, m) + np.bincount(j, n, m)
    new = replace(
        fitted,
        scores=one.scores,
        battles=battles,
        n_comparisons=fitted.n_comparisons + float(n.sum()),
        loglik=fitted.loglik + one.loglik_change,
    )
    leaderboard = Fitted.to_dict(new)  # the board without the annotators (the full fit's)
    leaderboard["update"] = "one-step"
    leaderboard["full_fit"] = dict(full_fit)
    leaderboard["votes_since_full_fit"] = since
    payload = {
        "update": {"method": UPDATE_METHOD, "base": int(full_fit["id"]), "votes_since": since},
        "leaderboard": leaderboard,
        "scores": {name: float(x) for name, x in zip(new.models, new.scores, strict=True)},
        "n_votes": base.n_votes + since,
    }
    return FitOutput(
        payload,
        time.perf_counter() - t0,
        new if want_fitted else None,
        delta.as_of_vote,
        time.process_time() - c0,
    )


def run_live_update(db: str, full_fit: dict[str, Any], want_fitted: bool) -> FitOutput:
    """:func:`run_update` on the votes this fit process's live counts applied since its last
    full fit (:func:`run_live_fit`): only they are read."""
    engine, live = live_counts(db)
    if not live.loaded or db not in _BASE:
        return FitOutput({}, 0.0, None, 0)
    return run_update(live.delta(engine).without(probe_flagged(engine)), db, full_fit, want_fitted)


def merge_update(full: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """The payload of a published one-step update: the full fit's (annotators, screening,
    configuration; the leaderboard's annotators and notes) with what the update changed."""
    return {
        **full,
        "leaderboard": {**full["leaderboard"], **update["leaderboard"]},
        "scores": update["scores"],
        "n_votes": update["n_votes"],
        "update": update["update"],
    }


def warm_up_worker() -> bool:
    """Imported and compiled once when the fit process starts (so the first refit is quick);
    one BLAS thread (the process shares the machine with the API workers; its matrices are a
    few hundred rows, where more threads mostly spin)."""
    import scipy.stats  # noqa: F401  (the influence test's binomial tails: ~1 s on first use)
    from threadpoolctl import threadpool_limits

    from ..crowd import influence  # noqa: F401
    from ..raters import annotator  # noqa: F401

    threadpool_limits(1)
    return True
