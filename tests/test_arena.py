"""The arena simulator (simulation and replay), the refitting loop and the selection experiment."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from stablearena import Battles, InputError, MElo, Outcome, PairCounts
from stablearena.data.simulate import random_ratings, simulate_battles
from stablearena.raters.base import ELO_SCALE, get_rater, rater_names
from stablearena.simulation.arena import Refitter, ReplayArena, SimulatedArena, run_arena
from stablearena.simulation.experiments.selection import (
    RankingAsymptotics,
    battles_to_target,
    fitted_arena,
    plot_selection_experiment,
    run_selection_experiment,
    selection_figure,
)


def _log() -> Battles:
    # pair (0,1): 3 wins of model 0 (one recorded with model 1 first), 1 loss, 2 ties; pair (1,2): 2
    a = [0, 0, 1, 1, 0, 1, 1, 2]
    b = [1, 1, 0, 0, 1, 0, 2, 1]
    o = ["model_a", "model_a", "model_b", "model_a", "tie", "tie", "model_a", "tie (bothbad)"]
    return Battles.from_arrays(np.array(a), np.array(b), o, models=["m0", "m1", "m2"])


# --------------------------------------------------------------------------- replay
def test_replay_draws_each_pairs_battles_without_replacement():
    arena = ReplayArena(_log())
    rng = np.random.default_rng(0)
    seen = []
    while (o := arena.play(1, 0, rng)) is not None:  # model 1 as model_a
        seen.append(o)
    # from model 1's side: 1 win, 3 losses, 2 ties — exactly the log, then exhausted
    assert sorted(seen) == sorted(
        [Outcome.A, Outcome.B, Outcome.B, Outcome.B, Outcome.TIE, Outcome.TIE]
    )
    assert arena.left(0, 1) == 0 and arena.play(0, 1, rng) is None
    assert arena.left(1, 2) == 2
    assert arena.play(0, 2, rng) is None  # never played in the log
    assert not arena.available()[0, 1] and arena.available()[1, 2]


def test_replay_from_pair_counts_and_copy_independence():
    counts = PairCounts.from_arrays(
        ["a", "b", "c"], np.array([[0, 1], [1, 2]]), np.array([[2, 1, 1, 0], [0, 0, 0, 3]])
    )
    arena = ReplayArena(counts)
    twin = arena.copy()
    rng = np.random.default_rng(1)
    outs = [arena.play(1, 2, rng) for _ in range(3)]
    assert outs == [Outcome.TIE_BOTH_BAD] * 3 and arena.play(1, 2, rng) is None
    assert twin.left(1, 2) == 3  # the copy was not consumed


def test_replay_initial_battles_are_drawn_from_the_log():
    arena = ReplayArena(_log())
    a, b, o = arena.random_battles(5, np.random.default_rng(2))
    assert len(a) == 5 and arena.remaining.sum() == 3
    with pytest.raises(InputError, match="only 3 are left"):
        arena.random_battles(4, np.random.default_rng(3))


def test_replay_truth_is_m_elo_of_the_full_log():
    log = simulate_battles(random_ratings(5, seed=0), 400, seed=1)
    np.testing.assert_allclose(ReplayArena(log).truth(), MElo().fit(log).scores)


def test_replay_refuses_weighted_counts():
    counts = PairCounts.from_arrays(["a", "b"], np.array([[0, 1]]), np.array([[1.5, 1, 0]]))
    with pytest.raises(InputError, match="whole battle counts"):
        ReplayArena(counts)


def test_replay_refuses_an_empty_log():
    counts = PairCounts.from_arrays(["a", "b"], np.array([[0, 1]]), np.array([[0, 0, 0]]))
    with pytest.raises(InputError, match="no battles"):
        ReplayArena(counts)


# --------------------------------------------------------------------------- simulation
def test_simulated_outcomes_follow_the_papers_rule():
    r = np.array([1100.0, 1000.0])
    arena = SimulatedArena(r)
    rng = np.random.default_rng(0)
    out = np.array([arena.play(0, 1, rng) for _ in range(20000)])
    p = 1 / (1 + np.exp(-ELO_SCALE * 100))
    freq = np.bincount(out, minlength=4)[:3] / len(out)
    np.testing.assert_allclose(freq, [p * p, (1 - p) ** 2, 2 * p * (1 - p)], atol=0.012)


def test_simulated_outcomes_follow_rao_kupper():
    arena = SimulatedArena(np.array([1100.0, 1000.0]), rule="rao-kupper", eta=0.7)
    z = ELO_SCALE * 100.0
    rng = np.random.default_rng(3)
    out = np.array([arena.play(0, 1, rng) for _ in range(20000)])
    freq = np.bincount(out, minlength=4)[:3] / len(out)
    pa, pb = 1 / (1 + np.exp(0.7 - z)), 1 / (1 + np.exp(0.7 + z))
    np.testing.assert_allclose(freq, [pa, pb, 1 - pa - pb], atol=0.012)
    ma, mb = arena.outcome_matrices()
    assert ma[0, 1] == pytest.approx(pa) and mb[0, 1] == pytest.approx(pb)
    with pytest.raises(InputError, match="eta must be >= 0"):
        SimulatedArena([1000.0, 900.0], rule="rao-kupper", eta=-0.1)


def test_simulation_from_a_fitted_tie_models_own_rule():
    # a Rao–Kupper fit judges with its own win / loss / tie probabilities
    log = simulate_battles(random_ratings(5, seed=1), 4000, rule="paper", seed=2)
    fitted = get_rater("rao-kupper").fit(log)
    arena = SimulatedArena.from_fitted(fitted, rule="model")
    np.testing.assert_allclose(arena.truth(), fitted.scores - fitted.scores.mean(), atol=1e-12)
    pa, pb = arena.outcome_matrices()
    probs = fitted.outcome_probabilities(np.array([0, 3]), np.array([2, 1]))
    np.testing.assert_allclose([pa[0, 2], pb[0, 2]], probs[0, :2], rtol=1e-9)
    np.testing.assert_allclose([pa[3, 1], pb[3, 1]], probs[1, :2], rtol=1e-9)
    rng = np.random.default_rng(5)
    out = np.array([arena.play(0, 2, rng) for _ in range(20000)])
    np.testing.assert_allclose(np.bincount(out, minlength=4)[:3] / len(out), probs[0], atol=0.012)
    with pytest.raises(InputError, match="single-η Rao–Kupper or Davidson"):
        SimulatedArena.from_fitted(MElo().fit(log), rule="model")


def test_fitted_arena_judges_with_the_logs_annotator_abilities():
    # two honest annotators and one who flips every vote
    ratings = random_ratings(6, spread=150, seed=3)
    log = simulate_battles(
        ratings,
        6000,
        abilities=[1.0, 1.5, -1.0],
        annotator_probs=[0.5, 0.3, 0.2],
        rule="paper",
        seed=4,
    )
    arena, desc = fitted_arena(log, "rao-kupper")
    assert desc["annotators"] == 3 and arena.abilities is not None
    am = get_rater("am-elo").fit(log)
    np.testing.assert_allclose(arena.annotator_probs, am.records / am.records.sum())
    # abilities rescaled to a battle-weighted mean of 1, signs kept
    assert np.average(arena.abilities, weights=am.records) == pytest.approx(1.0)
    assert (arena.abilities < 0).sum() == 1
    assert desc["share_of_battles_by_nonpositive_abilities"] == pytest.approx(0.2, abs=0.03)
    alone, desc2 = fitted_arena(log, "davidson", annotators=False)
    assert alone.abilities is None and desc2["annotators"] == 0 and alone.rule == "davidson"
    with pytest.raises(InputError, match="fit must be one of"):
        fitted_arena(log, "thurstone")


def test_annotator_of_zero_ability_votes_at_random():
    arena = SimulatedArena(np.array([1400.0, 1000.0]), rule="bt", abilities=[0.0])
    rng = np.random.default_rng(1)
    wins = np.mean([arena.play(0, 1, rng) == Outcome.A for _ in range(4000)])
    assert abs(wins - 0.5) < 0.03


def test_simulation_from_a_fitted_raters_own_model():
    log = simulate_battles(random_ratings(6, seed=3), 3000, seed=4)
    fitted = MElo().fit(log)
    arena = SimulatedArena.from_fitted(fitted, rule="bt")
    np.testing.assert_allclose(arena.truth(), fitted.scores, atol=1e-9)
    rng = np.random.default_rng(5)
    a, b, o = arena.random_battles(20000, rng)
    again = MElo().fit(
        Battles(
            models=arena.models, model_a=a.astype(np.int32), model_b=b.astype(np.int32), outcome=o
        )
    )
    assert np.abs(again.scores - fitted.scores).max() < 0.15


def test_simulated_arena_bad_input():
    with pytest.raises(InputError, match="at least two"):
        SimulatedArena([1000.0])
    with pytest.raises(InputError, match="outcome rule"):
        SimulatedArena([1000.0, 900.0], rule="coin")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="annotator_probs"):
        SimulatedArena([1000.0, 900.0], abilities=[1.0, 0.5], annotator_probs=[1.0])
    with pytest.raises(InputError, match="names"):
        SimulatedArena([1000.0, 900.0], models=["a"])


# --------------------------------------------------------------------------- refitting
def test_refitter_m_elo_equals_the_m_elo_rater():
    log = simulate_battles(random_ratings(6, seed=0), 500, seed=1, rule="paper")
    ref = Refitter(log.models)
    ref.add(log.model_a, log.model_b, log.outcome)
    np.testing.assert_allclose(ref.fit(), MElo().fit(log).scores, atol=1e-7)
    np.testing.assert_array_equal(ref.counts().totals.sum(), len(log))


def test_refitter_keeps_ratings_finite_before_the_mle_exists():
    ref = Refitter(("a", "b", "c", "d"))
    ref.add(np.array([0, 2]), np.array([1, 3]), np.array([0, 0]))  # two components, all wins
    x = ref.fit()
    assert np.all(np.isfinite(x)) and np.ptp(x) < 5


@pytest.mark.skipif("elo" not in rater_names(), reason="the online Elo rater has not landed")
def test_refitter_online_elo_uses_the_battle_order():
    log = simulate_battles(random_ratings(4, seed=0), 300, seed=1)
    ref = Refitter(log.models, "elo")
    ref.add(log.model_a, log.model_b, log.outcome)
    from stablearena.raters.base import get_rater

    np.testing.assert_allclose(ref.fit(), get_rater("elo").fit(log).scores)


def test_refitter_unknown_rater():
    with pytest.raises(InputError, match="unknown method"):
        Refitter(("a", "b"), "glicko-7")


# --------------------------------------------------------------------------- the loop
def test_run_arena_replay_repicks_exhausted_pairs_and_never_overdraws():
    log = simulate_battles(random_ratings(6, seed=1), 120, seed=2)
    run = run_arena(ReplayArena(log), "d-opt", 100, init=10, seed=3)
    assert len(run.battles) == 110
    assert run.exhausted > 0  # d-opt keeps wanting pairs that run out
    played = run.battles.counts()
    original = log.counts()
    key = {(i, j): t for i, j, t in zip(original.i, original.j, original.totals, strict=True)}
    for i, j, t in zip(played.i, played.j, played.totals, strict=True):
        assert t <= key[(i, j)]


def test_run_arena_records_snapshots_and_excludes_models():
    arena = SimulatedArena(random_ratings(6, seed=0))
    run = run_arena(
        arena,
        "a-opt",
        40,
        init=10,
        batch=7,
        record=(0, 15, 40),
        exclude_models=["model_005"],
        seed=1,
    )
    assert sorted(run.snapshots) == [0, 15, 40]
    assert run.snapshots[15].pair_battles.sum() / 2 == 25
    assert run.choices[:, 5].sum() == 0 and run.choices[5].sum() == 0
    assert run.choices.sum() == 40


def test_run_arena_shared_initial_battles():
    arena = SimulatedArena(random_ratings(5, seed=0))
    r1 = run_arena(arena, "random", 5, init=20, init_seed=7, seed=1)
    r2 = run_arena(arena, "d-opt", 5, init=20, init_seed=7, seed=2)
    np.testing.assert_array_equal(r1.battles.model_a[:20], r2.battles.model_a[:20])
    np.testing.assert_array_equal(r1.battles.outcome[:20], r2.battles.outcome[:20])


@pytest.mark.parametrize("replay", [False, True])
def test_common_random_numbers_give_each_pairs_kth_battle_the_same_outcome(replay):
    ratings = random_ratings(6, seed=0)
    arena = (
        ReplayArena(simulate_battles(ratings, 3_000, seed=9, rule="paper"))
        if replay
        else SimulatedArena(ratings)
    )
    runs = [
        run_arena(arena, sel, 150, init=20, init_seed=7, outcome_seed=[3, 1], seed=s)
        for s, sel in enumerate(["random", "d-opt", "nearest"])
    ]

    def kth_outcomes(run):
        # the k-th selected battle of each pair, seen from the smaller index
        out: dict[tuple[int, int, int], int] = {}
        seen: dict[tuple[int, int], int] = {}
        b = run.battles
        for a, c, o in zip(b.model_a[20:], b.model_b[20:], b.outcome[20:], strict=True):
            lo, hi = min(a, c), max(a, c)
            k = seen.get((lo, hi), 0)
            seen[(lo, hi)] = k + 1
            out[(lo, hi, k)] = int(o) if a < c else int(Outcome.B if o == 0 else 0 if o == 1 else o)
        return out

    outs = [kth_outcomes(r) for r in runs]
    shared = 0
    for x in outs[1:]:
        common = outs[0].keys() & x.keys()
        shared += len(common)
        assert all(outs[0][key] == x[key] for key in common)
    assert shared > 50  # the runs did play the same pairs often enough to compare
    # the streams differ between outcome seeds, and draws are not all alike
    other = run_arena(arena, "random", 150, init=20, init_seed=7, outcome_seed=[4, 1], seed=0)
    assert not np.array_equal(other.battles.outcome, runs[0].battles.outcome)
    assert len(set(outs[0].values())) > 1


def test_run_arena_bad_input():
    arena = SimulatedArena(random_ratings(4, seed=0))
    with pytest.raises(InputError, match="non-negative"):
        run_arena(arena, "random", -1)
    with pytest.raises(InputError, match="batch"):
        run_arena(arena, "random", 5, batch=0)
    with pytest.raises(InputError, match="recorded steps"):
        run_arena(arena, "random", 5, record=(10,))
    with pytest.raises(InputError, match="unknown strategy"):
        run_arena(arena, "oracle", 5)
    with pytest.raises(InputError, match="outcome_seed"):
        run_arena(arena, "random", 5, outcome_seed=[-1])


# --------------------------------------------------------------------------- the experiment
def test_selection_experiment_json_shape_and_values(tmp_path):
    res = run_selection_experiment(
        n_models=6, strategies=["random", "d-opt"], init=20, steps=[10, 30], seeds=2
    )
    d = json.loads(json.dumps(res.to_dict()))
    assert set(d["strategies"]) == {"random", "d-opt"}
    for v in d["strategies"].values():
        assert set(v) == {"pairwise", "a_info", "d_info", "mean"}
        assert set(v["pairwise"]) == {"10", "30"} and all(
            len(x) == 2 for x in v["pairwise"].values()
        )
        assert 0 <= v["mean"] <= 1
        # information only grows as battles are added
        for key in ("a_info", "d_info"):
            assert all(b >= a for a, b in zip(v[key]["10"], v[key]["30"], strict=True))
    assert d["settings"]["mode"] == "simulation"
    png = plot_selection_experiment(res, tmp_path / "sel.png")
    assert png.stat().st_size > 10_000


@pytest.mark.filterwarnings("ignore::stablearena.StableArenaWarning")
def test_the_bound_at_every_step_is_above_every_design_in_expectation():
    """``bound_seeds``: at each recorded step the best allocation's E[pairwise] is at least
    each design's and the even allocation's, and ``best_gain`` is the mean difference."""
    res = run_selection_experiment(
        n_models=6,
        strategies=["random", "a-opt", "rank-opt"],
        init=20,
        steps=[10, 40],
        seeds=2,
        bound_seeds=1,
    )
    (b,) = res.bound
    assert b["battles"] == 60 and len(b["best_by_step"]) == len(b["uniform_by_step"]) == 2
    assert b["best"] == b["best_by_step"][-1] and b["uniform"] == b["uniform_by_step"][-1]
    assert all(x >= u - 1e-12 for x, u in zip(b["best_by_step"], b["uniform_by_step"], strict=True))
    assert b["best_gain"] == pytest.approx(
        np.mean(b["best_by_step"]) - np.mean(b["uniform_by_step"])
    )
    for name in res.strategies:  # seed 0 is the bound's seed
        expected = res.expected[name][0]
        assert all(e <= x + 1e-9 for e, x in zip(expected, b["best_by_step"], strict=True))
    json.dumps(res.to_dict())  # serialisable


def test_battles_to_target_interpolates_the_first_crossing():
    steps = [0, 50, 100, 150, 200]
    # crosses 0.80 between 50 (0.78) and 100 (0.82): 50 + (0.02/0.04)·50 = 75
    assert battles_to_target(steps, [0.7, 0.78, 0.82, 0.79, 0.85], 0.80) == pytest.approx(75.0)
    # the first crossing counts, even if the curve dips below again
    assert battles_to_target(steps, [0.7, 0.81, 0.79, 0.9, 0.9], 0.80) == pytest.approx(
        0 + (0.10 / 0.11) * 50
    )
    assert battles_to_target(steps, [0.9, 0.9, 0.9, 0.9, 0.9], 0.80) == 0.0
    assert battles_to_target(steps, [0.7, 0.7, 0.7, 0.7, 0.79], 0.80) is None
    assert battles_to_target(steps, [0.7, 0.7, 0.7, 0.7, 0.80], 0.80) == 200.0
    # the baseline reaches its own target, whatever the rounding of its seed mean
    assert battles_to_target(steps, [0.7, 0.7, 0.7, 0.7, 0.80], 0.80 + 1e-15) == 200.0
    with pytest.raises(InputError, match="same length"):
        battles_to_target(steps, [0.7, 0.8], 0.8)


def test_selection_experiment_paired_summary_and_battles_to_target():
    res = run_selection_experiment(
        n_models=6, strategies=["random", "d-opt"], init=20, steps=[20, 40], grid=10, seeds=3
    )
    assert res.curve_steps == (0, 10, 20, 30, 40)
    np.testing.assert_array_equal(res.pairwise["d-opt"], res.curves["d-opt"][:, [2, 4]])
    d = res.pairwise["d-opt"].mean(axis=1) - res.pairwise["random"].mean(axis=1)
    p = res.paired("d-opt")
    assert p["mean_diff"] == pytest.approx(d.mean())
    assert p["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(3))
    assert p["won"] + p["tied"] + p["lost"] == 3 and p["won"] == int((d > 0).sum())
    target = res.curves["random"][:, -1].mean()
    assert res.target() == pytest.approx(target)
    reach = res.battles_to_target("d-opt")
    assert reach["battles"] == battles_to_target(
        res.curve_steps, res.curves["d-opt"].mean(axis=0), target
    )
    assert res.battles_to_target("random")["battles"] <= 40
    summary = json.loads(json.dumps(res.to_dict()))["summary"]["d-opt"]
    assert summary["paired"]["mean_diff"] == pytest.approx(p["mean_diff"])
    assert 0 < summary["expected_pairwise"] < 1 and summary["paired_expected"] is not None
    # the same seeds in worker processes give the same figures
    par = run_selection_experiment(
        n_models=6,
        strategies=["random", "d-opt"],
        init=20,
        steps=[20, 40],
        grid=10,
        seeds=3,
        workers=2,
    )
    np.testing.assert_array_equal(par.curves["d-opt"], res.curves["d-opt"])


def test_selection_experiment_without_the_baseline_has_no_paired_summary():
    res = run_selection_experiment(n_models=6, strategies=["d-opt"], init=20, steps=[20], seeds=2)
    assert res.baseline is None and res.paired("d-opt") is None
    assert res.battles_to_target("d-opt") is None


def test_selection_experiment_fitted_mode(llmfao_path):
    df = pd.read_csv(llmfao_path)
    log = Battles.from_arrays(df.left, df.right, df.winner, annotator=df.worker)
    res = run_selection_experiment(
        log, fit="rao-kupper", strategies=["random", "rank-opt"], init=100, steps=[20], seeds=1
    )
    st = res.settings
    assert st["mode"] == "fitted" and st["n_models"] == 59
    assert st["fit"]["family"] == "rao-kupper" and st["fit"]["annotators"] == 124
    assert res.expected and 0.5 < res.mean_pairwise("rank-opt") <= 1


def test_ranking_asymptotics_objective_gradient_and_bound():
    arena = SimulatedArena(random_ratings(6, spread=150, seed=2), rule="paper")
    asym = RankingAsymptotics.of(arena)
    # a Bradley–Terry-type arena: m-ELO's limit is the truth; ties halve the variance of W
    np.testing.assert_allclose(asym.limit, asym.truth, atol=1e-9)
    np.testing.assert_allclose(asym.var, asym.sens / 2, atol=1e-12)
    iu, ju = np.triu_indices(6, 1)
    n = np.random.default_rng(0).uniform(1, 5, len(iu))
    _, grad = asym._objective(n)
    for k in (0, 4, 11):
        e = np.zeros(len(iu))
        e[k] = 1e-6
        fd = (asym._objective(n + e)[0] - asym._objective(n - e)[0]) / 2e-6
        assert grad[k] == pytest.approx(fd, rel=1e-5)
    best, alloc = asym.best_allocation(200)
    assert alloc.sum() / 2 == pytest.approx(200)
    assert best >= asym.uniform_pairwise(200) and best == pytest.approx(
        asym.expected_pairwise(alloc), abs=1e-9
    )
    least = asym.least_battles(asym.uniform_pairwise(200), 200)
    assert least is not None and least <= 200
    assert asym.least_battles(1.0, 200) is None


@pytest.mark.filterwarnings("ignore::stablearena.StableArenaWarning")
def test_expected_pairwise_predicts_the_realized_metric():
    # the normal approximation against Monte Carlo: m-ELO refitted on many simulated logs of
    # one allocation misorders, on average, what the approximation says
    ratings = random_ratings(8, spread=60, seed=7)
    arena = SimulatedArena(ratings, rule="paper")
    asym = RankingAsymptotics.of(arena)
    alloc = np.full((8, 8), 40.0)
    np.fill_diagonal(alloc, 0.0)
    iu, ju = np.triu_indices(8, 1)
    a = np.repeat(iu, 40)
    b = np.repeat(ju, 40)
    rng = np.random.default_rng(0)
    from stablearena.analysis.metrics import pairwise_agreement
    from stablearena.data.simulate import sample_outcomes

    z = ELO_SCALE * (ratings[a] - ratings[b])
    vals = []
    for _ in range(200):
        o = sample_outcomes(z, rng, "paper")
        fitted = MElo().fit(
            Battles(
                models=arena.models,
                model_a=a.astype(np.int32),
                model_b=b.astype(np.int32),
                outcome=o,
            )
        )
        vals.append(pairwise_agreement(arena.truth(), fitted.scores))
    assert np.mean(vals) == pytest.approx(
        asym.expected_pairwise(alloc), abs=3 * np.std(vals) / np.sqrt(200) + 0.005
    )


def test_selection_experiment_does_not_depend_on_the_list_of_strategies():
    kw = dict(n_models=8, init=30, steps=[20, 40], seeds=2)
    both = run_selection_experiment(strategies=["random", "d-opt"], **kw)
    alone = run_selection_experiment(strategies=["d-opt"], **kw)
    np.testing.assert_array_equal(both.pairwise["d-opt"], alone.pairwise["d-opt"])
    np.testing.assert_array_equal(both.d_info["d-opt"], alone.d_info["d-opt"])


def test_selection_figure_has_every_panel_filled(tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    names = ["random", "d-opt", "rank-opt"]
    res = run_selection_experiment(
        n_models=6, strategies=names, init=20, steps=[20, 40], grid=10, seeds=2
    )
    fig = selection_figure(res)
    axes = [ax for ax in fig.get_axes() if ax.get_label() != "<colorbar>"]
    # five panels above (pairwise, paired difference, battles-to-target, A-Info, D-Info) and one
    # heatmap per strategy below; none empty
    assert len(axes) == 5 + len(names)
    for ax in axes:
        assert ax.get_title() and ax.get_xlabel()
        assert ax.lines or ax.images or ax.patches or ax.collections
    curves, paired, target = axes[0], axes[1], axes[2]
    assert curves.get_ylabel().startswith("pairwise metric")
    # one line per strategy (plus the target line), one ±SE band per strategy
    assert [ln.get_label() for ln in curves.lines[:1]] == ["random"]
    assert {ln.get_label() for ln in curves.lines} >= set(names)
    assert sum(isinstance(c, PolyCollection) for c in curves.collections) == len(names)
    assert {ln.get_label() for ln in paired.lines} >= {"d-opt", "rank-opt"}
    assert len(target.patches) == len(names)
    assert [t.get_text() for t in target.get_yticklabels()] == names
    assert sum(1 for ax in axes if ax.images) == len(names)
    png = plot_selection_experiment(res, tmp_path / "sel.png")
    img = plt.imread(png)
    assert img.shape[1] > 1500 and img[..., :3].std() > 0.05  # not blank
    no_base = run_selection_experiment(
        n_models=6, strategies=["d-opt"], init=20, steps=[20], seeds=1
    )
    axes = [ax for ax in selection_figure(no_base).get_axes() if ax.get_label() != "<colorbar>"]
    assert len(axes) == 3 + 1 and all(ax.lines or ax.images for ax in axes)


def test_selection_experiment_design_estimate_option():
    kw = dict(n_models=8, strategies=["random", "d-opt"], init=30, steps=[40], seeds=2)
    eb = run_selection_experiment(**kw)
    plug = run_selection_experiment(**kw, estimate="plug-in")
    assert eb.settings["estimate"] == "empirical-bayes" and plug.settings["estimate"] == "plug-in"
    np.testing.assert_array_equal(eb.pairwise["random"], plug.pairwise["random"])  # no estimate
    assert not np.array_equal(eb.choices["d-opt"], plug.choices["d-opt"])
    with pytest.raises(InputError, match="estimate"):
        run_selection_experiment(**kw, estimate="map")


def test_d_opt_gains_information_faster_than_random_in_simulation():
    res = run_selection_experiment(
        n_models=8, strategies=["random", "d-opt"], init=30, steps=[100, 200], seeds=2
    )
    assert res.growth("d-opt", "d_info") > res.growth("random", "d_info")


def test_selection_experiment_bad_input():
    with pytest.raises(InputError, match="either"):
        run_selection_experiment()
    with pytest.raises(InputError, match="unknown strategy"):
        run_selection_experiment(n_models=5, strategies=["psychic"])
    with pytest.raises(InputError, match="positive"):
        run_selection_experiment(n_models=5, steps=[0, 10])
    with pytest.raises(InputError, match="at least two"):
        run_selection_experiment(n_models=1)


def test_selection_experiment_replays_llmfao(llmfao_path):
    df = pd.read_csv(llmfao_path)
    log = Battles.from_arrays(df.left, df.right, df.winner, annotator=df.worker)
    res = run_selection_experiment(
        log, strategies=["random", "d-opt"], init=100, steps=[50], seeds=1
    )
    assert res.settings["n_models"] == 59 and res.settings["n_battles_in_log"] == 8931
    assert 0.5 < res.mean_pairwise("d-opt") <= 1


def test_cli_next_pairs_and_experiment(tmp_path, llmfao_path):
    from typer.testing import CliRunner

    from stablearena.cli import app

    runner = CliRunner()
    out = runner.invoke(
        app, ["next-pairs", str(llmfao_path), "-k", "3", "--annotator", "58", "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    payload = json.loads(out.output)
    assert len(payload["pairs"]) == 3 and payload["excluded_pairs"] > 0
    judged = pd.read_csv(llmfao_path).query("worker == 58")
    seen = {frozenset(p) for p in zip(judged.left, judged.right, strict=True)}
    assert all(frozenset((p["model_a"], p["model_b"])) not in seen for p in payload["pairs"])
    res = runner.invoke(
        app,
        [
            "experiment",
            "selection",
            "--simulate",
            "5",
            "--strategies",
            "random,d-opt",
            "--init",
            "10",
            "--steps",
            "5,10",
            "--seeds",
            "1",
            "--format",
            "json",
            "--output",
            str(tmp_path / "r.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert set(json.loads((tmp_path / "r.json").read_text())["strategies"]) == {"random", "d-opt"}
    assert (tmp_path / "r.png").exists()


def test_cli_next_pairs_design_estimate(llmfao_path, cli):
    base = ["next-pairs", str(llmfao_path), "-k", "3", "--format", "json"]
    eb = json.loads(cli(*base)[1])
    plug = json.loads(cli(*base, "--estimate", "plug-in")[1])
    assert eb["estimate"] == "empirical-bayes" and plug["estimate"] == "plug-in"
    # the gains are evaluated at different ratings
    assert [p["gain"] for p in eb["pairs"]] != [p["gain"] for p in plug["pairs"]]
    code, _, err = cli(*base, "--estimate", "map")
    assert code == 2 and "estimate must be one of" in err


def test_cli_next_pairs_rank_opt_and_default(llmfao_path, cli):
    from stablearena.design.selection import DEFAULT_STRATEGY

    base = ["next-pairs", str(llmfao_path), "-k", "3", "--distinct", "--format", "json"]
    rank = json.loads(cli(*base, "-s", "rank-opt")[1])
    assert rank["strategy"] == "rank-opt" and "misordered" in rank["criterion"]
    assert len({(p["model_a"], p["model_b"]) for p in rank["pairs"]}) == 3
    plug = json.loads(cli(*base, "-s", "rank-opt", "--weights", "plug-in")[1])
    assert [p["gain"] for p in plug["pairs"]] != [p["gain"] for p in rank["pairs"]]
    assert json.loads(cli(*base)[1])["strategy"] == DEFAULT_STRATEGY
    code, _, err = cli(*base, "-s", "rank-opt", "--weights", "psychic")
    assert code == 2 and "weights must be one of" in err


def test_cli_experiment_fitted_mode_needs_a_log(cli):
    code, _, err = cli("experiment", "selection", "--simulate", "5", "--fit", "rao-kupper")
    assert code == 2 and "--fit" in err


def test_paired_difference_counts_seeds_and_refuses_empty_input():
    from stablearena.analysis.metrics import paired_difference

    p = paired_difference([0.02, 0.0, -0.01, 0.03])
    assert p["won"] == 2 and p["tied"] == 1 and p["lost"] == 1
    assert p["mean_diff"] == pytest.approx(0.01)
    assert p["se"] == pytest.approx(np.std([0.02, 0.0, -0.01, 0.03], ddof=1) / 2)
    assert paired_difference([0.5])["se"] == 0.0
    with pytest.raises(InputError, match="non-empty"):
        paired_difference([])
