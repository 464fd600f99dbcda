"""Fit metrics of outcome models (docs/methods/metrics.md, leaderbot App. D): NLL, cross-entropy, RMSE, KL/JS,
AIC/BIC, marginal outcomes, held-out splits, Kendall τ between fitted models."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from stablearena import Battles, PairCounts
from stablearena.analysis.metrics import (
    fit_metrics,
    kendall_tau_matrix,
    marginal_outcomes,
    outcome_table,
    split_counts,
)
from stablearena.errors import InputError
from stablearena.raters import BradleyTerry, MElo
from stablearena.raters.ties import Davidson, RaoKupper


def arena(m: int = 7, n: int = 80, seed: int = 0) -> PairCounts:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.7, m)
    i, j = np.triu_indices(m, 1)
    d = x[i] - x[j]
    ea, eb, nu = np.exp(d / 2), np.exp(-d / 2), 0.8
    probs = np.column_stack([ea, eb, np.full(len(d), nu)]) / (ea + eb + nu)[:, None]
    y = np.array([rng.multinomial(n, p) for p in probs], dtype=float)
    return PairCounts.from_arrays([f"m{k}" for k in range(m)], np.column_stack([i, j]), y)


@dataclass(frozen=True)
class Saturated:
    """A 'model' that predicts each pair's empirical frequencies exactly."""

    counts: PairCounts

    @property
    def models(self) -> tuple[str, ...]:
        return self.counts.models

    def outcome_probabilities(self, i, j):
        c = self.counts
        table = {}
        for r in range(len(c)):
            n = c.totals[r]
            table[(c.i[r], c.j[r])] = np.array([c.wins[r], c.losses[r], c.all_ties[r]]) / n
        out = []
        for a, b in zip(np.ravel(i), np.ravel(j), strict=True):
            p = table[(min(a, b), max(a, b))]
            out.append(p if a < b else p[[1, 0, 2]])
        return np.array(out)


# ------------------------------------------------------------------------------------ NLL and cross-entropy
@pytest.mark.parametrize("rater", [RaoKupper(), Davidson(k_tie=2), RaoKupper(k_cov=0)])
def test_nll_is_the_fitted_nll_and_the_sum_of_cross_entropies(rater):
    counts = arena()
    fit = rater.fit(counts)
    met = fit_metrics(fit)
    assert met["nll"] == pytest.approx(fit.nll, rel=1e-12)
    assert met["ce_win"] + met["ce_loss"] + met["ce_tie"] == pytest.approx(met["nll"], rel=1e-12)
    assert met["n_comparisons"] == counts.n_comparisons
    assert met["outcomes"] == "ties"


def test_bradley_terry_models_are_scored_in_their_own_outcome_space():
    counts = arena(seed=1)
    melo, bt = MElo().fit(counts), BradleyTerry().fit(counts)
    m1, m2 = fit_metrics(melo), fit_metrics(bt)
    assert m1["nll"] == pytest.approx(melo.nll, rel=1e-12)  # ties as half
    assert m2["nll"] == pytest.approx(bt.nll, rel=1e-12)  # ties dropped
    assert m1["ce_tie"] is None and m1["rmse_tie"] is None
    assert m1["outcomes"] == "half" and m2["outcomes"] == "drop"
    assert m2["n_comparisons"] == pytest.approx((counts.wins + counts.losses).sum())
    # two outcomes: the win and loss errors coincide (w − n p = −(l − n(1 − p))), as in leaderbot D.2
    assert m1["rmse_win"] == pytest.approx(m1["rmse_loss"]) == pytest.approx(m1["rmse"])
    assert m1["n_params"] == counts.n_models - 1


def test_rmse_kld_jsd_by_hand():
    counts = arena(m=4, n=30, seed=2)
    fit = Davidson().fit(counts)
    tab = outcome_table(fit)
    n = tab.n
    w = n / n.sum()
    exp_counts = n[:, None] * tab.predicted
    rmse = np.sqrt((w[:, None] * (tab.observed - exp_counts) ** 2).sum(axis=0))
    met = fit_metrics(fit)
    assert [met["rmse_win"], met["rmse_loss"], met["rmse_tie"]] == pytest.approx(list(rmse))
    assert met["rmse"] == pytest.approx(math.sqrt(np.mean(rmse**2)))
    kl = []
    js = []
    for r in range(len(n)):
        pe, q = tab.observed[r] / n[r], tab.predicted[r]
        kl.append(sum(a * math.log(a / b) for a, b in zip(pe, q, strict=True) if a > 0))
        mix = (pe + q) / 2
        js.append(
            0.5 * sum(a * math.log(a / c) for a, c in zip(pe, mix, strict=True) if a > 0)
            + 0.5 * sum(b * math.log(b / c) for b, c in zip(q, mix, strict=True) if b > 0)
        )
    assert met["kld"] == pytest.approx(np.mean(kl))
    assert met["jsd"] == pytest.approx(np.mean(js))
    assert 0 <= met["jsd"] <= math.log(2)


