"""Bounded influence: how much one account's votes may weigh in a fit.

am-ELO weighs an annotator's votes by its estimated ability a_k (docs/methods/annotators.md).
An account that agrees with the leaderboard it is pushing earns a large ability and so more
weight (docs/guides/rigging.md). Bounded influence caps that weight and lets it grow only as
the account votes:

    w_k = min(max(a_k, 0), cap) · min(1, n_k / ramp_votes) · min(1, t_k / ramp_days)

with n_k the account's vote count (its age in votes) and t_k its age in days (since it was
created; the age factor is off when no ages are known or ``ramp_days`` is 0). The vote ramp
cannot stop an attacker whose accounts vote like honest ones (their camouflage votes count
towards the ramp); the age ramp makes an identity cost time: before ``ramp_days`` an account's
votes weigh less, at age 0 nothing (docs/guides/rigging.md). The scores are then the Bradley–Terry
maximum-likelihood estimate with those row coefficients held fixed,
P(i beats j | k) = σ(w_k (x_i − x_j)) — the am-ELO likelihood with the abilities replaced by
the bounded weights. With no ability above ``cap`` and ``ramp_votes`` ≤ every account's
count, this is the am-ELO fit itself (its optimum has a zero score gradient at its abilities).

:func:`account_trust` says, per account, what weight it got and why, and how far it moves the
leaderboard (:func:`stablearena.influence.account_influence` at the bounded fit):
``stablearena annotators`` and the live arena's admin view show it (docs/guides/annotators.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from . import choices
from ._numeric import expit
from .raters.bradley_terry import bradley_terry_loglik, solve_bradley_terry

__all__ = [
    "DEFAULT_CAP",
    "DEFAULT_RAMP_VOTES",
    "DEFAULT_RAMP_DAYS",
    "AccountTrust",
    "account_trust",
    "account_weights",
    "bounded_fit",
    "bounded_information",
    "bounded_weights",
    "bounded_scores",
    "OneStep",
    "one_step_update",
]

#: Largest weight of one account, in average annotators (am-ELO's abilities have mean 1): the
#: value of :data:`stablearena.influence.INFLUENCE_ABILITY_CAP`. Set in
#: :mod:`stablearena.choices` (``TRUST_CAP``), which the command line reads without numpy.
DEFAULT_CAP: float = choices.TRUST_CAP
#: Votes after which a new account weighs fully (its weight grows linearly until then).
DEFAULT_RAMP_VOTES: float = choices.TRUST_RAMP_VOTES
#: Days after which a new account weighs fully (its weight grows linearly with its age).
DEFAULT_RAMP_DAYS: float = choices.TRUST_RAMP_DAYS


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
) -> np.ndarray:
    """w_k = min(max(a_k, 0), cap) · min(1, n_k / ramp_votes) · min(1, t_k / ramp_days) for
    every account k (no cap when ``cap`` is None or ≤ 0, no vote ramp when ``ramp_votes`` is,
    no age ramp when ``ramp_days`` is or ``ages`` — t_k in days, +∞ for an account that counts
    as old — is None). Negative abilities weigh nothing (the account is screened)."""
    a = np.clip(np.asarray(abilities, float), 0.0, math.inf if _off(cap) else cap)
    with np.errstate(over="ignore"):  # a tiny ramp: n / ramp = inf, weight min(1, ·) = 1
        if not _off(ramp_votes):
            a = a * np.minimum(1.0, np.asarray(votes, float) / ramp_votes)  # type: ignore[operator]
        if ages is not None and not _off(ramp_days):
            t = np.maximum(np.asarray(ages, float), 0.0)
            a = a * np.minimum(1.0, t / ramp_days)  # type: ignore[operator]
    return a


def _fit_votes(fit: Any) -> np.ndarray:
    """n_k of every fitted account (the order of the fit's counts' annotators)."""
    c = fit.counts
    return np.bincount(c.annotator, c.totals, len(c.annotators))


def _fit_ages(fit: Any, ages: Mapping[str, float] | None) -> np.ndarray | None:
    """t_k in days of every fitted account from ``ages`` (name → days; a name it lacks counts
    as a new account, age 0), or None when no ages are known."""
    if ages is None:
        return None
    names = fit.annotators
    return np.array([float(ages.get(names[k], 0.0)) for k in fit._fit_annotators])


def bounded_weights(
    fit: Any,
    cap: float | None,
    ramp_votes: float | None,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = None,
) -> np.ndarray:
    """Each fitted account's bounded weight w_k (:func:`account_weights`; in the order of
    ``fit._fit_annotators``) — its ability as fitted when the cap and both ramps are off (the
    rule is off: am-ELO as it is, negative abilities included); an age ramp that lowers
    nobody's weight (every account at least ``ramp_days`` old) counts as off."""
    a = fit.abilities[fit._fit_annotators]
    t = None if ages is None or _off(ramp_days) else _fit_ages(fit, ages)
    if t is not None and np.all(t >= ramp_days):  # every account old enough: no age ramp
        t = None
    if _off(cap) and _off(ramp_votes) and t is None:
        return np.array(a, float)
    return account_weights(
        a, _fit_votes(fit), cap=cap, ramp_votes=ramp_votes, ages=t, ramp_days=ramp_days
    )


