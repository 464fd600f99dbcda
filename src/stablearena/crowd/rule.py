"""The crowd rule: a Stable Arena board in which every honest vote counts (docs/methods/crowd.md).

A public arena's crowd is mostly casual — visitors who vote a handful of times on one or two
days — beside a few regulars and heavy voters. The rule weighs them all on one footing:

1. **Scores** x: the Bradley–Terry likelihood with each count row weighted by its coefficient
   c_r (below), P(i beats j | account k) = σ(w_k (x_i − x_j)), ties scored as half, plus the
   existence prior (a virtual half tie against the average model) on every model whose maximum
   would otherwise be infinite — on **every** model when the weighted votes leave the graph
   disconnected, so that a model with battles always gets a rating (a wide interval, never a
   refusal).
2. **Abilities shrunk toward the crowd's.** Each account's ability a_k (am-ELO's
   discrimination, docs/methods/annotators.md) gets a normal prior a_k ~ N(1, τ²) whose spread
   τ² is estimated from the data by the method of moments on the accounts' score statistics at
   a = 1 (the DerSimonian–Laird idea, 1986: with U_k = ∂ℓ_k/∂a and I_k its information at
   a = 1, E U_k² ≈ I_k + I_k² τ², so τ̂² = max(0, Σ (U_k² − I_k)) / Σ I_k²; clipped to
   [min_sd², max_sd²] (the options ``min_sd``, ``max_sd``)). a_k is then the posterior mode with the scores held fixed
   (empirical Bayes, Efron & Morris 1975): a three-vote visitor's evidence is small, so it
   weighs about 1 — what m-ELO gives it — while a heavy voter's ability is its own.
3. **Screening by confidence, among those it may judge.** An account with at least δ
   (``min_records``) votes is flagged when its posterior upper bound a_k + z·sd_k (z the
   one-sided ``confidence`` quantile) is below ε (``ability_threshold``): its weight is 0.
   δ decides whom the screening may judge, never whose votes count: an account below δ votes
   with the crowd's weight (1 before the scale of step 4).
4. **Bounded contribution.** w_k = min(max(a_k, 0), ``cap``) for the judged accounts, scaled
   so that the average vote weighs 1 (as in m-ELO), and the weighted votes one
   account gives any one model, C_km = Σ_{rows of k with m} w_k n_r, are capped at
   the limit L: the account's rows with model m are scaled by min(1, L / C_km)
   (a row scaled by the smaller factor of its two models). L is what an honest voter
   typically gives one model: the ``model_votes_quantile`` (99.9 %) quantile of the established
   accounts' votes per (account, model), clipped to [``model_votes``, ``model_votes_max``]
   ([10, 50]; :func:`model_votes_limit`). Moving a model then takes many accounts, whatever
   their age or agreement.
5. **Floods found by what they do.** Accounts with fewer than ``flood_days`` days of record
   (active days when known, else days since creation) are *new*. For each model the new
   accounts' weighted score on it is compared with what the established accounts' board
   predicts — z_m = (O_m − E_m) / √(V_m + (Σ c n p(1−p))²·Var x̂_m), established scores and
   their variance from a fit on the established accounts alone — and where |z_m| passes the
   Bonferroni bound at family level ``flood_level`` the new accounts' votes on that model do not
   count (the model and z are reported). The test runs only against an established majority
   — established accounts holding at least ``flood_min_share`` (half) of the counted votes,
   and at least ``flood_min_accounts`` (10) of them on the model — since in a young or casual
   arena a few patient accounts would otherwise be the crowd the honest majority is tested
   against. Youth alone is no penalty: a new account weighs as a
   regular one unless the new accounts, together, disagree with the crowd on a model.

Step 5 runs first, on the votes as m-ELO counts them (one account's say on a model capped),
so that a flood cannot first bend the abilities; steps 1–4 then alternate ``rounds`` times from
the m-ELO start on what it left, and step 5 runs again on the final weights (the scores refitted
when it sets more aside). Nothing is remembered between fits: the live board
(``stablearena serve``), ``stablearena rank --method arena`` and the simulator
(:mod:`stablearena.simulation.attacks`, defence ``crowd``) run this one function.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.stats import norm

from .. import choices
from .._numeric import expit
from ..data.battles import PairCounts
from ..errors import DisconnectedGraphError, InputError
from ..raters.annotator import AmEloFitted
from ..raters.base import Convergence
from ..raters.bradley_terry import (
    PRIOR_STRENGTH,
    _prior_terms,
    bradley_terry_loglik,
    solve_bradley_terry,
)
from .trust import record_days_of

__all__ = [
    "CrowdRule",
    "CrowdFit",
    "CrowdFitted",
    "crowd_fit",
    "ability_spread",
    "model_votes_limit",
    "account_model_volume",
]

#: The largest weighted votes one account may give any one model (``model_votes``), chosen by
#: the held-out measurements of docs/guides/rigging.md ("The crowd rule").
DEFAULT_MODEL_VOTES: float = choices.CROWD_MODEL_VOTES
#: Days of record below which an account is *new* for the flood test.
DEFAULT_FLOOD_DAYS: float = choices.CROWD_FLOOD_DAYS


@dataclass(frozen=True)
class CrowdRule:
    """Options of :func:`crowd_fit` (module docstring): ``ability_threshold`` ε,
    ``confidence`` and ``min_records`` δ (screening: only accounts with δ votes or more may be
    flagged; every account's votes count), ``cap`` (largest weight), ``model_votes`` (largest weighted
    votes of one account on one model; None or 0: off), ``flood_days`` and ``flood_level``
    (the flood test; None or 0 days: off), ``min_sd``/``max_sd`` (bounds of the estimated
    ability spread τ), ``prior_sd`` (τ fixed instead of estimated), ``rounds``."""

    ability_threshold: float = 0.0
    confidence: float = 0.95
    min_records: float = 0.0
    cap: float | None = choices.CROWD_CAP
    model_votes: float | None = DEFAULT_MODEL_VOTES
    model_votes_quantile: float | None = choices.CROWD_MODEL_VOTES_QUANTILE
    model_votes_max: float = choices.CROWD_MODEL_VOTES_MAX
    flood_days: float | None = DEFAULT_FLOOD_DAYS
    flood_level: float = 0.01
    flood_min_share: float = 0.5
    flood_min_accounts: int = 10
    min_sd: float = 0.1
    max_sd: float = 1.0
    prior_sd: float | None = None
    rounds: int = 4

    def __post_init__(self) -> None:
        if not 0.5 <= self.confidence < 1:
            raise InputError(f"confidence must lie in [0.5, 1), not {self.confidence!r}.")
        if self.model_votes_quantile is not None and not 0 < self.model_votes_quantile < 1:
            raise InputError(
                "model_votes_quantile must lie in (0, 1) (or None: the limit is model_votes), "
                f"not {self.model_votes_quantile!r}."
            )
        if self.model_votes and self.model_votes_max < self.model_votes:
            raise InputError(
                f"need model_votes ≤ model_votes_max, not {self.model_votes!r} > "
                f"{self.model_votes_max!r}."
            )
        if not 0 <= self.flood_min_share <= 1:
            raise InputError(f"flood_min_share must lie in [0, 1], not {self.flood_min_share!r}.")
        if self.flood_min_accounts < 1:
            raise InputError(
                f"flood_min_accounts must be at least 1, not {self.flood_min_accounts!r}."
            )
        if not 0 < self.flood_level < 1:
            raise InputError(f"flood_level must lie in (0, 1), not {self.flood_level!r}.")
        if not 0 < self.min_sd <= self.max_sd:
            raise InputError(
                f"need 0 < min_sd ≤ max_sd, not min_sd={self.min_sd!r}, max_sd={self.max_sd!r}."
            )
        if self.prior_sd is not None and not self.prior_sd > 0:
            raise InputError(
                f"prior_sd must be positive (or None: estimated), not {self.prior_sd!r}."
            )
        if self.rounds < 1:
            raise InputError(f"rounds must be at least 1, not {self.rounds!r}.")


@dataclass(frozen=True, eq=False)
class CrowdFitted(AmEloFitted):
    """A board of the crowd rule: an :class:`~stablearena.raters.annotator.AmEloFitted` whose
    abilities are the accounts' posterior modes (``ability_se`` their posterior SDs) and whose
    scores are the weighted Bradley–Terry fit with the row coefficients ``row_weights`` (one per
    row of ``counts``) held fixed. Its information is that of the scores alone at those weights
    (the prior included), so intervals, the sandwich and the bootstrap treat the weights as
    given: H = −Σ_r c_r n_r p_r (1 − p_r)(e_i − e_j)(e_i − e_j)ᵀ − the prior's curvature."""

    row_weights: np.ndarray | None = field(default=None, repr=False)

    def _rw(self) -> np.ndarray:
        assert self.row_weights is not None
        return np.asarray(self.row_weights, float)

    def parameters(self) -> np.ndarray:
        """The scores (the weights are given, not estimated here)."""
        return np.array(self.scores, dtype=float)

    def hessian(self) -> np.ndarray:
        from ..raters.information import laplacian

        c = self.counts
        x = self.scores
        p = expit(x[c.i] - x[c.j])
        h = -laplacian(
            self.n_models,
            c.i.astype(np.int64),
            c.j.astype(np.int64),
            self._rw() * c.totals * p * (1 - p),
        )
        if self.model_prior is not None and self.model_prior.any():
            h += _prior_terms(x, self.model_prior.astype(float), PRIOR_STRENGTH)[2]
        return h

    def covariance(self) -> np.ndarray:
        """Covariance of the scores under the gauge Σx = 0 (the weights given): the top-left
        block of the inverse of the bordered matrix [[−H, 1], [1ᵀ, 0]]."""
        h = -self.hessian()
        m = h.shape[0]
        g = self.gauge_constraints()
        kkt = np.block([[h, g], [g.T, np.zeros((g.shape[1], g.shape[1]))]])
        inv = np.linalg.inv(kkt)[:m, :m]
        return 0.5 * (inv + inv.T)

    def score_contributions(self) -> tuple[np.ndarray, np.ndarray]:
        c = self.counts
        x = self.scores
        p = expit(x[c.i] - x[c.j])
        w = self._rw()
        rows = np.arange(len(c))
        g = np.zeros((len(c), 4, self.n_models))
        for col, score in enumerate((1.0, 0.0, 0.5, 0.5)):
            e = w * (score - p)
            g[rows, col, c.i] = e
            g[rows, col, c.j] = -e
        return g, np.column_stack([c.wins, c.losses, c.ties, c.ties_both_bad])

    def outer_product(self) -> np.ndarray:
        from ..raters.information import laplacian

        c = self.counts
        x = self.scores
        p = expit(x[c.i] - x[c.j])
        q = c.wins * (1 - p) ** 2 + c.losses * p**2 + c.all_ties * (0.5 - p) ** 2
        return laplacian(
            self.n_models, c.i.astype(np.int64), c.j.astype(np.int64), self._rw() ** 2 * q
        )

    def gauge_constraints(self) -> np.ndarray:
        g = np.zeros((self.n_models, 1))
        g[:, 0] = 1.0
        return g

    def dispersion(self) -> float:
        c = self.counts
        if c is None or c.all_ties.sum() <= 0:
            return 1.0
        w = self._rw()
        p = expit(self.scores[c.i] - self.scores[c.j])
        v = np.maximum(p * (1 - p), 1e-300)
        pearson = float(
            np.sum(w * (c.wins * (1 - p) ** 2 + c.losses * p**2 + c.all_ties * (0.5 - p) ** 2) / v)
        )
        dof = float(np.sum(w * c.totals)) - (self.n_models - 1)
        return pearson / dof if dof > 0 else 1.0

    def refit(self, counts: PairCounts) -> CrowdFitted:
        """The scores refitted on ``counts`` (the same rows, other counts: a bootstrap resample)
        with the same row weights, warm-started here."""
        c0 = self.counts
        if len(counts) != len(c0) or not (
            np.array_equal(counts.i, c0.i) and np.array_equal(counts.j, c0.j)
        ):
            raise InputError("refit needs pair counts with the same rows as fitted.counts.")
        x, conv = _scores(
            counts.n_models, counts, self._rw(), self.scores, _needs_prior(counts, self._rw())
        )
        return replace(self, scores=x, counts=counts, convergence=conv)

    def resampling_table(self) -> np.ndarray:
        c = self.counts
        return np.column_stack([c.wins, c.losses, c.ties, c.ties_both_bad])

    def refit_table(self, table: np.ndarray) -> CrowdFitted:
        c = self.counts
        t = np.asarray(table, float)
        return self.refit(
            replace(c, wins=t[:, 0], losses=t[:, 1], ties=t[:, 2], ties_both_bad=t[:, 3])
        )


