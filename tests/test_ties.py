"""Tie and covariance models (docs/methods/ties.md): formulas, derivatives, constraints, solvers, contract."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena import Battles, PairCounts
from stablearena.data.datasets import path as dataset_path
from stablearena.data.simulate import random_ratings, simulate_battles
from stablearena.errors import DisconnectedGraphError, InputError, StableArenaWarning
from stablearena.raters import BradleyTerry, MElo, get_rater
from stablearena.raters.ties import (
    Davidson,
    RaoKupper,
    ThurstonianBT,
    TieFitted,
    TieSpec,
    _TieEngine,
    dct_basis,
)

DATA = dataset_path("chatbot-arena-2024")

FAMILIES = ["rao-kupper", "davidson", "bt-half", "bt-drop"]
STRUCTURES = [  # (k_tie, k_cov, tie_form)
    (0, None, "nested"),
    (2, None, "nested"),
    (3, None, "leaderbot"),
    (0, 0, "nested"),
    (2, 2, "nested"),
    (2, 3, "leaderbot"),
]


# ------------------------------------------------------------------------------------ helpers
def arena_counts(m: int = 8, n_per_pair: int = 60, seed: int = 0, eta: float = 0.6) -> PairCounts:
    """A complete arena whose counts are drawn from a Rao–Kupper model with threshold ``eta``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.8, m)
    i, j = np.triu_indices(m, 1)
    d = x[i] - x[j]
    pw = 1 / (1 + np.exp(-(d - eta)))
    pl = 1 / (1 + np.exp(-(-d - eta)))
    probs = np.column_stack([pw, pl, 1 - pw - pl])
    y = np.array([rng.multinomial(n_per_pair, p) for p in probs], dtype=float)
    return PairCounts.from_arrays([f"m{k}" for k in range(m)], np.column_stack([i, j]), y)


def engine_for(
    counts: PairCounts, family: str, k_tie: int, k_cov: int | None, form: str
) -> _TieEngine:
    spec = TieSpec(family, counts.n_models, k_tie, k_cov, form)
    return _TieEngine(spec, counts.i, counts.j, counts.wins, counts.losses, counts.all_ties)


def random_theta(
    spec: TieSpec, rng: np.random.Generator, counts: PairCounts | None = None
) -> np.ndarray:
    """Random parameters; Rao–Kupper thresholds made feasible (h ≥ 0.1 on every compared pair) by
    raising G's first DCT column, which is positive for every model."""
    th = rng.normal(0, 0.4, spec.n_params)
    if spec.has_eta0:
        th[spec.eta0] = 0.7
    if spec.family == "rao-kupper" and spec.k_tie > 0 and counts is not None:
        eng = _TieEngine(spec, counts.i, counts.j, counts.wins, counts.losses, counts.all_ties)
        first = spec.g.start + spec.k_tie * np.arange(spec.m)
        while eng.primitives(th)[2].min() < 0.1:
            th[first] += 0.25
    return th