def test_a_saturated_model_has_zero_error_and_divergence():
    counts = arena(seed=3)
    met = fit_metrics(Saturated(counts), counts)
    assert met["rmse"] == pytest.approx(0, abs=1e-9)
    assert met["kld"] == pytest.approx(0, abs=1e-12) and met["jsd"] == pytest.approx(0, abs=1e-12)
    # the saturated NLL is the lower bound of every model's NLL
    assert met["nll"] <= fit_metrics(RaoKupper(k_tie=3).fit(counts))["nll"]


# ------------------------------------------------------------------------------------ AIC, BIC
def test_aic_and_bic_use_the_total_loglik_and_the_number_of_comparisons():
    counts = arena(seed=4)
    fit = RaoKupper(k_tie=1).fit(counts)
    met = fit_metrics(fit)
    k, ll, n = fit.n_free_params, fit.loglik, counts.n_comparisons
    assert met["n_params"] == k
    assert met["aic"] == pytest.approx(2 * k - 2 * ll)
    assert met["bic"] == pytest.approx(k * math.log(n) - 2 * ll)
    # not leaderbot's: 2k − 2·(mean NLL) and k·ln(pairs) − 2·(mean NLL)
    assert met["aic"] != pytest.approx(2 * fit.n_params - 2 * fit.nll)


def test_held_out_metrics_have_no_information_criteria():
    counts = arena(n=200, seed=5)
    train, test = split_counts(counts, 0.2, seed=1)
    fit = Davidson().fit(train)
    met = fit_metrics(fit, test)
    assert met["aic"] is None and met["bic"] is None
    assert met["n_comparisons"] == test.n_comparisons
    assert np.isfinite(met["nll"])


def test_a_zero_probability_outcome_is_floored_not_infinite():
    counts = arena(m=5, seed=6)
    ties = counts.ties.copy()
    ties[0] = 0  # one pair never ties in training ...
    fit = RaoKupper(k_tie=5).fit(counts.with_counts(counts.wins, counts.losses, ties))
    met = fit_metrics(fit, counts)  # ... but does in the evaluation data
    assert all(np.isfinite(v) for v in met.values() if isinstance(v, float))


# ------------------------------------------------------------------------------------ marginal outcomes
def test_marginals_of_m_elo_reproduce_each_models_score():
    """At the m-ELO optimum Σ_j n_ij p_ij = Σ_j (w_ij + t_ij/2) for every model (score equations)."""
    counts = arena(seed=7)
    tab = marginal_outcomes(MElo().fit(counts))
    np.testing.assert_allclose(tab["predicted_win"], tab["observed_win"], atol=1e-9)
    np.testing.assert_allclose(tab["observed_win"] + tab["observed_loss"], 1.0)


def test_marginals_of_davidson_reproduce_win_minus_loss_and_the_tie_rate():
    counts = arena(seed=8)
    fit = Davidson().fit(counts)
    tab = marginal_outcomes(fit)
    np.testing.assert_allclose(
        tab["predicted_win"] - tab["predicted_loss"],
        tab["observed_win"] - tab["observed_loss"],
        atol=1e-9,
    )
    ties_obs = (tab["observed_tie"] * tab["battles"]).sum()
    ties_pred = (tab["predicted_tie"] * tab["battles"]).sum()
    assert ties_pred == pytest.approx(ties_obs, rel=1e-9)  # ∂/∂η = Σ t − Σ n P_tie = 0
    sums = tab[["predicted_win", "predicted_loss", "predicted_tie"]].sum(axis=1)
    np.testing.assert_allclose(sums, 1.0)
    assert list(tab["model"]) == list(fit.models)


