"""The crowd rule (stablearena.crowd.rule, docs/methods/crowd.md): every honest vote counts, from an
account's first; screening judges only who has δ votes; one account's say on a model is capped;
a flood of new accounts is found by its disagreement with the established crowd."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stablearena import Battles, MElo
from stablearena.crowd.rule import CrowdRule, ability_spread, crowd_fit, model_votes_limit
from stablearena.errors import InputError
from stablearena.simulation.attacks import crowd_accounts

M = 10
TRUTH = np.linspace(-1.5, 1.5, M)
NAMES = np.array([f"m{k:02d}" for k in range(M)], dtype=object)


def _votes(rng, n, name, *, ability=1.0, pair=None):
    """``n`` Bradley–Terry votes of one account with discrimination ``ability`` (negative:
    reversed) on random pairs of TRUTH (or always ``pair``)."""
    if pair is None:
        a = rng.integers(0, M, n)
        b = (a + rng.integers(1, M, n)) % M
    else:
        a, b = np.full(n, pair[0]), np.full(n, pair[1])
    p = 1 / (1 + np.exp(-ability * (TRUTH[a] - TRUTH[b])))
    return a, b, np.where(rng.random(n) < p, 0, 1), np.full(n, name, dtype=object)


def _battles(parts) -> Battles:
    a, b, oc, ann = (np.concatenate([p[k] for p in parts]) for k in range(4))
    return Battles.from_arrays(NAMES[a], NAMES[b], oc, annotator=ann)


def _crowd(rng, crowd: str, total: int, prefix: str = "v"):
    vols, active, ages = crowd_accounts(crowd, total, rng)
    parts = [_votes(rng, int(v), f"{prefix}{q}") for q, v in enumerate(vols) if v > 0]
    days = {f"{prefix}{q}": float(d) for q, d in enumerate(active)}
    return parts, days


def test_a_casual_crowd_gets_a_board_close_to_m_elo_with_weights_about_one():
    """Issue 40: visitors with 1–10 votes each — the am-ELO rule's δ = 50 gave them no board.
    The crowd rule ranks them; with so little evidence each, every weight is about 1 (the
    crowd's), so the board is m-ELO's."""
    rng = np.random.default_rng(0)
    parts, days = _crowd(rng, "casual", 3000)
    counts = _battles(parts).counts(by_annotator=True)
    got = crowd_fit(counts, CrowdRule(min_records=50), active_days=days)
    assert got.converged and not got.flagged
    w = np.array(list(got.weights.values()))
    # below δ = 50 every account votes with the crowd's weight: the board is m-ELO's
    assert np.allclose(w, 1.0)
    melo = MElo().fit(_battles(parts).counts())
    x, y = got.fitted.scores, melo.scores
    assert np.all(np.isfinite(x))
    assert np.corrcoef(x, y)[0, 1] > 0.999
    assert np.max(np.abs((x - x.mean()) - (y - y.mean()))) < 1e-3
    # judged by everyone's posterior instead (δ = 0): weights about 1, the same order
    judged = crowd_fit(counts, CrowdRule(min_records=0), active_days=days)
    wj = np.array(list(judged.weights.values()))
    assert 0.5 < wj.min() and wj.max() < 1.5 and abs(np.median(wj) - 1) < 0.05
    assert np.corrcoef(judged.fitted.scores, y)[0, 1] > 0.999
    se = np.sqrt(np.diag(got.fitted.covariance()))
    assert np.all(np.isfinite(se)) and np.all(se > 0)


def test_a_three_vote_account_weighs_what_a_regular_honest_one_does():
    rng = np.random.default_rng(1)
    parts = [_votes(rng, 200, f"r{q}") for q in range(10)]
    parts += [_votes(rng, 3, f"c{q}") for q in range(200)]
    got = crowd_fit(_battles(parts).counts(by_annotator=True))
    casual = np.array([got.weights[f"c{q}"] for q in range(200)])
    regular = np.array([got.weights[f"r{q}"] for q in range(10)])
    assert abs(casual.mean() - 1) < 0.1 and casual.std() < 0.1
    assert abs(regular.mean() - 1) < 0.3


def test_the_ability_spread_is_recovered_on_a_known_crowd():
    """τ (the spread of the accounts' abilities) by moments; truth 0.5 on 150 accounts of 150
    votes (truth-known: the estimate is within 0.15)."""
    rng = np.random.default_rng(2)
    abil = rng.normal(1, 0.5, 150)
    parts = [_votes(rng, 150, f"a{q}", ability=abil[q]) for q in range(150)]
    got = crowd_fit(_battles(parts).counts(by_annotator=True), CrowdRule(model_votes=None))
    assert abs(got.prior_sd - 0.5) < 0.15, got.prior_sd
    # and a crowd of one ability: τ at its floor
    parts = [_votes(rng, 150, f"b{q}") for q in range(150)]
    same = crowd_fit(_battles(parts).counts(by_annotator=True), CrowdRule(model_votes=None))
    assert same.prior_sd < 0.2
    # the estimator itself: E U² = I + I² τ²
    info = np.full(1000, 4.0)
    u = rng.normal(0, np.sqrt(info + info**2 * 0.3**2))
    assert abs(math.sqrt(ability_spread(u, info)) - 0.3) < 0.05


def test_a_heavy_reverser_is_flagged_a_casual_one_cannot_be():
    rng = np.random.default_rng(3)
    parts = [_votes(rng, int(rng.integers(1, 11)), f"c{q}") for q in range(600)]
    parts.append(_votes(rng, 400, "heavy", ability=-1.0))
    parts.append(_votes(rng, 4, "small", ability=-1.0))
    got = crowd_fit(_battles(parts).counts(by_annotator=True), CrowdRule(min_records=50))
    assert set(got.flagged) == {"heavy"}
    assert got.weights["heavy"] == 0
    assert "excluded" in got.flagged["heavy"]
    # the small reverser cannot be judged on 4 votes: its posterior is the crowd's
    assert 0.5 < got.weights["small"] < 1.2


def test_one_account_gives_one_model_at_most_model_votes():
    """The per-(account, model) cap: an account voting 80 times for m09 against others gives it
    at most ``model_votes`` weighted votes, whatever its weight."""
    rng = np.random.default_rng(4)
    parts = [_votes(rng, 300, f"r{q}") for q in range(8)]
    a = np.full(80, M - 1, dtype=np.int64)  # the best model, so its votes are believable
    b = rng.integers(0, M - 1, 80)
    parts.append((a, b, np.zeros(80, dtype=np.int64), np.full(80, "pusher", dtype=object)))
    counts = _battles(parts).counts(by_annotator=True)
    got = crowd_fit(counts, CrowdRule(model_votes=10.0, model_votes_quantile=None))
    c = got.fitted.counts
    k = list(c.annotators).index("pusher")
    rows = (c.annotator == k) & ((c.i == M - 1) | (c.j == M - 1))
    weighted = float(np.sum(got.fitted.row_weights[rows] * c.totals[rows]))
    assert weighted <= 10.0 + 1e-9
    assert got.capped.get("pusher", 0) >= 1
    # without the cap the same account gives it its full weight
    free = crowd_fit(counts, CrowdRule(model_votes=None))
    assert float(np.sum(free.fitted.row_weights[rows] * c.totals[rows])) > 40
    # the default limit: the honest accounts' 99.9% per-model volume (here the regulars' ~60 a
    # model, more than the most, 50), never below 10
    c0 = counts.take(counts.totals > 0)
    everyone = np.ones(len(counts.annotators), dtype=bool)
    assert model_votes_limit(c0, CrowdRule(), everyone) == 50.0
    casual_only = np.array([n != "pusher" and n == "r0" for n in counts.annotators])
    assert 10.0 <= model_votes_limit(c0, CrowdRule(), casual_only) <= 50.0
    assert model_votes_limit(c0, CrowdRule(), np.zeros_like(everyone)) == 10.0
    assert model_votes_limit(c0, CrowdRule(model_votes=None), everyone) is None


def test_a_flood_of_new_accounts_is_found_and_set_aside():
    """300 new accounts (1 day of record) each voting 6 times for the bottom model against the
    top half; the established crowd (≥ 30 days) ranks it last. The flood test finds m00, and
    the new accounts' votes on it do not count: the board is the established crowd's."""
    rng = np.random.default_rng(5)
    parts = [_votes(rng, 60, f"r{q}") for q in range(60)]
    days = {f"r{q}": 40.0 for q in range(60)}
    for q in range(300):
        b = rng.integers(5, M, 6)
        parts.append(
            (
                np.zeros(6, dtype=np.int64),
                b,
                np.zeros(6, dtype=np.int64),
                np.full(6, f"f{q}", dtype=object),
            )
        )
        days[f"f{q}"] = 1.0
    counts = _battles(parts).counts(by_annotator=True)
    got = crowd_fit(counts, active_days=days)
    assert "m00" in got.floods and got.floods["m00"] > 0
    assert got.new == frozenset(f"f{q}" for q in range(300))
    assert got.fitted.scores[0] <= np.sort(got.fitted.scores)[1]  # m00 in the bottom two
    flooded = crowd_fit(counts, CrowdRule(flood_days=None), active_days=days)
    assert flooded.fitted.scores[0] > got.fitted.scores[0] + 0.5  # what the flood would do
    no_test = crowd_fit(counts)  # no days: no flood test
    assert not no_test.floods and not no_test.flood_z


def test_the_flood_test_rarely_flags_an_honest_crowd_of_new_accounts():
    """Level 0.01 per fit (Bonferroni over models): 600 honest new accounts (1–6 votes, one
    day) beside 80 established ones (40 votes, 40 days) trip it in at most 2 of 20 seeds."""
    false = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        parts = [_votes(rng, 40, f"r{q}") for q in range(80)]
        days = {f"r{q}": 40.0 for q in range(80)}
        for q in range(600):
            parts.append(_votes(rng, int(rng.integers(1, 7)), f"n{q}"))
            days[f"n{q}"] = 1.0
        got = crowd_fit(_battles(parts).counts(by_annotator=True), active_days=days)
        assert got.flood_z and len(got.new) == 600
        false += bool(got.floods)
    assert false <= 2, false


def test_a_few_patient_accounts_are_not_the_crowd_a_casual_majority_is_tested_against():
    """Issue 40 (found by the rigging runs): in a casual arena every honest account is new, so
    one account with 30 days of record and 100 agreeing warm-up votes was the whole established
    crowd; the flood test then set the honest majority's votes aside on the attacker's target,
    and one account lifted the top model by 10 places for 145 votes (m-ELO: 2,896). Without an
    established majority there is no flood test."""
    rng = np.random.default_rng(7)
    parts, days = _crowd(rng, "casual", 3000)
    honest = crowd_fit(_battles(parts).counts(by_annotator=True), active_days=days)
    parts.append(_votes(rng, 100, "sleeper"))  # agreeing warm-up
    b = rng.integers(1, M, 45)
    parts.append(
        (
            np.zeros(45, dtype=np.int64),
            b,
            np.zeros(45, dtype=np.int64),
            np.full(45, "sleeper", dtype=object),
        )
    )  # then the weakest model wins 45 times
    days["sleeper"] = 30.0
    got = crowd_fit(_battles(parts).counts(by_annotator=True), active_days=days)
    assert not got.floods and not got.flood_z
    assert got.weights["sleeper"] <= 1.0 + 1e-9  # agreement buys no more than the crowd's weight
    rank = lambda x: int(np.sum(x > x[0]))  # noqa: E731  (places above m00)
    assert rank(honest.fitted.scores) - rank(got.fitted.scores) <= 1


def test_a_disconnected_graph_is_rated_never_refused():
    """Two groups of models never compared across: every model still gets a finite rating
    (the existence prior on all models), with intervals, instead of DisconnectedGraphError."""
    rng = np.random.default_rng(6)
    parts = []
    for q in range(30):
        a = rng.integers(0, 5, 5)
        b = (a + rng.integers(1, 5, 5)) % 5
        if q % 2:
            a, b = a + 5, b + 5
        p = 1 / (1 + np.exp(-(TRUTH[a] - TRUTH[b])))
        parts.append((a, b, np.where(rng.random(5) < p, 0, 1), np.full(5, f"u{q}", dtype=object)))
    got = crowd_fit(_battles(parts).counts(by_annotator=True))
    assert np.all(np.isfinite(got.fitted.scores)) and got.converged
    se = np.sqrt(np.diag(got.fitted.covariance()))
    assert np.all(np.isfinite(se)) and np.all(se > 0)


def test_the_crowd_rule_needs_accounts_and_says_so():
    b = Battles.from_arrays(["a", "b"], ["b", "a"], [0, 1])
    with pytest.raises(InputError, match="per annotator"):
        crowd_fit(b.counts())
    with pytest.raises(InputError, match="confidence"):
        CrowdRule(confidence=1.0)
    with pytest.raises(InputError, match="min_sd"):
        CrowdRule(min_sd=0.5, max_sd=0.2)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 6),
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 2), st.integers(0, 8)),
        min_size=1,
        max_size=60,
    ),
)
def test_any_arena_gives_a_finite_converged_board(m, rows):
    """Property: whatever the votes (one-sided, tiny, disconnected, one account), the board is
    finite, converged and every weight finite and non-negative."""
    rows = [(a % m, b % m, o, k) for a, b, o, k in rows if a % m != b % m]
    if not rows:
        return
    a, b, o, k = (np.array(v) for v in zip(*rows, strict=True))
    names = np.array([f"x{q}" for q in range(m)], dtype=object)
    winner = np.array(["model_a", "model_b", "tie"], dtype=object)[o]
    battles = Battles.from_arrays(names[a], names[b], winner, annotator=[f"u{q}" for q in k])
    got = crowd_fit(
        battles.counts(by_annotator=True), active_days={f"u{q}": float(q) for q in range(9)}
    )
    assert got.converged
    assert np.all(np.isfinite(got.fitted.scores))
    w = np.array(list(got.weights.values()))
    assert np.all(np.isfinite(w)) and np.all(w >= 0)
    assert math.isfinite(got.prior_sd)


def _casual_log(path, seed=0, total=1500, with_tstamp=True):
    rng = np.random.default_rng(seed)
    parts, days = _crowd(rng, "casual", total)
    a, b, oc, ann = (np.concatenate([p[k] for p in parts]) for k in range(4))
    frame = pd.DataFrame(
        {
            "model_a": NAMES[a],
            "model_b": NAMES[b],
            "winner": np.where(oc == 0, "model_a", "model_b"),
            "judge": ann,
        }
    )
    if with_tstamp:
        frame["tstamp"] = 1.7e9 + np.sort(rng.uniform(0, 20 * 86400, len(frame)))
    frame.to_csv(path, index=False)
    return path


def test_rank_arena_ranks_a_casual_log_with_intervals(tmp_path, cli):
    """Acceptance (issue 40): a casual-only log (1–10 votes an account) — ``rank --method
    arena`` exited 2 ("no annotator has at least min_records=50"); now a board with finite
    intervals of positive width, in m-ELO's order."""
    log = _casual_log(tmp_path / "casual.csv")
    code, out, err = cli("rank", log, "--method", "arena", "--ci", "fisher", "--format", "json")
    assert code == 0, err
    board = json.loads(out)
    assert len(board["models"]) == M
    for r in board["models"]:
        lo, hi = r["ci_low"], r["ci_high"]
        assert math.isfinite(lo) and math.isfinite(hi) and hi - lo > 1
    assert not board["crowd"]["flagged"]
    code, out2, err = cli("rank", log, "--format", "json")
    assert code == 0, err
    melo = [r["model"] for r in json.loads(out2)["models"]]
    got = [r["model"] for r in board["models"]]
    assert sum(x != y for x, y in zip(got, melo, strict=True)) <= 2


def test_serve_import_of_a_casual_log_publishes_a_board(tmp_path):
    """``stablearena serve --import LOG`` of a casual-only log: the first fit publishes (it
    waited for ever for an annotator with arena.min_records=50 votes)."""
    from stablearena.service import store
    from stablearena.service.refit import live_ages, run_fit
    from stablearena.service.seed import import_log
    from stablearena.service.settings import ArenaConfig

    log = _casual_log(tmp_path / "casual.csv", seed=1)
    engine = store.make_engine(f"sqlite:///{tmp_path}/arena.db")
    store.migrate(engine)
    try:
        import_log(engine, log)
        cfg = ArenaConfig().model_dump()
        assert cfg["board_rule"] == "crowd"
        live = run_fit(store.read_snapshot(engine), cfg, None, "casual", live_ages(engine, cfg))
    finally:
        engine.dispose()
    payload = live.payload
    assert payload["converged"]
    models = payload["leaderboard"]["models"]
    assert len(models) == M and all(math.isfinite(r["rating"]) for r in models)
    assert payload["screening"]["rule"] == "crowd"


def test_three_page_votes_reach_the_live_board(tmp_path):
    """Issue 40: after a newcomer's first three votes ``GET /v1/leaderboard`` answered 503 (the
    am-ELO rule waited for δ votes, then refused a disconnected graph); on the crowd rule it is
    a board of every voted model."""
    from test_dashboard import MODELS, open_arena, play

    tc, admin = open_arena(f"sqlite:///{tmp_path}/arena.db")
    try:
        for m in MODELS:
            admin.add_model(m)
        play(tc, admin, 3, names=["newcomer"])
        admin.refit()
        got = tc.get("/v1/leaderboard")
        assert got.status_code == 200, got.text
        models = got.json()["models"]
        assert len(models) >= 2
        assert all(math.isfinite(r["rating"]) for r in models)
    finally:
        tc.__exit__(None, None, None)


def test_a_board_of_eight_votes_is_ordered_by_score_with_intervals_that_say_how_little(tmp_path):
    """Issue 40: after 8 page votes the public board ranked a lower score above a higher one and
    showed zero-width intervals ("973.1–973.1"); on the crowd rule it is ordered by its scores,
    every interval has width, and the public page draws it."""
    from test_dashboard import MODELS, open_arena, play

    tc, admin = open_arena(f"sqlite:///{tmp_path}/arena.db")
    try:
        for m in MODELS:
            admin.add_model(m)
        play(tc, admin, 8, names=["a", "b", "c"])
        admin.refit()
        board = tc.get("/v1/leaderboard?ci=fisher").json()
        ratings = [r["rating"] for r in board["models"]]
        assert ratings == sorted(ratings, reverse=True)
        assert [r["rank"] for r in board["models"]] == list(range(1, len(ratings) + 1))
        for r in board["models"]:
            assert math.isfinite(r["ci_low"]) and r["ci_high"] - r["ci_low"] > 50
        # the page's boards are drawn once per fit, off the request: draw them now (as the
        # watcher would) instead of waiting on the clock
        tc.app.state.public_boards.draw()
        page = tc.get("/leaderboard")
        assert 'id="lb-table"' in page.text, page.text[-500:]
        assert page.status_code == 200 and "could not be fitted" not in page.text
    finally:
        tc.__exit__(None, None, None)