def reference_loglik(spec: TieSpec, theta: np.ndarray, counts: PairCounts) -> float:
    """Slow, obviously-correct log-likelihood: a loop over pairs with the papers' π formulas
    (Rao–Kupper eq. 4, Davidson eq. 5, BT eq. 2), H from eq. 6–8 and Σ = D + ΛΛᵀ (eq. 13)."""
    m = spec.m
    mu = theta[spec.mu]
    hmat = np.zeros((m, m))
    if spec.has_ties:
        eta0 = theta[spec.eta0] if spec.has_eta0 else 0.0
        g = theta[spec.g].reshape(m, spec.k_tie) if spec.k_tie else np.zeros((m, 0))
        phi = np.array(
            [
                [
                    math.sqrt(2 / m) * math.cos(math.pi / (4 * m) * (2 * a - 1) * (2 * c - 1))
                    for c in range(1, spec.k_tie + 1)
                ]
                for a in range(1, m + 1)
            ]
        ).reshape(m, spec.k_tie)
        for a in range(m):
            for b in range(m):
                hmat[a, b] = eta0 + sum(
                    g[a, c] * phi[b, c] + g[b, c] * phi[a, c] for c in range(spec.k_tie)
                )
    sigma = None
    if spec.has_cov:
        t = theta[spec.sd]
        lam = theta[spec.lam].reshape(m, spec.kc)
        sigma = np.diag(t**2) + lam @ lam.T
    total = 0.0
    for r in range(len(counts)):
        a, b = int(counts.i[r]), int(counts.j[r])
        w, lo, tie = counts.wins[r], counts.losses[r], counts.all_ties[r]
        diff = mu[a] - mu[b]
        if sigma is not None:
            diff /= math.sqrt(sigma[a, a] + sigma[b, b] - 2 * sigma[a, b])
        pi_a, pi_b = math.exp(diff / 2), math.exp(-diff / 2)
        if spec.family == "rao-kupper":
            nu = math.exp(abs(hmat[a, b]))
            pw = pi_a / (pi_a + nu * pi_b)
            pl = pi_b / (nu * pi_a + pi_b)
            pt = pi_a * pi_b * (nu**2 - 1) / ((pi_a + nu * pi_b) * (nu * pi_a + pi_b))
            total += w * math.log(pw) + lo * math.log(pl) + (tie * math.log(pt) if tie else 0.0)
        elif spec.family == "davidson":
            nu = math.exp(hmat[a, b])
            den = pi_a + pi_b + nu * math.sqrt(pi_a * pi_b)
            total += (
                w * math.log(pi_a / den)
                + lo * math.log(pi_b / den)
                + tie * math.log(nu * math.sqrt(pi_a * pi_b) / den)
            )
        else:
            p = pi_a / (pi_a + pi_b)
            s, n = (w + tie / 2, w + lo + tie) if spec.family == "bt-half" else (w, w + lo)
            total += s * math.log(p) + (n - s) * math.log(1 - p)
    return total


# ------------------------------------------------------------------------------------ formulas
def test_dct_basis_is_orthonormal_and_matches_eq8():
    phi = dct_basis(11, 5)
    np.testing.assert_allclose(phi.T @ phi, np.eye(5), atol=1e-12)
    assert phi[2, 3] == pytest.approx(math.sqrt(2 / 11) * math.cos(math.pi / 44 * 5 * 7))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("structure", STRUCTURES)
def test_loglik_matches_slow_reference(family, structure):
    counts = arena_counts(m=6, n_per_pair=30)
    k_tie, k_cov, form = structure
    eng = engine_for(counts, family, k_tie, k_cov, form)
    th = random_theta(eng.spec, np.random.default_rng(1), counts)
    assert eng.loglik(th) == pytest.approx(
        reference_loglik(eng.spec, th, counts), rel=1e-12, abs=1e-9
    )


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("structure", STRUCTURES)
def test_gradient_and_hessian_match_finite_differences(family, structure):
    counts = arena_counts(m=7, n_per_pair=40, seed=3)
    k_tie, k_cov, form = structure
    eng = engine_for(counts, family, k_tie, k_cov, form)
    th = random_theta(eng.spec, np.random.default_rng(2), counts)
    _, grad = eng.value_and_grad(th)
    hess = eng.hessian(th)
    eps = 1e-6
    fd_g = np.empty_like(th)
    fd_h = np.empty((len(th), len(th)))
    for k in range(len(th)):
        e = np.zeros_like(th)
        e[k] = eps
        fd_g[k] = (eng.loglik(th + e) - eng.loglik(th - e)) / (2 * eps)
        fd_h[k] = (eng.value_and_grad(th + e)[1] - eng.value_and_grad(th - e)[1]) / (2 * eps)
    scale = np.abs(grad).max()
    assert np.abs(fd_g - grad).max() <= 1e-6 * scale
    assert np.abs(fd_h - hess).max() <= 1e-5 * np.abs(hess).max()
    np.testing.assert_allclose(hess, hess.T, atol=1e-9 * np.abs(hess).max())


