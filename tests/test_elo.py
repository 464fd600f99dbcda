"""Online Elo (docs/methods/ratings.md): hand-computed cases, a plain-Python reference, order dependence,
seeded shuffles, and bad input."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena import Battles, InputError, MElo, Outcome, get_rater
from stablearena.analysis.metrics import consistency, kendall_tau
from stablearena.data.io import read_battles
from stablearena.data.simulate import random_ratings, simulate_battles
from stablearena.raters.base import ELO_SCALE
from stablearena.raters.elo import Elo, EloFitted, online_elo, online_elo_shuffled, shuffle_order

A, B, TIE, BOTH_BAD = Outcome.A, Outcome.B, Outcome.TIE, Outcome.TIE_BOTH_BAD


def reference_elo(
    battles: Battles, k: float = 4.0, initial: float = 1000.0, order: np.ndarray | None = None
) -> np.ndarray:
    """FastChat's ``compute_online_elo`` written out plainly, one battle at a time."""
    ratings = [initial] * battles.n_models
    weights = battles.weights()
    for r in range(len(battles)) if order is None else order:
        a, b = int(battles.model_a[r]), int(battles.model_b[r])
        ea = 1 / (1 + 10 ** ((ratings[b] - ratings[a]) / 400))
        eb = 1 / (1 + 10 ** ((ratings[a] - ratings[b]) / 400))
        outcome = int(battles.outcome[r])
        sa = 1.0 if outcome == A else 0.0 if outcome == B else 0.5
        ratings[a] += k * weights[r] * (sa - ea)
        ratings[b] += k * weights[r] * (1 - sa - eb)
    return np.array(ratings)


def log(
    rows: list[tuple[int, int, int]], models: tuple[str, ...] = ("x", "y", "z"), **kw
) -> Battles:
    a, b, o = (np.array(c) for c in zip(*rows, strict=True))
    return Battles.from_arrays(a, b, o.astype(np.int8), models=models, **kw)


@pytest.fixture(scope="module")
def arena() -> Battles:
    return simulate_battles(random_ratings(12, seed=3), 3000, rule="paper", seed=4)


# ---------------------------------------------------------------------------- hand-computed
def test_first_battle_moves_half_k():
    fitted = Elo().fit(log([(0, 1, A)], models=("x", "y")))
    assert fitted.ratings == pytest.approx([1002.0, 998.0], abs=1e-12)


def test_two_wins_by_hand():
    # second battle: E = 1/(1 + 10^(-4/400)), gain 4 (1 - E)
    e = 1 / (1 + 10 ** (-4 / 400))
    fitted = Elo().fit(log([(0, 1, A), (0, 1, A)], models=("x", "y")))
    assert fitted.ratings[0] == pytest.approx(1002 + 4 * (1 - e), abs=1e-12)
    assert fitted.ratings[1] == pytest.approx(998 - 4 * (1 - e), abs=1e-12)
    assert fitted.ratings[0] == pytest.approx(1003.976975, abs=1e-6)


def test_tie_between_equals_changes_nothing_and_both_bad_is_a_tie():
    for o in (TIE, BOTH_BAD):
        fitted = Elo().fit(log([(0, 1, o), (1, 2, o)]))
        assert fitted.ratings == pytest.approx([1000.0, 1000.0, 1000.0], abs=1e-12)


def test_tie_pulls_ratings_together():
    fitted = Elo().fit(log([(0, 1, A), (0, 1, TIE)], models=("x", "y")))
    e = 1 / (1 + 10 ** (-4 / 400))
    assert fitted.ratings[0] == pytest.approx(1002 + 4 * (0.5 - e), abs=1e-12)


def test_k_initial_and_weight_scale_the_update():
    fitted = Elo(k=32, initial=1500).fit(log([(1, 0, A)], models=("x", "y")))
    assert fitted.ratings == pytest.approx([1484.0, 1516.0], abs=1e-12)
    weighted = Elo().fit(log([(0, 1, A)], models=("x", "y"), weight=[2.5]))
    assert weighted.ratings == pytest.approx([1005.0, 995.0], abs=1e-12)
    zero = Elo().fit(log([(0, 1, A), (0, 1, B)], models=("x", "y"), weight=[0.0, 1.0]))
    assert zero.ratings == pytest.approx([998.0, 1002.0], abs=1e-12)


