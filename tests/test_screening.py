"""The Stable Arena loop (docs/methods/annotators.md; am-ELO Algorithm 3): screening over a growing log."""

from __future__ import annotations

import numpy as np
import pytest

from stablearena import Battles, InputError
from stablearena.crowd.screening import StableArena
from stablearena.raters.annotator import UNKNOWN_ANNOTATOR, AmElo
from stablearena.simulation.perturbation import simulate_arena


def split(battles: Battles, parts: int) -> list[Battles]:
    idx = np.array_split(np.arange(len(battles)), parts)
    return [battles.take(i) for i in idx]


def test_an_annotator_below_delta_is_left_out_then_admitted():
    sim = simulate_arena(8, 8_000, profiles={"honest": 8}, seed=0, shuffle_annotators=False)
    b = sim.battles
    late = b.annotators[0]
    # annotator 0 votes 30 times in the first batch; the rest of its votes arrive later
    first_mask = (b.annotator != 0) & (np.arange(len(b)) < 4000)
    first_mask |= (b.annotator == 0) & (np.cumsum(b.annotator == 0) <= 30)
    arena = StableArena(min_records=50)
    s1 = arena.update(b.take(first_mask))
    d1 = {d.annotator: d for d in s1.decisions}
    assert d1[late].status == "left_out" and "30 records < min_records 50" in d1[late].reason
    assert d1[late].change == "new"
    s2 = arena.update(b.take(~first_mask))
    d2 = {d.annotator: d for d in s2.decisions}
    assert d2[late].status == "included" and d2[late].change == "admitted"
    assert [d.annotator for d in s2.changes()] == [late]
    assert s2.n_battles == len(b) and s2.step == 2


def test_exclude_policy_keeps_flagged_annotators_out_of_later_fits():
    sim = simulate_arena(10, 12_000, profiles={"honest": 12, "flipper": 3}, seed=1)
    b = sim.battles
    flippers = {sim.battles.annotators[k] for k in np.flatnonzero(sim.of_profile("flipper"))}
    arena = StableArena(min_records=20, policy="exclude")
    first, second = split(b, 2)
    s1 = arena.update(first)
    excluded1 = {d.annotator for d in s1.decisions if d.status == "excluded"}
    assert excluded1 == flippers
    assert {d.annotator for d in s1.changes() if d.change == "excluded"} == flippers
    s2 = arena.update(second)
    d2 = {d.annotator: d for d in s2.decisions}
    assert all(d2[f].status == "excluded" and "earlier round" in d2[f].reason for f in flippers)
    assert arena.excluded == flippers
    # the published ratings are a plain am-ELO fit on everyone else's votes
    keep = ~sim.of_profile("flipper")[b.annotator]
    ref = AmElo().fit(b.take(keep))
    np.testing.assert_allclose(s2.fitted.scores, ref.scores, atol=1e-12)


def test_warn_policy_flags_but_keeps_them_in_the_fit():
    sim = simulate_arena(10, 12_000, profiles={"honest": 12, "flipper": 3}, seed=1)
    arena = StableArena(min_records=20, policy="warn")
    step = arena.update(sim.battles)
    flagged = {d.annotator for d in step.decisions if d.status == "flagged"}
    names = sim.battles.annotators
    assert flagged == {names[k] for k in np.flatnonzero(sim.of_profile("flipper"))}
    assert step.fitted.included.all() and not arena.excluded
    assert all("flagged: ability" in d.reason for d in step.decisions if d.status == "flagged")


@pytest.mark.parametrize("bad", ["random", "always_tie", "flipper", "always_a"])
def test_each_planted_bad_annotator_is_caught(bad):
    sim = simulate_arena(10, 15_000, profiles={"honest": 12, bad: 2}, seed=2)
    arena = StableArena(min_records=50, ability_threshold=0.2, policy="exclude")
    step = arena.update(sim.battles)
    status = np.array([d.status for d in step.decisions])
    by_name = dict(zip([d.annotator for d in step.decisions], status, strict=True))
    names = sim.battles.annotators
    got = np.array([by_name[n] for n in names])
    assert np.all(got[sim.of_profile(bad)] == "excluded")
    assert np.all(got[sim.honest] == "included")


def test_batches_with_different_models_and_no_annotator_column():
    sim = simulate_arena(6, 3_000, profiles={"honest": 4}, seed=3)
    b = sim.battles
    first, second = split(b, 2)
    plain = Battles(
        models=second.models, model_a=second.model_a, model_b=second.model_b, outcome=second.outcome
    )
    arena = StableArena(min_records=10)
    arena.update(first)
    step = arena.update(plain)
    assert UNKNOWN_ANNOTATOR in step.fitted.annotators
    assert step.n_battles == len(b)
    assert set(step.fitted.models) == set(b.models)
    d = step.to_dict()
    assert d["step"] == 2 and len(d["decisions"]) == len(step.fitted.annotators)
    assert set(d["decisions"][0]) >= {"annotator", "status", "change", "reason", "ability"}
    frame = step.decision_frame()
    assert list(frame.annotator) == [x.annotator for x in step.decisions]