def _weighted_rows(fit: Any, w: np.ndarray) -> tuple[np.ndarray, ...]:
    """The rows of the bounded objective: (i, j, n, s, coef) of the fit's counts with a weight
    (coef = w_k ≠ 0 and a vote), and the models that get the existence prior — those the fit
    gave it and those without a finite MLE on the weighted votes alone (``None``: no model); a
    :class:`~stablearena.errors.DisconnectedGraphError` when those votes leave a model out."""
    from .graph import check_comparison_graph

    c = fit.counts
    coef = w[c.annotator]
    keep = (coef > 0) & (c.totals > 0)
    prior = check_comparison_graph(c.take(keep)).needs_prior
    if fit.model_prior is not None:
        prior = prior | (np.asarray(fit.model_prior) > 0)
    i, j = c.i[keep].astype(np.int64), c.j[keep].astype(np.int64)
    return i, j, c.totals[keep], c.score[keep], coef[keep], prior if prior.any() else None


def _solve(fit: Any, w: np.ndarray) -> tuple[np.ndarray, float]:
    """Scores of the Bradley–Terry fit with row coefficients w_k, and its log-likelihood on
    every vote of the fit (a vote of weight 0 counts ln ½). The existence prior goes on the
    models of :func:`_weighted_rows`."""
    c = fit.counts
    i, j, n, s, coef, prior = _weighted_rows(fit, w)
    x = solve_bradley_terry(c.n_models, i, j, n, s, coef=coef, x0=fit.scores, prior_mask=prior).x
    return x, bradley_terry_loglik(
        x, c.i.astype(np.int64), c.j.astype(np.int64), c.totals, c.score, w[c.annotator]
    )


def bounded_scores(
    fit: Any,
    *,
    cap: float | None,
    ramp_votes: float | None = 0.0,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = 0.0,
) -> np.ndarray:
    """The model scores of an am-ELO ``fit`` refitted with each account's weight bounded by
    :func:`account_weights` (accounts' vote counts from the fit's counts, ages in days by name
    from ``ages``)."""
    return _solve(fit, bounded_weights(fit, cap, ramp_votes, ages, ramp_days))[0]