@dataclass(frozen=True, eq=False)
class CrowdFit:
    """:func:`crowd_fit`'s result. ``fitted``: the board (:class:`CrowdFitted`); per account of
    the counts (their order): ``weights`` w_k (0 when flagged), ``flagged`` (name → reason);
    ``prior_sd`` τ; ``capped`` (name → number of models on which its votes were capped);
    ``floods`` (model → z of the new accounts' disagreement, for the models where their votes
    were set aside), ``flood_z`` (every tested model's z), ``new`` the new accounts' names;
    ``converged``: every score fit converged."""

    fitted: CrowdFitted
    weights: dict[str, float]
    flagged: dict[str, str]
    prior_sd: float
    capped: dict[str, int]
    floods: dict[str, float]
    flood_z: dict[str, float]
    new: frozenset[str]
    converged: bool
    notes: tuple[str, ...] = ()


def _needs_prior(counts: PairCounts, coef: np.ndarray) -> np.ndarray:
    """Models that need the existence prior on the rows with a positive coefficient: those
    without a finite maximum (:func:`stablearena.data.graph.check_comparison_graph`) — every model
    when those rows leave the graph disconnected or a model without a counted vote."""
    from ..data.graph import check_comparison_graph

    keep = (np.asarray(coef) > 0) & (counts.totals > 0)
    try:
        return np.asarray(check_comparison_graph(counts.take(keep)).needs_prior, bool)
    except DisconnectedGraphError:
        return np.ones(counts.n_models, dtype=bool)


