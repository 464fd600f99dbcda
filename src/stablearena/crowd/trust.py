"""Bounded influence: how much one account's votes may weigh in a fit.

am-ELO weighs an annotator's votes by its estimated ability a_k (docs/methods/annotators.md).
An account that agrees with the leaderboard it is pushing earns a large ability and so more
weight (docs/guides/rigging.md). Bounded influence caps that weight and lets it grow only as
the account votes:

    w_k = min(max(a_k, 0), c_k) · min(1, n_k / ramp_votes) · min(1, t_k / ramp_days),
    c_k = cap when t_k ≥ record_days, else min(cap, 1),

with n_k the account's vote count (its age in votes) and t_k its record in days: the number of
distinct UTC days on which it voted (``active_days``) when those are known, else its age in days
since it was created (``ages``; the day factor is off when neither is known or ``ramp_days`` is
0). The vote ramp cannot stop an attacker whose accounts vote like honest ones (their camouflage
votes count towards the ramp); the day ramp makes an identity cost time: before ``ramp_days``
days an account's votes weigh less, with no day nothing. Counted in *active* days an account
left idle since sign-up (a sleeper) earns nothing by waiting: its record is the days it spent
voting. And until its record reaches ``record_days`` no account weighs more than an honest
annotator (1), however well its votes agree with the board — agreeing first is how a patient
attacker inflates its am-ELO ability (docs/guides/rigging.md, "Sleepers"). **Young accounts**
(fewer than ``ramp_days`` days of record) together supply at most a share s (``young_share``)
of any model's weighted votes: where they would supply more, their votes on that model are
scaled down (:func:`young_share_factors`), so that many young accounts cannot buy, by number,
the weight that each one lacks. The scores are then the Bradley–Terry
maximum-likelihood estimate with those row coefficients held fixed,
P(i beats j | k) = σ(w_k (x_i − x_j)) — the am-ELO likelihood with the abilities replaced by
the bounded weights. With no ability above ``cap`` and ``ramp_votes`` ≤ every account's
count, this is the am-ELO fit itself (its optimum has a zero score gradient at its abilities).

:func:`account_trust` says, per account, what weight it got and why, and how far it moves the
leaderboard (:func:`stablearena.crowd.influence.account_influence` at the bounded fit):
``stablearena annotators`` and the live arena's admin view show it (docs/guides/annotators.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from .. import choices
from .._numeric import expit
from ..errors import InputError
from ..raters.bradley_terry import bradley_terry_loglik, solve_bradley_terry

__all__ = [
    "DEFAULT_CAP",
    "DEFAULT_RAMP_VOTES",
    "DEFAULT_RAMP_DAYS",
    "DEFAULT_RECORD_DAYS",
    "DEFAULT_YOUNG_SHARE",
    "AccountTrust",
    "BoundedRows",
    "account_trust",
    "account_weights",
    "bounded_fit",
    "bounded_information",
    "bounded_rows",
    "bounded_weights",
    "bounded_scores",
    "admit_young",
    "young_accounts",
    "young_names",
    "young_share_factors",
    "weightless",
    "OneStep",
    "one_step_update",
]

#: Largest weight of one account, in average annotators (am-ELO's abilities have mean 1): the
#: value of :data:`stablearena.crowd.influence.INFLUENCE_ABILITY_CAP`. Set in
#: :mod:`stablearena.choices` (``TRUST_CAP``), which the command line reads without numpy.
DEFAULT_CAP: float = choices.TRUST_CAP
#: Votes after which a new account weighs fully (its weight grows linearly until then).
DEFAULT_RAMP_VOTES: float = choices.TRUST_RAMP_VOTES
#: Days after which a new account weighs fully (its weight grows linearly with its age).
DEFAULT_RAMP_DAYS: float = choices.TRUST_RAMP_DAYS
#: Days of record (active days when known) before an account may weigh more than 1.
DEFAULT_RECORD_DAYS: float = choices.TRUST_RECORD_DAYS
#: Largest share of any model's weighted votes that young accounts together may supply.
DEFAULT_YOUNG_SHARE: float = choices.TRUST_YOUNG_SHARE


def _off(value: float | None) -> bool:
    """A cap or ramp of ``None`` or ≤ 0 is off."""
    return value is None or value <= 0


def account_weights(
    abilities: np.ndarray,
    votes: np.ndarray,
    *,
    cap: float | None,
    ramp_votes: float | None = 0.0,
    ages: np.ndarray | None = None,
    ramp_days: float | None = 0.0,
    record_days: float | None = 0.0,
) -> np.ndarray:
    """w_k = min(max(a_k, 0), c_k) · min(1, n_k / ramp_votes) · min(1, t_k / ramp_days) for
    every account k, c_k = ``cap`` when t_k ≥ ``record_days`` and min(``cap``, 1) before (no cap
    when ``cap`` is None or ≤ 0, no vote ramp when ``ramp_votes`` is, no day ramp when
    ``ramp_days`` is, no record rule when ``record_days`` is; without ``ages`` — t_k in days
    of record, active days or days since creation, +∞ for an account that counts as old —
    neither day rule applies). Negative abilities weigh nothing (the account is screened)."""
    hi = math.inf if _off(cap) else float(cap)  # type: ignore[arg-type]
    a = np.asarray(abilities, float)
    t = None if ages is None else np.maximum(np.asarray(ages, float), 0.0)
    if t is not None and not _off(record_days):
        c = np.where(t >= record_days, hi, min(hi, 1.0))  # type: ignore[operator]
        a = np.clip(a, 0.0, c)
    else:
        a = np.clip(a, 0.0, hi)
    with np.errstate(over="ignore"):  # a tiny ramp: n / ramp = inf, weight min(1, ·) = 1
        if not _off(ramp_votes):
            a = a * np.minimum(1.0, np.asarray(votes, float) / ramp_votes)  # type: ignore[operator]
        if t is not None and not _off(ramp_days):
            a = a * np.minimum(1.0, t / ramp_days)  # type: ignore[operator]
    return a


def record_days_of(
    names: Any,
    ages: Mapping[str, float] | None,
    active_days: Mapping[str, float] | None,
) -> np.ndarray | None:
    """t_k of every name: its ``active_days`` when those are given (a name they lack: 0, an
    account that has not voted on any day counted), else its ``ages`` (a name they lack: 0, a
    new account); None when neither is given."""
    days = active_days if active_days is not None else ages
    if days is None:
        return None
    return np.array([float(days.get(n, 0.0)) for n in names])


def weightless(
    names: Any,
    *,
    ages: Mapping[str, float] | None = None,
    active_days: Mapping[str, float] | None = None,
    ramp_days: float | None = DEFAULT_RAMP_DAYS,
) -> frozenset[str]:
    """The ``names`` whose day factor min(1, t_k / ``ramp_days``) is 0 (no day of record): they
    weigh 0 whatever their votes, so they are left out of the ability fit too (an am-ELO fit
    with them excluded, as accounts below δ votes are) — otherwise their votes move the other
    accounts' abilities and, through them, the board (docs/guides/rigging.md)."""
    if _off(ramp_days):
        return frozenset()
    names = tuple(names)
    t = record_days_of(names, ages, active_days)
    if t is None:
        return frozenset()
    return frozenset(n for n, d in zip(names, t, strict=True) if d <= 0)


