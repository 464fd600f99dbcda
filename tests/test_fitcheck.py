"""A board that never publishes a broken fit (issue 34, item 3): the checks, and the live arena
keeping the last good board — marked stale, with an alert in /healthz, the board's JSON and
the admin view, on every worker — until a fit passes."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient
from test_service import settings_for  # the service tests' arena: no refit of its own

from stablearena.analysis.fitcheck import MAX_SCALE_CHANGE, board_problems, scale_ratio
from stablearena.service import create_app
from stablearena.service.client import ArenaClient
from stablearena.service.refit import run_fit

GOOD = {"a": 1.0, "b": 0.5, "c": 0.0, "d": -0.4, "e": -1.1}


def test_a_good_board_has_no_problem():
    assert board_problems(GOOD) == []
    moved = {m: 1.3 * x + 0.2 for m, x in GOOD.items()}
    assert board_problems(moved, previous=GOOD, votes=1100, previous_votes=1000) == []
    # an arena's first days (fewer than 50 votes per model): the scale is not held to yet
    shrunk = {m: 0.225 * x for m, x in GOOD.items()}
    assert board_problems(shrunk, previous=GOOD, votes=35, previous_votes=22) == []
    assert board_problems(shrunk, previous=GOOD, votes=400, previous_votes=250)


def test_not_converged_and_not_finite():
    assert board_problems(GOOD, converged=False) == ["the fit did not converge"]
    (p,) = board_problems({**GOOD, "c": math.nan})
    assert p == "scores that are not finite: c"


def test_a_scale_that_explodes_is_a_problem_unless_the_votes_more_than_doubled():
    exploded = {m: 34 * x for m, x in GOOD.items()}
    assert scale_ratio(exploded, GOOD) == pytest.approx(34)
    (p,) = board_problems(exploded, previous=GOOD, votes=1240, previous_votes=1000)
    assert "spread changed ×34" in p and "+240 votes" in p
    shrunk = {m: x / 5 for m, x in GOOD.items()}
    assert board_problems(shrunk, previous=GOOD, votes=1000, previous_votes=1000)
    # an import, or an arena's first days: a new scale is expected
    assert board_problems(exploded, previous=GOOD, votes=2001, previous_votes=1000) == []
    # within the factor either way
    edge = {m: MAX_SCALE_CHANGE * 0.99 * x for m, x in GOOD.items()}
    assert board_problems(edge, previous=GOOD, votes=1000, previous_votes=1000) == []


def test_too_few_common_models_cannot_be_compared():
    assert scale_ratio({"a": 1.0, "b": 5.0}, {"a": 0.0, "b": 1.0}) is None
    assert scale_ratio({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 0.0, "b": 0.0, "c": 0.0}) is None


# ------------------------------------------------------------------ the live arena
def _wait(cond, seconds: float = 30.0):
    deadline = time.time() + seconds
    while time.time() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_the_live_arena_keeps_the_last_good_board(tmp_path):
    url = f"sqlite:///{tmp_path / 'arena.db'}"
    truth = dict(GOOD)
    with TestClient(create_app(settings_for(url))) as tc:
        admin = ArenaClient(
            "http://testserver", tc.app.state.admin_key, client=TestClient(tc.app), retries=0
        )
        for m in truth:
            admin.add_model(m)
        key = admin.create_annotator("u1")
        who = ArenaClient("http://testserver", key, client=TestClient(tc.app), retries=0)
        rng = np.random.default_rng(0)
        for _ in range(260):  # > 50 per model: the scale is held to
            (b,) = who.next_battles()
            p = 1 / (1 + math.exp(truth[b["model_b"]] - truth[b["model_a"]]))
            who.vote(b["battle_id"], "model_a" if rng.random() < p else "model_b")
        admin.refit()
        good = _wait(lambda: tc.get("/v1/leaderboard").json().get("models"))
        assert tc.get("/healthz").json()["board"] == "ok"

        # a fit of the same votes whose scores stretched ×34 (what a flood did to the
        # screened fit): built by the fit the arena runs, then broken as reported
        st, refitter = tc.app.state.arena, tc.app.state.refitter
        snap = st.counts.snapshot(st.engine)
        out = run_fit(snap, st.config.model_dump(), st.fit.payload.get("screening"))
        broken = dataclasses.replace(
            out,
            payload={
                **out.payload,
                "scores": {m: 34 * x for m, x in out.payload["scores"].items()},
            },
        )
        assert refitter._held_back(broken) is True
        health = tc.get("/healthz").json()
        assert (
            health["board"] == "stale"
            and "spread changed ×34" in health["fit_alert"]["problems"][0]
        )
        board = tc.get("/v1/leaderboard").json()
        assert board["stale"] is True and board["models"] == good  # the last good board stays
        held_at = health["fit_alert"]["held_at"]
        # every worker: another app on the same database reads the alert at its poll, and a
        # fit it holds back later keeps the time the board was first held (issue 44: held_at
        # differed per host)
        with TestClient(create_app(settings_for(url), worker=1)) as other:
            _wait(lambda: other.get("/healthz").json()["board"] == "stale")
            assert other.get("/v1/leaderboard").json()["stale"] is True
            time.sleep(0.01)
            assert other.app.state.refitter._held_back(broken) is True
            again = other.get("/healthz").json()["fit_alert"]
            assert again["held_at"] == held_at and again["checked_at"] > held_at
            _wait(lambda: tc.get("/healthz").json()["fit_alert"]["held_at"] == held_at)
        # the admin view says it
        assert tc.post("/admin/login", data={"key": tc.app.state.admin_key}).status_code in (
            200,
            303,
        )
        assert "The board is stale" in tc.get("/admin").text
        # a fit that does not converge is held back too
        assert refitter._held_back(
            dataclasses.replace(out, payload={**out.payload, "converged": False})
        )
        assert tc.get("/healthz").json()["fit_alert"]["problems"] == ["the fit did not converge"]
        # a good fit clears the alert
        assert refitter._held_back(out) is False
        assert tc.get("/healthz").json()["board"] == "ok"
        assert "stale" not in tc.get("/v1/leaderboard").json()


def test_offline_a_fit_that_did_not_converge_says_it_is_no_board_to_publish():
    """The same rule offline: rank's JSON and table notes (leaderboard_payload) say so first."""
    from stablearena.analysis.leaderboard import leaderboard_payload
    from stablearena.data import datasets
    from stablearena.raters import get_rater

    b = datasets.load("llmfao")
    with pytest.warns(Warning):
        stopped = get_rater("am-elo", max_iter=2).fit(b)
    note = leaderboard_payload(stopped, b)["notes"][0]
    assert note.startswith("not a board to publish: the fit did not converge")
    full = leaderboard_payload(get_rater("am-elo").fit(b), b)
    assert not any(n.startswith("not a board to publish") for n in full["notes"])