def _scores(
    m: int, c: PairCounts, coef: np.ndarray, x0: np.ndarray | None, prior: np.ndarray
) -> tuple[np.ndarray, Convergence]:
    """The weighted Bradley–Terry scores (ties as half) with the existence prior on ``prior``:
    each row's coefficient weighs its votes (n_r and s_r times c_r — a frequency weight, not
    :func:`solve_bradley_terry`'s ``coef``, which scales the score difference)."""
    keep = (coef > 0) & (c.totals > 0)
    i, j = c.i[keep].astype(np.int64), c.j[keep].astype(np.int64)
    sol = solve_bradley_terry(
        m,
        i,
        j,
        c.totals[keep] * coef[keep],
        c.score[keep] * coef[keep],
        x0=x0,
        prior_mask=prior if prior.any() else None,
        max_iter=200,
    )
    return np.asarray(sol.x, float), sol.convergence


def ability_spread(u: np.ndarray, info: np.ndarray) -> float:
    """τ̂² = max(0, Σ (U_k² − I_k)) / Σ I_k² (module docstring): the moment estimate of the
    variance of the accounts' abilities about 1 from their score statistics U_k and
    informations I_k at a = 1; 0 when no account has information."""
    den = float(np.sum(info**2))
    if den <= 0:
        return 0.0
    return max(0.0, float(np.sum(u**2 - info))) / den


