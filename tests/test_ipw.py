"""Inverse-propensity weights (Battles.with_ipw, rank --ipw) and the sampling-weight sandwich:
A⁺ B A⁺ with A = Σ w H and B = Σ w² g gᵀ, pinned by a per-battle computation in plain NumPy."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stablearena import Battles
from stablearena.data.battles import Outcome, ipw_weights
from stablearena.design.selection import get_selector
from stablearena.design.serving_draw import simulate_served
from stablearena.errors import InputError
from stablearena.raters import get_rater
from stablearena.raters.uncertainty import bootstrap, covariance, intervals

SCORE = np.array([1.0, 0.0, 0.5, 0.5])  # W of model_a per outcome code


def _log(seed: int, n: int = 3000, m: int = 6) -> tuple[Battles, np.ndarray]:
    """A random log with both kinds of tie, and random draw probabilities."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    strength = rng.normal(0, 0.7, m)
    p = 1 / (1 + np.exp(strength[b] - strength[a]))
    u = rng.random(n)
    outcome = np.where(u < 0.15, 2, np.where(u < 0.2, 3, np.where(rng.random(n) < p, 0, 1)))
    battles = Battles.from_arrays(a, b, outcome.astype(np.int8), models=[f"m{k}" for k in range(m)])
    return battles, rng.uniform(0.02, 1.0, n)


def _per_battle_sandwich(fitted, battles: Battles, ties: bool) -> np.ndarray:
    """A⁺ B A⁺ by a loop over battles: A = Σ w p(1 − p) u uᵀ, B = Σ w² (s − p)² u uᵀ with
    u = e_a − e_b; A⁺ the pseudo-inverse (the sum-zero gauge: A's null space is 1)."""
    m = battles.n_models
    x = np.asarray(fitted.scores)
    a_mat = np.zeros((m, m))
    b_mat = np.zeros((m, m))
    for k in range(len(battles)):
        if not ties and battles.outcome[k] >= Outcome.TIE:
            continue  # bt drops ties
        i, j, w = battles.model_a[k], battles.model_b[k], battles.weight[k]
        u = np.zeros(m)
        u[i], u[j] = 1.0, -1.0
        p = 1 / (1 + np.exp(x[j] - x[i]))
        g = (SCORE[battles.outcome[k]] - p) * u
        a_mat += w * p * (1 - p) * np.outer(u, u)
        b_mat += w * w * np.outer(g, g)
    a_pinv = np.linalg.pinv(a_mat, rcond=1e-12, hermitian=True)
    return a_pinv @ b_mat @ a_pinv


@pytest.mark.parametrize("method", ["m-elo", "bt"])
def test_the_sandwich_equals_a_per_battle_computation(method):
    battles, prop = _log(3)
    weighted = battles.with_ipw(prop)
    assert weighted.sampling_weights and weighted.weight.mean() == pytest.approx(1.0)
    fitted = get_rater(method).fit(weighted)
    got = covariance(fitted, "sandwich").scores
    want = _per_battle_sandwich(fitted, weighted, ties=method == "m-elo")
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
    # as frequency weights the same w would give a meat of Σ w g gᵀ: a different, narrower matrix
    freq = get_rater(method).fit(replace(weighted, sampling_weights=False))
    np.testing.assert_allclose(freq.scores, fitted.scores, rtol=0, atol=1e-12)
    assert np.trace(covariance(freq, "sandwich").scores) < 0.9 * np.trace(got)


def test_the_sandwich_by_annotator_counts_equals_the_collapsed_one():
    battles, prop = _log(4, n=800)
    rng = np.random.default_rng(0)
    battles = replace(
        battles,
        annotator=rng.integers(0, 3, len(battles)).astype(np.int32),
        annotators=("x", "y", "z"),
    )
    weighted = battles.with_ipw(prop)
    by = weighted.counts(by_annotator=True)
    flat = weighted.counts()
    np.testing.assert_allclose(by.collapse().squares, flat.squares, rtol=1e-12)
    fitted = get_rater("m-elo").fit(by)
    np.testing.assert_allclose(
        covariance(fitted, "sandwich").scores,
        _per_battle_sandwich(fitted, weighted, ties=True),
        rtol=1e-9,
        atol=1e-15,
    )