# ---------------------------------------------------------------------------- reference loop
def test_equals_plain_python_reference(arena):
    w = np.random.default_rng(0).uniform(0.2, 3.0, len(arena))
    weighted = Battles.from_arrays(
        arena.model_a, arena.model_b, arena.outcome, models=arena.models, weight=w
    )
    for data in (arena, weighted):
        for k, init in ((4.0, 1000.0), (16.0, 1200.0)):
            ours = Elo(k=k, initial=init).fit(data).ratings
            assert np.max(np.abs(ours - reference_elo(data, k, init))) < 1e-9


def test_each_shuffle_equals_reference_on_its_order(arena):
    runs = online_elo_shuffled(
        arena.model_a, arena.model_b, arena.scores, arena.n_models, shuffles=4, seed=11
    )
    for s in range(4):
        order = shuffle_order(len(arena), 11, s)
        assert np.max(np.abs(runs[s] - reference_elo(arena, order=order))) < 1e-9
        assert (
            np.max(
                np.abs(
                    runs[s]
                    - online_elo(
                        arena.model_a, arena.model_b, arena.scores, arena.n_models, order=order
                    )
                )
            )
            < 1e-12
        )
    fitted = Elo(shuffles=4, seed=11).fit(arena)
    assert fitted.ratings == pytest.approx(runs.mean(0), abs=1e-9)
    assert fitted.ratings_std == pytest.approx(runs.std(0), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from([0, 1, 2, 3])),
        min_size=1,
        max_size=40,
    ).filter(lambda rows: any(a != b for a, b, _ in rows)),
    st.floats(0.5, 64.0),
)
def test_reference_property(rows, k):
    rows = [r for r in rows if r[0] != r[1]]
    data = log(rows, models=tuple("abcde"))
    ours = Elo(k=k).fit(data)
    assert np.max(np.abs(ours.ratings - reference_elo(data, k))) < 1e-9
    # updates are zero-sum: the mean rating stays at the initial rating
    raw = online_elo(data.model_a, data.model_b, data.scores, 5, k=k)
    assert raw.mean() == pytest.approx(1000.0, abs=1e-9)


def test_matches_evalica_elo(arena):
    evalica = pytest.importorskip("evalica")
    winners = np.array(
        [evalica.Winner.X, evalica.Winner.Y, evalica.Winner.Draw, evalica.Winner.Draw]
    )
    idx = pd.Index(range(arena.n_models))
    res = evalica.elo(arena.model_a, arena.model_b, list(winners[arena.outcome]), index=idx)
    theirs = res.scores.reindex(idx).to_numpy()
    assert np.max(np.abs(Elo().fit(arena).ratings - theirs)) < 1e-8


# ---------------------------------------------------------------------------- shuffles
def test_shuffle_order_is_a_uniform_permutation():
    assert sorted(shuffle_order(1000, 5, 7).tolist()) == list(range(1000))
    seen = {p: 0 for p in itertools.permutations(range(3))}
    n = 6000
    for s in range(n):
        seen[tuple(shuffle_order(3, 1, s).tolist())] += 1
    expected = n / 6
    chi2 = sum((c - expected) ** 2 / expected for c in seen.values())
    assert chi2 < 20.5  # 5 degrees of freedom, p = 0.001


def test_mean_over_shuffles_reproducible_with_seed(arena):
    one = Elo(shuffles=30, seed=7).fit(arena)
    two = Elo(shuffles=30, seed=7).fit(arena)
    other = Elo(shuffles=30, seed=8).fit(arena)
    assert np.array_equal(one.ratings, two.ratings)
    assert np.array_equal(one.ratings_std, two.ratings_std)
    assert not np.allclose(one.ratings, other.ratings, atol=1e-6)
    # different seeds agree to within the sampling error of the mean over 30 orders
    se = np.sqrt(one.ratings_std**2 / 30 + other.ratings_std**2 / 30)
    assert np.all(np.abs(one.ratings - other.ratings) < 5 * se + 1e-9)