def _account_stats(
    a: np.ndarray, d: np.ndarray, n: np.ndarray, s: np.ndarray, k: np.ndarray, na: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per account: U = Σ d (s − n p) and I = Σ n d² p (1 − p) at abilities ``a``, p = σ(a_k d)."""
    p = expit(a[k] * d)
    return (
        np.bincount(k, d * (s - n * p), na),
        np.bincount(k, n * d * d * p * (1 - p), na),
    )


def _posterior_abilities(
    d: np.ndarray, n: np.ndarray, s: np.ndarray, k: np.ndarray, na: int, tau: float
) -> tuple[np.ndarray, np.ndarray]:
    """The posterior modes of the abilities under N(1, τ²) with the scores held fixed (Newton
    on the concave one-dimensional log-posteriors, all accounts at once) and their posterior
    SDs (1/√(I_k(a_k) + 1/τ²))."""
    a = np.ones(na)
    lam = 1.0 / (tau * tau)
    for _ in range(50):
        u, info = _account_stats(a, d, n, s, k, na)
        step = (u - lam * (a - 1.0)) / (info + lam)
        step = np.clip(step, -1.0, 1.0)
        a = a + step
        if float(np.max(np.abs(step), initial=0.0)) < 1e-10:
            break
    info = _account_stats(a, d, n, s, k, na)[1]
    return a, 1.0 / np.sqrt(info + lam)


def account_model_volume(
    k: np.ndarray, i: np.ndarray, j: np.ndarray, vol: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each (account, model) cell's volume from rows of account ``k`` on models ``i``, ``j``
    with volume ``vol`` (a row counts for both its models): (cell keys k·m + model, each row's
    cell index for its i side then its j side — 2 × rows —, each cell's total). The per-model
    limit of step 4, its quantile and the live update's limit all read this one sum."""
    k = np.asarray(k, dtype=np.int64)
    key = np.concatenate([k * m + i, k * m + j])
    uk, inv = np.unique(key, return_inverse=True)
    return uk, inv, np.bincount(inv, np.concatenate([vol, vol]), len(uk))


def _model_caps(
    c: PairCounts, w_rows: np.ndarray, limit: float
) -> tuple[np.ndarray, dict[int, int]]:
    """Row factors of the per-model contribution cap: min(1, limit / C_km) for both models of
    each row (the smaller), and per account the number of models on which it was capped."""
    m = c.n_models
    uk, inv, tot = account_model_volume(c.annotator, c.i, c.j, w_rows * c.totals, m)
    f = np.minimum(1.0, limit / np.maximum(tot, 1e-300))
    n_rows = len(c)
    fr = np.minimum(f[inv[:n_rows]], f[inv[n_rows:]])
    hit = np.flatnonzero(f < 1.0)
    capped: dict[int, int] = {}
    for acc in (uk[hit] // m).tolist():
        capped[acc] = capped.get(acc, 0) + 1
    return fr, capped


def _flood_test(
    c: PairCounts,
    coef: np.ndarray,
    new_rows: np.ndarray,
    x: np.ndarray,
    rule: CrowdRule,
) -> tuple[np.ndarray, dict[int, float], dict[int, float]]:
    """The flood test of the module docstring on rows ``new_rows`` (the new accounts' rows):
    (row factors — 0 on a new account's row with a flagged model —, flagged model → z, tested
    model → z)."""
    m = c.n_models
    level = rule.flood_level
    fac = np.ones(len(c))
    est = ~new_rows & (coef > 0)
    if not est.any() or not (new_rows & (coef > 0)).any():
        return fac, {}, {}
    # a flood is new accounts against an established majority: without one (a young or a
    # casual arena, where almost everyone is new) there is no crowd to test against, and a
    # few patient accounts would be that crowd
    vol = coef * c.totals
    if float(vol[est].sum()) < rule.flood_min_share * float(vol[coef > 0].sum()):
        return fac, {}, {}
    ce = c.take(est)
    prior = _needs_prior(ce, coef[est])
    xe, _ = _scores(m, ce, coef[est], x, prior)
    # the established scores' variance: the diagonal of the inverse information on Σx = 0
    from ..raters.information import laplacian

    pe = expit(xe[ce.i] - xe[ce.j])
    lap = laplacian(
        m, ce.i.astype(np.int64), ce.j.astype(np.int64), coef[est] * ce.totals * pe * (1 - pe)
    )
    if prior.any():
        lap = lap - _prior_terms(xe, prior.astype(float), PRIOR_STRENGTH)[2]
    one = np.ones((m, m)) / m
    try:
        var_x = np.clip(np.diag(np.linalg.inv(lap + one) - one), 0.0, None)
    except np.linalg.LinAlgError:
        return fac, {}, {}
    use = new_rows & (coef > 0) & (c.totals > 0)
    i, j = c.i[use].astype(np.int64), c.j[use].astype(np.int64)
    w, n, s = coef[use], c.totals[use], c.score[use]
    p = expit(xe[i] - xe[j])
    # model i's side of each row: observed s, expected n p; model j's: the opposite
    resid = w * (s - n * p)
    v = w * w * n * p * (1 - p)
    h = w * n * p * (1 - p)
    o_e = np.bincount(i, resid, m) - np.bincount(j, resid, m)
    var = np.bincount(i, v, m) + np.bincount(j, v, m)
    sens = np.bincount(i, h, m) + np.bincount(j, h, m)
    var = var + sens * sens * var_x
    # ... and on a model, established accounts enough that no few of them are its board
    ke = ce.annotator.astype(np.int64)
    pairs = np.unique(np.concatenate([ke * m + ce.i, ke * m + ce.j]))
    est_accounts = np.bincount(pairs % m, minlength=m)
    tested = np.flatnonzero((var > 0) & (est_accounts >= rule.flood_min_accounts))
    if not len(tested):
        return fac, {}, {}
    z = np.zeros(m)
    z[tested] = o_e[tested] / np.sqrt(var[tested])
    crit = float(norm.isf(level / (2 * len(tested))))
    bad = tested[np.abs(z[tested]) > crit]
    if len(bad):
        flag = np.zeros(m, dtype=bool)
        flag[bad] = True
        hit = new_rows & (flag[c.i] | flag[c.j])
        fac[hit] = 0.0
    return (
        fac,
        {int(b): float(z[b]) for b in bad},
        {int(t): float(z[t]) for t in tested},
    )


@dataclass(frozen=True)
class _Rounds:
    """What :func:`_weight_rounds` leaves: scores, row coefficients, per-account abilities,
    posterior SDs, weights, flags, τ, capped models and the scale."""

    x: np.ndarray
    coef: np.ndarray
    conv: Convergence
    converged: bool
    a: np.ndarray
    sd: np.ndarray
    w: np.ndarray
    flagged: np.ndarray
    tau: float
    capped: dict[int, int]
    scale: float


def _weight_rounds(c: PairCounts, base: np.ndarray, x: np.ndarray, rule: CrowdRule) -> _Rounds:
    """Steps 1–4 of the module docstring, ``rule.rounds`` times from the scores ``x``, on the
    rows of ``c`` with ``base`` > 0 (``base``: a row factor — 0 sets a row aside)."""
    na, m = len(c.annotators or ()), c.n_models
    k = c.annotator.astype(np.int64)
    use = base > 0
    n, s = c.totals * use, c.score * use
    z = float(norm.ppf(rule.confidence))
    cap = math.inf if not rule.cap or rule.cap <= 0 else float(rule.cap)
    mv = float(rule.model_votes) if rule.model_votes and rule.model_votes > 0 else None
    votes = np.bincount(k, c.totals, na)
    if use.all():
        x, conv = np.asarray(x, float), Convergence(True, 0, 0.0, "start", "the m-ELO start")
    else:
        x, conv = _scores(m, c, base, x, _needs_prior(c, base))
    converged = conv.converged
    if rule.prior_sd is None:
        # τ once, at the m-ELO start: re-estimated on the weighted scores it would feed on
        # itself (weights that favour agreeing accounts stretch the scores, which widens the
        # accounts' apparent spread, which spreads the weights further)
        u1, i1 = _account_stats(np.ones(na), x[c.i] - x[c.j], n, s, k, na)
        tau = float(np.clip(math.sqrt(ability_spread(u1, i1)), rule.min_sd, rule.max_sd))
    else:
        tau = float(rule.prior_sd)
    a, sd = np.ones(na), np.full(na, tau)
    w, flagged = np.ones(na), np.zeros(na, dtype=bool)
    coef, capped, scale = base, {}, 1.0
    judged = votes >= rule.min_records
    for _ in range(rule.rounds):
        a, sd = _posterior_abilities(x[c.i] - x[c.j], n, s, k, na, tau)
        flagged = (a + z * sd < rule.ability_threshold) & judged
        # an account below δ votes with the crowd's weight (1 before the scale below)
        w = np.where(flagged, 0.0, np.where(judged, np.clip(a, 0.0, cap), 1.0))
        # the scale: the average vote weighs 1 (as in m-ELO), so the board's spread is m-ELO's
        # wherever the crowd agrees with itself
        counted = np.bincount(k, n, na)
        mean_w = float(np.sum(w * counted)) / max(float(np.sum(counted[~flagged])), 1e-300)
        scale = mean_w if mean_w > 0 else 1.0
        w = np.minimum(w / scale, cap)
        coef = w[k] * base
        capped = {}
        if mv:
            fr, capped = _model_caps(c, coef, mv)
            coef = coef * fr
        x, conv = _scores(m, c, coef, x, _needs_prior(c, coef))
        converged = converged and conv.converged
    return _Rounds(x, coef, conv, converged, a, sd, w, flagged, tau, capped, scale)


def model_votes_limit(c: PairCounts, rule: CrowdRule, established: np.ndarray) -> float | None:
    """The per-model limit of an account (step 4): the ``model_votes_quantile`` quantile of the
    established accounts' votes per (account, model) cell — what an honest voter typically
    gives one model — clipped to [``model_votes``, ``model_votes_max``]; ``model_votes``
    alone when the quantile is off or no account is established; None: no limit."""
    if not rule.model_votes or rule.model_votes <= 0:
        return None
    floor = float(rule.model_votes)
    if rule.model_votes_quantile is None:
        return floor
    k = c.annotator.astype(np.int64)
    keep = np.asarray(established, bool)[k] & (c.totals > 0)
    if not keep.any():
        return floor
    _, _, cells = account_model_volume(k[keep], c.i[keep], c.j[keep], c.totals[keep], c.n_models)
    q = float(np.quantile(cells, rule.model_votes_quantile))
    return float(np.clip(q, floor, max(floor, rule.model_votes_max)))


def crowd_fit(
    counts: PairCounts,
    rule: CrowdRule | None = None,
    *,
    ages: Mapping[str, float] | None = None,
    active_days: Mapping[str, float] | None = None,
    x0: np.ndarray | None = None,
) -> CrowdFit:
    """The crowd rule's board on ``counts`` (pair counts per account; module docstring).
    ``ages``/``active_days``: days of record per account name (active days when given; a name
    they lack: 0 — new; neither: no flood test). ``x0``: a warm start for the scores."""
    rule = rule or CrowdRule()
    if counts.annotator is None or counts.annotators is None:
        raise InputError(
            f"{counts.source}: the crowd rule weighs accounts, so it needs pair counts per "
            "annotator (a judge column); rank with --method m-elo instead."
        )
    c = counts.take(counts.totals > 0)
    if len(c) == 0:
        raise InputError(f"{counts.source}: no comparisons to rank.")
    names = tuple(counts.annotators)
    na, m = len(names), c.n_models
    k = c.annotator.astype(np.int64)
    ones = np.ones(len(c))
    t = (
        None
        if not rule.flood_days or rule.flood_days <= 0
        else record_days_of(names, ages, active_days)
    )
    new = np.zeros(na, dtype=bool) if t is None else t < float(rule.flood_days)
    mv = model_votes_limit(c, rule, ~new)
    rule = replace(rule, model_votes=mv)
    prior = _needs_prior(c, ones)
    x, conv = _scores(m, c, ones, x0, prior)
    converged = conv.converged
    # 1. the flood test first, on the votes as m-ELO counts them (one account's say on a model
    # capped): a flood must not first bend the abilities the weights are drawn from
    base = ones.copy()
    floods: dict[int, float] = {}
    tested: dict[int, float] = {}
    if t is not None:
        c0 = ones * _model_caps(c, ones, mv)[0] if mv else ones
        x_0, _ = _scores(m, c, c0, x, _needs_prior(c, c0))
        base, floods, tested = _flood_test(c, c0, new[k], x_0, rule)
    # 2. the weights, on what the flood test left
    rounds = _weight_rounds(c, base, x, rule)
    x, coef, conv = rounds.x, rounds.coef, rounds.conv
    converged = converged and rounds.converged
    # 3. the flood test again on the final weights (a flood the equal weights hid)
    if t is not None:
        fac, more, tested = _flood_test(c, coef, new[k], x, rule)
        for q, zz in more.items():
            floods[q] = zz
        if more:
            coef = coef * fac
            prior = _needs_prior(c, coef)
            x, conv = _scores(m, c, coef, x, prior)
            converged = converged and conv.converged
    prior = _needs_prior(c, coef)
    a, sd, w, flagged, tau, capped, scale = (
        rounds.a,
        rounds.sd,
        rounds.w,
        rounds.flagged,
        rounds.tau,
        rounds.capped,
        rounds.scale,
    )
    # abilities on the weights' scale (the average vote weighs 1): weight = min(max(a, 0), cap)
    return _result(
        counts,
        c,
        names,
        x,
        conv,
        converged,
        a / scale,
        sd / scale,
        w,
        flagged,
        coef,
        prior,
        tau,
        capped,
        floods,
        tested,
        new,
        rule,
    )


def _result(
    counts: PairCounts,
    c: PairCounts,
    names: tuple[str, ...],
    x: np.ndarray,
    conv: Convergence,
    converged: bool,
    a: np.ndarray,
    sd: np.ndarray,
    w: np.ndarray,
    flagged: np.ndarray,
    coef: np.ndarray,
    prior: np.ndarray,
    tau: float,
    capped: dict[int, int],
    floods: dict[int, float],
    tested: dict[int, float],
    new: np.ndarray,
    rule: CrowdRule,
) -> CrowdFit:
    """The :class:`CrowdFit` of a finished fit: the :class:`CrowdFitted` board (flagged
    accounts' rows out of its counts, status ``excluded``)."""
    na, m = len(names), c.n_models
    k = c.annotator.astype(np.int64)
    records = np.bincount(k, c.totals, na)
    status, reasons = [], []
    for q in range(na):
        if records[q] <= 0:
            status.append("left_out")
            reasons.append("left out: no vote")
        elif flagged[q]:
            status.append("excluded")
            reasons.append(
                f"excluded: ability {a[q]:.3g} (posterior SD {sd[q]:.3g}) below "
                f"{rule.ability_threshold:g} with {rule.confidence:.0%} confidence"
            )
        elif records[q] < rule.min_records:
            status.append("included")
            reasons.append(
                f"weight {w[q]:.3g}: {records[q]:g} votes, below min_records={rule.min_records:g} "
                f"— the crowd's weight (ability {a[q]:.3g}, posterior SD {sd[q]:.3g})"
            )
        else:
            status.append("included")
            reasons.append(
                f"weight {w[q]:.3g}: ability {a[q]:.3g} (posterior SD {sd[q]:.3g}) shrunk "
                f"toward the crowd's 1 by its {records[q]:g} votes (τ = {tau:.3g})"
            )
    included = np.array([st == "included" for st in status])
    pos = np.full(na, -1, dtype=np.int64)
    pos[included] = np.arange(int(included.sum()))
    keep = included[k]
    fc = c.take(keep)
    fc = replace(
        fc,
        annotator=pos[fc.annotator.astype(np.int64)].astype(np.int32),
        annotators=tuple(names[q] for q in np.flatnonzero(included)),
    )
    rw = coef[keep]
    battles = np.bincount(fc.i, fc.totals, m) + np.bincount(fc.j, fc.totals, m)
    loglik = bradley_terry_loglik(
        x, fc.i.astype(np.int64), fc.j.astype(np.int64), fc.totals, fc.score, rw
    )
    notes = [
        f"crowd rule: abilities shrunk toward 1 by a N(1, {tau:.3g}²) prior estimated from "
        "the data; weight min(max(ability, 0), "
        f"{rule.cap or 'no cap'}); at most "
        + (f"{rule.model_votes:.3g}" if rule.model_votes else "no limit")
        + " weighted votes of one account on one model (the established accounts' "
        f"{rule.model_votes_quantile or 0:.1%} per-model volume, at least "
        f"{DEFAULT_MODEL_VOTES:g}; docs/methods/crowd.md)"
    ]
    if floods:
        notes.append(
            f"new accounts' votes set aside on {len(floods)} model(s) where they disagreed "
            "with the established accounts: "
            + ", ".join(f"{c.models[q]} (z = {zz:+.1f})" for q, zz in sorted(floods.items()))
        )
    if prior.any():
        notes.append(
            f"{int(prior.sum())} model(s) rated with the existence prior (too few counted votes "
            "for a finite maximum, or a comparison graph in several parts): their intervals "
            "are wide"
        )
    if not converged:
        notes.append("a score fit did not converge within 200 Newton steps")
    fitted = CrowdFitted(
        method="crowd",
        models=c.models,
        scores=x,
        loglik=float(loglik),
        n_comparisons=float(fc.n_comparisons),  # a flagged account's votes are not the board's
        battles=battles,
        convergence=replace(conv, converged=bool(converged)),
        params={"rule": "crowd", **{kk: v for kk, v in rule.__dict__.items()}},
        anchor=None,
        notes=tuple(notes),
        counts=fc,
        annotators=names,
        abilities=a,
        ability_se=sd,
        records=records,
        status=tuple(status),
        reasons=tuple(reasons),
        normalization="mean",
        prior_ties=None,
        model_prior=prior if prior.any() else None,
        row_weights=rw,
    )
    return CrowdFit(
        fitted=fitted,
        weights={names[q]: float(w[q]) for q in range(na)},
        flagged={names[q]: reasons[q] for q in range(na) if status[q] == "excluded"},
        prior_sd=tau,
        capped={names[q]: v for q, v in capped.items()},
        floods={c.models[q]: v for q, v in floods.items()},
        flood_z={c.models[q]: v for q, v in tested.items()},
        new=frozenset(names[q] for q in np.flatnonzero(new)),
        converged=bool(converged),
        notes=tuple(notes),
    )