def test_the_squares_are_sums_of_squared_weights_on_the_sorted_path_too():
    # 300 models and 400 battles: count_rows sorts keys instead of filling a dense table
    rng = np.random.default_rng(1)
    m, n = 300, 400
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    outcome = rng.integers(0, 4, n).astype(np.int8)
    battles = Battles.from_arrays(a, b, outcome, models=[f"m{k:03d}" for k in range(m)])
    weighted = battles.with_ipw(rng.uniform(0.1, 1, n))
    c = weighted.counts()
    w2 = weighted.weight**2
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    seen_from_i = np.where((a > b) & (outcome < 2), 1 - outcome, outcome)
    want = np.zeros((len(c), 4))
    row = {(int(i), int(j)): r for r, (i, j) in enumerate(zip(c.i, c.j, strict=True))}
    for k in range(n):
        want[row[(int(lo[k]), int(hi[k]))], seen_from_i[k]] += w2[k]
    np.testing.assert_allclose(c.squares, want, rtol=1e-12)
    # they follow the rows through the filters
    kept = c.filter(exclude_models=["m000"], both_bad="drop")
    assert kept.squares.shape == (len(kept), 4) and np.all(kept.squares[:, 3] == 0)


def test_with_all_weights_one_the_sandwich_is_todays():
    battles, _ = _log(5)
    ones = battles.with_ipw(np.ones(len(battles)))
    c = ones.counts()
    np.testing.assert_array_equal(
        c.squares, np.column_stack([c.wins, c.losses, c.ties, c.ties_both_bad])
    )
    fitted, plain = get_rater("m-elo").fit(ones), get_rater("m-elo").fit(battles)
    np.testing.assert_allclose(
        covariance(fitted, "sandwich").scores,
        covariance(plain, "sandwich").scores,
        rtol=1e-12,
        atol=1e-16,
    )


def test_the_weights_are_one_over_the_propensity_with_mean_one():
    w = ipw_weights(np.array([0.5, 0.25, 1.0, 0.125]))
    np.testing.assert_allclose(w, np.array([2, 4, 1, 8]) / 3.75)
    # the normalisation leaves the fit and the sandwich unchanged
    battles, prop = _log(6, n=1000)
    f1 = get_rater("m-elo").fit(battles.with_ipw(prop))
    f2 = get_rater("m-elo").fit(battles.with_ipw(prop / 2))
    np.testing.assert_allclose(f1.scores, f2.scores, atol=1e-12)
    np.testing.assert_allclose(
        covariance(f1, "sandwich").scores, covariance(f2, "sandwich").scores, rtol=1e-9
    )


# ----------------------------------------------------------------------------- refusals
def test_fisher_is_refused_under_sampling_weights():
    battles, prop = _log(7, n=500)
    fitted = get_rater("m-elo").fit(battles.with_ipw(prop))
    with pytest.raises(InputError, match="sandwich"):
        covariance(fitted, "fisher")
    with pytest.raises(InputError, match="sandwich"):
        intervals(fitted, "fisher")
    iv = intervals(fitted, "sandwich")
    assert any("sampling weights" in n for n in iv.covariance.notes)


def test_the_battle_bootstrap_is_refused_and_the_clustered_one_allowed():
    battles, prop = _log(8, n=600)
    rng = np.random.default_rng(2)
    battles = replace(
        battles,
        annotator=rng.integers(0, 12, len(battles)).astype(np.int32),
        annotators=tuple(f"u{k}" for k in range(12)),
    )
    weighted = battles.with_ipw(prop)
    fitted = get_rater("m-elo").fit(weighted)
    with pytest.raises(InputError, match="battle bootstrap"):
        bootstrap(fitted, rounds=4, workers=1)
    boot = bootstrap(fitted, rounds=4, workers=1, battles=weighted, cluster="annotator")
    assert np.all(np.isfinite(boot.ratings))