def _fit_votes(fit: Any) -> np.ndarray:
    """n_k of every fitted account (the order of the fit's counts' annotators)."""
    c = fit.counts
    return np.bincount(c.annotator, c.totals, len(c.annotators))


def _fit_ages(
    fit: Any,
    ages: Mapping[str, float] | None,
    active_days: Mapping[str, float] | None = None,
) -> np.ndarray | None:
    """t_k in days of record of every fitted account (:func:`record_days_of`), or None when
    neither ages nor active days are known."""
    names = fit.annotators
    return record_days_of([names[k] for k in fit._fit_annotators], ages, active_days)


def bounded_weights(
    fit: Any,
    cap: float | None,
    ramp_votes: float | None,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = None,
    active_days: Mapping[str, float] | None = None,
    record_days: float | None = None,
) -> np.ndarray:
    """Each fitted account's bounded weight w_k (:func:`account_weights`; in the order of
    ``fit._fit_annotators``, days of record from ``active_days`` when given, else ``ages``) —
    its ability as fitted when the cap, both ramps and the record rule are off (the rule is
    off: am-ELO as it is, negative abilities included); day rules that lower nobody's weight
    (every account at least ``ramp_days`` and ``record_days`` days of record) count as off."""
    a = fit.abilities[fit._fit_annotators]
    days_on = not (_off(ramp_days) and _off(record_days))
    t = _fit_ages(fit, ages, active_days) if days_on else None
    if t is not None and np.all(t >= max(ramp_days or 0.0, record_days or 0.0)):
        t = None  # every account has the record: no day rule
    if _off(cap) and _off(ramp_votes) and t is None:
        return np.array(a, float)
    return account_weights(
        a,
        _fit_votes(fit),
        cap=cap,
        ramp_votes=ramp_votes,
        ages=t,
        ramp_days=ramp_days,
        record_days=record_days,
    )