@pytest.mark.parametrize("family", ["rao-kupper", "davidson"])
def test_probabilities_sum_to_one_and_predict_is_expected_score(family):
    counts = arena_counts()
    fit = get_rater(family, k_tie=2).fit(counts)
    ii, jj = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    p = fit.outcome_probabilities(ii, jj)
    assert p.shape == (8, 8, 3)
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, atol=1e-12)
    assert (p >= 0).all()
    wm = fit.win_matrix()
    np.testing.assert_allclose(np.diag(wm), 0.5)
    np.testing.assert_allclose(wm + wm.T, 1.0, atol=1e-12)
    np.testing.assert_allclose(wm, p[..., 0] + 0.5 * p[..., 2])
    assert fit.predict("m0", "m1") == pytest.approx(wm[0, 1])


# ------------------------------------------------------------------------------------ symmetries, constraints
@pytest.mark.parametrize("family", ["rao-kupper", "davidson", "bt-half"])
def test_symmetries_leave_the_likelihood_unchanged(family):
    counts = arena_counts(m=7)
    eng = engine_for(counts, family, 3 if family != "bt-half" else 0, 2, "nested")
    s = eng.spec
    th = random_theta(s, np.random.default_rng(4), counts)
    base = eng.loglik(th)
    moved = th.copy()
    moved[s.mu] += 0.37  # shift
    assert eng.loglik(moved) == pytest.approx(base, rel=1e-12)
    moved = th.copy()  # scale (μ, Σ) → (cμ, c²Σ)
    for sl in (s.mu, s.sd, s.lam):
        moved[sl] *= 1.7
    assert eng.loglik(moved) == pytest.approx(base, rel=1e-12)
    moved = th.copy()  # translation and rotation of Λ
    lam = moved[s.lam].reshape(s.m, s.kc) + np.array([0.3, -0.2])
    rot = np.array([[math.cos(0.4), -math.sin(0.4)], [math.sin(0.4), math.cos(0.4)]])
    moved[s.lam] = (lam @ rot).ravel()
    assert eng.loglik(moved) == pytest.approx(base, rel=1e-12)
    if s.has_ties and s.k_tie > 1:  # G → G + ΦA, A antisymmetric
        amat = np.array([[0, 0.5, -0.2], [-0.5, 0, 0.1], [0.2, -0.1, 0]])
        moved = th.copy()
        moved[s.g] = (th[s.g].reshape(s.m, 3) + eng.phi @ amat).ravel()
        assert eng.loglik(moved) == pytest.approx(base, rel=1e-12)
    # every tangent vector of the symmetry group is a zero direction of the gradient
    _, grad = eng.value_and_grad(th)
    dirs = eng.symmetry_directions(th)
    assert np.abs(dirs.T @ grad).max() <= 1e-9 * np.abs(grad).max() * len(th)


@pytest.mark.parametrize(
    "rater",
    [
        RaoKupper(k_cov=0),
        RaoKupper(k_tie=2, k_cov=2),
        Davidson(k_tie=1, k_cov=2, tie_form="leaderbot"),
        ThurstonianBT(k_cov=2),
        ThurstonianBT(ties="drop", k_cov=1),
    ],
)
def test_constraints_hold_exactly_at_the_returned_optimum(rater):
    counts = arena_counts(m=9, n_per_pair=80, seed=5)
    fit = rater.fit(counts)
    s = fit.spec
    th = fit.parameters()
    assert abs(th[s.mu].sum()) <= 1e-9
    sigma = fit.thurstonian_covariance()
    p = np.eye(s.m) - 1.0 / s.m
    assert abs(np.trace(p @ sigma @ p) - 1.0) <= 1e-9
    _, lam = fit.covariance_factors()
    assert np.linalg.norm(lam.sum(axis=0)) <= 1e-9
    assert all(v <= 1e-9 for v in fit.constraints.values())
    # S is the variance of score differences and has a zero diagonal
    smat = fit.dissimilarity()
    np.testing.assert_allclose(np.diag(smat), 0.0)
    np.testing.assert_allclose(smat[0, 1], sigma[0, 0] + sigma[1, 1] - 2 * sigma[0, 1], rtol=1e-12)
    assert fit.convergence.converged