def test_a_sandwich_other_models_cannot_weight_is_refused():
    battles, prop = _log(9, n=600)
    fitted = get_rater("rao-kupper").fit(battles.with_ipw(prop))
    with pytest.raises(InputError, match="m-elo, bt and elo"):
        covariance(fitted, "sandwich")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (np.nan, "missing"),
        (None, "missing"),
        (0.0, "not positive"),
        (-0.3, "not positive"),
        (1.5, "larger than 1"),
        (np.inf, "not a finite number"),
        ("high", "not a number"),
    ],
    ids=["nan", "none", "zero", "negative", "above-one", "inf", "text"],
)
def test_a_bad_propensity_names_the_row_and_value(value, said):
    battles, prop = _log(10, n=20)
    p = prop.astype(object) if value is None or isinstance(value, str) else prop.copy()
    p[6] = value
    with pytest.raises(InputError, match=said) as err:
        battles.with_ipw(p)
    assert "data row 7" in str(err.value)
    if value not in (None, "high") and not (isinstance(value, float) and np.isnan(value)):
        assert repr(float(value)) in str(err.value)


def test_a_missing_propensity_column_is_refused():
    battles, _ = _log(11, n=20)
    with pytest.raises(InputError, match="no propensity column 'propensity'"):
        battles.with_ipw()


def test_propensities_of_the_wrong_length_are_refused():
    battles, prop = _log(12, n=20)
    with pytest.raises(InputError, match="19 propensities for 20 battles"):
        battles.with_ipw(prop[:-1])


def test_a_log_with_weights_is_not_reweighted_silently():
    battles, prop = _log(13, n=20)
    with pytest.raises(InputError, match="already has frequency weights"):
        replace(battles, weight=np.ones(20)).with_ipw(prop)


# ----------------------------------------------------------------------------- the CLI
@pytest.fixture
def run(cli):
    """The in-process CLI (conftest's ``cli``) with the error's white space folded (Rich wraps
    long messages)."""

    def call(*args: str) -> tuple[int, str, str]:
        code, out, err = cli(*args)
        return code, out, " ".join(err.split())

    return call


def _export(tmp_path, prop, name="propensity"):
    battles, _ = _log(14, n=len(prop))
    df = battles.to_frame().rename(columns={"winner": "outcome"})
    df[name] = prop
    path = tmp_path / "export.csv"
    df.to_csv(path, index=False)
    return path, battles


def test_rank_ipw_gives_sandwich_intervals_from_the_propensity_column(tmp_path, run):
    prop = np.random.default_rng(3).uniform(0.05, 1, 400)
    path, battles = _export(tmp_path, prop)
    code, out, err = run("rank", str(path), "--ipw", "--ci", "sandwich", "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    fitted = get_rater("m-elo").fit(battles.with_ipw(prop))
    se = dict(zip(fitted.models, covariance(fitted, "sandwich").se, strict=True))
    for row in payload["models"]:
        assert row["se"] == pytest.approx(se[row["model"]], rel=1e-6)
    assert any("sampling weights" in n for n in payload["ci"]["notes"])


def test_rank_ipw_reads_a_column_named_with_col(tmp_path, run):
    prop = np.random.default_rng(4).uniform(0.05, 1, 200)
    path, battles = _export(tmp_path, prop, name="pi")
    code, out, err = run("rank", str(path), "--ipw", "--col", "propensity=pi", "-f", "json")
    assert code == 0, err
    fitted = get_rater("m-elo").fit(battles.with_ipw(prop))
    rating = dict(zip(fitted.models, fitted.ratings, strict=True))
    for row in json.loads(out)["models"]:
        assert row["rating"] == pytest.approx(rating[row["model"]], abs=1e-6)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--ipw", "--ci", "fisher"], "Use the sampling-weight sandwich: --ci sandwich"),
        (["--ipw", "--ci", "bootstrap"], "no battle bootstrap"),
        (["--col", "propensity=propensity"], "add --ipw"),
        (["--ipw", "--method", "arena"], "--ipw does not apply to --method arena"),
    ],
    ids=["fisher", "bootstrap", "col-without-ipw", "arena"],
)
def test_rank_ipw_refusals(tmp_path, run, args, said):
    path, _ = _export(tmp_path, np.full(50, 0.5))
    code, _, err = run("rank", str(path), *args)
    assert code == 2 and said in err