def young_accounts(
    fit: Any,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = None,
    active_days: Mapping[str, float] | None = None,
) -> np.ndarray | None:
    """Whether each fitted account (the order of ``fit._fit_annotators``) is **young**: fewer
    than ``ramp_days`` days of record (active days when given, else ages), so that the day ramp
    lowers its weight — None when no account is (no days known, no day ramp)."""
    if _off(ramp_days):
        return None
    t = _fit_ages(fit, ages, active_days)
    if t is None:
        return None
    young = t < ramp_days  # type: ignore[operator]
    return young if young.any() else None


def young_names(
    counts: Any,
    *,
    ages: Mapping[str, float] | None = None,
    active_days: Mapping[str, float] | None = None,
    ramp_days: float | None = DEFAULT_RAMP_DAYS,
    min_records: float = 0.0,
) -> dict[str, str]:
    """The **young** accounts of ``counts`` (pair counts per annotator; name → reason): a day of
    record or more, fewer than ``ramp_days`` (active days when given, else ages; a name they
    lack: 0 — no day, so weightless, not young) and at least ``min_records`` votes (below δ an
    account is out of the fit anyway). Their votes are left out of the ability fit
    (:func:`admit_young`); empty without days or a day ramp."""
    if _off(ramp_days):
        return {}
    names = tuple(counts.annotators or ())
    t = record_days_of(names, ages, active_days)
    if t is None:
        return {}
    unit = "active days" if active_days is not None else "days old"
    records = np.bincount(counts.annotator, counts.totals, len(names))
    ok = (t > 0) & (t < ramp_days) & (records >= min_records)  # type: ignore[operator]
    return {
        n: f"young ({d:.3g} of {ramp_days:g} {unit}): left out of the ability fit, its ability "
        "estimated alone against the board"
        for n, d, y in zip(names, t, ok, strict=True)
        if y
    }


def admit_young(fit: Any, counts: Any, young: Mapping[str, str]) -> Any:
    """The am-ELO ``fit`` with the ``young`` accounts (name → reason, :func:`young_names`) — left
    out of it — admitted to the fitted accounts with the abilities the fit gave them alone
    (the ability MLE with the scores held fixed, :class:`~stablearena.raters.annotator.
    AmEloFitted`), their votes in ``counts`` (pair counts per annotator; votes on a model the
    fit does not rate are dropped) added to its counts. The scores stay those of the fit
    without them: young accounts shape no other account's ability and no score of the ability
    fit — many new accounts cannot move the honest accounts' abilities, which is how accounts
    created for an attack lifted a target though each weighed almost nothing
    (docs/guides/rigging.md, "Young accounts"). Their weight in the board is the rule's
    (:func:`bounded_fit` of the result): ability capped at 1 before the record, × both ramps.
    ``fit`` itself when no young account is in ``counts``."""
    from ..data.battles import PairCounts

    names = fit.annotators
    where = {n: k for k, n in enumerate(names)}
    status = list(fit.status)
    add = [where[n] for n in young if n in where and status[where[n]] == "left_out"]
    c_names = counts.annotators or ()
    c_where = {n: k for k, n in enumerate(c_names)}
    add = [k for k in add if names[k] in c_where]
    if not add:
        return fit
    reasons = list(fit.reasons)
    for k in add:
        status[k] = "included"
        reasons[k] = f"{young[names[k]]} ({float(fit.abilities[k]):.3g})"
    new_idx = np.flatnonzero(np.isin(np.array(status, dtype=object), ["included", "flagged"]))
    pos = np.full(len(names), -1, dtype=np.int64)
    pos[new_idx] = np.arange(len(new_idx))
    fc = fit.counts
    old_ann = pos[fit._fit_annotators[fc.annotator]]
    c_pos = np.full(len(c_names), -1, dtype=np.int64)
    for k in add:
        c_pos[c_where[names[k]]] = pos[k]
    yc = counts.take(c_pos[counts.annotator] >= 0)
    m_where = {m: k for k, m in enumerate(fc.models)}
    mi = np.array([m_where.get(m, -1) for m in yc.models], dtype=np.int64)
    a, b = mi[yc.i], mi[yc.j]
    ok = (a >= 0) & (b >= 0)
    a, b = a[ok], b[ok]
    swap = a > b
    merged = PairCounts(
        models=fc.models,
        i=np.r_[fc.i, np.where(swap, b, a)],
        j=np.r_[fc.j, np.where(swap, a, b)],
        wins=np.r_[fc.wins, np.where(swap, yc.losses[ok], yc.wins[ok])],
        losses=np.r_[fc.losses, np.where(swap, yc.wins[ok], yc.losses[ok])],
        ties=np.r_[fc.ties, yc.ties[ok]],
        ties_both_bad=np.r_[fc.ties_both_bad, yc.ties_both_bad[ok]],
        annotator=np.r_[old_ann, c_pos[yc.annotator[ok]]],
        annotators=tuple(names[k] for k in new_idx),
        source=fc.source,
    )
    m = merged.n_models
    battles = np.bincount(merged.i, merged.totals, m) + np.bincount(merged.j, merged.totals, m)
    return replace(
        fit,
        counts=merged,
        status=tuple(status),
        reasons=tuple(reasons),
        n_comparisons=merged.n_comparisons,
        battles=battles,
        notes=(
            *fit.notes,
            f"{len(add)} young account(s) left out of the ability fit and weighed by their "
            "abilities alone (docs/guides/annotators.md)",
        ),
    )


