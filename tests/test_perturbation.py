"""Perturbations of annotators and annotator profiles (docs/methods/metrics.md; am-ELO §5.5)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena import Battles, InputError, Outcome, StableArenaWarning
from stablearena.simulation.perturbation import (
    PERTURBATIONS,
    perturb_annotators,
    perturb_outcomes,
    simulate_arena,
)

A, B, T, TB = Outcome.A, Outcome.B, Outcome.TIE, Outcome.TIE_BOTH_BAD
ALL = np.array([A, B, T, TB] * 2500, dtype=np.int8)


def test_flip_swaps_decisive_votes_and_keeps_ties():
    out = perturb_outcomes(ALL, "flip", np.random.default_rng(0))
    np.testing.assert_array_equal(out, np.array([B, A, T, TB] * 2500))


def test_equal_makes_every_vote_a_tie():
    out = perturb_outcomes(ALL, "equal", np.random.default_rng(0))
    assert np.all(out == T)


def test_random_turns_decisive_votes_into_tie_or_opposite_half_and_half():
    out = perturb_outcomes(ALL, "random", np.random.default_rng(0))
    a, b = ALL == A, ALL == B
    assert set(np.unique(out[a])) == {B, T} and set(np.unique(out[b])) == {A, T}
    assert abs(np.mean(out[a | b] == T) - 0.5) < 0.03
    np.testing.assert_array_equal(out[ALL >= T], ALL[ALL >= T])


def test_mixed_draws_each_vote_from_the_three_perturbations():
    out = perturb_outcomes(ALL, "mixed", np.random.default_rng(0))
    a = ALL == A
    # from A: flip (B) 1/3 + random (B or T, 1/6 each) + equal (T) 1/3 → B 1/2, T 1/2
    assert set(np.unique(out[a])) == {B, T}
    assert abs(np.mean(out[a] == B) - 0.5) < 0.04
    # a tie stays a tie under flip and random, and is a tie under equal; a both-bad tie
    # becomes a plain tie only under equal (1/3)
    assert np.all(out[ALL == T] == T)
    assert abs(np.mean(out[ALL == TB] == T) - 1 / 3) < 0.04


def test_unknown_kind():
    with pytest.raises(InputError, match="perturbation kind"):
        perturb_outcomes(ALL, "swap", np.random.default_rng(0))


def arena(seed=0, n_ann=20):
    return simulate_arena(6, 4000, profiles={"honest": n_ann}, seed=seed).battles


@pytest.mark.parametrize("kind", PERTURBATIONS)
def test_perturb_annotators_changes_only_the_chosen_annotators(kind):
    b = arena()
    p = perturb_annotators(b, kind, 0.3, seed=1)
    assert p.perturbed.sum() == 6
    untouched = ~p.perturbed[b.annotator]
    np.testing.assert_array_equal(p.battles.outcome[untouched], b.outcome[untouched])
    assert np.any(p.battles.outcome[~untouched] != b.outcome[~untouched])
    assert p.battles.models == b.models and p.battles.annotators == b.annotators
    assert len(p.perturbed_names) == 6


def test_perturbation_is_seeded():
    b = arena()
    p1, p2 = (
        perturb_annotators(b, "mixed", 0.3, seed=5),
        perturb_annotators(b, "mixed", 0.3, seed=5),
    )
    np.testing.assert_array_equal(p1.perturbed, p2.perturbed)
    np.testing.assert_array_equal(p1.battles.outcome, p2.battles.outcome)
    p3 = perturb_annotators(b, "mixed", 0.3, seed=6)
    assert not np.array_equal(p1.battles.outcome, p3.battles.outcome)


def test_eligible_restricts_the_draw():
    b = arena()
    names = list(b.annotators[:5])
    p = perturb_annotators(b, "flip", 0.4, seed=0, eligible=names)
    assert p.perturbed.sum() == 2 and set(p.perturbed_names) <= set(names)
    mask = np.zeros(len(b.annotators), bool)
    mask[-4:] = True
    q = perturb_annotators(b, "flip", 0.5, seed=0, eligible=mask)
    assert np.array_equal(q.perturbed & ~mask, np.zeros_like(mask))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kind": "flip", "fraction": 1.5}, r"\[0, 1\]"),
        ({"kind": "flip", "fraction": -0.1}, r"\[0, 1\]"),
        ({"kind": "nope", "fraction": 0.1}, "perturbation kind"),
        ({"kind": "flip", "fraction": 0.1, "eligible": ["ghost"]}, "unknown annotator"),
        ({"kind": "flip", "fraction": 0.1, "eligible": np.ones(3, bool)}, "entries"),
    ],
)
def test_bad_perturbation_arguments(kwargs, match):
    with pytest.raises(InputError, match=match):
        perturb_annotators(arena(), **kwargs)


def test_perturbing_needs_annotators():
    b = arena()
    plain = Battles(models=b.models, model_a=b.model_a, model_b=b.model_b, outcome=b.outcome)
    with pytest.raises(InputError, match="annotator column"):
        perturb_annotators(plain, "flip", 0.1)


def test_more_than_half_warns():
    with pytest.warns(StableArenaWarning, match="above half"):
        perturb_annotators(arena(), "flip", 0.6, seed=0)


@settings(max_examples=30, deadline=None)
@given(
    kind=st.sampled_from(PERTURBATIONS),
    fraction=st.floats(0, 0.5),
    seed=st.integers(0, 2**31),
)
def test_property_only_perturbed_votes_change_and_counts_match(kind, fraction, seed):
    b = arena(seed % 7, n_ann=13)
    p = perturb_annotators(b, kind, fraction, seed=seed)
    assert p.perturbed.sum() == round(fraction * 13)
    assert len(p.battles) == len(b)
    same = ~p.perturbed[b.annotator]
    np.testing.assert_array_equal(p.battles.outcome[same], b.outcome[same])


# ------------------------------------------------------------------------------ profiles
def test_profiles_do_what_they_say():
    sim = simulate_arena(
        8,
        40_000,
        profiles={"honest": 4, "random": 2, "always_tie": 2, "flipper": 2, "always_a": 2},
        seed=3,
    )
    b = sim.battles
    prof = np.array(sim.profiles)[b.annotator]
    assert np.all(b.outcome[prof == "always_tie"] == Outcome.TIE)
    assert np.all(b.outcome[prof == "always_a"] == Outcome.A)
    assert np.all(sim.abilities[sim.of_profile("flipper")] < 0)
    assert np.all(sim.abilities[sim.of_profile("random", "always_tie", "always_a")] == 0)
    assert np.all((sim.abilities[sim.honest] >= 0.5) & (sim.abilities[sim.honest] <= 1.5))
    # the stronger model wins: often for honest, rarely for flippers, half the time for random
    stronger_a = sim.true_ratings[b.model_a] > sim.true_ratings[b.model_b]
    won_stronger = np.where(stronger_a, b.outcome == Outcome.A, b.outcome == Outcome.B)
    rate = {p: won_stronger[prof == p].mean() for p in ("honest", "flipper", "random")}
    assert rate["honest"] > 0.65 and rate["flipper"] < 0.35 and abs(rate["random"] - 0.5) < 0.03


def test_simulated_arena_is_seeded_and_names_reveal_nothing():
    s1 = simulate_arena(5, 1000, profiles={"honest": 3, "flipper": 3}, seed=4)
    s2 = simulate_arena(5, 1000, profiles={"honest": 3, "flipper": 3}, seed=4)
    np.testing.assert_array_equal(s1.battles.outcome, s2.battles.outcome)
    assert s1.profiles == s2.profiles
    assert all(name.startswith("ann_") for name in s1.battles.annotators)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"profiles": {"saint": 3}}, "unknown annotator profile"),
        ({"profiles": {"honest": 0}}, "at least one annotator"),
        ({"ability_range": (1.0, 0.5)}, "ability_range"),
        ({"true_ratings": [1000.0, 1100.0]}, "true_ratings"),
    ],
)
def test_bad_profile_arguments(kwargs, match):
    with pytest.raises(InputError, match=match):
        simulate_arena(4, 100, **kwargs)


# ------------------------------------------------------------------------------ the experiment
def test_perturbation_experiment_on_a_small_simulated_arena():
    import json

    from stablearena.simulation.experiments.perturbation import (
        PerturbationConfig,
        run_perturbation,
        simulated_perturbation_arena,
    )

    b = simulated_perturbation_arena(10, 30, 8_000, seed=3)
    cfg = PerturbationConfig(kinds=("flip", "mixed"), ratios=(0.3,), seeds=2, elo_shuffles=20)
    res = run_perturbation(b, cfg)
    assert res.n_annotators == 30 and res.thresholds == (0.0, 0.15)
    assert len(res.runs) == 4 and len(res.summary) == 2
    for rec in res.summary:
        assert rec["consistency_am-elo"] >= rec["consistency_m-elo"]
        assert rec["f1@0"] >= 0.9
        assert 0 <= rec["f1_unflagged@0"] <= 1
    for run in res.runs:
        assert len(run["perturbed"]) == 9
    json.dumps(res.to_dict(), allow_nan=False)


def test_perturbation_experiment_is_reproducible():
    from stablearena.simulation.experiments.perturbation import PerturbationConfig, run_perturbation

    b = simulate_arena(6, 3_000, profiles={"honest": 12}, seed=5).battles
    cfg = PerturbationConfig(
        kinds=("random",), ratios=(0.25,), seeds=2, methods=("m-elo", "am-elo")
    )
    r1, r2 = run_perturbation(b, cfg), run_perturbation(b, cfg)
    assert r1.summary == r2.summary and r1.runs == r2.runs


@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"kinds": ("swap",)}, "--kind"),
        ({"ratios": (0.7,)}, "--ratios"),
        ({"seeds": 0}, "--seeds"),
        ({"methods": ("m-elo",)}, "--methods"),
        ({"min_records": 10**6}, "lower --min-records"),
    ],
)
def test_perturbation_experiment_bad_config(cfg, match):
    from stablearena.simulation.experiments.perturbation import PerturbationConfig, run_perturbation

    with pytest.raises(InputError, match=match):
        run_perturbation(arena(), PerturbationConfig(**cfg))


def test_screened_protocol_counts_only_the_perturbed_as_anomalous():
    """Annotators anomalous before any perturbation are screened out first (the Stable Arena
    keeps them out); unscreened, the paper's F1 counts finding them as false alarms."""
    from stablearena.simulation.experiments.perturbation import PerturbationConfig, run_perturbation

    sim = simulate_arena(10, 16_000, profiles={"honest": 27, "flipper": 3}, seed=6)
    b = sim.battles
    planted = {b.annotators[k] for k in np.flatnonzero(sim.of_profile("flipper"))}
    cfg = dict(kinds=("flip",), ratios=(0.3,), seeds=2, methods=("m-elo", "am-elo"))
    screened = run_perturbation(b, PerturbationConfig(**cfg))
    raw = run_perturbation(b, PerturbationConfig(**cfg, screen=False))
    out = {d["annotator"] for d in screened.screened_out if d["status"] == "excluded"}
    assert out == planted
    assert screened.n_annotators == 27 and raw.n_annotators == 30
    assert set(raw.baseline_flagged["0"]) == planted and screened.baseline_flagged["0"] == []
    assert screened.summary[0]["f1@0"] == 1.0
    assert raw.summary[0]["f1@0"] < 0.9  # the planted flippers count as false alarms (or misses)
    assert raw.summary[0]["f1_unflagged@0"] == 1.0


