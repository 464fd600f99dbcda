"""Bounded influence: how much one account's votes may weigh in a fit.

am-ELO weighs an annotator's votes by its estimated ability a_k (docs/methods/annotators.md).
An account that agrees with the leaderboard it is pushing earns a large ability and so more
weight (docs/guides/rigging.md). Bounded influence caps that weight and lets it grow only as
the account votes:

    w_k = min(max(a_k, 0), cap) · min(1, n_k / ramp_votes)

with n_k the account's vote count (its age in votes). The scores are then the Bradley–Terry
maximum-likelihood estimate with those row coefficients held fixed,
P(i beats j | k) = σ(w_k (x_i − x_j)) — the am-ELO likelihood with the abilities replaced by
the bounded weights. With no ability above ``cap`` and ``ramp_votes`` ≤ every account's
count, this is the am-ELO fit itself (its optimum has a zero score gradient at its abilities).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .raters.bradley_terry import solve_bradley_terry

__all__ = ["account_weights", "bounded_scores"]


def account_weights(
    abilities: np.ndarray, votes: np.ndarray, *, cap: float, ramp_votes: float = 0.0
) -> np.ndarray:
    """w_k = min(max(a_k, 0), cap) · min(1, n_k / ramp_votes) for every account k (no ramp
    when ``ramp_votes`` ≤ 0). Negative abilities weigh nothing (the account is screened)."""
    a = np.clip(np.asarray(abilities, float), 0.0, cap)
    if ramp_votes > 0:
        a = a * np.minimum(1.0, np.asarray(votes, float) / ramp_votes)
    return a


def bounded_scores(fit: Any, *, cap: float, ramp_votes: float = 0.0) -> np.ndarray:
    """The model scores of an am-ELO ``fit`` refitted with each account's weight bounded by
    :func:`account_weights` (accounts' vote counts from the fit's counts)."""
    c = fit.counts
    votes = np.bincount(c.annotator, c.totals, len(c.annotators))
    w = account_weights(fit.abilities[fit._fit_annotators], votes, cap=cap, ramp_votes=ramp_votes)
    coef = w[c.annotator]
    keep = (coef > 0) & (c.totals > 0)
    prior = fit.model_prior if fit.model_prior is not None and fit.model_prior.any() else None
    return solve_bradley_terry(
        c.n_models,
        c.i[keep].astype(np.int64),
        c.j[keep].astype(np.int64),
        c.totals[keep],
        c.score[keep],
        coef=coef[keep],
        x0=fit.scores,
        prior_mask=prior,
    ).x