def young_share_factors(
    i: np.ndarray,
    j: np.ndarray,
    weighted: np.ndarray,
    young: np.ndarray,
    n_models: int,
    share: float,
) -> np.ndarray:
    """The young-share cap's factor f_m of every model m: with Y_m and O_m the weighted votes
    (w_k · n_r summed over the rows r = (i, j) that involve m) of young and of other accounts,

        f_m = min(1, s / (1 − s) · O_m / Y_m)    (1 where Y_m = 0 or O_m = 0),

    s = ``share``; a young row's weight is then multiplied by min(f_i, f_j), so that young
    accounts together supply at most the share s of any model's weighted votes (f_m Y_m ≤
    s (f_m Y_m + O_m)). Weighted votes, not information: a vote's pull on a score is w_k, its
    information w_k², so an information share would let low-weight votes pull far more than
    their share. A model only young accounts judged (O_m = 0) is left alone: there the cap has
    nothing to be a share of (at a launch every account counts as old). ``weighted``:
    w_k · n_r of every row; ``young``: whether each row is a young account's."""
    if not 0.0 < share < 1.0:
        raise InputError(f"the young share must lie in (0, 1), not {share!r}.")
    yw = np.where(young, weighted, 0.0)
    ow = np.where(young, 0.0, weighted)
    y = np.bincount(i, yw, n_models) + np.bincount(j, yw, n_models)
    o = np.bincount(i, ow, n_models) + np.bincount(j, ow, n_models)
    limit = share / (1.0 - share) * o
    f = np.ones(n_models)
    bind = (y > limit) & (o > 0)
    f[bind] = limit[bind] / y[bind]
    return f


@dataclass(frozen=True)
class BoundedRows:
    """The rule's weights on a fit (:func:`bounded_rows`): ``weights`` w_k of every fitted
    account (:func:`bounded_weights`, the order of ``fit._fit_annotators``); ``rows`` each count
    row's weight (w_k, times min(f_i, f_j) for a young account's row); ``young`` whether each
    fitted account is young (:func:`young_accounts`; None: none is, or the cap is off);
    ``factors`` f_m of every model (:func:`young_share_factors`; None when the cap is off)."""

    weights: np.ndarray
    rows: np.ndarray
    young: np.ndarray | None
    factors: np.ndarray | None


def bounded_rows(
    fit: Any,
    *,
    cap: float | None,
    ramp_votes: float | None = 0.0,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = 0.0,
    active_days: Mapping[str, float] | None = None,
    record_days: float | None = 0.0,
    young_share: float | None = 0.0,
) -> BoundedRows:
    """The rule's weights on ``fit``: each account's (:func:`bounded_weights`) and each count
    row's, the young-share cap applied (:func:`young_share_factors`, off when ``young_share``
    is None, 0 or no account is young)."""
    w = bounded_weights(fit, cap, ramp_votes, ages, ramp_days, active_days, record_days)
    c = fit.counts
    coef = w[c.annotator]
    young = None if _off(young_share) else young_accounts(fit, ages, ramp_days, active_days)
    if young is None:
        return BoundedRows(w, coef, None, None)
    yr = young[c.annotator]
    f = young_share_factors(c.i, c.j, coef * c.totals, yr, c.n_models, float(young_share))  # type: ignore[arg-type]
    return BoundedRows(w, np.where(yr, coef * np.minimum(f[c.i], f[c.j]), coef), young, f)