def test_confidence_option_passes_through():
    sim = simulate_arena(8, 6_000, profiles={"honest": 8, "random": 4}, seed=4)
    loose = StableArena(min_records=10, ability_threshold=0.3).update(sim.battles)
    strict = StableArena(min_records=10, ability_threshold=0.3, confidence=0.99).update(sim.battles)
    assert sum(d.status == "flagged" for d in strict.decisions) <= sum(
        d.status == "flagged" for d in loose.decisions
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"policy": "ban"}, "policy"),
        ({"exclude_flagged": True}, "StableArena arguments"),
        ({"min_records": -5}, "min_records"),
        ({"normalization": "median"}, "normalization"),
    ],
)
def test_bad_loop_options(kwargs, match):
    with pytest.raises(InputError, match=match):
        StableArena(**kwargs)


def test_bad_batches():
    arena = StableArena()
    with pytest.raises(InputError, match="no battles yet"):
        _ = arena.log
    b = simulate_arena(4, 100, profiles={"honest": 2}, seed=0).battles
    with pytest.raises(InputError, match="empty"):
        arena.update(b.take(np.zeros(len(b), bool)))
    with pytest.raises(InputError, match="takes Battles"):
        arena.update(b.counts())  # type: ignore[arg-type]


# ------------------------------------------------------------------ screening a fixed log
def test_screen_log_removes_the_planted_flippers_and_refits_without_them():
    from stablearena.crowd.screening import screen_log

    sim = simulate_arena(10, 12_000, profiles={"honest": 12, "flipper": 3}, seed=1)
    b = sim.battles
    flippers = {b.annotators[k] for k in np.flatnonzero(sim.of_profile("flipper"))}
    scr = screen_log(b, min_records=20)
    assert set(scr.excluded) == flippers
    assert all(d.step == 1 and "excluded in round 1" in d.reason for d in scr.removed)
    # the last fit flags nobody, and it is the plain am-ELO fit of the kept log
    assert scr.rounds == 2 and "flagged" not in scr.fitted.status
    assert set(scr.battles.annotators) == set(b.annotators) - flippers
    assert len(scr.battles) == int((~sim.of_profile("flipper")[b.annotator]).sum())
    np.testing.assert_allclose(scr.fitted.scores, AmElo().fit(scr.battles).scores, atol=1e-12)


def test_screen_log_repeats_until_nobody_is_flagged():
    from stablearena.crowd.screening import screen_log

    # a high threshold: excluding the lowest annotators moves the mean-1 scale, so that others
    # fall below it in the next round; the loop runs until a fit flags nobody
    sim = simulate_arena(8, 10_000, profiles={"honest": 20}, seed=4, ability_range=(0.2, 1.8))
    scr = screen_log(sim.battles, min_records=20, ability_threshold=0.75)
    assert scr.rounds >= 3
    assert {d.step for d in scr.removed} == set(range(1, scr.rounds))
    fitted = np.array(scr.fitted.status) == "included"
    assert fitted.sum() == len(scr.battles.annotators)
    assert np.all(scr.fitted.abilities[fitted] >= 0.75)


def test_screen_log_lists_annotators_with_too_few_records():
    from stablearena.crowd.screening import screen_log

    sim = simulate_arena(8, 6_000, profiles={"honest": 6}, seed=0, shuffle_annotators=False)
    b = sim.battles
    keep = (b.annotator != 0) | (np.cumsum(b.annotator == 0) <= 10)
    scr = screen_log(b.take(keep), min_records=50)
    (few,) = scr.removed
    assert few.status == "left_out" and few.annotator == b.annotators[0] and few.records == 10
    assert b.annotators[0] not in scr.battles.annotators


def test_screen_log_warns_when_max_rounds_stops_it():
    from stablearena import StableArenaWarning
    from stablearena.crowd.screening import screen_log

    sim = simulate_arena(10, 12_000, profiles={"honest": 12, "flipper": 3}, seed=1)
    with pytest.warns(StableArenaWarning, match="after 1 rounds"):
        scr = screen_log(sim.battles, min_records=20, max_rounds=1)
    assert len(scr.excluded) == 3 and scr.rounds == 1


@pytest.mark.parametrize(
    "kwargs, match", [({"max_rounds": 0}, "max_rounds"), ({"min_records": -1}, "min_records")]
)
def test_screen_log_bad_options(kwargs, match):
    from stablearena.crowd.screening import screen_log

    sim = simulate_arena(6, 2_000, profiles={"honest": 4}, seed=0)
    with pytest.raises(InputError, match=match):
        screen_log(sim.battles, **kwargs)


def test_screen_log_needs_annotators():
    from stablearena.crowd.screening import screen_log

    b = Battles.from_arrays([0, 1], [1, 2], [0, 1])
    with pytest.raises(InputError, match="annotator column"):
        screen_log(b)


