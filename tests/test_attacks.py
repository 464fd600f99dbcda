"""The attack simulator (stablearena.simulation.attacks): arena, attackers, influence, cost search."""

from __future__ import annotations

import numpy as np
import pytest

from stablearena.data import datasets
from stablearena.errors import InputError
from stablearena.simulation import attacks as A

DATA = str(datasets.path("chatbot-arena-2024"))  # the bundled pair counts


@pytest.fixture(scope="module")
def arena() -> A.HonestArena:
    return A.honest_arena(DATA, fraction=0.01, seed=0)


def test_honest_arena_keeps_the_fraction_and_volumes(arena):
    total = 1_670_250
    assert abs(arena.n_votes - 0.01 * total) < 5 * np.sqrt(0.01 * total)
    rec = np.bincount(arena.counts.annotator, arena.counts.totals)
    assert rec.sum() == arena.n_votes
    # every annotator but the last (cut to the total) has 20–200 votes
    assert rec[:-1].min() >= 20 and rec.max() <= 200
    assert np.isclose(arena.serve.sum(), 1.0) and np.allclose(arena.outcome_p.sum(axis=1), 1.0)


def test_family_parse_round_trips_and_rejects_nonsense():
    for fam in A.FAMILIES:
        assert A.Family.parse(fam.name) == fam
    with pytest.raises(InputError, match="KIND"):
        A.Family.parse("omni+camo")
    with pytest.raises(InputError, match="modifier"):
        A.Family.parse("target+fast/few")


def test_target_only_attacker_votes_only_for_the_target(arena):
    target = int(np.argmax(arena.truth))
    st = A.attack_stream(arena, target, A.Family("target", False, "few"), 200, seed=1)
    i, j = arena.pair_i[st.row], arena.pair_j[st.row]
    winner = np.where(st.outcome == 0, i, j)
    assert len(st.row) == 200 and np.all(winner == target)
    assert set(np.unique(st.account)) == set(range(5))
    assert np.all(np.diff(st.served) > 0)
    # served battles: the target is in a few % of them
    assert st.served[-1] > 10 * 200


def test_camouflaged_attacker_votes_in_every_battle(arena):
    target = int(np.argmax(arena.truth))
    st = A.attack_stream(arena, target, A.Family("target", True, "many"), 500, seed=1)
    assert np.array_equal(st.served, np.arange(1, 501))
    has_t = (arena.pair_i[st.row] == target) | (arena.pair_j[st.row] == target)
    assert np.array_equal(st.greedy, has_t)
    vols = np.bincount(st.account)
    assert vols[:-1].min() >= 50 and vols.max() <= 200


def test_omnipresent_greedy_votes_lift_the_target_more_than_random_votes(arena):
    x0 = A.m_elo_scores(arena.counts)
    order = np.argsort(-x0)
    target = int(order[60])
    st = A.attack_stream(arena, target, A.Family("omni", False, "few"), 400, seed=2)
    c = A.merge_counts(arena.counts, st.counts(400, arena.models, arena))
    x = A.m_elo_scores(c)
    rival = int(order[59])
    assert (x[target] - x[rival]) > (x0[target] - x0[rival]) + 0.05


def test_influence_shift_matches_leave_one_account_out_refit(arena):
    """The one-Newton-step shift of an account ≈ the exact refit without it."""
    c = arena.counts
    x = A.m_elo_scores(c)
    i, j, n, _ = A._pooled(c)
    p = 1 / (1 + np.exp(-(x[i] - x[j])))
    infl = A.account_influence(c, x, A.bt_covariance(x, i, j, n * p * (1 - p)))
    big = int(np.argmax(np.bincount(c.annotator, c.totals)))
    x_wo = A.m_elo_scores(A._without(c, {c.annotators[big]}), x)
    exact = x_wo - x
    # first order: the full fit's covariance ignores the account's own leverage (~10 % here)
    np.testing.assert_allclose(infl.shift[big], exact, atol=0.15 * np.abs(exact).max())
    assert np.corrcoef(infl.shift[big], exact)[0, 1] > 0.99
    assert not infl.flagged.any()  # honest accounts: no false alarm at α = 0.05


