"""Influence screening: how much each account moves the leaderboard, and whether it should.

For a fitted Bradley–Terry model (m-ELO, or am-ELO with the abilities as per-account weights)
:func:`account_influence` gives every account's leave-one-account-out effect on every model's
score by one Newton step from the full fit, a score test of that push, and a test of how
concentrated the account's votes are on one model; :func:`e_values` is LMArena's per-account
e-value test, for comparison. docs/guides/rigging.md measures what they catch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from ..data.battles import PairCounts

__all__ = [
    "INFLUENCE_ABILITY_CAP",
    "Influence",
    "account_influence",
    "am_elo_covariance",
    "e_values",
]


@dataclass(frozen=True, eq=False)
class Influence:
    """Each account's leave-one-account-out effect on the scores by one Newton step, and how
    concentrated its votes are on one model.

    ``shift[k, i]``: the change of model i's score (natural units) when account k's votes are
    removed, −(Σ g_k)_i with g_k the account's gradient of the log-likelihood in the scores and
    Σ the scores' covariance (inverse information) of the full fit; ``z[k, i]``: the shift
    divided by its standard deviation under the fitted model, √(Σ I_k Σ)_ii with I_k the account's
    information — a score test that account k pushes model i harder than chance.
    ``log_p_select[k]``: ln of the smallest binomial tail probability, over models i, of the
    account having voted in at least c_ki battles with model i out of its n_k votes when a
    battle involves model i with probability q_i (the share of all votes that involve it) —
    an account that votes only when one model is on screen.
    ``threshold``: the Bonferroni bound Φ⁻¹(1 − α / (2 K m)) for |z| (and ln(α / (K m)) for the
    selection test); ``flagged``: either test beyond its bound.
    """

    accounts: tuple[str, ...]
    shift: np.ndarray
    z: np.ndarray
    log_p_select: np.ndarray
    select_model: np.ndarray
    threshold: float
    log_alpha: float

    @property
    def max_z(self) -> np.ndarray:
        return np.abs(self.z).max(axis=1)

    @property
    def model(self) -> np.ndarray:
        """The model each account pushes most (index of its largest |z|)."""
        return np.abs(self.z).argmax(axis=1)

    @property
    def flagged_push(self) -> np.ndarray:
        return self.max_z > self.threshold

    @property
    def flagged_select(self) -> np.ndarray:
        return self.log_p_select < self.log_alpha

    @property
    def flagged(self) -> np.ndarray:
        return self.flagged_push | self.flagged_select

    def reasons(self, models: Sequence[str]) -> list[str]:
        """One sentence per account: flagged or ok, and the figures behind it."""
        out = []
        for k in range(len(self.accounts)):
            i = int(self.model[k])
            z = float(self.z[k, i])
            verdict = "flagged" if self.flagged[k] else "ok"
            out.append(
                f"{verdict}: pushes {models[i]} with z {z:+.2f} (bound {self.threshold:.2f}; "
                f"removing the account moves it {self.shift[k, i] * 400 / math.log(10):+.2f} "
                f"points); votes on {models[int(self.select_model[k])]} with tail probability "
                f"{math.exp(self.log_p_select[k]):.2g} (bound {math.exp(self.log_alpha):.2g})"
            )
        return out


#: The influence test judges each account at its fitted ability clipped to [0, this]: a noisy
#: honest annotator (low ability) is not flagged for disagreeing, and an account whose votes
#: agree with the ranking it is pushing cannot hide behind an inflated ability (issue 25: 5–63×
#: an honest annotator's).
INFLUENCE_ABILITY_CAP: float = 2.0


def account_influence(
    counts: PairCounts,
    x: np.ndarray,
    cov: np.ndarray,
    abilities: np.ndarray | None = None,
    *,
    alpha: float = 0.05,
) -> Influence:
    """:class:`Influence` of every annotator of ``counts`` (pair × annotator rows) at scores
    ``x`` with covariance ``cov`` and the accounts' ``abilities`` (default 1, every account an
    average annotator; am-ELO's defence passes the fitted ones clipped to
    [0, :data:`INFLUENCE_ABILITY_CAP`], so that a high fitted ability cannot mask a push).

    Per row r (pair i, j, annotator k, n votes, score s): p = σ(a_k (x_i − x_j)), gradient
    a_k (s − n p)(e_i − e_j), information a_k² n p (1 − p)(e_i − e_j)(e_i − e_j)ᵀ; with
    D_r = Σ(e_i − e_j): shift_k = −Σ_{r∈k} a_k (s − n p) D_r, var_k = Σ_{r∈k} a_k² n p (1 − p) D_r².
    """
    from scipy.stats import binom

    from .._numeric import normal_ppf

    names = counts.annotators or ("unknown",)
    kk = len(names)
    k = (
        counts.annotator.astype(np.int64)
        if counts.annotator is not None
        else np.zeros(len(counts), np.int64)
    )
    a = np.ones(kk) if abilities is None else np.asarray(abilities, float)
    ak = a[k]
    i, j = counts.i.astype(np.int64), counts.j.astype(np.int64)
    n = counts.totals
    p = 1.0 / (1.0 + np.exp(-ak * (x[i] - x[j])))
    e = ak * (counts.score - n * p)
    w = ak * ak * n * p * (1 - p)
    m = len(x)
    key = i * m + j
    uk, inv = np.unique(key, return_inverse=True)
    d = cov[:, uk // m] - cov[:, uk % m]  # m × pairs
    shape = (kk, len(uk))
    ge = sparse.csr_matrix((e, (k, inv)), shape=shape)
    gw = sparse.csr_matrix((w, (k, inv)), shape=shape)
    shift = -np.asarray(ge @ d.T)
    var = np.asarray(gw @ (d.T**2))
    z = np.where(var > 0, -shift / np.sqrt(np.maximum(var, 1e-300)), 0.0)
    # selection: votes of k with model i, against Binomial(n_k, q_i)
    both = np.concatenate([k, k])
    cki = sparse.csr_matrix(
        (np.concatenate([n, n]), (both, np.concatenate([i, j]))), shape=(kk, m)
    ).toarray()
    nk = np.bincount(k, n, kk)
    q = cki.sum(axis=0) / max(2.0 * n.sum(), 1e-300) * 2.0
    q = np.clip(q, 1e-12, 1.0 - 1e-12)
    rows, cols = np.nonzero(cki)
    logp = np.zeros((kk, m))
    logp[rows, cols] = binom.logsf(np.round(cki[rows, cols]) - 1, np.round(nk[rows]), q[cols])
    thr = float(normal_ppf(1.0 - alpha / (2.0 * kk * m)))
    return Influence(
        tuple(names),
        shift,
        z,
        logp.min(axis=1),
        logp.argmin(axis=1),
        thr,
        math.log(alpha / (kk * m)),
    )


def e_values(counts: PairCounts, x: np.ndarray, abilities: np.ndarray | None = None) -> np.ndarray:
    """Each annotator's log e-value (LMArena / Chatbot Arena's anomalous-user test, Chiang et
    al. 2024 §5): each decisive vote gets the p-value p = P(outcome) when that is ≤ ½ (1
    otherwise; ties p = 1) under the fitted model, the calibrator e = 1/(2√p) turns it into an
    e-value (E[e] ≤ 1 under the model), and the account's e-value is their product; flag it
    when ln e ≥ ln(K/α)."""
    kk = len(counts.annotators or ("unknown",))
    k = (
        counts.annotator.astype(np.int64)
        if counts.annotator is not None
        else np.zeros(len(counts), np.int64)
    )
    a = np.ones(kk) if abilities is None else np.asarray(abilities, float)
    z = a[k] * (x[counts.i] - x[counts.j])
    pi = 1.0 / (1.0 + np.exp(-z))
    lp_i = np.where(pi <= 0.5, np.log(np.maximum(pi, 1e-300)), 0.0)
    lp_j = np.where(pi >= 0.5, np.log(np.maximum(1 - pi, 1e-300)), 0.0)
    ln2 = math.log(2.0)
    # ln e = −ln 2 − ½ ln p per vote
    per_row = (
        counts.wins * (-ln2 - 0.5 * lp_i)
        + counts.losses * (-ln2 - 0.5 * lp_j)
        + counts.all_ties * (-ln2)
    )
    return np.bincount(k, per_row, kk)


def am_elo_covariance(fit: Any) -> np.ndarray:
    """Covariance of an am-ELO fit's scores (gauge-constrained inverse Fisher information, the
    abilities profiled out): the Σ of :func:`account_influence`."""
    from ..raters.annotator import AmEloRows, _gauge_covariance, _gauge_signs, _neg_hessian_blocks

    idx = fit._fit_annotators
    rows = AmEloRows.from_counts(fit.counts, n_annotators=len(idx))
    a = fit.abilities[idx]
    lap, b, dd = _neg_hessian_blocks(fit.scores, a, rows, exact=False)
    act = rows.records() > 0
    cov, _ = _gauge_covariance(lap, b, np.maximum(dd, 1e-300), act, _gauge_signs(a, act))
    return cov