def test_order_dependence_is_measured(arena):
    # hand case: the same two results in the two orders give different ratings
    fwd = Elo().fit(log([(0, 1, A), (1, 2, A), (0, 2, B)]))
    rev = Elo().fit(log([(0, 2, B), (1, 2, A), (0, 1, A)]))
    assert np.max(np.abs(fwd.ratings - rev.ratings)) > 0.01
    # on a simulated arena: every order gives another ranking, m-ELO does not care
    runs = online_elo_shuffled(
        arena.model_a, arena.model_b, arena.scores, arena.n_models, shuffles=20, seed=0
    )
    assert consistency(list(runs)) < 1.0
    fitted = Elo(shuffles=20).fit(arena)
    assert np.all(fitted.ratings_std > 0)
    melo = [MElo().fit(arena.take(shuffle_order(len(arena), 0, s))).ratings for s in range(3)]
    assert consistency(melo) == 1.0


# ---------------------------------------------------------------------------- result object
def test_scores_loglik_and_comparison_with_melo(arena):
    fitted = Elo(shuffles=10).fit(arena)
    assert isinstance(fitted, EloFitted)
    assert fitted.scores.mean() == pytest.approx(0.0, abs=1e-12)
    assert fitted.scores == pytest.approx(ELO_SCALE * (fitted.ratings - fitted.ratings.mean()))
    assert fitted.ratings.mean() == pytest.approx(1000.0, abs=1e-9)
    # the ties-as-half Bradley–Terry log-likelihood, computed battle by battle
    p = 1 / (1 + np.exp(-(fitted.scores[arena.model_a] - fitted.scores[arena.model_b])))
    w = arena.scores
    loglik = np.sum(w * np.log(p) + (1 - w) * np.log(1 - p))
    assert fitted.loglik == pytest.approx(loglik, rel=1e-12)
    assert fitted.n_comparisons == len(arena)
    melo = MElo().fit(arena)
    assert fitted.nll > melo.nll  # m-ELO maximises this likelihood; Elo does not
    assert fitted.convergence.grad_norm > melo.convergence.grad_norm
    assert fitted.predict(0, 1) == pytest.approx(
        1 / (1 + 10 ** ((fitted.ratings[1] - fitted.ratings[0]) / 400))
    )
    assert fitted.battles.sum() == 2 * len(arena)


def test_recovers_true_order():
    truth = random_ratings(20, spread=150, seed=9)
    battles = simulate_battles(truth, 20_000, seed=10)
    fitted = Elo(shuffles=50).fit(battles)
    assert kendall_tau(fitted.ratings, truth) >= 0.9


def test_to_dict_contract_and_std():
    battles = simulate_battles(random_ratings(5, seed=1), 500, seed=2)
    plain = Elo().fit(battles).to_dict()
    assert {"method", "n_battles", "n_models", "nll", "models"} <= set(plain)
    assert plain["method"] == "elo" and plain["shuffles"] == 0
    assert all(set(e) == {"rank", "model", "rating", "battles"} for e in plain["models"])
    shuffled = Elo(shuffles=8).fit(battles)
    out = shuffled.to_dict()
    assert out["shuffles"] == 8
    assert [e["rank"] for e in out["models"]] == [1, 2, 3, 4, 5]
    for e in out["models"]:
        k = shuffled.models.index(e["model"])
        assert e["std"] == pytest.approx(shuffled.ratings_std[k])
        assert e["rating"] == pytest.approx(shuffled.ratings[k])
    text = json.dumps(out, allow_nan=False)
    assert "NaN" not in text
    assert list(shuffled.leaderboard().columns) == ["rank", "model", "rating", "battles", "std"]