# ------------------------------------------------------------------------------------ splits
def test_split_by_battle_partitions_the_counts():
    counts = arena(n=100, seed=9)
    train, test = split_counts(counts, 0.25, by="battle", seed=3)
    total = train.n_comparisons + test.n_comparisons
    assert total == counts.n_comparisons
    assert test.n_comparisons / total == pytest.approx(0.25, abs=0.03)
    a, b = split_counts(counts, 0.25, by="battle", seed=3)
    np.testing.assert_array_equal(a.wins, train.wins)  # seeded


def test_split_by_pair_keeps_training_connected_and_pairs_disjoint():
    counts = arena(m=9, seed=10)
    train, test = split_counts(counts, 0.4, by="pair", seed=2)
    tr = set(zip(train.i.tolist(), train.j.tolist(), strict=True))
    te = set(zip(test.i.tolist(), test.j.tolist(), strict=True))
    assert not tr & te and len(tr | te) == len(counts)
    assert len(te) == round(0.4 * len(counts))
    g = coo_matrix((np.ones(len(train)), (train.i, train.j)), shape=(9, 9))
    assert connected_components(g, directed=False)[0] == 1


def test_split_of_a_battle_log():
    ratings = np.linspace(900, 1100, 5)
    from stablearena.data.simulate import simulate_battles

    battles = simulate_battles(ratings, 2000, rule="davidson", eta=0.0, seed=1)
    assert isinstance(battles, Battles)
    train, test = split_counts(battles, 0.1, seed=0)
    assert train.n_comparisons + test.n_comparisons == len(battles)


@pytest.mark.parametrize("ratio", [0, 1, -0.1, 1.5])
def test_bad_test_ratio_is_an_input_error(ratio):
    with pytest.raises(InputError, match="test_ratio"):
        split_counts(arena(), ratio)


def test_unknown_split_is_an_input_error():
    with pytest.raises(InputError, match="split"):
        split_counts(arena(), 0.1, by="prompt")


def test_weighted_counts_cannot_be_split_by_battle():
    counts = arena()
    with pytest.raises(InputError, match="whole-number"):
        split_counts(
            counts.with_counts(counts.wins * 0.5, counts.losses, counts.ties), 0.1, by="battle"
        )


def test_evaluating_on_unknown_models_is_an_input_error():
    fit = Davidson().fit(arena(m=5))
    other = arena(m=6)
    with pytest.raises(InputError, match="not in the fitted model"):
        fit_metrics(fit, other)


def test_evaluation_counts_in_another_model_order_are_mapped():
    counts = arena(m=5, seed=11)
    fit = Davidson().fit(counts)
    names = list(counts.models)[::-1]
    code = {n: k for k, n in enumerate(names)}
    pairs = np.column_stack(
        [[code[counts.models[a]] for a in counts.i], [code[counts.models[b]] for b in counts.j]]
    )
    reordered = PairCounts.from_arrays(
        names, pairs, np.column_stack([counts.wins, counts.losses, counts.ties])
    )
    assert fit_metrics(fit, reordered)["nll"] == pytest.approx(fit.nll, rel=1e-12)


# ------------------------------------------------------------------------------------ Kendall τ
def test_kendall_tau_matrix():
    counts = arena(m=8, seed=12)
    fits = [MElo().fit(counts), RaoKupper().fit(counts), Davidson(k_tie=2).fit(counts)]
    tau = kendall_tau_matrix(fits, ["melo", "rk", "dv"])
    assert tau.shape == (3, 3)
    np.testing.assert_allclose(np.diag(tau), 1.0)
    np.testing.assert_allclose(tau.values, tau.values.T)
    assert (tau.values > 0.5).all()


def test_kendall_tau_of_a_reversed_ranking_is_minus_one():
    @dataclass(frozen=True)
    class Scores:
        models: tuple
        scores: np.ndarray
        method: str = "x"

    a = Scores(("a", "b", "c", "d"), np.array([1.0, 2, 3, 4]))
    b = Scores(("d", "c", "b", "a"), np.array([1.0, 2, 3, 4]))  # same names, opposite order
    assert kendall_tau_matrix([a, b]).iloc[0, 1] == pytest.approx(-1.0)


def test_kendall_tau_matrix_needs_the_same_models():
    a = Davidson().fit(arena(m=5))
    b = Davidson().fit(arena(m=6))
    with pytest.raises(InputError, match="same models"):
        kendall_tau_matrix([a, b])