# ------------------------------------------------------------------------------------ solvers and recovery
def test_single_eta_models_recover_the_truth():
    m, x_true, eta_true = 10, None, 0.6
    rng = np.random.default_rng(7)
    x_true = rng.normal(0, 0.8, m)
    i, j = np.triu_indices(m, 1)
    d = x_true[i] - x_true[j]
    pw, pl = 1 / (1 + np.exp(-(d - eta_true))), 1 / (1 + np.exp(-(-d - eta_true)))
    y = np.array(
        [rng.multinomial(4000, p) for p in np.column_stack([pw, pl, 1 - pw - pl])], dtype=float
    )
    counts = PairCounts.from_arrays([f"m{k}" for k in range(m)], np.column_stack([i, j]), y)
    fit = RaoKupper().fit(counts)
    assert fit.eta == pytest.approx(eta_true, abs=0.02)
    assert np.abs(fit.scores - (x_true - x_true.mean())).max() < 0.05
    assert fit.convergence.converged and fit.convergence.grad_norm <= 1e-9


def test_davidson_recovers_simulated_arena():
    ratings = random_ratings(12, spread=150, seed=3)
    battles = simulate_battles(ratings, 60_000, rule="davidson", eta=0.2, seed=4)
    fit = Davidson().fit(battles)
    assert fit.eta == pytest.approx(0.2, abs=0.05)
    truth = (ratings - ratings.mean()) * math.log(10) / 400
    pos = {name: k for k, name in enumerate(battles.models)}
    order = [pos[name] for name in fit.models]
    # deviations in units of the standard errors from the inverse observed information
    m = fit.n_models
    cov = np.linalg.pinv(-fit.hessian())[:m, :m]
    center = np.eye(m) - 1.0 / m
    se = np.sqrt(np.diag(center @ cov @ center))
    z = (fit.scores - truth[order]) / se
    assert np.abs(z).max() < 4.0
    assert 0.3 < np.sqrt(np.mean(z**2)) < 2.0  # the standard errors are of the right size


def test_newton_and_lbfgs_agree():
    counts = arena_counts(m=9, seed=8)
    a = RaoKupper(k_tie=2).fit(counts)
    b = RaoKupper(k_tie=2, solver="lbfgs").fit(counts)
    assert a.nll == pytest.approx(b.nll, abs=1e-10)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)


def test_nested_tie_form_never_fits_worse_as_k_tie_grows():
    counts = arena_counts(m=10, n_per_pair=200, seed=9)
    nll = []
    prev = None
    for k in (0, 1, 2, 4):
        rater = RaoKupper(k_tie=k)
        fit = rater.fit(counts, init=prev) if prev is not None else rater.fit(counts)
        nll.append(fit.nll)
        prev = fit
    assert all(b <= a + 1e-12 for a, b in zip(nll, nll[1:], strict=False))
    # a nested model started at the smaller optimum (G = 0) has exactly its likelihood
    k0 = RaoKupper().fit(counts)
    spec = TieSpec("rao-kupper", counts.n_models, 3, None, "nested")
    eng = _TieEngine(spec, counts.i, counts.j, counts.wins, counts.losses, counts.all_ties)
    th = np.zeros(spec.n_params)
    th[spec.mu] = k0.scores
    th[spec.eta0] = k0.eta
    assert eng.loglik(th) == pytest.approx(k0.loglik, rel=1e-13)