def test_step_on_pair_counts_matches_update_on_the_log():
    sim = simulate_arena(8, 6000, profiles={"honest": 8, "flipper": 2}, seed=5)
    parts = split(sim.battles, 3)
    by_log = StableArena(min_records=50, policy="exclude")
    by_counts = StableArena(min_records=50, policy="exclude")
    so_far = []
    for part in parts:
        so_far.append(part)
        s1 = by_log.update(part)
        log = by_log.log
        s2 = by_counts.step(log.counts(by_annotator=True))
        assert np.allclose(s1.ratings, s2.ratings, atol=1e-4)
        assert [(d.annotator, d.status, d.change) for d in s1.decisions] == [
            (d.annotator, d.status, d.change) for d in s2.decisions
        ]
    assert by_counts.excluded == by_log.excluded and by_counts.excluded


def test_reconsider_readmits_an_excluded_annotator_whose_new_votes_agree():
    sim = simulate_arena(8, 8000, profiles={"honest": 8}, seed=6, shuffle_annotators=False)
    b = sim.battles
    target = b.annotators[0]
    mine = b.annotator == 0
    first = np.arange(len(b)) < 4000
    # in the first half annotator 0 flips every vote; later it votes honestly
    flipped = b.with_outcome(np.where(mine & first, 1 - np.minimum(b.outcome, 1), b.outcome))
    for reconsider in (False, True):
        arena = StableArena(min_records=20, policy="exclude", reconsider=reconsider)
        s1 = arena.update(flipped.take(first))
        assert {d.annotator: d.status for d in s1.decisions}[target] == "excluded"
        s2 = arena.update(flipped.take(~first))
        d2 = {d.annotator: d for d in s2.decisions}[target]
        if reconsider:
            assert d2.change == "readmitted" and d2.status == "included"
            assert d2.reason.startswith("readmitted: ability")
            assert target not in arena.excluded
        else:
            assert d2.status == "excluded" and target in arena.excluded


# ------------------------------------------------------------------ unconverged fits (issue 25)
def _flipper_log() -> tuple[Battles, list[str]]:
    sim = simulate_arena(10, 4000, profiles={"honest": 30, "flipper": 4}, seed=3)
    flippers = [sim.battles.annotators[k] for k, p in enumerate(sim.profiles) if p == "flipper"]
    return sim.battles, sorted(flippers)


def test_screening_never_excludes_on_an_unconverged_fit():
    import warnings

    from stablearena import StableArenaWarning
    from stablearena.crowd.screening import screen_log

    battles, _ = _flipper_log()
    # one Newton iteration, also when continued warm: never converges, so nobody is excluded
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StableArenaWarning)
        out = screen_log(battles, max_iter=1)
    assert out.excluded == []
    assert any("did not converge" in str(w.message) for w in caught)
    assert not out.fitted.flagged.any()
    # the am-ELO rater's own exclusion round does not act on an unconverged fit either
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fit = AmElo(min_records=50, max_iter=1, exclude_flagged=True).fit(battles)
    assert "excluded" not in fit.status
    assert any("did not converge" in n for n in fit.notes)


def test_converged_fit_continues_an_unconverged_fit_warm():
    import warnings

    from stablearena import StableArenaWarning
    from stablearena.crowd.screening import converged_fit, screen_log

    battles, flippers = _flipper_log()
    rater = AmElo(min_records=50, max_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        cold = rater.fit(battles)
        assert not cold.convergence.converged  # 3 iterations are not enough from the m-ELO start
        warm = converged_fit(rater, battles)
        full = AmElo(min_records=50).fit(battles)
        screened = screen_log(battles, max_iter=3)
    assert warm.convergence.converged
    np.testing.assert_allclose(warm.scores, full.scores, atol=1e-6)
    assert sorted(screened.excluded) == flippers


def test_influence_screening_excludes_an_account_that_only_votes_for_one_model():
    import warnings

    from stablearena import StableArenaWarning
    from stablearena.crowd.screening import screen_log
    from stablearena.data.battles import Outcome

    sim = simulate_arena(10, 8000, profiles={"honest": 20}, seed=5)
    b = sim.battles
    rng = np.random.default_rng(0)
    target = int(np.argsort(sim.true_ratings)[5])
    other = rng.choice(np.setdiff1d(np.arange(10), [target]), 150)
    names = np.array(b.models, dtype=object)
    ann = np.array(b.annotators, dtype=object)
    rigged = Battles.from_arrays(
        np.concatenate([names[b.model_a], np.full(150, names[target], dtype=object)]),
        np.concatenate([names[b.model_b], names[other]]),
        np.concatenate([b.outcome, np.full(150, Outcome.A, dtype=np.int8)]),
        annotator=np.concatenate([ann[b.annotator], np.full(150, "rigger", dtype=object)]),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        plain = screen_log(rigged)
        guarded = screen_log(rigged, influence=True)
        honest = screen_log(b, influence=True)
    assert "rigger" not in plain.excluded
    assert guarded.excluded == ["rigger"]
    reason = next(d.reason for d in guarded.removed if d.annotator == "rigger")
    assert reason.startswith("excluded by influence:") and names[target] in reason
    assert honest.excluded == []
