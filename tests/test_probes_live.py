"""Probe battles in the live arena (serve's [[judges]] and [judge_probes]): over real HTTP
against the demo server process, the obeying judge is flagged, judges no more, its votes leave
the fit; the honest judge passes; GET /v1/admin/judges and /admin show it."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient
from test_arena_service import admin, battle, demo, open_page, settings, vote  # noqa: F401

from stablearena.service import store
from stablearena.service.app import create_app


def _settle(tc):
    """Wait until the holder's background work (the judges' judging and probes) is done."""
    deadline = time.time() + 60
    while time.time() < deadline and tc.app.state.holder.tasks:
        time.sleep(0.05)


def _judges_status(tc):
    return {r["judge"]: r for r in tc.get("/v1/admin/judges", headers=admin(tc)).json()["judges"]}


def test_live_probes_flag_the_obeying_judge_and_its_votes_weigh_nothing(tmp_path, demo):  # noqa: F811
    s = settings(tmp_path, demo.base_url)
    s.judges = [
        {"name": n, "base_url": demo.base_url, "model": n} for n in ("judge-obey", "judge-keen")
    ]
    s.judge_probes.share = 0.8  # a probe for each judge after every battle (chance 0.8/0.2)
    s.arena_page.visitor_open = 100  # up to 41 page battles from one visitor in this test
    s.arena_page.visitor_battles_per_hour = 1e6
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        status: dict = {}
        for k in range(40):
            lines = battle(tc, csrf, f"What is {k + 11}*7?")
            assert vote(tc, csrf, lines[0]["battle_id"], "tie").status_code == 200
            _settle(tc)  # this battle's judging and probes are done
            status = _judges_status(tc)
            if status.get("judge-obey", {}).get("flagged"):
                break
        assert status["judge-obey"]["status"] == "flagged", status
        assert "weigh nothing" in status["judge-obey"]["reason"]
        assert status["judge-keen"]["status"] == "passed"
        body = tc.get("/v1/admin/judges", headers=admin(tc)).json()
        assert 0 < body["probe_share"] < 0.9 and body["flagged"] == ["judge-obey"]
        assert tc.get("/v1/admin/judges").status_code == 401
        # flagged: the next battle is judged by judge-keen alone
        votes_before = status["judge-obey"]["votes"]
        lines = battle(tc, csrf, "What is 99*3?")
        assert vote(tc, csrf, lines[0]["battle_id"], "tie").status_code == 200
        _settle(tc)
        assert _judges_status(tc)["judge-obey"]["votes"] == votes_before
        # its votes are out of the fit: the refit's accounts do not include it
        tc.post("/v1/admin/refit", headers=admin(tc))
        names = {
            a["annotator"] for a in tc.get("/v1/annotators", headers=admin(tc)).json()["annotators"]
        }
        assert "judge-keen" in names and "judge-obey" not in names
        with tc.app.state.arena.engine.connect() as conn:
            assert store.probes.probe_records(conn)  # durable: read back from the database
        page = tc.post("/admin/login", data={"key": tc.app.state.admin_key})
        assert page.status_code in (200, 303)
        html = tc.get("/admin").text
        assert "Judges tested by probes" in html and "flagged" in html


def test_a_live_probe_is_built_on_the_answer_of_a_model_drawn_uniformly(tmp_path, demo):  # noqa: F811
    """Not on one of the battle's answers (a note-writing model's answer would carry its note
    to both sides of the probe): the holder asks a model drawn uniformly, anew."""
    import numpy as np

    s = settings(tmp_path, demo.base_url)
    with TestClient(create_app(s)) as tc:
        holder = tc.app.state.holder
        tc.portal.call(holder.refresh)
        asked: list[int] = []
        real = holder.client

        def client(mid):  # noqa: ANN001, ANN202
            asked.append(mid)
            return real(mid)

        holder.client = client
        rng = np.random.default_rng(0)
        got = [tc.portal.call(holder._probe_answer, "What is 12*7?", rng) for _ in range(12)]
        assert all(isinstance(g, str) and g.strip() for g in got)
        assert set(asked) == set(holder.endpoints) and len(asked) == 12  # every model, uniformly
        holder.endpoints = {}
        assert tc.portal.call(holder._probe_answer, "What is 12*7?", rng) is None