def test_rank_ipw_names_the_file_row_and_value_of_a_bad_propensity(tmp_path, run):
    prop = np.full(50, 0.5)
    prop[9] = 0.0
    path, _ = _export(tmp_path, prop)
    code, _, err = run("rank", str(path), "--ipw")
    assert code == 2
    assert str(path) in err and "data row 10" in err and "propensity 0.0" in err


def test_rank_ipw_without_the_column_says_so(tmp_path, run):
    path, _ = _export(tmp_path, np.full(50, 0.5), name="other")
    code, _, err = run("rank", str(path), "--ipw")
    assert code == 2 and "no column 'propensity'" in err and "--col propensity=NAME" in err


# ----------------------------------------------------------------------------- property
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    m=st.integers(2, 7),
    n=st.integers(30, 300),
    floor=st.floats(1e-3, 1.0),
)
def test_the_sampling_sandwich_is_finite_symmetric_and_psd(seed, m, n, floor):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    outcome = rng.integers(0, 4, n).astype(np.int8)
    battles = Battles.from_arrays(a, b, outcome, models=[f"m{k}" for k in range(m)])
    weighted = battles.with_ipw(rng.uniform(floor, 1.0, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a split graph or an unbeaten model: the prior's note
        fitted = get_rater("m-elo").fit(weighted)
    cov = covariance(fitted, "sandwich").scores
    assert np.all(np.isfinite(cov))
    np.testing.assert_allclose(cov, cov.T, rtol=0, atol=1e-12 * max(1.0, np.abs(cov).max()))
    eig = np.linalg.eigvalsh(cov)
    assert eig.min() >= -1e-9 * max(1.0, eig.max())
    np.testing.assert_allclose(cov.sum(axis=1), 0, atol=1e-9 * max(1.0, np.abs(cov).max()))


# ----------------------------------------------------------------------------- the design
def test_simulated_serving_stores_the_propensities_it_drew_with():
    battles = simulate_served(np.linspace(-1, 1, 5), get_selector("a-opt"), 300, seed=1)
    prop = battles.extra["propensity"]
    assert np.all((prop > 0) & (prop <= 1))
    explore = battles.extra["strategy"] == "explore"
    assert 0.03 < explore.mean() < 0.2  # ε = 0.1
    # a uniform exploration draw of one of the 10 pairs has at least ε/10
    assert prop.min() >= 0.1 / 10 - 1e-12


def test_coverage_of_the_sampling_sandwich_on_an_adaptive_design():
    """30 arenas of the bench's design with ε = 0.3 (the bench runs 200: 0.947 ± 0.006 for the
    sampling sandwich, 0.735 ± 0.011 for the weights read as frequencies): loose bounds."""
    from stablearena.simulation.experiments.ipw import IpwCoverageConfig, run_ipw_coverage

    s = run_ipw_coverage(IpwCoverageConfig(arenas=30, exploration=0.3))["variants"]
    assert 0.90 <= s["ipw sampling sandwich"]["differences"] <= 0.99
    assert 0.90 <= s["unweighted fisher"]["differences"] <= 0.99
    assert s["ipw as frequency, fisher"]["differences"] < 0.85
    assert (
        s["ipw sampling sandwich"]["difference_width"]
        > 1.5 * s["ipw as frequency, fisher"]["difference_width"]
    )