def test_rao_kupper_pairs_without_ties_sit_on_the_kink():
    counts = arena_counts(m=8, n_per_pair=40, seed=10)
    # remove the ties of a few pairs: their fitted thresholds may go to exactly 0
    ties = counts.ties.copy()
    ties[:6] = 0
    counts = counts.with_counts(counts.wins, counts.losses, ties)
    fit = RaoKupper(k_tie=6).fit(counts)
    assert fit.convergence.converged, fit.convergence
    eta = fit.tie_thresholds()[counts.i, counts.j]
    assert (eta >= 0).all()
    assert (eta[ties > 0] > 0).all()


def test_bt_cov_without_covariance_is_m_elo_and_bt():
    counts = arena_counts(seed=11)
    a, b = ThurstonianBT(k_cov=None).fit(counts), MElo().fit(counts)
    assert a.nll == pytest.approx(b.nll, abs=1e-12)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-8)
    a, b = ThurstonianBT(ties="drop", k_cov=None).fit(counts), BradleyTerry().fit(counts)
    assert a.nll == pytest.approx(b.nll, abs=1e-12)
    assert a.n_comparisons == b.n_comparisons


def test_existence_prior_keeps_a_never_losing_model_finite():
    counts = arena_counts(m=6, seed=12)
    losses, ties = counts.losses.copy(), counts.ties.copy()
    first = counts.i == 0  # model 0 never loses or ties
    losses[first] = 0
    ties[first] = 0
    counts = counts.with_counts(counts.wins, losses, ties)
    with pytest.warns(StableArenaWarning, match="never lost"):
        fit = Davidson().fit(counts)
    assert np.isfinite(fit.scores).all() and fit.scores[0] == fit.scores.max()
    assert fit.notes


# ------------------------------------------------------------------------------------ counting parameters
@pytest.mark.parametrize(
    ("family", "k_tie", "k_cov", "expected"),
    [  # leaderbot Table D.1 "Num. Param." for m = 129 (leaderbot form)
        ("bt-half", 0, None, 129),
        ("bt-half", 0, 0, 258),
        ("bt-half", 0, 3, 645),
        ("rao-kupper", 0, None, 130),
        ("rao-kupper", 1, None, 258),
        ("rao-kupper", 10, None, 1419),
        ("rao-kupper", 20, None, 2709),
        ("rao-kupper", 0, 0, 259),
        ("rao-kupper", 1, 0, 387),
        ("davidson", 10, 0, 1548),
        ("davidson", 0, 3, 646),
        ("davidson", 20, 3, 3225),
    ],
)
def test_parameter_count_matches_leaderbot_table(family, k_tie, k_cov, expected):
    assert TieSpec(family, 129, k_tie, k_cov, "leaderbot").n_params == expected


def test_free_parameters_equal_the_rank_of_the_hessian():
    counts = arena_counts(m=9, n_per_pair=300, seed=13)
    for rater in (RaoKupper(k_tie=3), Davidson(k_tie=2, k_cov=2)):
        fit = rater.fit(counts)
        sv = np.linalg.svd(fit.hessian(), compute_uv=False)
        rank = int(np.sum(sv > 1e-8 * sv[0]))
        assert rank == fit.n_free_params
        assert fit.aic == pytest.approx(2 * fit.n_free_params - 2 * fit.loglik)
        assert fit.bic == pytest.approx(
            fit.n_free_params * math.log(fit.n_comparisons) - 2 * fit.loglik
        )