def _weighted_rows(fit: Any, coef: np.ndarray) -> tuple[np.ndarray, ...]:
    """The rows of the bounded objective: (i, j, n, s, coef) of the fit's counts with a weight
    (``coef``, each row's weight from :func:`bounded_rows`, ≠ 0, and a vote), and the models
    that get the existence prior — those the fit gave it and those without a finite MLE on the
    weighted votes alone (``None``: no model); a
    :class:`~stablearena.errors.DisconnectedGraphError` when those votes leave a model out."""
    from ..data.graph import check_comparison_graph

    c = fit.counts
    keep = (coef > 0) & (c.totals > 0)
    prior = check_comparison_graph(c.take(keep)).needs_prior
    if fit.model_prior is not None:
        prior = prior | (np.asarray(fit.model_prior) > 0)
    i, j = c.i[keep].astype(np.int64), c.j[keep].astype(np.int64)
    return i, j, c.totals[keep], c.score[keep], coef[keep], prior if prior.any() else None


def _solve(fit: Any, rows: np.ndarray) -> tuple[np.ndarray, float]:
    """Scores of the Bradley–Terry fit with row coefficients ``rows`` (each count row's weight,
    :func:`bounded_rows`), and its log-likelihood on every vote of the fit (a vote of weight 0
    counts ln ½). The existence prior goes on the models of :func:`_weighted_rows`."""
    c = fit.counts
    i, j, n, s, coef, prior = _weighted_rows(fit, rows)
    x = solve_bradley_terry(c.n_models, i, j, n, s, coef=coef, x0=fit.scores, prior_mask=prior).x
    return x, bradley_terry_loglik(
        x, c.i.astype(np.int64), c.j.astype(np.int64), c.totals, c.score, rows
    )


def bounded_scores(
    fit: Any,
    *,
    cap: float | None,
    ramp_votes: float | None = 0.0,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = 0.0,
    active_days: Mapping[str, float] | None = None,
    record_days: float | None = 0.0,
    young_share: float | None = 0.0,
) -> np.ndarray:
    """The model scores of an am-ELO ``fit`` refitted with each account's weight bounded by
    :func:`account_weights` (accounts' vote counts from the fit's counts, days of record by
    name from ``active_days``, else ``ages``) and young accounts' rows by the young-share cap
    (:func:`young_share_factors`)."""
    rows = bounded_rows(
        fit,
        cap=cap,
        ramp_votes=ramp_votes,
        ages=ages,
        ramp_days=ramp_days,
        active_days=active_days,
        record_days=record_days,
        young_share=young_share,
    ).rows
    return _solve(fit, rows)[0]


def bounded_fit(
    fit: Any,
    *,
    cap: float | None,
    ramp_votes: float | None = 0.0,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = 0.0,
    active_days: Mapping[str, float] | None = None,
    record_days: float | None = 0.0,
    young_share: float | None = 0.0,
) -> Any:
    """``fit`` (am-ELO) with its scores replaced by :func:`bounded_scores` — the abilities,
    statuses and reasons kept; ``loglik`` that of the bounded model;
    ``params`` gain ``ability_cap``, ``trust_ramp_votes`` (and ``trust_ramp_days``,
    ``trust_record_days`` and ``trust_days`` — ``"active"`` or ``"age"`` — when days are
    given, ``trust_young_share`` when the young-share cap is on) — or ``fit`` itself when every
    row's bounded weight equals its account's ability (nothing capped, ramped, shared out or
    negative), and when the cap, both ramps, the record rule and the young-share cap are off
    (None or ≤ 0: the rule is off). ``active_days`` (name → distinct UTC days with a vote, up
    to the fit) replace ``ages`` (name → days since creation) as the days of record when given.
    ``young_share``: the largest share of any model's weighted votes that accounts with fewer
    than ``ramp_days`` days of record may supply together (:func:`young_share_factors`).
    Accounts of weight 0 for want of a day (:func:`weightless`) should be left out of ``fit``
    itself (its ``exclude``): here they only weigh 0."""
    from ..errors import DisconnectedGraphError

    got = bounded_rows(
        fit,
        cap=cap,
        ramp_votes=ramp_votes,
        ages=ages,
        ramp_days=ramp_days,
        active_days=active_days,
        record_days=record_days,
        young_share=young_share,
    )
    a = fit.abilities[fit._fit_annotators]
    if np.array_equal(got.weights, a) and np.array_equal(got.rows, a[fit.counts.annotator]):
        return fit
    try:
        x, loglik = _solve(fit, got.rows)
    except DisconnectedGraphError as exc:  # weighed votes alone cannot rank every model
        return replace(fit, notes=(*fit.notes, f"bounded influence not applied: {exc}"))
    params = {**dict(fit.params), "ability_cap": cap, "trust_ramp_votes": ramp_votes}
    days = "active" if active_days is not None else "age" if ages is not None else None
    aged = days is not None and not _off(ramp_days)
    recorded = days is not None and not _off(record_days)
    if aged:
        params["trust_ramp_days"] = ramp_days
    if recorded:
        params["trust_record_days"] = record_days
    if aged or recorded:
        params["trust_days"] = days
    shared = got.young is not None
    if shared:
        params["trust_young_share"] = young_share
    unit = "active days" if days == "active" else "age in days"
    note = (
        f"bounded influence: each account's weight min(max(ability, 0), {cap or 'no cap'}"
        + (f"; 1 before {record_days:g} {unit}" if recorded else "")
        + f") · min(1, votes / {ramp_votes or 'no ramp'})"
        + (f" · min(1, {unit} / {ramp_days:g})" if aged else "")
        + (
            f"; accounts under {ramp_days:g} {unit} together at most {young_share:.0%} of "
            "any model's weighted votes"
            if shared
            else ""
        )
        + " (docs/guides/annotators.md)"
    )
    return replace(fit, scores=x, loglik=loglik, params=params, notes=(*fit.notes, note))


