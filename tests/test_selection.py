"""Pair selection: exact criteria against brute force, incremental bookkeeping, batches,
exclusions, warm-up, baselines, the anchor bias, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena import Battles, InputError, MElo
from stablearena.data.simulate import random_ratings, simulate_battles
from stablearena.design.selection import (
    DEFAULT_STRATEGY,
    AdaPairSelector,
    AOptimal,
    AOptimalGrounded,
    ArenaWeightsSelector,
    DOptimal,
    DOptimalGrounded,
    InformationTracker,
    NearestSelector,
    RandomSelector,
    RankOptimal,
    a_info,
    d_info,
    expected_misorder_sensitivity,
    get_selector,
    misorder_weights,
    select_pairs,
    selector_names,
)
from stablearena.raters.base import ELO_SCALE
from stablearena.raters.information import (
    MIN_PRIOR_VARIANCE,
    bt_information,
    empirical_bayes_scores,
    laplacian_pinv,
)
from stablearena.simulation.arena import SimulatedArena, run_arena


def _tracker(
    m: int = 8, n: int = 200, seed: int = 0, estimate: str = "empirical-bayes"
) -> InformationTracker:
    """A tracker at the design estimate d-opt and a-opt use by default (the brute-force
    references below read its information directly)."""
    battles = simulate_battles(random_ratings(m, seed=seed), n, seed=seed + 1)
    return InformationTracker.from_fitted(MElo().fit(battles), estimate=estimate)


def _u(m: int, i: int, j: int) -> np.ndarray:
    u = np.zeros(m)
    u[i], u[j] = 1.0, -1.0
    return u


def _brute_d(tr: InformationTracker) -> dict[tuple[int, int], float]:
    """ln det of the grounded information after one more battle, per pair (slow reference)."""
    m = tr.n_models
    out = {}
    for i in range(m):
        for j in range(i + 1, m):
            new = tr.info + tr.weights[i, j] * np.outer(_u(m, i, j), _u(m, i, j))
            out[(i, j)] = np.linalg.slogdet(new[:-1, :-1])[1]
    return out


def _brute_a(tr: InformationTracker) -> dict[tuple[int, int], float]:
    """tr(I⁺) after one more battle, per pair (slow reference)."""
    m = tr.n_models
    out = {}
    for i in range(m):
        for j in range(i + 1, m):
            new = tr.info + tr.weights[i, j] * np.outer(_u(m, i, j), _u(m, i, j))
            out[(i, j)] = np.trace(np.linalg.pinv(new))
    return out


# --------------------------------------------------------------------------- exact criteria
def test_d_opt_matches_brute_force_determinant():
    tr = _tracker()
    brute = _brute_d(tr)
    best = max(brute, key=brute.get)
    sel = DOptimal().select(tr, rng=0)
    assert tuple(sel.pairs[0]) == best
    base = np.linalg.slogdet(tr.info[:-1, :-1])[1]
    assert sel.values[0] == pytest.approx(brute[best] - base, rel=1e-9)


def test_a_opt_matches_brute_force_trace():
    tr = _tracker(seed=3)
    brute = _brute_a(tr)
    best = min(brute, key=brute.get)
    sel = AOptimal().select(tr, rng=0)
    assert tuple(sel.pairs[0]) == best
    assert sel.values[0] == pytest.approx(np.trace(np.linalg.pinv(tr.info)) - brute[best], rel=1e-8)


def _laplacian_of(c: np.ndarray) -> np.ndarray:
    return np.diag(c.sum(axis=1)) - c


@pytest.mark.parametrize("weights", ["expected", "plug-in"])
def test_rank_opt_matches_brute_force_fall_of_the_weighted_trace(weights):
    # the gain is the exact fall of tr(L Σ) for L at the current state: recompute Σ' = (I + w u uᵀ)⁺
    # for every pair and compare, pick and value
    tr = _tracker(seed=2)
    m = tr.n_models
    lap = _laplacian_of(misorder_weights(tr.design_scores, laplacian_pinv(tr.info), weights))
    base = np.trace(lap @ np.linalg.pinv(tr.info))
    brute = {}
    for i in range(m):
        for j in range(i + 1, m):
            new = tr.info + tr.weights[i, j] * np.outer(_u(m, i, j), _u(m, i, j))
            brute[(i, j)] = base - np.trace(lap @ np.linalg.pinv(new))
    best = max(brute, key=brute.get)
    sel = RankOptimal(weights=weights).select(tr, rng=0)
    assert tuple(sel.pairs[0]) == best
    assert sel.values[0] == pytest.approx(brute[best], rel=1e-8)


def test_expected_misorder_sensitivity_is_the_gaussian_average():
    from scipy.integrate import quad
    from scipy.stats import norm

    for mean in (0.0, 0.3, 1.0, 2.5, -1.7, 6.0):
        ref = quad(lambda y, mu=mean: abs(y) * norm.pdf(y) * norm.pdf(y - mu), -30, 30)[0]
        assert expected_misorder_sensitivity(np.array(mean)) == pytest.approx(ref, rel=1e-9)
    assert expected_misorder_sensitivity(np.array(0.0)) == pytest.approx(1 / (2 * np.pi))


def test_misorder_weights_are_derivatives_of_the_misordering_probability():
    # c_ij = d/dσ² of Φ(−|Δ|/σ) (plug-in) or of E_{Δ*~N(Δ, s²)} Φ(−|Δ*|/σ) at s = σ (expected),
    # checked by central differences in σ² of the pair's variance
    from scipy.integrate import quad
    from scipy.stats import norm

    sigma = np.array([[0.5, -0.1, 0.0], [-0.1, 0.3, 0.05], [0.0, 0.05, 0.8]])
    sigma = sigma - sigma.mean(axis=0) - sigma.mean(axis=1)[:, None] + sigma.mean()
    x = np.array([0.4, -0.2, 0.1])
    var01 = sigma[0, 0] + sigma[1, 1] - 2 * sigma[0, 1]
    gap = x[0] - x[1]
    s2 = var01

    def expected(v):
        return quad(
            lambda d: norm.cdf(-abs(d) / np.sqrt(v)) * norm.pdf(d, gap, np.sqrt(s2)), -20, 20
        )[0]

    h = 1e-5
    plug = (norm.cdf(-abs(gap) / np.sqrt(var01 + h)) - norm.cdf(-abs(gap) / np.sqrt(var01 - h))) / (
        2 * h
    )
    exp_fd = (expected(var01 + h) - expected(var01 - h)) / (2 * h)
    c_plug = misorder_weights(x, sigma, "plug-in")
    c_exp = misorder_weights(x, sigma, "expected")
    # Φ(−|Δ|/σ) rises with σ²: the weights are its derivative, a positive number
    assert c_plug[0, 1] == pytest.approx(plug, rel=1e-5)
    assert c_exp[0, 1] == pytest.approx(exp_fd, rel=1e-4)
    np.testing.assert_allclose(c_exp, c_exp.T)
    assert np.all(np.diag(c_exp) == 0)
    with pytest.raises(InputError, match="weights must be one of"):
        misorder_weights(x, sigma, "psychic")  # type: ignore[arg-type]


def test_rank_opt_spends_on_uncertain_orders_where_d_and_a_opt_spend_on_variance():
    # models 0 and 1 are close and already measured a lot; model 2 is far above both, with
    # fewer battles: its ratings are the most uncertain (D and A go there), but its order is
    # beyond doubt (gaps ≈ 5 standard errors), while 0 vs 1 is still nearly a coin flip
    # (gap ≈ 0.9 standard errors: the ranking-targeted design goes there)
    x = np.array([0.0, 0.1, 2.0])
    tr = InformationTracker(3, scores=x)
    tr.add(0, 1, 300.0)
    tr.add(0, 2, 30.0)
    tr.add(1, 2, 30.0)
    assert tuple(get_selector("d-opt", estimate="plug-in").select(tr, rng=0).pairs[0]) != (0, 1)
    assert tuple(get_selector("a-opt", estimate="plug-in").select(tr, rng=0).pairs[0]) != (0, 1)
    assert tuple(get_selector("rank-opt", estimate="plug-in").select(tr, rng=0).pairs[0]) == (0, 1)


def test_default_strategy_is_registered():
    assert DEFAULT_STRATEGY in selector_names()


def test_grounded_d_opt_picks_the_same_pair_as_anchor_free():
    # det of the grounded matrix is pdet/N for every anchor, so both D criteria agree
    for seed in range(3):
        tr = _tracker(seed=seed, estimate="plug-in")
        assert tuple(DOptimalGrounded().select(tr, rng=0).pairs[0]) == tuple(
            DOptimal(estimate="plug-in").select(tr, rng=0).pairs[0]
        )


def test_grounded_a_opt_matches_its_own_brute_force():
    tr = _tracker(seed=5)
    m = tr.n_models
    best, arg = np.inf, None
    for i in range(m):
        for j in range(i + 1, m):
            new = tr.info + tr.weights[i, j] * np.outer(_u(m, i, j), _u(m, i, j))
            t = np.trace(np.linalg.inv(new[:-1, :-1]))
            if t < best:
                best, arg = t, (i, j)
    assert tuple(AOptimalGrounded().select(tr, rng=0).pairs[0]) == arg


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(3, 9),
    seed=st.integers(0, 10_000),
    adds=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(1, 3)), max_size=6),
)
def test_sherman_morrison_updates_match_recomputation(m, seed, adds):
    rng = np.random.default_rng(seed)
    tr = InformationTracker(m, scores=rng.normal(size=m))
    # a spanning path so the graph is connected, then random extra battles
    for k in range(m - 1):
        tr.add(k, k + 1)
    _ = tr.sigma2  # start tracking T = Σ² too
    # and rank-opt's Σ L Σ, kept exact for the L of the moment it was formed
    sigma0 = tr.sigma.copy()
    lap = _laplacian_of(misorder_weights(tr.design_scores, sigma0))
    np.testing.assert_allclose(tr.ranking_matrix(), sigma0 @ lap @ sigma0, atol=1e-10)
    for i, j, n in adds:
        i, j = i % m, j % m
        if i != j:
            tr.add(i, j, float(n))
    ref = laplacian_pinv(tr.info)
    np.testing.assert_allclose(tr.sigma, ref, atol=1e-9)
    np.testing.assert_allclose(tr.sigma2, ref @ ref, atol=1e-9)
    np.testing.assert_allclose(tr.ranking_matrix(), ref @ lap @ ref, atol=1e-9)
    iu, ju = np.nonzero(np.triu(tr.pair_battles, 1))
    np.testing.assert_allclose(tr.info, bt_information(tr.scores, iu, ju, tr.pair_battles[iu, ju]))
    # a copy carries Σ L Σ on; a refresh forms it again at the new state
    np.testing.assert_array_equal(tr.copy().ranking_matrix(), tr.ranking_matrix())
    tr.refresh()
    lap2 = _laplacian_of(misorder_weights(tr.design_scores, tr.sigma))
    np.testing.assert_allclose(tr.ranking_matrix(), tr.sigma @ lap2 @ tr.sigma, atol=1e-10)


def test_refresh_recomputes_from_counts_at_new_scores():
    tr = _tracker(estimate="plug-in")
    x = np.linspace(-1, 1, tr.n_models)
    tr.add(0, 1)
    tr.refresh(x)
    iu, ju = np.nonzero(np.triu(tr.pair_battles, 1))
    np.testing.assert_allclose(
        tr.info, bt_information(x - x.mean(), iu, ju, tr.pair_battles[iu, ju])
    )
    np.testing.assert_allclose(tr.sigma, laplacian_pinv(tr.info), atol=1e-12)


def test_empirical_bayes_tracker_is_the_plug_in_one_at_the_shrunk_scores():
    tr = _tracker(seed=4, n=120)
    x = np.linspace(-1, 1, tr.n_models)
    tr.refresh(x)
    plug = InformationTracker.from_counts(
        MElo().fit(simulate_battles(random_ratings(8, seed=4), 120, seed=5)).counts, x
    )
    shrunk, tau2 = empirical_bayes_scores(x, plug.info)
    np.testing.assert_allclose(tr.scores, x - x.mean())  # the fitted scores are kept as given
    np.testing.assert_allclose(tr.design_scores, shrunk, atol=1e-12)
    assert tr.prior_variance == pytest.approx(tau2)
    iu, ju = np.nonzero(np.triu(tr.pair_battles, 1))
    np.testing.assert_allclose(
        tr.info, bt_information(shrunk, iu, ju, tr.pair_battles[iu, ju]), atol=1e-12
    )
    # a selector converts a tracker of the other estimate, and picks as on a matching one
    assert plug.with_estimate("plug-in") is plug
    conv = plug.with_estimate("empirical-bayes")
    np.testing.assert_allclose(conv.info, tr.info, atol=1e-12)
    for sel in (DOptimal(), AOptimal()):
        assert tuple(sel.select(plug, 3, rng=1).pairs.ravel()) == tuple(
            sel.select(tr, 3, rng=1).pairs.ravel()
        )
    with pytest.raises(InputError, match="estimate"):
        InformationTracker(3, estimate="map")  # type: ignore[arg-type]


def test_empirical_bayes_shrinks_each_information_direction():
    rng = np.random.default_rng(0)
    m = 7
    tr = InformationTracker(m, scores=rng.normal(size=m))
    for i in range(m):
        for j in range(i + 1, m):
            tr.add(i, j, float(rng.integers(1, 5)))
    x = rng.normal(size=m) * 2
    x -= x.mean()
    shrunk, tau2 = empirical_bayes_scores(x, tr.info)
    lam, vec = np.linalg.eigh(tr.info)
    lam, vec = lam[1:], vec[:, 1:]  # the zero eigenvalue is the constant direction
    assert tau2 == pytest.approx((x @ x - np.sum(1 / lam)) / (m - 1))
    expect = vec @ ((tau2 * lam / (tau2 * lam + 1)) * (vec.T @ x))
    np.testing.assert_allclose(shrunk, expect, atol=1e-12)
    assert abs(shrunk.sum()) < 1e-12
    # no spread beyond noise: everything shrinks to (almost) zero
    tiny, t2 = empirical_bayes_scores(x * 1e-3, tr.info)
    assert t2 == MIN_PRIOR_VARIANCE and np.abs(tiny).max() < 1e-5
    # a great deal of information: the scores stay as they are
    same, _ = empirical_bayes_scores(x, tr.info * 1e8)
    np.testing.assert_allclose(same, x, atol=1e-6)


@pytest.mark.filterwarnings("ignore::stablearena.StableArenaWarning")
def test_empirical_bayes_scores_are_closer_to_the_truth_on_sparse_data():
    """Few battles per model: the shrunk scores have a smaller error than the MLE (on average
    over arenas; the James–Stein effect)."""
    err_mle, err_eb = [], []
    for seed in range(20):
        truth = random_ratings(30, seed=seed) * ELO_SCALE
        fitted = MElo().fit(simulate_battles(truth / ELO_SCALE, 150, seed=seed + 100))
        tr = InformationTracker.from_fitted(fitted, estimate="empirical-bayes")
        t = truth - truth.mean()
        err_mle.append(np.sum((tr.scores - t) ** 2))
        err_eb.append(np.sum((tr.design_scores - t) ** 2))
    assert np.mean(err_eb) < 0.8 * np.mean(err_mle)


# --------------------------------------------------------------------------- info metrics
def test_info_metrics_are_anchor_free_versions_of_the_papers():
    tr = _tracker(seed=2)
    info, m = tr.info, tr.n_models
    grounded = [np.delete(np.delete(info, k, 0), k, 1) for k in range(m)]
    dets = [np.linalg.slogdet(g)[1] for g in grounded]
    np.testing.assert_allclose(dets, dets[0], rtol=1e-10)  # same for every anchor
    assert d_info(info) == pytest.approx(np.exp(dets[0] / (m - 1)), rel=1e-10)
    traces = [np.trace(np.linalg.inv(g)) for g in grounded]
    assert a_info(info) == pytest.approx(1.0 / np.mean(traces), rel=1e-10)


def test_info_metrics_are_zero_when_disconnected():
    tr = InformationTracker(4)
    tr.add(0, 1)
    tr.add(2, 3)
    assert a_info(tr.info) == 0.0
    assert d_info(tr.info) == 0.0


# --------------------------------------------------------------------------- batches
def test_greedy_batch_equals_sequential_picks_with_updates():
    tr = _tracker(seed=7)
    batch = DOptimal().select(tr, 6, rng=0)
    work = tr.copy()
    seq = []
    for _ in range(6):
        i, j = DOptimal().select(work, rng=0).pairs[0]
        seq.append((int(i), int(j)))
        work.add(i, j)
    assert [tuple(p) for p in batch.pairs] == seq
    # the tracker itself is untouched by select
    np.testing.assert_array_equal(tr.pair_battles, _tracker(seed=7).pair_battles)


def test_rank_opt_greedy_batch_equals_sequential_picks_with_updates():
    # within a batch L stays that of the batch's state, exactly as when battles are added
    # without a refresh
    tr = _tracker(seed=8)
    batch = RankOptimal().select(tr, 6, rng=0)
    work = tr.copy()
    _ = work.ranking_matrix()
    seq = []
    for _ in range(6):
        i, j = RankOptimal().select(work, rng=0).pairs[0]
        seq.append((int(i), int(j)))
        work.add(i, j)
    assert [tuple(p) for p in batch.pairs] == seq


def test_greedy_batch_gains_more_information_than_the_papers_top_k():
    tr = _tracker(m=12, n=300, seed=11)

    def logdet_after(sel):
        work = tr.copy()
        for i, j in sel.pairs:
            work.add(i, j)
        return np.linalg.slogdet(work.info[1:, 1:])[1]

    greedy = DOptimal().select(tr, 20, rng=0)
    topk = DOptimal(batch_mode="top-k").select(tr, 20, rng=0)
    assert len({tuple(p) for p in topk.pairs}) == 20
    assert logdet_after(greedy) >= logdet_after(topk)


def test_distinct_batch_has_no_repeats():
    tr = _tracker(seed=1)
    sel = DOptimal().select(tr, 15, rng=0, distinct=True)
    assert len({tuple(p) for p in sel.pairs}) == 15


# --------------------------------------------------------------------------- exclusions, warm-up
@pytest.mark.parametrize(
    "name",
    [
        "random",
        "nearest",
        "ada-pair",
        "arena-weights",
        "a-opt",
        "d-opt",
        "rank-opt",
        "a-opt-grounded",
        "d-opt-grounded",
    ],
)
def test_exclusions_are_respected(name):
    tr = _tracker(m=6, seed=4)
    tr.block_pair(0, 1)
    sel = get_selector(name).select(
        tr, 12, rng=0, exclude_models=["model_002"], exclude_pairs=[("model_003", 4)]
    )
    pairs = {tuple(p) for p in sel.pairs}
    assert all(2 not in p for p in pairs)
    assert (3, 4) not in pairs and (0, 1) not in pairs


def test_everything_excluded_is_an_error():
    tr = _tracker(m=3)
    with pytest.raises(InputError, match="no pair can be selected"):
        DOptimal().select(tr, exclude_models=[0, 1])


def test_warm_up_connects_the_graph_with_a_spanning_tree():
    tr = InformationTracker(10)
    sel = DOptimal().select(tr, 9, rng=3)
    assert sel.warm_up.all()
    work = tr.copy()
    for i, j in sel.pairs:
        work.add(i, j)
    assert work.connected  # 9 bridging picks = a spanning tree of 10 models
    # once connected, the next pick is an information pick
    nxt = DOptimal().select(work, rng=0)
    assert not nxt.warm_up[0] and nxt.values[0] > 0


def test_selection_works_from_the_first_battle_for_every_strategy():
    for name in selector_names():
        sel = get_selector(name).select(InformationTracker(5), 3, rng=0)
        assert len(sel) == 3 and np.all(np.isfinite(sel.values))


def test_disconnected_without_bridges_scores_within_components():
    tr = InformationTracker(4)
    tr.add(0, 1)
    tr.add(2, 3)
    tr.block_pair(0, 2), tr.block_pair(0, 3), tr.block_pair(1, 2), tr.block_pair(1, 3)
    sel = DOptimal().select(tr, rng=0)
    assert tuple(sel.pairs[0]) in {(0, 1), (2, 3)} and np.isfinite(sel.values[0])


def test_ties_are_broken_at_random_not_by_index():
    # equal strengths, no battles beyond a balanced cycle: many pairs tie
    tr = InformationTracker(12)
    for k in range(12):
        tr.add(k, (k + 1) % 12)
    firsts = {tuple(DOptimal().select(tr, rng=s).pairs[0]) for s in range(40)}
    assert len(firsts) > 3


# --------------------------------------------------------------------------- baselines
def test_nearest_picks_the_closest_ratings():
    tr = InformationTracker(4, scores=np.array([0.0, 1.0, 1.05, 3.0]))
    for k in range(3):
        tr.add(k, k + 1)
    assert tuple(NearestSelector().select(tr, rng=0).pairs[0]) == (1, 2)
    top = NearestSelector().select(tr, 2, rng=0).pairs
    assert [tuple(p) for p in top] == [(1, 2), (0, 1)]


def test_ada_pair_draws_unplayed_pairs_first_then_by_variance_shrinkage():
    tr = InformationTracker(4)
    for k in range(3):
        tr.add(k, k + 1, 5.0)
    picks = {tuple(p) for p in AdaPairSelector().select(tr, 3, rng=0).pairs}
    assert picks == {(0, 2), (0, 3), (1, 3)}  # the three unplayed pairs
    # all played: P ∝ √(v/n) − √(v/(n+1)) favours the pair with fewest battles
    tr2 = InformationTracker(3)
    tr2.add(0, 1, 1.0), tr2.add(1, 2, 50.0), tr2.add(0, 2, 50.0)
    counts = np.bincount(
        [
            int(
                AdaPairSelector().select(tr2, rng=s).pairs[0][0] == 0
                and AdaPairSelector().select(tr2, rng=s).pairs[0][1] == 1
            )
            for s in range(200)
        ],
        minlength=2,
    )
    assert counts[1] > 150


def test_arena_weights_follow_fastchat_sampling():
    tr = InformationTracker(["a", "b", "c"])
    sel = ArenaWeightsSelector(weights={"a": 2.0, "b": 1.0, "c": 1.0}, boost=["c"])
    p = sel.pair_probabilities(tr, tr.blocked)
    w = np.array([2.0, 1.0, 5.0])  # c boosted ×5
    ref = np.zeros((3, 3))
    for x in range(3):
        for y in range(3):
            if x != y:
                ref[x, y] = w[x] / w.sum() * w[y] / (w.sum() - w[x])
    np.testing.assert_allclose(p, ref + ref.T)
    assert np.triu(p, 1).sum() == pytest.approx(1.0)
    zero = ArenaWeightsSelector(weights={"a": 0.0}).pair_probabilities(tr, tr.blocked)
    assert zero[0].sum() == 0.0  # a model with weight 0 (an outage) is never drawn


def test_random_is_uniform_over_allowed_pairs():
    tr = InformationTracker(4)
    tr.block_pair(0, 1)
    picks = [tuple(RandomSelector().select(tr, rng=s).pairs[0]) for s in range(600)]
    freq = np.array([picks.count(p) for p in [(0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]]) / 600
    assert (0, 1) not in picks
    np.testing.assert_allclose(freq, 0.2, atol=0.06)


# --------------------------------------------------------------------------- behaviour in arenas
def test_d_opt_recovers_the_ranking_of_a_simulated_arena():
    arena = SimulatedArena(random_ratings(10, spread=200, seed=1))
    run = run_arena(arena, "d-opt", 600, init=30, seed=2)
    truth = arena.truth()
    # 630 battles of 10 models: scores within a few tenths of the truth
    assert np.corrcoef(truth, run.scores)[0, 1] > 0.97
    assert np.abs(run.scores - truth).max() < 0.4


def _model_shares(selector: str, seed: int) -> np.ndarray:
    arena = SimulatedArena(np.full(12, 1000.0))
    run = run_arena(arena, selector, 400, init=40, seed=seed)
    ch = run.choices + run.choices.T
    return ch.sum(axis=1)


def test_anchor_free_a_opt_has_no_anchor_bias_unlike_the_grounded_one():
    free = _model_shares("a-opt", 0)
    grounded = _model_shares("a-opt-grounded", 0)
    assert free.max() <= 2 * np.median(free)
    # the paper's formulation over-samples the fixed (last) model
    assert np.argmax(grounded) == 11 and grounded[11] > 2 * np.median(grounded)


def test_select_pairs_one_shot_on_a_log():
    battles = simulate_battles(random_ratings(6, seed=0), 300, seed=1)
    sel = select_pairs(battles, 4, strategy="a-opt")
    recs = sel.to_records()
    assert len(recs) == 4 and set(recs[0]) == {"model_a", "model_b", "gain", "warm_up"}
    assert all(r["gain"] > 0 for r in recs)


def test_tracker_from_battles_counts_every_battle():
    b = Battles.from_arrays(["x", "y", "x"], ["y", "z", "z"], ["model_a", "tie", "model_b"])
    tr = InformationTracker.from_counts(b)
    assert tr.n_battles == 3 and tr.connected


# --------------------------------------------------------------------------- bad input
def test_unknown_strategy():
    with pytest.raises(InputError, match="unknown strategy"):
        get_selector("best-guess")


def test_unknown_option():
    with pytest.raises(InputError, match="does not take"):
        get_selector("d-opt", temperature=2)


def test_bad_batch_mode():
    with pytest.raises(InputError, match="batch_mode"):
        DOptimal(batch_mode="all").select(_tracker(), 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [0, -1, 2.5])
def test_bad_k(k):
    with pytest.raises(InputError, match="positive integer"):
        DOptimal().select(_tracker(), k)


def test_unknown_model_name():
    with pytest.raises(InputError, match="unknown model"):
        DOptimal().select(_tracker(), exclude_models=["gpt-9"])


def test_model_index_out_of_range():
    with pytest.raises(InputError, match="outside"):
        _tracker().add(0, 99)


def test_self_battle():
    with pytest.raises(InputError, match="itself"):
        _tracker().add(2, 2)


def test_bad_battle_count():
    with pytest.raises(InputError, match="positive finite"):
        _tracker().add(0, 1, float("nan"))


def test_bad_scores():
    with pytest.raises(InputError, match="finite"):
        InformationTracker(3, scores=np.array([0.0, np.inf, 1.0]))
    with pytest.raises(InputError, match="finite"):
        InformationTracker(3, scores=np.zeros(4))


def test_one_model():
    with pytest.raises(InputError, match="at least two"):
        InformationTracker(1)


def test_negative_arena_weight():
    tr = InformationTracker(3)
    with pytest.raises(InputError, match="non-negative"):
        ArenaWeightsSelector(weights={"model_000": -1.0}).select(tr)


def test_fitted_and_counts_with_different_models():
    f = MElo().fit(simulate_battles(random_ratings(4, seed=0), 100, seed=0))
    other = simulate_battles(random_ratings(5, seed=0), 100, seed=0)
    with pytest.raises(InputError, match="different models"):
        InformationTracker.from_fitted(f, other)


# ---------------------------------------------------------------------------- pick probabilities
def _tracker_after(n_models: int, n_battles: int, seed: int) -> InformationTracker:
    arena = SimulatedArena(1000.0 + np.linspace(-200.0, 200.0, n_models))
    rng = np.random.default_rng(seed)
    a, b, oc = arena.random_battles(n_battles, rng)
    battles = Battles.from_arrays(a, b, oc, models=[f"m{k}" for k in range(n_models)])
    fitted = MElo().fit(battles)
    return InformationTracker.from_fitted(fitted, estimate="empirical-bayes")


@pytest.mark.parametrize("strategy", ["random", "ada-pair", "arena-weights"])
def test_pick_probabilities_of_sampling_selectors_match_their_draws(strategy):
    tracker = _tracker_after(6, 60, seed=1)
    sel = get_selector(strategy, **({"boost": ["m1"]} if strategy == "arena-weights" else {}))
    p = sel.pick_probabilities(tracker, exclude_pairs=[("m0", "m1")])
    assert np.allclose(p, p.T) and p[0, 1] == 0 and np.isclose(np.triu(p, 1).sum(), 1.0)
    rng = np.random.default_rng(0)
    freq = np.zeros_like(p)
    draws = 4000
    for _ in range(draws):
        ((i, j),) = sel.select(tracker, 1, rng=rng, exclude_pairs=[("m0", "m1")]).pairs
        freq[i, j] += 1
    iu, ju = np.triu_indices(6, 1)
    # every pair within 5 binomial standard errors of its stated probability
    se = np.sqrt(p[iu, ju] * (1 - p[iu, ju]) / draws)
    assert np.all(np.abs(freq[iu, ju] / draws - p[iu, ju]) <= 5 * se + 1e-12)


@pytest.mark.parametrize("strategy", ["d-opt", "a-opt", "rank-opt", "nearest", "d-opt-grounded"])
def test_pick_probabilities_of_deterministic_selectors_put_mass_on_their_pick(strategy):
    tracker = _tracker_after(7, 80, seed=2)
    sel = get_selector(strategy)
    p = sel.pick_probabilities(tracker, exclude_models=["m3"])
    ((i, j),) = sel.select(tracker, 1, rng=0, exclude_models=["m3"]).pairs
    assert p[i, j] == pytest.approx(1.0) and p[3].sum() == 0


def test_pick_probabilities_during_warm_up_are_uniform_over_bridges():
    tracker = InformationTracker(["a", "b", "c", "d"])
    tracker.add(0, 1)
    p = get_selector("d-opt").pick_probabilities(tracker)
    # components {a, b}, {c}, {d}: bridges a-c, a-d, b-c, b-d, c-d
    assert p[0, 1] == 0 and np.isclose(p[0, 2], 0.2) and np.isclose(p[2, 3], 0.2)


def _support_reference(mode, sigma, tmat, w, blocked):
    """The argmax support by its definition: every allowed pair scoring within the tolerance of
    the best (the kernel's arithmetic, in NumPy)."""
    iu, ju = np.nonzero(np.triu(~blocked, 1))
    rho = sigma[iu, iu] + sigma[ju, ju] - 2.0 * sigma[iu, ju]
    if mode == 0:
        score = w[iu, ju] * rho
    else:
        q = tmat[iu, iu] + tmat[ju, ju] - 2.0 * tmat[iu, ju]
        score = w[iu, ju] * q / (1.0 + w[iu, ju] * rho)
    if len(score) == 0:
        return set()
    best = score.max()
    keep = score >= best - 1e-10 * abs(best)
    return set(zip(iu[keep].tolist(), ju[keep].tolist(), strict=True))


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("seed", range(6))
def test_the_one_pass_argmax_support_is_the_set_of_near_best_pairs(mode, seed):
    from stablearena.design.selection import _best_pairs

    rng = np.random.default_rng(seed)
    m = 12
    a = rng.normal(size=(m, m))
    sigma = np.ascontiguousarray(a @ a.T / m)
    tmat = np.ascontiguousarray(sigma @ sigma)
    w = rng.uniform(0.05, 0.25, size=(m, m))
    w = np.ascontiguousarray((w + w.T) / 2)
    if seed % 2:  # planted ties: several pairs rescaled onto the best score, one just inside
        # the tolerance and one just outside, visited before and after the best
        rho = np.diag(sigma)[:, None] + np.diag(sigma)[None, :] - 2 * sigma
        target = float((w * rho)[np.triu_indices(m, 1)].max()) * 1.5
        for k, (i, j) in enumerate([(0, 5), (2, 3), (7, 11), (1, 2), (4, 9)]):
            scale = [1.0, 1.0, 1.0, 1 - 5e-11, 1 - 5e-10][k]
            w[i, j] = w[j, i] = target * scale / rho[i, j]
    if seed == 4:  # every pair scores the same: the whole allowed set ties
        sigma = np.ascontiguousarray(np.eye(m) - 1.0 / m)
        tmat = np.ascontiguousarray(sigma @ sigma)
        w = np.full((m, m), 0.25)
    blocked = rng.random((m, m)) < 0.2
    blocked = blocked | blocked.T
    np.fill_diagonal(blocked, True)
    bi, bj = _best_pairs(mode, sigma, tmat, w, blocked)
    got = list(zip(bi.tolist(), bj.tolist(), strict=True))
    assert got == sorted(got)  # in (i, j) order
    assert set(got) == _support_reference(mode, sigma, tmat, w, blocked)
    if seed % 2 and mode == 0:
        assert len(got) >= 2
    none_i, _ = _best_pairs(mode, sigma, tmat, w, np.ones((m, m), dtype=bool))
    assert len(none_i) == 0


@pytest.mark.parametrize("strategy", ["d-opt", "a-opt", "random"])
def test_pick_distribution_takes_a_precomputed_blocked_mask(strategy):
    tracker = _tracker_after(8, 90, seed=4)
    sel = get_selector(strategy)
    by_exclusion = sel.pick_distribution(
        tracker, exclude_models=["m2"], exclude_pairs=[("m0", "m5")]
    )
    by_mask = sel.pick_distribution(tracker, blocked=tracker.mask(["m2"], [("m0", "m5")]))
    for x, y in zip(by_exclusion, by_mask, strict=True):
        assert np.array_equal(x, y)


def test_a_selector_without_pick_probabilities_says_so():
    class Silent(RandomSelector):
        def _pick_distribution(self, tracker, blocked):
            return super(RandomSelector, self)._pick_distribution(tracker, blocked)

    with pytest.raises(NotImplementedError, match="propensity"):
        Silent().pick_probabilities(InformationTracker(3))


@pytest.mark.parametrize(
    "strategy", ["d-opt", "a-opt", "rank-opt", "random", "ada-pair", "nearest"]
)
def test_pick_distribution_is_the_support_of_pick_probabilities(strategy):
    tracker = _tracker_after(8, 90, seed=4)
    sel = get_selector(strategy)
    ex = {"exclude_models": ["m2"], "exclude_pairs": [("m0", "m5")]}
    # the dense reference of each selector (for d-opt / a-opt: every pair scored in NumPy order)
    t = tracker.with_estimate(sel.estimate) if sel.estimate else tracker
    dense = sel._pick_distribution(t, t.mask(["m2"], [("m0", "m5")]))
    i, j, p = sel.pick_distribution(tracker, **ex)
    assert np.all(i < j) and np.allclose(dense[i, j], p) and np.isclose(p.sum(), 1.0)
    assert np.isclose(np.triu(dense, 1).sum(), p.sum())