# ------------------------------------------------------------------------------------ information contract
def test_information_contract():
    counts = arena_counts(m=7, n_per_pair=100, seed=14)
    fit = RaoKupper(k_tie=2, k_cov=1).fit(counts)
    theta = fit.parameters()
    np.testing.assert_array_equal(theta[: fit.n_models], fit.scores)
    hess = fit.hessian()
    assert hess.shape == (len(theta), len(theta))
    gmat, nmat = fit.score_contributions()
    assert gmat.shape == (len(counts), 3, len(theta)) and nmat.shape == (len(counts), 3)
    # Σ N g is the gradient of the total log-likelihood, which vanishes at the optimum
    total = np.einsum("ro,rop->p", nmat, gmat)
    _, grad = fit._engine().value_and_grad(np.asarray(fit.theta))
    np.testing.assert_allclose(total, grad, atol=1e-9 * np.abs(grad).max() + 1e-9)
    assert np.linalg.norm(total) / counts.n_comparisons <= 1e-8
    # each g is the gradient of ln P(outcome | row): check one entry by differences
    eng = fit._engine()
    r, o, k, eps = 3, 2, fit.spec.g.start + 1, 1e-6
    th = np.asarray(fit.theta)

    def logp(t):
        d, svar, h = eng.primitives(t)
        from stablearena.raters.ties import _probabilities

        return math.log(_probabilities("rao-kupper", eng._u(d, svar), h)[r, o])

    e = np.zeros_like(th)
    e[k] = eps
    assert gmat[r, o, k] == pytest.approx((logp(th + e) - logp(th - e)) / (2 * eps), rel=1e-5)
    # refit on the same counts lands on the same optimum; on a resample it still works
    again = fit.refit(counts)
    assert again.nll == pytest.approx(fit.nll, abs=1e-10)
    rng = np.random.default_rng(0)
    n = counts.totals.astype(int)
    probs = np.column_stack([counts.wins, counts.losses, counts.ties]) / n[:, None]
    boot = np.array([rng.multinomial(k, p) for k, p in zip(n, probs, strict=True)], dtype=float)
    other = fit.refit(counts.with_counts(boot[:, 0], boot[:, 1], boot[:, 2]))
    assert isinstance(other, TieFitted) and other.spec == fit.spec


def test_to_dict_is_json_ready():
    counts = arena_counts(seed=15)
    fit = Davidson(k_tie=1, k_cov=0, anchor="m0=1200").fit(counts)
    d = fit.to_dict()
    text = json.dumps(d)
    assert "NaN" not in text and "Infinity" not in text
    assert d["k_tie"] == 1 and d["k_cov"] == 0 and d["family"] == "davidson"
    assert d["nll"] == pytest.approx(fit.nll)
    assert d["n_free_params"] == fit.n_free_params
    top = {r["model"]: r["rating"] for r in d["models"]}
    assert top["m0"] == pytest.approx(1200.0)


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=0, max_value=10_000))
def test_fit_is_invariant_to_the_orientation_of_pairs(seed):
    counts = arena_counts(m=6, n_per_pair=25, seed=seed)
    flipped = PairCounts.from_arrays(
        counts.models,
        np.column_stack([counts.j, counts.i]),
        np.column_stack([counts.losses, counts.wins, counts.ties]),
    )
    a, b = Davidson().fit(counts), Davidson().fit(flipped)
    assert a.nll == pytest.approx(b.nll, rel=1e-12)
    np.testing.assert_allclose(a.scores, b.scores, atol=1e-9)


# ------------------------------------------------------------------------------------ bad input
def test_no_ties_is_an_input_error():
    counts = arena_counts()
    with pytest.raises(InputError, match="no ties"):
        RaoKupper().fit(counts.with_counts(counts.wins, counts.losses, np.zeros(len(counts))))


def test_only_ties_is_an_input_error():
    counts = arena_counts()
    zero = np.zeros(len(counts))
    with pytest.raises(InputError, match="every comparison is a tie"):
        Davidson().fit(counts.with_counts(zero, zero, counts.ties + 1))


def test_k_tie_larger_than_models_is_an_input_error():
    with pytest.raises(InputError, match="k_tie"):
        RaoKupper(k_tie=20).fit(arena_counts(m=5))