def bounded_fit(
    fit: Any,
    *,
    cap: float | None,
    ramp_votes: float | None = 0.0,
    ages: Mapping[str, float] | None = None,
    ramp_days: float | None = 0.0,
) -> Any:
    """``fit`` (am-ELO) with its scores replaced by :func:`bounded_scores` — the abilities,
    statuses and reasons kept; ``loglik`` that of the bounded model;
    ``params`` gain ``ability_cap``, ``trust_ramp_votes`` (and ``trust_ramp_days`` when ages
    are given) — or ``fit`` itself when every account's bounded weight equals its ability
    (nothing capped, ramped or negative), and when the cap and both ramps are off (None or
    ≤ 0: the rule is off)."""
    from .errors import DisconnectedGraphError

    w = bounded_weights(fit, cap, ramp_votes, ages, ramp_days)
    if np.array_equal(w, fit.abilities[fit._fit_annotators]):
        return fit
    try:
        x, loglik = _solve(fit, w)
    except DisconnectedGraphError as exc:  # weighed votes alone cannot rank every model
        return replace(fit, notes=(*fit.notes, f"bounded influence not applied: {exc}"))
    params = {**dict(fit.params), "ability_cap": cap, "trust_ramp_votes": ramp_votes}
    aged = ages is not None and not _off(ramp_days)
    if aged:
        params["trust_ramp_days"] = ramp_days
    note = (
        f"bounded influence: each account's weight min(max(ability, 0), {cap or 'no cap'}) · "
        f"min(1, votes / {ramp_votes or 'no ramp'})"
        + (f" · min(1, age in days / {ramp_days:g})" if aged else "")
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
) -> np.ndarray:
    """H* = −∇² of the bounded objective (the log-likelihood :func:`bounded_scores` maximises,
    existence prior included) at ``scores`` (those of :func:`bounded_fit`):

        H* = Σ_r w_k² n_r p_r (1 − p_r) (e_i − e_j)(e_i − e_j)ᵀ + H_prior,
        p_r = σ(w_k (x_i − x_j)),

    the weights w_k of :func:`bounded_weights`, H_prior the existence prior's curvature (α
    virtual ties against the average model, :func:`~stablearena.raters.bradley_terry.
    solve_bradley_terry`). An M×M Laplacian, singular along 1 (scores have mean zero): what
    :func:`one_step_update` needs from a full fit. One pass over the fit's counts (O(C))."""
    from .information import laplacian
    from .raters.bradley_terry import PRIOR_STRENGTH, _prior_terms

    w = bounded_weights(fit, cap, ramp_votes, ages, ramp_days)
    i, j, n, _, coef, prior = _weighted_rows(fit, w)
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
        from .information import laplacian_pinv

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
    from .information import laplacian
    from .raters.bradley_terry import _bt_pass, _bt_value

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
    push (:class:`stablearena.influence.Influence`); ``flagged``: ``"push"`` (that test beyond
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


def _bounded_covariance(x: np.ndarray, fit: Any, w: np.ndarray) -> np.ndarray:
    """Covariance of the bounded fit's scores: the pseudo-inverse of the information
    Σ_r w_k² n p (1 − p)(e_i − e_j)(e_i − e_j)ᵀ (Σx = 0)."""
    from .information import bt_information, laplacian_pinv

    c = fit.counts
    coef = w[c.annotator]
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
) -> tuple[AccountTrust, ...]:
    """:class:`AccountTrust` of every annotator of the am-ELO ``fit`` (its order): the bounded
    weights (:func:`account_weights`), the bounded fit (:func:`bounded_scores`) and each
    fitted account's leave-one-account-out influence on it
    (:func:`stablearena.influence.account_influence` with the weights as abilities, the test's
    level ``alpha`` Bonferroni-corrected over accounts and models). Accounts not in the fit
    (waiting for δ votes, or excluded by the screening) weigh 0 and move nothing. ``ages``
    (name → days) and ``ramp_days``: the age ramp (off without ages)."""
    from .influence import account_influence

    idx = fit._fit_annotators
    w = bounded_weights(fit, cap, ramp_votes, ages, ramp_days)
    votes = _fit_votes(fit)
    x = bounded_fit(fit, cap=cap, ramp_votes=ramp_votes, ages=ages, ramp_days=ramp_days).scores
    use_age = ages is not None and not _off(ramp_days)
    infl = account_influence(fit.counts, x, _bounded_covariance(x, fit, w), w, alpha=alpha)
    points = np.abs(infl.shift) / fit.elo_scale
    max_z, pushes, push, select = infl.max_z, infl.model, infl.flagged_push, infl.flagged_select
    where = {int(k): r for r, k in enumerate(idx)}
    mr = int(dict(fit.params).get("min_records", 0))
    out = []
    for k, name in enumerate(fit.annotators):
        a = float(fit.abilities[k])
        age = float(ages.get(name, 0.0)) if ages is not None else None
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
        ramped = not _off(ramp_votes) and a > 0 and n < ramp_votes  # type: ignore[operator]
        reasons = []
        if a <= 0 and w[r] == 0:
            reasons.append(f"excluded: ability {a:.3g} ≤ 0, weight 0")
        if capped:
            reasons.append(f"capped at {cap:g} (ability {a:.3g})")
        if ramped:
            reasons.append(f"new: weight ramps until {ramp_votes:g} votes ({n:g} so far)")
        aged = use_age and a > 0 and age < ramp_days  # type: ignore[operator]
        if aged:
            reasons.append(f"young: weight ramps until {ramp_days:g} days old ({age:.3g} so far)")
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
                bool(capped),
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