def test_a_perturbed_log_without_an_mle_is_reported_not_averaged(monkeypatch):
    import stablearena.simulation.experiments.perturbation as pert
    from stablearena.errors import ConvergenceError

    real, calls = pert._fit, {"am-elo": 0}

    def flaky(method, battles, config):
        if method == "am-elo":
            calls["am-elo"] += 1
            if calls["am-elo"] == 3:  # the clean fit, then seed 0's, then seed 1's fails
                raise ConvergenceError("am-ELO has no maximum-likelihood solution (planted)")
        return real(method, battles, config)

    monkeypatch.setattr(pert, "_fit", flaky)
    b = simulate_arena(6, 3_000, profiles={"honest": 12}, seed=5).battles
    cfg = pert.PerturbationConfig(
        kinds=("flip",), ratios=(0.25,), seeds=3, methods=("m-elo", "am-elo"), screen=False
    )
    res = pert.run_perturbation(b, cfg)
    (rec,) = res.summary
    assert rec["failed_am-elo"] == 1 and rec["failed_m-elo"] == 0
    assert "failed_am-elo" in res.runs[1] and "consistency_am-elo" not in res.runs[1]
    ok = [r for r in res.runs if "failed_am-elo" not in r]
    assert rec["consistency_am-elo"] == pytest.approx(
        np.mean([r["consistency_am-elo"] for r in ok])
    )
    assert rec["f1@0"] == pytest.approx(np.mean([r["f1@0"] for r in ok]))
    assert any("1 of 3 perturbed logs" in n and "planted" in n for n in res.notes)
