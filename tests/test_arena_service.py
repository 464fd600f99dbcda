"""The battles the arena holds (docs/guides/arena-page.md): models as endpoints in ``serve``,
everything about a battle stored, the /arena page's calls, limits. The models are served by a
real OpenAI-compatible server process on loopback (stablearena.judging.endpoints.demo_server)."""

from __future__ import annotations

import io
import json
import re
import time

import pandas as pd
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.settings import Settings


@pytest.fixture(scope="module")
def demo():
    with DemoServer(seed=0) as server:
        yield server


def settings(tmp_path, base_url: str, models=("demo-ace", "demo-wild"), **page) -> Settings:
    return Settings(
        db=f"sqlite:///{tmp_path / 'arena.db'}",
        fit_in_process=False,
        poll_seconds=0.05,
        seed=0,
        arena={"min_records": 0, "refit_votes": 1, "refit_seconds": 0.2},
        models=[{"name": m, "base_url": base_url, "model": m} for m in models],
        arena_page={"prompts": "demo", "categories": {"math": r"\d\s*[-+*]\s*\d"}, **page},
    )


def admin(tc: TestClient) -> dict[str, str]:
    return {"Authorization": f"Bearer {tc.app.state.admin_key}"}


def open_page(tc: TestClient) -> str:
    r = tc.get("/arena")
    assert r.status_code == 200
    assert "script-src 'self'" in r.headers["content-security-policy"]
    return re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)