def bounded_information(
    fit: Any,
    scores: np.ndarray,
    *,
    cap: float | None,
    ramp_votes: float | None = 0.0,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = 0.0,
    active_days: Mapping[str, float] | None = None,
    record_days: float | None = 0.0,
    young_share: float | None = 0.0,
) -> np.ndarray:
    """H* = −∇² of the bounded objective (the log-likelihood :func:`bounded_scores` maximises,
    existence prior included) at ``scores`` (those of :func:`bounded_fit`):

        H* = Σ_r w_k² n_r p_r (1 − p_r) (e_i − e_j)(e_i − e_j)ᵀ + H_prior,
        p_r = σ(w_k (x_i − x_j)),

    the weights w_k of each row (:func:`bounded_rows`: the account's, shared out where the
    young-share cap binds), H_prior the existence prior's curvature (α virtual ties against the
    average model, :func:`~stablearena.raters.bradley_terry.solve_bradley_terry`). An M×M
    Laplacian, singular along 1 (scores have mean zero): what :func:`one_step_update` needs
    from a full fit. One pass over the fit's counts (O(C))."""
    from ..raters.bradley_terry import PRIOR_STRENGTH, _prior_terms
    from ..raters.information import laplacian

    rows = bounded_rows(
        fit,
        cap=cap,
        ramp_votes=ramp_votes,
        ages=ages,
        ramp_days=ramp_days,
        active_days=active_days,
        record_days=record_days,
        young_share=young_share,
    ).rows
    i, j, n, _, coef, prior = _weighted_rows(fit, rows)
    x = np.asarray(scores, float)
    p = expit(coef * (x[i] - x[j]))
    info = laplacian(len(x), i, j, n * coef * coef * p * (1.0 - p))
    if prior is not None:
        info -= _prior_terms(x, prior.astype(float), PRIOR_STRENGTH)[2]
    return info


@dataclass(frozen=True)
class OneStep:
    """:func:`one_step_update`'s result: ``scores`` θ* + δ (mean zero), ``information``
    H* + H_new (at θ*), ``gradient`` g_new, ``loglik_change`` ℓ_new(θ*) + ½ g_newᵀδ (the
    second-order change of the fit's log-likelihood, new votes included)."""

    scores: np.ndarray
    information: np.ndarray
    gradient: np.ndarray
    loglik_change: float

    @property
    def covariance(self) -> np.ndarray:
        """The updated scores' covariance: the pseudo-inverse of ``information`` (Σx = 0), as
        the bounded fit's (its information; here with the prior's few virtual ties)."""
        from ..raters.information import laplacian_pinv

        try:
            return laplacian_pinv(self.information)
        except np.linalg.LinAlgError:
            return np.linalg.pinv(self.information, hermitian=True)