def test_influence_flags_a_target_only_account_and_not_camouflage(arena):
    target = int(np.argsort(-arena.truth)[13])
    hits = {}
    for camo in (False, True):
        st = A.attack_stream(arena, target, A.Family("target", camo, "few"), 400, seed=3)
        c = A.merge_counts(arena.counts, st.counts(400, arena.models, arena))
        x = A.m_elo_scores(c)
        i, j, n, _ = A._pooled(c)
        p = 1 / (1 + np.exp(-(x[i] - x[j])))
        infl = A.account_influence(c, x, A.bt_covariance(x, i, j, n * p * (1 - p)))
        att = np.array([a.startswith("x") for a in infl.accounts])
        hits[camo] = (int(infl.flagged[att].sum()), int(infl.flagged[~att].sum()))
        assert "pushes" in infl.reasons(arena.models)[0]
    assert hits[False][0] == 5 and hits[False][1] == 0
    assert hits[True][0] == 0


def test_votes_needed_doubles_then_bisects():
    calls = []

    def lift(v):
        calls.append(v)
        return int(v // 100)

    out = A.votes_needed(lift, (1, 3, 10), 10_000, start=4, precision=1.1)
    assert 100 <= out[1] <= 110 and 300 <= out[3] <= 330 and 1000 <= out[10] <= 1100
    assert len(calls) == len(set(calls)) < 40
    assert A.votes_needed(lambda v: 0, (1,), 64)[1] is None


def test_e_values_are_e_values_under_the_model():
    """E[e] ≤ 1 for a vote drawn from the fitted model (the calibrator 1/(2√p))."""
    from stablearena.data.battles import PairCounts

    x = np.array([0.0, 1.0])
    pj = 1 / (1 + np.exp(-1.0))  # P(model 1 beats model 0)
    one = dict(i=np.array([0]), j=np.array([1]), ties=np.zeros(1), ties_both_bad=np.zeros(1))
    ev_win = A.e_values(
        PairCounts(models=("a", "b"), wins=np.ones(1), losses=np.zeros(1), **one), x
    )
    ev_loss = A.e_values(
        PairCounts(models=("a", "b"), wins=np.zeros(1), losses=np.ones(1), **one), x
    )
    expected = (1 - pj) * np.exp(ev_win[0]) + pj * np.exp(ev_loss[0])
    assert expected <= 1.0


def test_summary_pairs_seeds_against_m_elo():
    recs = []
    for seed in range(3):
        for d, v in (("m-elo", 10), ("am-elo+screen", 30)):
            recs.append(
                {
                    "seed": seed,
                    "family": "target/few",
                    "target": "top",
                    "defence": d,
                    "votes_1": v + seed,
                    "served_1": 100,
                    "votes_3": None,
                    "served_3": None,
                    "votes_10": None,
                    "served_10": None,
                }
            )
    rows = {r["defence"]: r for r in A.summarise(recs, max_votes={0: 50, 1: 50, 2: 50})}
    assert rows["m-elo"]["votes_1"] == 11 and rows["m-elo"]["ratio_1"] == 1.0
    assert rows["am-elo+screen"]["ratio_1"] == pytest.approx(np.mean([30 / 10, 31 / 11, 32 / 12]))
    assert rows["am-elo+screen"]["censored_3"] == 3 and rows["am-elo+screen"]["votes_3"] == 50


def test_auc_ranks_positives_above_negatives():
    assert A.auc(np.array([3.0, 2.0, 1.0, 0.0]), np.array([1, 1, 0, 0], bool)) == 1.0
    assert A.auc(np.array([0.0, 1.0]), np.array([1, 0], bool)) == 0.0
    assert A.auc(np.array([np.nan, 1.0]), np.array([1, 0], bool)) == 0.0
    assert A.auc(np.array([np.inf, 1.0]), np.array([1, 0], bool)) == 1.0


def run_cli(args: list[str], capsys) -> str:
    """``stablearena ARGS`` in process; its standard output."""
    from stablearena.cli import main

    try:
        main(args)
    except SystemExit as exc:
        assert not exc.code
    return capsys.readouterr().out


def test_rigging_command_runs_resumes_and_summarises(arena, capsys, tmp_path):
    import json

    args = [
        "experiment", "rigging", DATA, "--seeds", "2", "--fraction", "0.01",
        "--families", "target/few", "--targets", "middle", "--defences", "m-elo,m-elo+influence",
        "--max-votes", "400", "--results", str(tmp_path), "--format", "json",
    ]  # fmt: skip
    payload = json.loads(run_cli(args, capsys))
    assert payload["seeds"] == [0, 1] and sorted(p.name for p in tmp_path.iterdir()) == [
        "seed_0.json",
        "seed_1.json",
    ]
    rows = {r["defence"]: r for r in payload["summary"]}
    assert rows["m-elo"]["ratio_1"] == 1.0
    # the selection test catches 5 accounts that vote only for the target: dearer than m-ELO
    assert rows["m-elo+influence"]["ratio_10"] > 1.0
    assert "votes needed" in run_cli([*args[:-2], "--no-run", "--format", "table"], capsys)


def test_capped_scores_equal_am_elo_below_the_cap_and_bound_a_heavy_account(arena):
    import warnings

    from stablearena import StableArenaWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fit = A._screened_am_elo(arena.counts, None, min_records=20)
    a = fit.abilities[fit._fit_annotators]
    np.testing.assert_allclose(A.capped_scores(fit, 1e9), fit.scores, atol=1e-6)
    x = A.capped_scores(fit, 0.5 * a.max())
    assert not np.allclose(x, fit.scores, atol=1e-6)
    # the capped fit is the weighted Bradley–Terry optimum: zero score gradient at those weights
    c = fit.counts
    w = np.clip(a, 0, 0.5 * a.max())[c.annotator]
    p = 1 / (1 + np.exp(-w * (x[c.i] - x[c.j])))
    r = w * (c.score - c.totals * p)
    g = np.bincount(c.i, r, c.n_models) - np.bincount(c.j, r, c.n_models)
    assert np.abs(g).max() < 1e-6 * c.n_comparisons


def _lift(arena, stream, defence, fits, target):
    import warnings

    from stablearena import StableArenaWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        rank0 = A._rank_of(A.defence_scores(defence, arena.counts, fits)[0], target)

        def lift(v: int) -> int:
            c = A.merge_counts(arena.counts, stream.counts(v, arena.models, arena))
            return rank0 - A._rank_of(A.defence_scores(defence, c, fits, key=v)[0], target)

    return lift


def test_votes_needed_agrees_with_the_exhaustive_search_on_a_small_arena():
    """Doubling + bisection (precision 1: to the vote) finds the same first crossing as trying
    every number of votes, on m-ELO fits of a small arena."""
    arena = A.honest_arena(DATA, fraction=0.005, seed=0)
    x0 = A.m_elo_scores(arena.counts)
    target = int(np.argsort(-x0)[len(x0) // 2])
    fits = A._Fits(x_melo=x0)
    for fam in ("target/many", "omni+camo/few"):
        stream = A.attack_stream(arena, target, A.Family.parse(fam), 120, seed=1)
        lift = _lift(arena, stream, "m-elo", fits, target)
        every = [lift(v) for v in range(1, 121)]
        first = {lv: next((v + 1 for v, x in enumerate(every) if x >= lv), None) for lv in (1, 3)}
        fast = A.votes_needed(lift, (1, 3), 120, start=1, precision=1.0)
        assert fast == first, fam


def test_bounded_defences_are_am_elo_without_bounds_and_trust_bounded_scores_with_them(arena):
    import warnings

    from stablearena import StableArenaWarning

    fits = A._Fits(x_melo=A.m_elo_scores(arena.counts), cap=1e9, ramp_votes=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fits.honest_am = A._screened_am_elo(arena.counts, None)
        plain, ex1 = A.defence_scores("am-elo+screen", arena.counts, fits, key=0)
        free, ex2 = A.defence_scores("am-elo+screen+bounded", arena.counts, fits, key=0)
    np.testing.assert_allclose(free, plain, atol=1e-5)
    assert ex1 == ex2
    # with bounds: trust.bounded_scores of the screened fit (after the influence screening for
    # the +influence+bounded defence), on the arena with an attack in 5 accounts
    from stablearena.crowd.trust import bounded_scores

    target = int(np.argsort(-fits.x_melo)[13])
    stream = A.attack_stream(arena, target, A.Family.parse("target/few"), 400, seed=4)
    c = A.merge_counts(arena.counts, stream.counts(400, arena.models, arena))
    fits.cap, fits.ramp_votes = 2.0, 400.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        x, _ = A.defence_scores("am-elo+screen+bounded", c, fits, key=400)
        fit = fits.screened[400]
        np.testing.assert_allclose(x, bounded_scores(fit, cap=2.0, ramp_votes=400.0))
        assert not np.allclose(x, fit.scores, atol=1e-3)
        xi, excl = A.defence_scores("am-elo+screen+influence+bounded", c, fits, key=400)
    fit_i, flagged = fits.influenced[400]
    assert flagged and flagged <= excl  # the 5 accounts (or some) caught by the influence test
    np.testing.assert_allclose(xi, bounded_scores(fit_i, cap=2.0, ramp_votes=400.0))


def test_detector_roc_sees_a_target_only_attack_and_not_honest_accounts(arena):
    import warnings

    from stablearena import StableArenaWarning

    x0 = A.m_elo_scores(arena.counts)
    target = int(np.argsort(-x0)[64])
    stream = A.attack_stream(arena, target, A.Family.parse("target/few"), 400, seed=2)
    att = stream.counts(400, arena.models, arena)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        roc = A.detector_roc(A.merge_counts(arena.counts, att), att.annotators)
        # honest accounts relabelled as attackers: no detector separates them
        names = arena.counts.annotators
        votes = np.bincount(arena.counts.annotator, arena.counts.totals)
        fake = [n for n, v in zip(names, votes, strict=True) if v >= 50][::4]
        null = A.detector_roc(arena.counts, fake)
    assert roc["n_attackers"] == 5 and roc["select"] > 0.95
    assert null["n_attackers"] == len(fake)
    assert all(abs(null[d] - 0.5) < 0.2 for d in A.DETECTORS), null


def test_rigging_roc_option_prints_each_detectors_auc(capsys, tmp_path):
    import json

    args = [
        "experiment", "rigging", DATA, "--roc", "--seeds", "2", "--fraction", "0.01",
        "--families", "target/few,target+camo/few", "--targets", "middle",
        "--max-votes", "1500", "--results", str(tmp_path), "--format", "json",
    ]  # fmt: skip
    payload = json.loads(run_cli(args, capsys))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["roc_seed_0.json", "roc_seed_1.json"]
    rows = {r["family"]: r for r in payload["summary"]}
    # +10 on m-ELO takes target-only attackers a few dozen votes: no account reaches 50 votes
    assert rows["target/few"]["seeds"] == 2 and rows["target/few"]["auc_select"] is None
    assert rows["target+camo/few"]["n_attackers"] == 5
    assert 0 <= rows["target+camo/few"]["auc_push"] <= 1
    assert all(r["votes"] <= 1500 for r in payload["runs"])
    out = run_cli([*args[:-2], "--no-run", "--format", "table"], capsys)
    assert "what a detector sees" in out


def test_attacker_accounts_created_today_lift_nothing_under_the_age_ramp(arena):
    import warnings

    from stablearena import StableArenaWarning

    assert arena.ages is not None and len(arena.ages) == len(arena.counts.annotators)
    assert 0 <= arena.ages.min() and arena.ages.max() <= A.HONEST_MAX_AGE_DAYS
    x0 = A.m_elo_scores(arena.counts)
    target = int(np.argsort(-x0)[64])
    stream = A.attack_stream(arena, target, A.Family.parse("target+camo/few"), 1500, seed=3)
    c = A.merge_counts(arena.counts, stream.counts(1500, arena.models, arena))
    honest = A._honest_ages(arena)
    d = "am-elo+screen+influence+bounded"
    lifts = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        for age in (0.0, 30.0):
            fits = A._Fits(x_melo=x0, ramp_days=7.0)
            fits.honest_am = A._screened_am_elo(arena.counts, None)
            fits.ages = honest
            rank0 = A._rank_of(A.defence_scores(d, arena.counts, fits)[0], target)
            fits.ages = {**honest, **{f"x{k:05d}": age for k in range(5)}}
            lifts[age] = rank0 - A._rank_of(A.defence_scores(d, c, fits, key=1)[0], target)
        melo = A._rank_of(x0, target) - A._rank_of(A.m_elo_scores(c), target)
    # accounts old enough weigh as honest ones and lift the target as on m-ELO (roughly);
    # accounts created for the attack weigh 0 — their votes still move the honest annotators'
    # abilities a little (am-ELO fits those with every vote), which lifts it a few places here
    assert melo >= 10 and lifts[30.0] >= melo // 2 and lifts[0.0] <= melo // 3, (melo, lifts)


def test_sleepers_idle_since_sign_up_weigh_little_under_active_days(arena):
    """Accounts created 8 days before the attack and left idle: the age ramp (days since sign-up)
    gives them full weight — the target climbs about as on m-ELO — while counted in active days
    (one: the attack's) they weigh 1/7 and lift it no more than a third as far."""
    import warnings

    from stablearena import StableArenaWarning

    assert arena.active_days is not None and arena.active_days.min() >= 1
    assert np.all(arena.active_days <= np.floor(arena.ages) + 1)
    x0 = A.m_elo_scores(arena.counts)
    target = int(np.argsort(-x0)[64])
    stream = A.attack_stream(arena, target, A.Family.parse("target+camo/few"), 1500, seed=3)
    c = A.merge_counts(arena.counts, stream.counts(1500, arena.models, arena))
    d = "am-elo+screen+influence+bounded"
    lifts = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        honest_am = A._screened_am_elo(arena.counts, None)
        for days in ("age", "active"):
            fits = A._Fits(x_melo=x0, ramp_days=7.0, record_days=30.0, honest_am=honest_am)
            honest = A._honest_days(arena, days)
            A._set_days(fits, days, honest)
            rank0 = A._rank_of(A.defence_scores(d, arena.counts, fits)[0], target)
            mine = 8.0 if days == "age" else 1.0  # 8 days old; voted on one day
            A._set_days(fits, days, {**honest, **{f"x{k:05d}": mine for k in range(5)}})
            lifts[days] = rank0 - A._rank_of(A.defence_scores(d, c, fits, key=1)[0], target)
        melo = A._rank_of(x0, target) - A._rank_of(A.m_elo_scores(c), target)
    assert melo >= 10 and lifts["age"] >= melo // 2 and lifts["active"] <= melo // 3, (
        melo,
        lifts,
    )


def test_sleeper_warmup_is_counted_in_the_cost_and_agrees_with_the_board(arena):
    x0 = A.m_elo_scores(arena.counts)
    warm = A.warmup_votes(arena, x0, 20, 5, mode="board", seed=1)
    i, j = arena.pair_i[warm.row], arena.pair_j[warm.row]
    winner = np.where(warm.outcome == 0, i, j)
    loser = np.where(warm.outcome == 0, j, i)
    assert len(warm.row) == 100 and np.all(x0[winner] >= x0[loser])
    honest = A.warmup_votes(arena, x0, 20, 3, mode="honest", seed=1)
    assert set(np.unique(honest.outcome)) <= {0, 1, 2}
    with pytest.raises(InputError, match="warm-up mode"):
        A.warmup_votes(arena, x0, 20, 3, mode="agree")
    target = int(np.argsort(-x0)[64])
    stream = A.attack_stream(arena, target, A.Family.parse("target+camo/few"), 40, seed=3)
    c = stream.counts(12, arena.models, arena, warm)
    per = np.bincount(c.annotator, c.totals)
    # 12 attack votes round-robin over 5 accounts (3, 3, 2, 2, 2), each with its 20 warm-up votes
    assert stream.n_accounts(12) == 5 and list(per) == [23, 23, 22, 22, 22]
    assert list(np.bincount(stream.counts(3, arena.models, arena, warm).annotator)) != []
    assert stream.counts(3, arena.models, arena, warm).totals.sum() == 3 + 20 * 3
    # the bookkeeping of a run: votes = attack votes + warm-up of the accounts used
    recs = A.run_seed(
        arena,
        seed=0,
        families=[A.Family.parse("target+camo/few")],
        defences=("m-elo",),
        targets=("middle",),
        levels=(1,),
        max_votes=200,
        precision=2.0,
    )
    (r,) = recs
    assert r["warmup"] == 0 and r["votes_1"] == r["attack_votes_1"]
    assert r["account_days_1"] == r["accounts_1"] * 1.0