def battle(tc: TestClient, csrf: str, prompt: str = "What is 17*23?") -> list[dict]:
    r = tc.post("/arena/battles", json={"prompt": prompt}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200, r.text
    return [json.loads(line) for line in r.text.splitlines()]


def vote(tc: TestClient, csrf: str, bid: str, outcome: str = "model_a"):
    return tc.post(
        f"/arena/battles/{bid}/vote", json={"outcome": outcome}, headers={"X-CSRF-Token": csrf}
    )


def test_models_from_config_stream_store_vote_export(tmp_path, demo):
    with TestClient(create_app(settings(tmp_path, demo.base_url))) as tc:
        eps = tc.get("/v1/admin/endpoints", headers=admin(tc)).json()["endpoints"]
        assert {e["name"] for e in eps} == {"demo-ace", "demo-wild"}
        assert all("api_key" not in e for e in eps)
        csrf = open_page(tc)
        lines = battle(tc, csrf)
        bid = lines[0]["battle_id"]
        assert lines[-1] == {"done": True, "status": "complete", "failure": None}
        streamed = {s: "".join(x["delta"] for x in lines if x.get("side") == s) for s in "ab"}
        assert all(streamed.values())
        # no CSRF token, another site: refused
        assert tc.post("/arena/battles", json={"prompt": "x"}).status_code == 403
        r = tc.post(
            "/arena/battles",
            json={"prompt": "x"},
            headers={"X-CSRF-Token": csrf, "Origin": "http://evil.example"},
        )
        assert r.status_code == 403
        r = vote(tc, csrf, bid)
        assert r.status_code == 200, r.text
        assert {r.json()["model_a"], r.json()["model_b"]} == {"demo-ace", "demo-wild"}
        # export: the new columns; texts only when asked for
        ex = tc.get("/v1/export?format=jsonl", headers=admin(tc))
        row = json.loads(ex.text.splitlines()[0])
        assert row["category"] == "math" and row["status"] == "complete"
        assert row["completion_tokens_a"] > 0 and row["ttft_a"] >= 0 and "answer_a" not in row
        assert row["finish_reason_a"] == "stop" and json.loads(row["params_a"]) is not None
        ex = tc.get("/v1/export?format=jsonl&texts=true", headers=admin(tc))
        row = json.loads(ex.text.splitlines()[0])
        assert row["prompt_text"] == "What is 17*23?"
        assert {row["answer_a"], row["answer_b"]} == set(streamed.values())
        # the export is read back by `rank --style` (style counts per side)
        df = pd.read_json(io.StringIO(ex.text), lines=True)
        assert {"style_tokens_a", "style_bold_b"} <= set(df.columns)


def test_vote_refused_until_complete_and_failed_battle_never_counted(tmp_path, demo):
    s = settings(tmp_path, demo.base_url, models=("demo-ace+slow=0.3", "demo-fair+fail500"))
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        lines = battle(tc, csrf)
        bid = lines[0]["battle_id"]
        assert lines[-1]["status"] == "failed" and "http_500" in lines[-1]["failure"]
        assert vote(tc, csrf, bid).status_code == 409
        # the API route refuses it too (a failed battle never becomes votable)
        with tc.app.state.engine.connect() as conn:
            n = conn.execute(sa.select(sa.func.count()).select_from(store.votes)).scalar()
            status = store.held.held_status(conn, bid)
        assert n == 0 and status == "failed"
        held = tc.get("/v1/admin/held?status=failed", headers=admin(tc)).json()["battles"]
        assert [b["battle_id"] for b in held] == [bid] and held[0]["voted"] is False


def test_incomplete_battle_refuses_votes(tmp_path, demo):
    s = settings(tmp_path, demo.base_url)
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        st = tc.app.state
        # a battle served and not yet answered: stored unvotable
        from stablearena.service.security import Principal

        who = Principal(1, "admin", "admin", "", "")
        row = st.arena.serve(who, 1, ["demo-ace", "demo-wild"])[0]
        held = {"prompt_id": None, "prompt": "p", "category": "other", "address": None}
        held["served_at"] = time.time()
        assert (
            st.writer.submit(
                lambda c: store.held.insert_held(c, row=row, held=held, revision=None)
            ).result()
            == []
        )
        res = st.writer.submit(
            lambda c: store.record_vote(c, row["id"], 1, 0, time.time(), 0.0)
        ).result()
        # the API path: no vote on an incomplete battle, and it says why (not "expired")
        assert res.kind == "incomplete" and "both answers must be complete" in res.message
        res = st.writer.submit(
            lambda c: store.record_vote(c, row["id"], 1, 0, time.time(), 0.0)
        ).result()
        assert res.kind == "incomplete"
        assert csrf


def test_outage_from_breaker_and_back(tmp_path, demo):
    s = settings(tmp_path, demo.base_url, models=("demo-ace", "demo-sharp+flaky=2", "demo-wild"))
    s.models[1].update(outage_after=1, max_retries=0, outage_cooldown=0.0)
    s.arena_page.probe_seconds = 0.2
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        flaky = None
        for _ in range(12):
            lines = battle(tc, csrf)
            if lines[-1]["status"] == "failed":
                flaky = lines[-1]
                break
            vote(tc, csrf, lines[0]["battle_id"])
        assert flaky is not None
        models = {m["name"]: m for m in tc.get("/v1/models").json()["models"]}
        # under outage at once; the probe's answer (the 2nd request fails too, the 3rd answers)
        # brings it back
        deadline = time.time() + 10
        while time.time() < deadline:
            models = {m["name"]: m for m in tc.get("/v1/models").json()["models"]}
            if not models["demo-sharp+flaky=2"]["outage"]:
                break
            time.sleep(0.1)
        assert not models["demo-sharp+flaky=2"]["outage"]


def test_admin_sets_endpoint_and_limits(tmp_path, demo):
    s = settings(tmp_path, demo.base_url, models=(), visitor_open=1)
    with TestClient(create_app(s)) as tc:
        r = tc.put(
            "/v1/admin/models/m1/endpoint",
            json={"base_url": demo.base_url, "model": "demo-ace", "api_key": "sk-x"},
            headers=admin(tc),
        )
        assert r.status_code == 422 and "environment variable" in r.text
        for name, model in (("m1", "demo-ace"), ("m2", "demo-wild")):
            r = tc.put(
                f"/v1/admin/models/{name}/endpoint",
                json={
                    "base_url": demo.base_url,
                    "model": model,
                    "api_key_env": "NOPE",
                    "params": {"temperature": 0.2},
                    "max_concurrency": 2,
                    "timeout": 30,
                },
                headers=admin(tc),
            )
            assert r.status_code == 200 and r.json()["created"] is True
        csrf = open_page(tc)
        lines = battle(tc, csrf)
        assert lines[-1]["status"] == "complete"
        # served but not voted: the identity's cap (1) refuses the next battle
        r = tc.post("/arena/battles", json={"prompt": "hi"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_open"
        # a worker that did not serve it (its memory knows nothing) is refused by the
        # database's count, in the transaction that would store the battle: nothing is kept
        from stablearena.service.security import OpenBattles

        tc.app.state.visitors.open = OpenBattles()
        with tc.app.state.engine.connect() as conn:
            before = conn.execute(
                sa.select(sa.func.count()).select_from(store.tables.battles)
            ).scalar()
        r = tc.post("/arena/battles", json={"prompt": "hi"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_open"
        with tc.app.state.engine.connect() as conn:
            after = conn.execute(
                sa.select(sa.func.count()).select_from(store.tables.battles)
            ).scalar()
        assert after == before
        assert vote(tc, csrf, lines[0]["battle_id"]).status_code == 200
        assert battle(tc, csrf)[-1]["status"] == "complete"
        # an API client's vote beside the held ones: the export still reads as a battle log
        key = tc.post("/v1/admin/annotators", json={"name": "api"}, headers=admin(tc)).json()["key"]
        auth = {"Authorization": f"Bearer {key}"}
        b = tc.post("/v1/battles", json={}, headers=auth).json()["battles"][0]
        assert tc.post(
            f"/v1/battles/{b['battle_id']}/vote", json={"outcome": "tie"}, headers=auth
        ).is_success
        from stablearena.data.io import read_battles

        df = pd.read_json(io.StringIO(tc.get("/v1/export", headers=admin(tc)).text), lines=True)
        assert len(read_battles(df, extra="*")) == 2
        assert (df["prompt_id"] == "battle-" + b["battle_id"]).sum() == 1
        # a model without an endpoint stays a name
        assert tc.delete("/v1/admin/models/m2/endpoint", headers=admin(tc)).json()["removed"]
        assert "m2" in {m["name"] for m in tc.get("/v1/models").json()["models"]}
        with tc.app.state.engine.connect() as conn:
            cfgs = conn.execute(sa.select(store.held.model_endpoints.c.config)).scalars().all()
        assert all("sk-x" not in c for c in cfgs)


def test_style_and_category_boards_of_the_live_arena(tmp_path, demo):
    from stablearena.judging.endpoints.demo import demo_prompts

    s = settings(tmp_path, demo.base_url, models=("demo-ace", "demo-solid", "demo-wild"))
    s.models[2]["params"] = {"max_tokens": 3}  # a short answerer: lengths differ by side
    s.arena_page.visitor_open = 100
    s.arena_page.visitor_battles_per_hour = 1e6
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        for k, p in enumerate(demo_prompts(24)):
            lines = battle(tc, csrf, p["prompt"])
            assert vote(tc, csrf, lines[0]["battle_id"], ("model_a", "model_b")[k % 2]).is_success
        styled = tc.get("/v1/leaderboard?style=true&method=bt").json()
        assert "style" in styled and "style_tokens_a:style_tokens_b" not in styled["style_left_out"]
        boards = tc.get("/v1/leaderboard?by=category&method=bt").json()["boards"]
        assert set(boards) == {"math", "other"}
        assert sum(b["n_battles"] for b in boards.values()) == 24
        math = tc.get("/v1/leaderboard?where=category=math&method=bt").json()
        assert math["n_battles"] == boards["math"]["n_battles"]
        assert math["where"] == {"category": ["math"]}


def test_judges_vote_on_completed_battles(tmp_path, demo):
    s = settings(tmp_path, demo.base_url)
    s.judges = [
        {"name": n, "base_url": demo.base_url, "model": n} for n in ("judge-keen", "judge-contrary")
    ]
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        lines = battle(tc, csrf, "What is 12*12?")
        assert vote(tc, csrf, lines[0]["battle_id"], "tie").status_code == 200
        deadline = time.time() + 30
        rows: list[dict] = []
        while time.time() < deadline and len(rows) < 3:
            ex = tc.get("/v1/export?texts=true", headers=admin(tc)).text
            rows = [json.loads(x) for x in ex.splitlines()]
            time.sleep(0.1)
        judges = {r["judge"]: r for r in rows}
        assert {"judge-keen", "judge-contrary"} <= set(judges)
        j = judges["judge-keen"]
        assert j["strategy"] == "judge" and j["prompt_text"] == "What is 12*12?"
        assert j["answer_a"] and j["prompt_id"] == rows[0]["prompt_id"]
        # the judge's replies to both orders are kept (the demo judges explain their verdict)
        replies = json.loads(j["judge_reasoning"])
        assert [r["order"] for r in replies] == ["xy", "yx"]
        assert all(r["winner"] in ("A", "B", "tie") and r["reasoning"] for r in replies)
        people = [r for r in rows if r["strategy"] != "judge"]
        assert all(r.get("judge_reasoning") is None for r in people)
        # the honest judge and the inverted one disagree unless both orders tie
        a, b = judges["judge-keen"]["winner"], judges["judge-contrary"]["winner"]
        assert a == b == "tie" or a != b


def test_judges_forfeit_an_answer_that_talks_to_them_and_the_admin_sees_it(tmp_path, demo):
    """demo-sly opens every answer with a note to the judge: under the default policy
    (forfeit) the judge's vote goes to the other model without a judge call, and the admin view
    and GET /v1/admin/injections count it per model (issue 33, item 2)."""
    s = settings(tmp_path, demo.base_url, models=("demo-ace", "demo-sly"))
    s.judges = [{"name": "judge-obey", "base_url": demo.base_url, "model": "judge-obey"}]
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        lines = battle(tc, csrf, "What is 12*12?")
        assert vote(tc, csrf, lines[0]["battle_id"], "tie").status_code == 200
        deadline, rows = time.time() + 30, []
        while time.time() < deadline and len(rows) < 2:
            ex = tc.get("/v1/export?texts=true", headers=admin(tc)).text
            rows = [json.loads(x) for x in ex.splitlines()]
            time.sleep(0.1)
        j = next(r for r in rows if r["strategy"] == "judge")
        loser = "model_a" if j["model_a"] == "demo-sly" else "model_b"
        assert j["winner"] == ("model_b" if loser == "model_a" else "model_a")
        assert json.loads(j["judge_reasoning"]) == []  # no judge call: the rule decided
        flags = tc.get("/v1/admin/injections", headers=admin(tc)).json()["models"]
        assert [(f["model"], f["battles"], f["actions"]) for f in flags] == [
            ("demo-sly", 1, {"forfeit": 1})
        ]
        assert tc.get("/v1/admin/injections").status_code == 401
        page = tc.post("/admin/login", data={"key": tc.app.state.admin_key})
        assert page.status_code in (200, 303)
        html = tc.get("/admin").text
        assert "Answers that talked to the judge" in html and "demo-sly" in html


def test_a_flood_from_one_address_is_limited(tmp_path, demo):
    s = settings(tmp_path, demo.base_url, address_open=2)
    with TestClient(create_app(s)) as tc:
        tokens = []
        for _ in range(2):
            tc.cookies.clear()
            tokens.append((open_page(tc), dict(tc.cookies)))
        for csrf, cookies in tokens:  # two battles from the address, no vote: the cap
            tc.cookies.clear()
            tc.cookies.update(cookies)
            assert battle(tc, csrf)[-1]["status"] == "complete"
        tc.cookies.clear()
        csrf = open_page(tc)
        r = tc.post("/arena/battles", json={"prompt": "hi"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 429 and "your address" in r.json()["error"]["message"]
        # new identities from one address: a burst of 5, then refused
        codes = []
        for _ in range(5):
            tc.cookies.clear()
            codes.append(tc.get("/arena").status_code)
        assert codes[-1] == 429 and codes.count(200) == 2  # 3 made above, 2 more


def test_the_open_battles_counted_for_the_caps(tmp_path, demo):
    """A held battle counts against its identity's and address's caps while it is served
    within its lifetime and has no vote from the page; a failed one never does; the count
    reads the index of open battles only (its cost does not grow with the battles held)."""
    s = settings(tmp_path, demo.base_url, models=("demo-ace", "demo-wild", "demo-fair+fail500"))
    s.arena_page.visitor_open = 100
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        engine = tc.app.state.engine
        statuses, ids = [], []
        while len(statuses) < 6 or "failed" not in statuses or statuses.count("complete") < 2:
            lines = battle(tc, csrf)
            statuses.append(lines[-1]["status"])
            ids.append(lines[0]["battle_id"])
        held = sa.select(store.tables.held_battles).where(
            store.tables.held_battles.c.battle_id.in_(ids)
        )
        with engine.connect() as conn:
            rows = {r.battle_id: r for r in conn.execute(held)}
        who = next(iter(rows.values())).annotator_id
        address = next(iter(rows.values())).address
        done = [b for b, st in zip(ids, statuses, strict=True) if st == "complete"]

        def count(now: float) -> tuple[int, int]:
            with engine.connect() as conn:
                return store.held.open_held(conn, who, address, now)

        now = time.time()
        assert count(now) == (len(done), len(done))  # the failed ones are not open
        assert all(
            rows[b].open_until is None
            for b, st in zip(ids, statuses, strict=True)
            if st == "failed"
        )
        assert vote(tc, csrf, done[0]).status_code == 200
        assert count(now) == (len(done) - 1, len(done) - 1)
        assert vote(tc, csrf, done[0]).status_code == 200  # a replay changes nothing
        assert count(now) == (len(done) - 1, len(done) - 1)
        # past their lifetime (served_at + battle_ttl) they are not open any more
        assert count(now + s.arena.battle_ttl + 1) == (0, 0)
        with engine.connect() as conn:
            plan = " ".join(
                str(r[-1])
                for r in conn.exec_driver_sql(
                    "EXPLAIN QUERY PLAN SELECT count(*) FROM held_battles "
                    "WHERE address = ? AND open_until > ?",
                    (address, now),
                )
            )
        assert "ix_held_battles_open_address" in plan, plan


def test_the_admin_sees_which_model_one_judge_favours(tmp_path, demo):
    """Issue 41 item 3: with nothing contained (policy keep), judge-obey follows demo-sly's notes
    and the honest judges do not; GET /v1/admin/injections's ``disagreement`` flags demo-sly,
    favoured by judge-obey (stablearena.judging.injection.judge_disagreement)."""
    s = settings(tmp_path, demo.base_url, models=("demo-ace", "demo-sly", "demo-solid"))
    s.judges = [
        {"name": j, "base_url": demo.base_url, "model": j}
        for j in ("judge-obey", "judge-keen", "judge-fair")
    ]
    s.injection = {"policy": "keep"}
    s.arena_page.visitor_open = 100
    s.arena_page.visitor_battles_per_hour = 1e6
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        from stablearena.judging.endpoints.demo import demo_prompts

        for p in demo_prompts(40, seed=4):
            lines = battle(tc, csrf, p["prompt"])
            assert vote(tc, csrf, lines[0]["battle_id"], "tie").status_code == 200
        deadline, got = time.time() + 60, {}
        while time.time() < deadline:
            got = tc.get("/v1/admin/injections", headers=admin(tc)).json()["disagreement"]
            if got.get("demo-sly", {}).get("flagged"):
                break
            time.sleep(0.3)
        assert got["demo-sly"]["flagged"] and got["demo-sly"]["favoured_by"] == "judge-obey"