def one_step_update(
    scores: np.ndarray,
    information: np.ndarray,
    i: np.ndarray,
    j: np.ndarray,
    n: np.ndarray,
    s: np.ndarray,
    coef: np.ndarray | float = 1.0,
) -> OneStep:
    """The scores of a Bradley–Terry fit with fixed row coefficients after new votes, by one
    Newton step from the fit's optimum θ* (whose gradient on the old votes is zero):

        g_new = Σ_r c_r (s_r − n_r p_r)(e_i − e_j),   p_r = σ(c_r (θ*_i − θ*_j)),
        H_new = Σ_r c_r² n_r p_r (1 − p_r)(e_i − e_j)(e_i − e_j)ᵀ,
        θ = θ* + δ,   δ = (H* + H_new)⁺ g_new   (the mean-zero solution),

    rows r = (i, j) with ``n`` new comparisons, score ``s`` of i (wins + ½ ties; a correction
    moves a vote: n 0, s ±1 or ±½) and coefficient c_r (the account's weight w_k), H* =
    ``information`` of the old votes at θ* (:func:`bounded_information`). Everything is taken
    at θ*, so g_new and H_new are sums over the new votes: batches of votes add up, and the
    update costs O(new rows + M³), whatever the number of old votes. Exact to second order:
    the error against the full refit (weights frozen) is O(‖δ‖²); no new votes, δ = 0.
    """
    from ..raters.bradley_terry import _bt_pass, _bt_value
    from ..raters.information import laplacian

    x = np.array(scores, float)
    m = len(x)
    i = np.ascontiguousarray(i, dtype=np.int64)
    j = np.ascontiguousarray(j, dtype=np.int64)
    n = np.ascontiguousarray(n, dtype=float)
    s = np.ascontiguousarray(s, dtype=float)
    c = np.ascontiguousarray(np.broadcast_to(np.asarray(coef, float), n.shape))
    g = np.zeros(m)
    z, e, w = _bt_pass(x, i, j, n, s, c, g)
    info = np.asarray(information, float) + laplacian(m, i, j, w)
    if not np.any(g):
        return OneStep(x, info, g, _bt_value(z, e, n, s) if len(n) else 0.0)
    try:
        step = np.linalg.solve(info + 1.0 / m, g)  # + 11ᵀ/m: the step ⊥ 1 (g sums to 0)
    except np.linalg.LinAlgError:
        step = np.linalg.lstsq(info, g, rcond=None)[0]
    step -= step.mean()
    gain = _bt_value(z, e, n, s) + 0.5 * float(g @ step)
    return OneStep(x + step, info, g, gain)


@dataclass(frozen=True)
class AccountTrust:
    """One account under the bounded-influence rule.

    ``weight``: w_k in the published fit (0 when the account is not in it); ``capped``,
    ``ramped``: whether the cap or the ramp lowered it; ``influence``: the largest change of a
    model's rating (Elo points) when the account's votes are removed, by one Newton step from
    the bounded fit, on ``influence_model``; ``influence_z``: the score test of the account's
    push (:class:`stablearena.crowd.influence.Influence`); ``flagged``: ``"push"`` (that test beyond
    its Bonferroni bound), ``"select"`` (votes concentrated on one model) or ``None``;
    ``reason``: what of the above applies, in words; ``age_days``: the account's age (None
    when ages are not known, +∞ when it counts as old), ``aged``: whether the age ramp
    lowered its weight.
    """

    annotator: str
    votes: int
    ability: float
    weight: float
    capped: bool
    ramped: bool
    excluded: bool
    influence: float
    influence_model: str | None
    influence_z: float
    flagged: str | None
    reason: str
    age_days: float | None = None
    aged: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _bounded_covariance(x: np.ndarray, fit: Any, rows: np.ndarray) -> np.ndarray:
    """Covariance of the bounded fit's scores: the pseudo-inverse of the information
    Σ_r w_r² n p (1 − p)(e_i − e_j)(e_i − e_j)ᵀ (Σx = 0), w_r each row's weight."""
    from ..raters.information import bt_information, laplacian_pinv

    c = fit.counts
    coef = rows
    info = bt_information(x, c.i.astype(np.int64), c.j.astype(np.int64), c.totals, coef)
    try:
        return laplacian_pinv(info)
    except np.linalg.LinAlgError:  # models only zero-weight accounts compared
        return np.linalg.pinv(info, hermitian=True)


