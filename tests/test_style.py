"""Style-controlled Bradley–Terry (stablearena.raters.style): derivatives against finite
differences, the compiled pass against the vectorised reference, the fit against a per-battle
reference solver, recovery of a known style effect, intervals, am-ELO, and bad input."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from stablearena import Battles
from stablearena.analysis.metrics import kendall_tau
from stablearena.data.simulate import random_ratings
from stablearena.data.style_features import simulate_style_battles, with_covariates
from stablearena.errors import InputError
from stablearena.raters import MElo, get_rater
from stablearena.raters.style import (
    StyleAmElo,
    StyleBradleyTerry,
    StyleMElo,
    _Objective,
    style_gradient,
    style_hessian,
    style_loglik,
    style_rows,
)
from stablearena.raters.uncertainty import covariance, intervals


def _rows(seed=0, n=400, m=6, d=3, annotators=1, ties=True):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, m, n)
    b = (a + 1 + rng.integers(0, m - 1, n)) % m
    z = rng.normal(size=(n, d))
    oc = rng.integers(0, 3 if ties else 2, n).astype(np.int8)
    ann = rng.integers(0, annotators, n).astype(np.int32) if annotators > 1 else None
    battles = Battles(
        models=tuple(f"m{k}" for k in range(m)),
        model_a=a.astype(np.int32),
        model_b=b.astype(np.int32),
        outcome=oc,
        annotator=ann,
        annotators=None if ann is None else tuple(f"k{k}" for k in range(annotators)),
        weight=rng.uniform(0.5, 2.0, n),
    )
    rows = style_rows(battles, z, annotator=ann, n_annotators=annotators)
    return battles, z, rows


def _fd_grad(f, p, h=1e-6):
    out = np.zeros(len(p))
    for k in range(len(p)):
        e = np.zeros(len(p))
        e[k] = h
        out[k] = (f(p + e) - f(p - e)) / (2 * h)
    return out


@pytest.mark.parametrize("annotators", [1, 4])
def test_gradient_and_hessian_match_finite_differences(annotators):
    _, _, rows = _rows(annotators=annotators)
    m, d = rows.n_models, rows.n_features
    rng = np.random.default_rng(1)
    x, g = rng.normal(size=m), rng.normal(scale=0.3, size=d)
    theta = rng.uniform(0.3, 1.5, annotators) if annotators > 1 else None
    p0 = np.concatenate([x, g] + ([theta] if theta is not None else []))

    def split(p):
        return p[:m], p[m : m + d], (p[m + d :] if theta is not None else None)

    def f(p):
        xx, gg, th = split(p)
        return style_loglik(xx, gg, rows, th)

    def grad(p):
        xx, gg, th = split(p)
        return style_gradient(xx, gg, rows, th)

    np.testing.assert_allclose(
        style_gradient(x, g, rows, theta), _fd_grad(f, p0), rtol=1e-6, atol=1e-5
    )
    h = style_hessian(x, g, rows, theta)
    fd_h = np.column_stack([_fd_grad(lambda q, k=k: grad(q)[k], p0) for k in range(len(p0))])
    np.testing.assert_allclose(h, fd_h, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(h, h.T, atol=1e-10)


@pytest.mark.parametrize("penalty", ["gamma", "all", "none"])
@pytest.mark.parametrize("annotators", [1, 3])
def test_compiled_pass_matches_reference(penalty, annotators):
    _, _, rows = _rows(annotators=annotators)
    m, d = rows.n_models, rows.n_features
    rng = np.random.default_rng(2)
    x, g = rng.normal(size=m), rng.normal(scale=0.3, size=d)
    theta = rng.uniform(0.3, 1.5, annotators) if annotators > 1 else None
    obj = _Objective(rows, penalty, 0.7, None, annotators=theta is not None)
    val = obj.derivatives(x, g, theta)
    pen = np.zeros(m + d)
    if penalty != "none":
        pen[m:] = 0.7
    if penalty == "all":
        pen[:m] = 0.7 / math.log(10) ** 2
    p = np.concatenate([x, g])
    assert val == pytest.approx(
        style_loglik(x, g, rows, theta) - 0.5 * np.sum(pen * p * p), rel=1e-12
    )
    assert obj.value(x, g, theta) == pytest.approx(val, rel=1e-12)
    ref_g = style_gradient(x, g, rows, theta)
    np.testing.assert_allclose(obj.grad, ref_g[: m + d] - pen * p, rtol=1e-10, atol=1e-10)
    ref_h = style_hessian(x, g, rows, theta)
    np.testing.assert_allclose(
        obj.hess, -ref_h[: m + d, : m + d] + np.diag(pen), rtol=1e-10, atol=1e-9
    )
    if theta is not None:
        np.testing.assert_allclose(obj.ga, ref_g[m + d :], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(obj.dd, -np.diag(ref_h[m + d :, m + d :]), rtol=1e-10)
        np.testing.assert_allclose(obj.cross - obj.cross_e, -ref_h[: m + d, m + d :], atol=1e-9)
        fisher = style_hessian(x, g, rows, theta, exact=False)
        np.testing.assert_allclose(obj.cross, -fisher[: m + d, m + d :], atol=1e-9)


def _per_battle_loglik(battles, z, x, g, theta=None):
    """The obviously-correct reference: one term per battle, ties as half a win."""
    total = 0.0
    w = battles.weights()
    for r in range(len(battles)):
        u = x[battles.model_a[r]] - x[battles.model_b[r]] + z[r] @ g
        if theta is not None:
            u *= theta[battles.annotator[r]]
        score = [1.0, 0.0, 0.5, 0.5][battles.outcome[r]]
        total += w[r] * (score * log_expit(u) + (1 - score) * log_expit(-u))
    return total


@pytest.mark.parametrize("annotators", [1, 3])
def test_rows_reproduce_per_battle_loglik(annotators):
    battles, z, rows = _rows(annotators=annotators, n=200)
    rng = np.random.default_rng(3)
    x, g = rng.normal(size=rows.n_models), rng.normal(size=rows.n_features)
    theta = rng.uniform(0.3, 1.5, annotators) if annotators > 1 else None
    assert style_loglik(x, g, rows, theta) == pytest.approx(
        _per_battle_loglik(battles, z, x, g, theta), rel=1e-12
    )


def test_identical_cells_are_aggregated_without_changing_the_likelihood():
    rng = np.random.default_rng(4)
    n, m = 20_000, 5
    a = rng.integers(0, m, n)
    b = (a + 1 + rng.integers(0, m - 1, n)) % m
    z = rng.integers(-2, 3, (n, 2)).astype(float)  # a coarse grid: cells repeat
    battles = Battles(
        models=tuple("abcde"),
        model_a=a.astype(np.int32),
        model_b=b.astype(np.int32),
        outcome=rng.integers(0, 3, n).astype(np.int8),
    )
    rows = style_rows(battles, z)
    assert len(rows) < n / 10
    x, g = rng.normal(size=m), rng.normal(size=2)
    assert style_loglik(x, g, rows) == pytest.approx(
        _per_battle_loglik(battles, z, x, g), rel=1e-11
    )


def _scipy_reference(battles, z, penalty, reg, ties="half"):
    """Per-battle objective minimised by scipy (L-BFGS-B to a tight tolerance)."""
    m = battles.n_models
    score = np.array([1.0, 0.0, 0.5, 0.5])[battles.outcome]
    keep = np.ones(len(battles), bool) if ties == "half" else battles.outcome < 2
    a, b, s, zz = battles.model_a[keep], battles.model_b[keep], score[keep], z[keep]
    pen = np.zeros(m + z.shape[1])
    if penalty != "none":
        pen[m:] = reg
    if penalty == "all":
        pen[:m] = reg / math.log(10) ** 2

    def f(p):
        u = p[a] - p[b] + zz @ p[m:]
        q = expit(u)
        val = -np.sum(s * log_expit(u) + (1 - s) * log_expit(-u)) + 0.5 * np.sum(pen * p * p)
        e = s - q
        grad = np.zeros(len(p))
        np.add.at(grad, a, -e)
        np.add.at(grad, b, e)
        grad[m:] = -zz.T @ e
        return val, grad + pen * p

    res = minimize(f, np.zeros(m + z.shape[1]), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000})  # fmt: skip
    x = res.x[:m] - (res.x[:m].mean() if penalty != "all" else 0.0)
    return x, res.x[m:]


@pytest.mark.parametrize("penalty", ["gamma", "all", "none"])
def test_fit_matches_a_per_battle_reference_solver(penalty):
    b = simulate_style_battles(random_ratings(8, seed=1), 3000, gamma=(0.3, 0.1), seed=5, ties=True)
    fitted = StyleMElo(penalty=penalty, reg=2.0, raw=False).fit(b)
    assert fitted.convergence.converged
    x, g = _scipy_reference(b, b.covariates, penalty, 2.0)
    np.testing.assert_allclose(fitted.scores, x, atol=2e-6)
    np.testing.assert_allclose(fitted.gamma, g, atol=2e-6)
    if penalty == "all":
        assert abs(fitted.scores.mean()) < 1e-9  # the penalty alone centres the ratings


def test_warm_start_from_a_subsample_reaches_the_same_optimum(monkeypatch):
    import stablearena.raters.style as style_module

    b = simulate_style_battles(random_ratings(8, seed=1), 5000, gamma=(0.3, 0.1), seed=5, ties=True)
    cold = StyleMElo(raw=False).fit(b)
    monkeypatch.setattr(style_module, "_WARM_ROWS", 1000)
    warm = StyleMElo(raw=False).fit(b)
    assert warm.convergence.converged
    np.testing.assert_allclose(warm.scores, cold.scores, atol=1e-9)
    np.testing.assert_allclose(warm.gamma, cold.gamma, atol=1e-9)


def test_style_bt_drops_ties():
    b = simulate_style_battles(random_ratings(6, seed=2), 3000, gamma=(0.4,), seed=6, ties=True)
    fitted = StyleBradleyTerry(raw=False, penalty="none").fit(b)
    decisive = b.take(b.outcome < 2)
    # the same fit on the decisive battles, standardised over them, with ties-as-half
    z = decisive.covariates
    ref = StyleMElo(raw=False, penalty="none").fit(decisive)
    np.testing.assert_allclose(fitted.scores, ref.scores, atol=1e-9)
    np.testing.assert_allclose(fitted.gamma, ref.gamma, atol=1e-9)
    assert fitted.n_comparisons == len(decisive) and z is not None


def test_orientation_and_weights_do_not_matter():
    b = simulate_style_battles(random_ratings(6, seed=3), 2000, gamma=(0.3,), seed=7, ties=True)
    swapped = replace(
        b,
        model_a=b.model_b,
        model_b=b.model_a,
        outcome=np.array([1, 0, 2, 3], dtype=np.int8)[b.outcome],
        covariates=-b.covariates,
    )
    f1 = StyleMElo(raw=False, standardize=False).fit(b)
    f2 = StyleMElo(raw=False, standardize=False).fit(swapped)
    np.testing.assert_allclose(f1.scores, f2.scores, atol=1e-9)
    np.testing.assert_allclose(f1.gamma, f2.gamma, atol=1e-9)
    doubled = b.take(np.concatenate([np.arange(len(b)), np.arange(len(b))]))
    weighted = replace(b, weight=np.full(len(b), 2.0))
    f3 = StyleMElo(raw=False).fit(doubled)
    f4 = StyleMElo(raw=False).fit(weighted)
    np.testing.assert_allclose(f3.scores, f4.scores, atol=1e-9)
    np.testing.assert_allclose(f3.gamma, f4.gamma, atol=1e-9)


def test_no_style_effect_gives_m_elo_ratings():
    b = simulate_style_battles(random_ratings(10, seed=4), 20_000, gamma=(0.0,), seed=8)
    rng = np.random.default_rng(0)
    noise = with_covariates(b, rng.normal(size=len(b)), ["noise"])
    styled = StyleMElo(raw=False).fit(noise)
    plain = MElo().fit(b)
    assert abs(styled.gamma[0]) < 4 * styled.style_table()["se_fisher"][0]
    np.testing.assert_allclose(styled.ratings, plain.ratings, atol=3.0)


def test_recovers_gamma_and_beats_the_uncontrolled_ranking():
    truth = random_ratings(30, seed=5)
    hits, better = 0, 0
    reps = 12
    for rep in range(reps):
        b = simulate_style_battles(truth, 20_000, gamma=(0.25,), seed=100 + rep, style_spread=0.8)
        fitted = StyleMElo().fit(b)
        row = fitted.style_table().iloc[0]
        hits += row.ci_low_fisher <= 0.25 <= row.ci_high_fisher
        better += kendall_tau(fitted.ratings, truth) > kendall_tau(fitted.raw.ratings, truth)
    assert hits >= 9  # 95% intervals: P(≤ 8 of 12) < 0.2%
    assert better >= 10


def test_fisher_and_sandwich_agree_under_the_model_and_intervals_work():
    b = simulate_style_battles(random_ratings(12, seed=6), 30_000, gamma=(0.25, 0.05), seed=9)
    fitted = StyleMElo().fit(b)
    tab = fitted.style_table()
    ratio = tab.se_sandwich / tab.se_fisher
    assert np.all((ratio > 0.9) & (ratio < 1.1))
    for kind in ("fisher", "sandwich"):
        iv = intervals(fitted, kind)
        assert np.all(iv.ci_low < iv.ratings) and np.all(iv.ratings < iv.ci_high)
    cov = covariance(fitted, "fisher")
    assert cov.params.shape == (14, 14)


def test_the_battle_bootstrap_of_a_style_fit_agrees_with_the_sandwich():
    """Resampling the fit's own rows (battles with their covariates): the bootstrap standard
    errors match the sandwich's (200 rounds: the SD of an SD estimate is about 5%), the
    replicates do not depend on the number of workers, and the unchanged table refits to the
    same optimum."""
    from stablearena.raters.uncertainty import bootstrap

    b = simulate_style_battles(
        random_ratings(12, seed=0), 6000, gamma=(0.4, -0.2), ties=True, seed=1
    )
    fitted = StyleMElo().fit(b)
    same = fitted.refit_table(fitted.resampling_table())
    np.testing.assert_allclose(same.scores, fitted.scores, atol=1e-7)
    np.testing.assert_allclose(same.gamma, fitted.gamma, atol=1e-7)
    one = bootstrap(fitted, rounds=200, seed=0, workers=1)
    two = bootstrap(fitted, rounds=200, seed=0, workers=2)
    np.testing.assert_array_equal(one.scores, two.scores)
    assert one.failed == 0 and one.scores.shape == (200, 12)
    boot = intervals(fitted, "bootstrap", rounds=200, seed=0)
    ratio = boot.se / intervals(fitted, "sandwich").se
    assert np.all((ratio > 0.85) & (ratio < 1.15)), ratio
    assert np.all(boot.ci_low < boot.ratings) and np.all(boot.ratings < boot.ci_high)


def test_style_am_elo_bootstrap_refits_the_abilities_too():
    """Style-controlled am-ELO's battle bootstrap refits ratings, γ and abilities on each
    resample: its rating standard errors are near the sandwich's, and the unchanged table
    refits to the same optimum (abilities included)."""
    truth = random_ratings(8, seed=2)
    abilities = np.r_[np.full(8, 1.0), np.full(2, -1.0)]  # two flippers among ten annotators
    b = simulate_style_battles(truth, 6000, gamma=(0.3,), abilities=abilities, seed=5)
    fitted = StyleAmElo().fit(b)
    same = fitted.refit_table(fitted.resampling_table())
    np.testing.assert_allclose(same.scores, fitted.scores, atol=1e-6)
    np.testing.assert_allclose(same.abilities, fitted.abilities, atol=1e-6)
    boot = intervals(fitted, "bootstrap", rounds=150, seed=0, workers=1)
    assert boot.bootstrap.failed == 0
    ratio = boot.se / intervals(fitted, "sandwich").se
    assert np.all((ratio > 0.8) & (ratio < 1.25)), ratio


def test_a_clustered_style_bootstrap_is_refused_with_what_to_use():
    b = simulate_style_battles(random_ratings(5, seed=3), 800, gamma=(0.3,), seed=4)
    with pytest.raises(InputError, match="no clustered bootstrap"):
        intervals(StyleMElo().fit(b), "bootstrap", rounds=4, cluster="annotator", battles=b)


def test_to_dict_keeps_the_contract_and_adds_keys():
    b = simulate_style_battles(random_ratings(6, seed=7), 3000, gamma=(0.3,), seed=10)
    out = StyleMElo().fit(b).to_dict()
    for key in ("method", "n_battles", "n_models", "nll", "models", "convergence", "notes"):
        assert key in out
    entry = out["models"][0]
    assert {"rank", "model", "rating", "battles", "raw_rating", "raw_rank", "rank_shift"} <= set(
        entry
    )
    feats = out["style"]["features"]
    assert feats[0]["feature"] == "length" and "se_sandwich" in feats[0]
    assert sum(e["rank_shift"] for e in out["models"]) == 0


def test_am_elo_style_recovers_flippers_like_am_elo():
    from stablearena.analysis.metrics import prediction_auc
    from stablearena.raters.annotator import AmElo

    rng = np.random.default_rng(11)
    ab = np.concatenate([rng.uniform(0.5, 1.5, 40), -rng.uniform(0.5, 1.5, 10)])
    truth = random_ratings(15, seed=8)
    b = simulate_style_battles(
        truth, 30_000, gamma=(0.25,), abilities=ab, seed=12, style_spread=0.8
    )
    styled = StyleAmElo().fit(b)
    plain = AmElo().fit(b)
    assert styled.convergence.converged
    flip = ab < 0
    auc_styled = prediction_auc(-styled.abilities, flip.astype(float))
    auc_plain = prediction_auc(-plain.abilities, flip.astype(float))
    assert auc_styled >= auc_plain - 1e-9 and auc_styled > 0.99
    assert kendall_tau(styled.ratings, truth) >= kendall_tau(plain.ratings, truth)
    # γ on the scale of the average annotator: mean |ability| = 1 over a mixture of signs
    # (docs/methods/annotator-identification.md; it was mean(ability) = 1)
    assert 0.25 * np.abs(ab).mean() * 0.6 < styled.gamma[0] < 0.25 * np.abs(ab).mean() * 1.6
    tab = styled.annotator_table()
    assert len(tab) == 50 and np.all(tab.ability_se > 0)
    iv = intervals(styled, "sandwich")
    assert np.all(np.isfinite(iv.se))


def test_am_elo_style_gradient_vanishes_on_the_constraint_set():
    ab = np.array([1.2, 0.8, 1.0, -0.7])
    b = simulate_style_battles(
        random_ratings(8, seed=9), 8000, gamma=(0.3, 0.1), abilities=ab, seed=13
    )
    f = StyleAmElo(raw=False, penalty="none").fit(b)
    grad = style_gradient(f.scores, f.gamma, f.rows, f.abilities)
    m, d = f.n_models, f.n_features
    assert np.abs(grad[: m + d]).max() / f.n_comparisons < 1e-8
    ga = grad[m + d :]
    assert np.abs(ga - ga.mean()).max() / f.n_comparisons < 1e-8
    assert np.abs(f.abilities).mean() == pytest.approx(1.0)  # the gauge: mean |ability| = 1


def test_am_elo_style_without_annotators_is_style_m_elo():
    b = simulate_style_battles(random_ratings(6, seed=10), 3000, gamma=(0.3,), seed=14)
    f = StyleAmElo(raw=False).fit(b)
    g = StyleMElo(raw=False).fit(b)
    np.testing.assert_allclose(f.scores, g.scores, atol=1e-8)
    assert any("unknown" in n for n in f.notes)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), reg=st.floats(0.0, 5.0))
def test_optimum_is_stationary(seed, reg):
    b = simulate_style_battles(
        random_ratings(5, seed=seed), 600, gamma=(0.2, -0.1), seed=seed, ties=True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = StyleMElo(raw=False, reg=reg).fit(b)
    grad = style_gradient(f.scores, f.gamma, f.rows)
    grad[f.n_models :] -= reg * f.gamma
    assert f.convergence.converged
    assert np.abs(grad).max() / f.n_comparisons < 1e-8


# ---------------------------------------------------------------------------------- bad input
def test_pair_counts_are_refused():
    b = simulate_style_battles(random_ratings(4, seed=1), 500, seed=1)
    with pytest.raises(InputError, match="per-battle covariates"):
        StyleMElo().fit(b.counts())


def test_battles_without_covariates_are_refused():
    b = simulate_style_battles(random_ratings(4, seed=1), 500, seed=1)
    with pytest.raises(InputError, match="no covariates"):
        StyleMElo().fit(replace(b, covariates=None, covariate_names=None))


def test_unknown_feature_is_refused():
    b = simulate_style_battles(random_ratings(4, seed=1), 500, seed=1)
    with pytest.raises(InputError, match="unknown covariate"):
        StyleMElo(features=("bold",)).fit(b)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"penalty": "lasso"}, "penalty must be"),
        ({"reg": -1.0}, "reg must be"),
        ({"tol": 0.0}, "tol"),
    ],
)
def test_bad_options_are_refused(options, message):
    b = simulate_style_battles(random_ratings(4, seed=1), 500, seed=1)
    with pytest.raises(InputError, match=message):
        StyleMElo(**options).fit(b)


def test_constant_covariate_is_refused():
    b = simulate_style_battles(random_ratings(4, seed=1), 500, seed=1)
    with pytest.raises(InputError, match="same in every battle"):
        StyleMElo().fit(with_covariates(b, np.full(len(b), 0.3), ["flat"]))


def test_non_finite_covariates_are_refused():
    b = simulate_style_battles(random_ratings(4, seed=1), 50, seed=1)
    z = b.covariates.copy()
    z[7, 0] = np.nan
    with pytest.raises(InputError, match="row 8"):
        with_covariates(b, z, ["length"])


def test_registered_and_constructible_by_name():
    assert type(get_rater("style-m-elo", penalty="all")) is StyleMElo
    assert type(get_rater("style-am-elo")) is StyleAmElo


@pytest.mark.slow
def test_acceptance_recovery_100_arenas_of_100k_battles():
    """Issue 14 acceptance: γ_length = 0.25, 100k battles, 50 models, 100 repetitions."""
    truth = random_ratings(50, seed=2024)
    cover, better = 0, 0
    for rep in range(100):
        b = simulate_style_battles(truth, 100_000, gamma=(0.25,), seed=10_000 + rep)
        fitted = StyleMElo().fit(b)
        row = fitted.style_table().iloc[0]
        cover += row.ci_low_fisher <= 0.25 <= row.ci_high_fisher
        better += kendall_tau(fitted.ratings, truth) > kendall_tau(fitted.raw.ratings, truth)
    assert cover >= 90
    assert better > 50


def test_am_elo_style_annotator_who_always_agrees_gets_virtual_ties():
    ab = np.array([1.0, 1.0, 1.0, 1.0, 60.0])
    b = simulate_style_battles(
        random_ratings(6, spread=300, seed=3), 6000, gamma=(0.3,), abilities=ab, seed=15
    )
    with pytest.warns(Warning, match="voted all with"):
        f = StyleAmElo(raw=False).fit(b)
    assert f.convergence.converged
    assert f.prior_ties is not None and f.prior_ties[4] > 0 and f.prior_ties[:4].sum() == 0
    assert f.abilities[4] == f.abilities.max() and np.all(np.isfinite(f.abilities))


@pytest.mark.parametrize("annotators", [1, 7])
@pytest.mark.parametrize("parts", [2, 3])
def test_the_pass_split_over_cores_sums_to_the_single_pass(annotators, parts):
    """Large fits split each pass over the cores (one accumulator per slice, then summed): the
    objective, gradient, Hessian and annotator blocks equal those of one pass over all rows."""
    from stablearena.raters.style import _pass, _pass_split

    rng = np.random.default_rng(annotators * 10 + parts)
    rows, m, d = 1001, 9, 3
    a = rng.integers(0, m, rows).astype(np.int32)
    b = ((a + rng.integers(1, m, rows)) % m).astype(np.int32)
    z = rng.normal(size=(rows, d))
    k = rng.integers(0, annotators, rows).astype(np.int32)
    n = rng.integers(1, 4, rows).astype(float)
    s = np.floor(rng.uniform(0, 1, rows) * (n + 1))
    x, gamma = rng.normal(size=m), rng.normal(size=d) * 0.3
    theta = rng.uniform(0.2, 1.5, annotators) if annotators > 1 else np.ones(1)

    def run(fn, *extra):
        p, kk = m + d, max(annotators, 1)
        out = [np.empty(p), np.empty((p, p)), np.empty(kk), np.empty(kk)]
        out += [np.empty((p, kk)), np.empty((p, kk))]
        total = fn(x, gamma, a, b, z, k, n, s, theta, True, *out, *extra)
        value = fn(x, gamma, a, b, z, k, n, s, theta, False, *out, *extra)
        return total, value, out

    t1, v1, one = run(_pass)
    t2, v2, split = run(_pass_split, parts)
    assert t1 == pytest.approx(t2, rel=1e-12) and v1 == pytest.approx(v2, rel=1e-12)
    assert t1 == pytest.approx(v1, rel=1e-12)
    blocks = one if annotators > 1 else one[:2]
    for want, got in zip(blocks, split, strict=False):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