@pytest.mark.parametrize("k", [-1, 1.5, "3"])
def test_bad_k_cov_is_an_input_error(k):
    with pytest.raises(InputError, match="k_cov"):
        Davidson(k_cov=k).fit(arena_counts(m=5))


def test_k_cov_as_large_as_models_is_an_input_error():
    with pytest.raises(InputError, match="k_cov"):
        Davidson(k_cov=5).fit(arena_counts(m=5))


def test_negative_k_tie_is_an_input_error():
    with pytest.raises(InputError, match="k_tie"):
        RaoKupper(k_tie=-1).fit(arena_counts(m=5))


def test_unknown_tie_form_is_an_input_error():
    with pytest.raises(InputError, match="tie_form"):
        RaoKupper(k_tie=1, tie_form="other").fit(arena_counts(m=5))


def test_unknown_solver_is_an_input_error():
    with pytest.raises(InputError, match="solver"):
        Davidson(solver="adam").fit(arena_counts(m=5))


def test_bt_cov_unknown_ties_option_is_an_input_error():
    with pytest.raises(InputError, match="ties"):
        ThurstonianBT(ties="third").fit(arena_counts(m=5))


def test_disconnected_graph_is_refused():
    counts = arena_counts(m=6)
    keep = ((counts.i < 3) & (counts.j < 3)) | ((counts.i >= 3) & (counts.j >= 3))
    with pytest.raises(DisconnectedGraphError):
        RaoKupper().fit(counts.take(keep))


def test_unknown_anchor_is_an_input_error():
    with pytest.raises(InputError, match="anchor"):
        Davidson(anchor="nobody=1000").fit(arena_counts(m=5))


def test_init_from_other_models_is_an_input_error():
    a = Davidson().fit(arena_counts(m=5))
    with pytest.raises(InputError, match="same models"):
        Davidson().fit(arena_counts(m=6), init=a)


def test_empty_battles_are_an_input_error():
    empty = Battles.from_arrays(
        np.zeros(0, int), np.zeros(0, int), np.zeros(0, int), models=["a", "b"]
    )
    with pytest.raises(InputError):
        RaoKupper().fit(empty)


# ------------------------------------------------------------------------------------ real data (leaderbot)
def load_arena() -> PairCounts:
    d = json.loads(DATA.read_text())
    return PairCounts.from_arrays(d["models"], np.array(d["X"]), np.array(d["Y"])).drop_both_bad()


def test_reference_values_on_chatbot_arena_2024():
    counts = load_arena()
    assert counts.n_comparisons == 1_374_996 and len(counts) == 3455
    rk = RaoKupper().fit(counts)
    dv = Davidson().fit(counts)
    assert rk.nll == pytest.approx(1.0094825, abs=1e-6)
    assert rk.eta == pytest.approx(0.4500, abs=5e-5)
    assert dv.nll == pytest.approx(1.0100066, abs=1e-6)
    assert MElo().fit(counts).nll == pytest.approx(0.6554111, abs=1e-6)
    # the warm timings are bench/bench_ties.py's


@pytest.mark.slow
def test_factored_covariance_rao_kupper_on_chatbot_arena_2024():
    counts = load_arena()
    fit = RaoKupper(k_tie=10, k_cov=3, tie_form="leaderbot").fit(counts)
    assert fit.nll <= 1.0049
    assert all(v <= 1e-9 for v in fit.constraints.values())


@pytest.mark.slow
def test_nested_form_is_monotone_on_chatbot_arena_2024():
    counts = load_arena()
    prev, nll = None, []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in (0, 1, 10, 20):
            fit = (
                RaoKupper(k_tie=k).fit(counts, init=prev)
                if prev
                else RaoKupper(k_tie=k).fit(counts)
            )
            nll.append(fit.nll)
            prev = fit
    assert all(b <= a for a, b in zip(nll, nll[1:], strict=False)), nll