def test_anchor_and_registry():
    battles = simulate_battles(random_ratings(5, seed=1), 500, seed=2)
    rater = get_rater("elo", k=8.0, shuffles=3, seed=1, anchor="model_002=1200")
    assert isinstance(rater, Elo)
    fitted = rater.fit(battles)
    assert fitted.ratings[2] == pytest.approx(1200.0)
    free = Elo(k=8.0, shuffles=3, seed=1).fit(battles)
    assert np.allclose(fitted.ratings - fitted.ratings[2], free.ratings - free.ratings[2])
    assert fitted.params["shuffles"] == 3


def test_refit_is_refused():
    battles = simulate_battles(random_ratings(4, seed=1), 200, seed=2)
    fitted = Elo().fit(battles)
    with pytest.raises(NotImplementedError, match="order"):
        fitted.refit(fitted.counts)


# ---------------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def small() -> Battles:
    return simulate_battles(random_ratings(4, seed=1), 100, seed=2)


def test_pair_counts_are_refused(small):
    with pytest.raises(InputError, match="order"):
        Elo().fit(small.counts())


def test_not_battles_refused():
    with pytest.raises(InputError, match="Battles"):
        Elo().fit(pd.DataFrame({"model_a": ["x"], "model_b": ["y"], "winner": ["model_a"]}))


def test_empty_log_refused(small):
    with pytest.raises(InputError, match="empty"):
        Elo().fit(small.take(np.zeros(len(small), dtype=bool)))


@pytest.mark.parametrize("k", [0.0, -4.0, math.nan, math.inf, "4"])
def test_bad_k(small, k):
    with pytest.raises(InputError, match="k must be"):
        Elo(k=k).fit(small)


@pytest.mark.parametrize("initial", [math.nan, -math.inf, None])
def test_bad_initial(small, initial):
    with pytest.raises(InputError, match="initial"):
        Elo(initial=initial).fit(small)


@pytest.mark.parametrize("shuffles", [-1, 2.5, True, "10"])
def test_bad_shuffles(small, shuffles):
    with pytest.raises(InputError, match="shuffles"):
        Elo(shuffles=shuffles).fit(small)


@pytest.mark.parametrize("seed", [1.5, None, "x"])
def test_bad_seed(small, seed):
    with pytest.raises(InputError, match="seed"):
        Elo(shuffles=2, seed=seed).fit(small)


def test_bad_anchor(small):
    with pytest.raises(InputError, match="MODEL=RATING"):
        Elo(anchor="model_000").fit(small)
    with pytest.raises(InputError, match="not among"):
        Elo(anchor="nobody=1000").fit(small)


def test_overflowing_k_is_an_error(small):
    huge = Battles.from_arrays(
        small.model_a,
        small.model_b,
        small.outcome,
        models=small.models,
        weight=np.full(len(small), 1e300),
    )
    with pytest.raises(InputError, match="overflow"):
        Elo(k=1000).fit(huge)  # the largest K, but weights of 1e300
    # a K past the bound is refused before any rating runs past the largest float
    rows = [(2, 1, B), (1, 2, TIE), (1, 2, TIE), (0, 1, B), (1, 2, TIE), (2, 1, B)]
    with pytest.raises(InputError, match="at most 1000"):
        Elo(k=1.7e308).fit(log(rows))


# ---------------------------------------------------------------------------- real data
def test_llmfao_shuffled_elo(llmfao_path):
    battles = read_battles(llmfao_path)
    fitted = Elo(shuffles=100).fit(battles)
    assert fitted.n_models == 59 and fitted.n_comparisons == 8931
    assert np.all(np.isfinite(fitted.ratings)) and np.all(np.isfinite(fitted.ratings_std))
    assert fitted.ratings.mean() == pytest.approx(1000.0, abs=1e-9)
    # the same log read column by column gives the same order, hence the same Elo
    df = pd.read_csv(llmfao_path)
    direct = Battles.from_arrays(df["left"], df["right"], df["winner"])
    assert np.allclose(Elo().fit(direct).ratings, Elo().fit(battles).ratings, atol=1e-9)
    melo = MElo().fit(battles)
    assert fitted.nll > melo.nll
    assert kendall_tau(fitted.ratings, melo.ratings) > 0.8
