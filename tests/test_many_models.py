"""Thousands of models (issue 32): the lean routes of Fisher intervals and of the information
tracker agree with the dense ones they replace, keep to their memory, and refuse with a clear
message when a dense matrix cannot fit."""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena import InputError, MElo, StableArenaWarning
from stablearena.data.simulate import random_ratings, simulate_battles
from stablearena.design.selection import InformationTracker, get_selector
from stablearena.raters import get_rater
from stablearena.raters import information as info_mod
from stablearena.raters import uncertainty as unc
from stablearena.raters.information import laplacian, laplacian_pinv


def _graph(m: int, edges: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A connected weighted graph: a random spanning path plus random edges (repeats allowed)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(m)
    i = np.concatenate([perm[:-1], rng.integers(0, m, edges)])
    j = np.concatenate([perm[1:], rng.integers(0, m, edges)])
    keep = i != j
    w = rng.uniform(0.01, 3.0, len(i))[keep]
    return i[keep], j[keep], w


def _fitted(m: int, per_model: int = 8, seed: int = 0, method: str = "m-elo"):
    battles = simulate_battles(random_ratings(m, seed=seed), per_model * m, seed=seed + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        return get_rater(method).fit(battles)


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(2, 30),
    extra=st.integers(0, 90),
    seed=st.integers(0, 2**31 - 1),
    scale=st.sampled_from([1e-6, 1.0, 1e4]),
)
def test_laplacian_pinv_is_the_pseudo_inverse(m, extra, seed, scale):
    """The Cholesky route (copy and in place) and the trace equal numpy's SVD pseudo-inverse."""
    from stablearena.raters.information import laplacian_pinv_trace

    i, j, w = _graph(m, extra, seed)
    lap = laplacian(m, i, j, w * scale)
    ref = np.linalg.pinv(lap, hermitian=True)
    tol = 1e-8 * np.max(np.abs(ref))
    assert np.max(np.abs(laplacian_pinv(lap) - ref)) <= tol
    assert np.max(np.abs(laplacian_pinv(lap.copy(), overwrite=True) - ref)) <= tol
    assert laplacian_pinv_trace(lap) == pytest.approx(np.trace(ref), rel=1e-8)


def test_laplacian_is_the_same_matrix_as_before():
    """The in-place Laplacian is bit for bit the two-bincount one it replaces."""
    m = 50
    i, j, w = _graph(m, 400, 3)
    old = np.bincount(i * m + j, w, m * m) + np.bincount(j * m + i, w, m * m)
    ref = -old.reshape(m, m)
    ref[np.diag_indices(m)] += np.bincount(i, w, m) + np.bincount(j, w, m)
    ref += 0.0
    assert np.array_equal(laplacian(m, i, j, w), ref)


@pytest.mark.parametrize("method", ["m-elo", "bt"])
@pytest.mark.parametrize("m", [5, 60])
def test_fisher_covariance_matches_the_bordered_solve(method, m):
    """Plain Bradley–Terry's Cholesky pseudo-inverse gives the bordered solve's covariance (to
    1e-8), scaled by the same dispersion; the standard errors computed without the m×m ratings
    matrix equal its diagonal."""
    fitted = _fitted(m, method=method)
    cov = unc.covariance(fitted, "fisher")
    p, notes = unc._bread_inverse(fitted.hessian(), fitted.gauge_constraints())
    ref = fitted.dispersion() * p
    assert np.max(np.abs(cov.scores - ref)) <= 1e-8 * np.max(np.abs(ref))
    assert cov.params is cov.scores and not notes
    dense_se = np.sqrt(np.clip(np.diag(cov.ratings), 0, None))
    assert np.allclose(cov.se, dense_se, rtol=1e-10, atol=1e-12)
    a, b = np.arange(m - 1), np.arange(1, m)
    assert np.array_equal(cov.difference_se(a, b), cov.difference_se()[a, b])
    sandwich = unc.covariance(fitted, "sandwich")
    assert np.all(np.isfinite(sandwich.scores))


def test_anchored_standard_errors_match_the_dense_ratings_matrix():
    battles = simulate_battles(random_ratings(12, seed=0), 96, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fitted = MElo(anchor=("model_003", 1000.0)).fit(battles)
    cov = unc.covariance(fitted, "fisher")
    dense = np.sqrt(np.clip(np.diag(cov.ratings), 0, None))
    assert dense[3] < 1e-6 and np.allclose(cov.se, dense, atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 6),
    m=st.integers(1, 30),
    levels=st.integers(1, 5),
    seed=st.integers(0, 2**31 - 1),
)
def test_ranks_by_sorting_equal_the_pairwise_count(rows, m, levels, seed):
    """Ranks by sorting equal the pairwise definition, ties (few levels) included."""
    x = np.random.default_rng(seed).integers(0, levels, (rows, m)).astype(float)
    better = 1 + np.sum(x[:, None, :] > x[:, :, None], axis=2)
    worse = np.sum(x[:, None, :] >= x[:, :, None], axis=2)
    assert np.array_equal(unc._ranks(x), better)
    assert np.array_equal(unc._ranks(x, worse=True), worse)


def test_cholesky_draws_have_the_covariance_of_the_contrasts(monkeypatch):
    """Draws through the Cholesky root differ from N(scores, cov) only by a shift per draw:
    their contrasts have the covariance's contrasts (checked on the sample covariance), and a
    covariance whose contrasts are singular falls back to the eigen-decomposition."""
    monkeypatch.setattr(unc, "CHOLESKY_DRAWS_ABOVE", 0)
    fitted = _fitted(6)
    cov = unc.covariance(fitted, "fisher").scores
    draws = unc._normal_draws(np.asarray(fitted.scores), cov, 20000, seed=1)
    centred = draws - draws.mean(axis=1, keepdims=True)
    sample = np.cov(centred, rowvar=False)
    assert np.max(np.abs(sample - cov)) < 0.05 * np.max(np.abs(cov))
    assert unc._cholesky_root(np.zeros((4, 4))) is None
    flat = unc._normal_draws(np.arange(4.0), np.zeros((4, 4)), 3, seed=0)
    assert np.array_equal(flat, np.tile(np.arange(4.0), (3, 1)))


def test_intervals_and_tiers_without_dense_differences(monkeypatch):
    """intervals() asks only for the adjacent pairs' differences; tiers() gives the same
    answer from the function as from the full matrix; each stage reports its progress (the
    command line shows the latest report beside a spinner)."""
    from stablearena._progress import reporting

    fitted = _fitted(40)
    monkeypatch.setattr(unc, "CHOLESKY_DRAWS_ABOVE", 0)
    seen: list[str] = []
    with reporting(seen.append):
        iv = unc.intervals(fitted, "fisher")
    assert [t.split(":")[0] for t in seen] == [
        "Fisher covariance",
        "normal draws",
        "normal draws",
        "rank intervals",
    ]
    full = iv.covariance.difference_se()
    t1, p1 = unc.tiers(iv.ratings, full)
    t2, p2 = unc.tiers(iv.ratings, iv.covariance.difference_se)
    assert np.array_equal(t1, t2) and np.allclose(p1, p2, rtol=0, atol=0)
    assert np.array_equal(iv.tier, t2)
    assert np.all(iv.rank_low <= iv.rank) and np.all(iv.rank <= iv.rank_high)


# the pairs today's code chose (main at the start of issue 32), 60 models, 6 picks, seed 7
BEFORE = {
    ("d-opt", "empirical-bayes", "greedy"): [
        [1, 36],
        [12, 36],
        [36, 51],
        [6, 13],
        [26, 33],
        [1, 12],
    ],
    ("d-opt", "plug-in", "top-k"): [[1, 57], [1, 6], [1, 39], [1, 13], [26, 35], [1, 36]],
    ("a-opt", "empirical-bayes", "greedy"): [
        [1, 36],
        [12, 36],
        [6, 36],
        [7, 25],
        [1, 51],
        [13, 39],
    ],
    ("a-opt", "plug-in", "greedy"): [[1, 57], [26, 35], [9, 26], [1, 39], [1, 6], [9, 26]],
    ("rank-opt", "empirical-bayes", "greedy"): [
        [1, 36],
        [12, 36],
        [11, 25],
        [7, 27],
        [17, 51],
        [26, 33],
    ],
    ("rank-opt", "plug-in", "top-k"): [[1, 57], [1, 6], [1, 39], [1, 13], [26, 35], [1, 36]],
}


@pytest.mark.parametrize("key", sorted(BEFORE))
def test_next_pairs_are_the_same_as_before(key):
    """The lean tracker (Cholesky inverses, the trace alone for the empirical-Bayes estimate,
    scratch copies without counts) picks the same pairs as the dense one did."""
    name, estimate, batch = key
    battles = simulate_battles(random_ratings(60, seed=3), 480, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fitted = MElo().fit(battles)
    sel = get_selector(name, estimate=estimate, batch_mode=batch)
    tracker = InformationTracker.from_fitted(fitted, estimate=estimate)
    before = tracker.pair_battles.copy(), tracker.info.copy()
    s = sel.select(tracker, 6, rng=7)
    assert s.pairs.tolist() == BEFORE[key]
    assert np.array_equal(tracker.pair_battles, before[0])
    assert np.array_equal(tracker.info, before[1])


def test_scratch_copy_without_counts_needs_a_connected_graph():
    tracker = InformationTracker(5)
    with pytest.raises(InputError, match="connected"):
        tracker.copy(keep_counts=False)


def test_dense_work_is_refused_with_the_memory_it_needs(monkeypatch):
    """When the system has too little memory, intervals stop before any dense work and say
    how much they need, how much there is and what to do."""
    fitted = _fitted(30)
    monkeypatch.setattr(info_mod, "available_memory", lambda: 2**20)
    with pytest.raises(InputError) as err:
        unc.intervals(fitted, "fisher")
    text = str(err.value)
    assert "fisher intervals of 30 models" in text
    assert "GiB of memory, and only 0.0 GiB is available" in text
    assert "--min-battles" in text
    monkeypatch.setattr(info_mod, "available_memory", lambda: 2**10)
    with pytest.raises(InputError, match=r"pair selection among 30 models .* six dense 30×30"):
        InformationTracker(30)
    monkeypatch.setattr(info_mod, "available_memory", lambda: None)  # unknown: no refusal
    assert unc.intervals(fitted, "fisher").se.shape == (30,)


def test_fisher_covariance_keeps_to_one_dense_matrix():
    """The covariance of 700 models holds one 700×700 array at its peak (the Hessian, inverted
    in place), where the bordered solve held four and more."""
    fitted = _fitted(700, per_model=6)
    one = 8 * 700 * 700
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        cov = unc.covariance(fitted, "fisher")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert cov.scores.shape == (700, 700)
    assert peak < 1.5 * one, f"peak {peak / one:.2f} m×m arrays"


def test_tracker_and_batch_keep_to_their_arrays():
    """Building the tracker (empirical-Bayes estimate) and a greedy d-opt batch of 10 each
    peak below 6.5 m×m arrays (5.5 and 5.3 measured at 400 models; the dense route peaked at
    7.2 and 8.3:
    temporaries of W and of the inverses, and a scratch copy with the counts and the
    information)."""
    m = 300
    battles = simulate_battles(random_ratings(m, seed=1), 8 * m, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fitted = MElo().fit(battles)
    one = 8 * m * m
    # once before, so that numba's compiling of the kernels is not counted
    get_selector("d-opt").select(InformationTracker.from_fitted(fitted), 2, rng=0)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        tracker = InformationTracker.from_fitted(fitted, estimate="empirical-bayes")
        built = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        get_selector("d-opt").select(tracker, 10, rng=0)
        peak = max(built, tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()
    assert peak < 6.5 * one, f"peak {peak / one:.2f} m×m arrays"


@pytest.mark.slow
def test_three_thousand_models_finish():
    """Fisher intervals and a d-opt batch at 3,000 models (about 30 battles each) finish and
    are finite (bench/bench_many_models.py times them)."""
    fitted = _fitted(3000, per_model=15)
    iv = unc.intervals(fitted, "fisher")
    assert np.all(np.isfinite(iv.se)) and np.all(np.isfinite(iv.ci_low))
    tracker = InformationTracker.from_fitted(fitted, estimate="empirical-bayes")
    s = get_selector("d-opt").select(tracker, 10, rng=0)
    assert len(s.pairs) == 10 and np.all(np.isfinite(s.values))