def account_trust(
    fit: Any,
    *,
    cap: float | None = DEFAULT_CAP,
    ramp_votes: float | None = DEFAULT_RAMP_VOTES,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = DEFAULT_RAMP_DAYS,
    alpha: float = 0.05,
    active_days: Mapping[str, float] | None = None,
    record_days: float | None = 0.0,
    young_share: float | None = 0.0,
) -> tuple[AccountTrust, ...]:
    """:class:`AccountTrust` of every annotator of the am-ELO ``fit`` (its order): the bounded
    weights (:func:`account_weights`), the bounded fit (:func:`bounded_scores`) and each
    fitted account's leave-one-account-out influence on it
    (:func:`stablearena.crowd.influence.account_influence` with the weights as abilities, the test's
    level ``alpha`` Bonferroni-corrected over accounts and models). Accounts not in the fit
    (waiting for δ votes, or excluded by the screening) weigh 0 and move nothing. ``ages``
    (name → days) and ``ramp_days``: the age ramp (off without ages); ``active_days`` (name →
    distinct days with a vote) replace the ages as the days of record when given;
    ``record_days``: the record before an account may weigh more than 1; ``young_share``: the
    young-share cap (:func:`young_share_factors`). ``weight`` is w_k, before the young-share
    cap scales a young account's rows; the influence is computed with w_k too (an upper bound
    where the cap binds)."""
    from .influence import account_influence

    idx = fit._fit_annotators
    rule = {
        "cap": cap,
        "ramp_votes": ramp_votes,
        "ages": ages,
        "ramp_days": ramp_days,
        "active_days": active_days,
        "record_days": record_days,
        "young_share": young_share,
    }
    got = bounded_rows(fit, **rule)
    w, rows = got.weights, got.rows
    votes = _fit_votes(fit)
    x = bounded_fit(fit, **rule).scores
    days = active_days if active_days is not None else ages
    unit = "active days" if active_days is not None else "days old"
    use_age = days is not None and not _off(ramp_days)
    use_record = days is not None and not _off(record_days)
    infl = account_influence(fit.counts, x, _bounded_covariance(x, fit, rows), w, alpha=alpha)
    points = np.abs(infl.shift) / fit.elo_scale
    max_z, pushes, push, select = infl.max_z, infl.model, infl.flagged_push, infl.flagged_select
    where = {int(k): r for r, k in enumerate(idx)}
    mr = int(dict(fit.params).get("min_records", 0))
    out = []
    for k, name in enumerate(fit.annotators):
        a = float(fit.abilities[k])
        age = float(ages.get(name, 0.0)) if ages is not None else None
        rec = float(days.get(name, 0.0)) if days is not None else math.inf
        r = where.get(k)
        if r is None:
            why = (
                f"excluded: ability {a:.3g} below the screening threshold"
                if fit.status[k] == "excluded"
                else f"waiting: fewer than {mr} votes, not in the fit"
            )
            out.append(
                AccountTrust(
                    name, int(round(fit.records[k])), a, 0.0, False, False, True, 0.0, None,
                    0.0, None, why, age,
                )
            )  # fmt: skip
            continue
        n = float(votes[r])
        capped = not _off(cap) and a > cap  # type: ignore[operator]
        short = use_record and rec < record_days and a > 1  # type: ignore[operator]
        ramped = not _off(ramp_votes) and a > 0 and n < ramp_votes  # type: ignore[operator]
        reasons = []
        if a <= 0 and w[r] == 0:
            reasons.append(f"excluded: ability {a:.3g} ≤ 0, weight 0")
        if capped and not short:
            reasons.append(f"capped at {cap:g} (ability {a:.3g})")
        if short:
            reasons.append(
                f"capped at 1 until {record_days:g} {unit} of record ({rec:.3g} so far; "
                f"ability {a:.3g})"
            )
        if ramped:
            reasons.append(f"new: weight ramps until {ramp_votes:g} votes ({n:g} so far)")
        aged = use_age and a > 0 and rec < ramp_days  # type: ignore[operator]
        if aged:
            reasons.append(
                f"young: weight ramps until {ramp_days:g} {unit} ({rec:.3g} so far)"
                + (
                    f"; young accounts together at most {young_share:.0%} of a model's "
                    "weighted votes"
                    if not _off(young_share)
                    else ""
                )
            )
        top = int(points[r].argmax())
        pushed = int(pushes[r])
        flag = None
        if push[r]:
            flag = "push"
            reasons.append(
                f"flagged: influence outlier on {fit.models[pushed]} "
                f"(z {infl.z[r, pushed]:+.1f}, bound {infl.threshold:.1f})"
            )
        elif select[r]:
            flag = "select"
            reasons.append(
                f"flagged: votes when {fit.models[int(infl.select_model[r])]} is on screen "
                f"(tail probability {math.exp(infl.log_p_select[r]):.2g})"
            )
        out.append(
            AccountTrust(
                name,
                int(round(n)),
                a,
                float(w[r]),
                bool(capped or short),
                bool(ramped),
                bool(w[r] == 0),
                float(points[r, top]),
                fit.models[top] if points[r, top] > 0 else None,
                float(max_z[r]),
                flag,
                "; ".join(reasons) or "full weight",
                age,
                bool(aged),
            )
        )
    return tuple(out)
