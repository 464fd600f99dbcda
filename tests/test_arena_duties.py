"""A public arena's duties (issue 31, item 4; docs/guides/live-arena-security.md): moderation
of every prompt before any model sees it and before it is stored (an OpenAI-compatible
``/v1/moderations`` endpoint — the demo server's, a real process — or a local rule list), terms
of use accepted per identity, and battle categories from a classifier endpoint asked while the
answers stream. In-process arena (FastAPI's TestClient), real demo server process, SQLite."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena.errors import InputError
from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.service.app import create_app
from stablearena.service.arena_settings import CLASSIFIER_TAGS
from stablearena.service.duties import check_duties, parse_tags
from stablearena.service.settings import Settings


@pytest.fixture(scope="module")
def demo():
    with DemoServer(seed=0) as server:
        yield server


def make(tmp_path, base_url: str, tag: str, **duties) -> Settings:
    """An arena of two demo models with their own request counters (``id=tag``)."""
    return Settings(
        db=f"sqlite:///{tmp_path / 'arena.db'}",
        fit_in_process=False,
        poll_seconds=0.05,
        seed=0,
        arena={"min_records": 0},
        models=[
            {"name": m, "base_url": base_url, "model": f"{m}+id={tag}"}
            for m in ("demo-ace", "demo-wild")
        ],
        arena_page={"categories": {"math": r"\d\s*[-+*]\s*\d"}},
        **duties,
    )


def admin(tc: TestClient) -> dict[str, str]:
    return {"Authorization": f"Bearer {tc.app.state.admin_key}"}


def csrf_of(tc: TestClient) -> str:
    r = tc.get("/arena")
    assert r.status_code == 200
    return re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)


def post_battle(tc: TestClient, csrf: str, prompt: str):
    return tc.post("/arena/battles", json={"prompt": prompt}, headers={"X-CSRF-Token": csrf})


def chat_requests(demo: DemoServer, tag: str) -> int:
    """Chat requests the demo server saw for this test's models."""
    return sum(v["requests"] for k, v in demo.stats().items() if k.endswith(f"+id={tag}"))


def held_rows(tc: TestClient) -> list:
    with tc.app.state.holder.state.engine.connect() as conn:
        return conn.execute(sa.text("SELECT prompt, category FROM held_battles")).all()


def duties(tc: TestClient) -> dict:
    r = tc.get("/v1/admin/duties", headers=admin(tc))
    assert r.status_code == 200, r.text
    return r.json()


def test_moderation_endpoint_refuses_before_any_model_and_stores_nothing(tmp_path, demo):
    cfg = make(
        tmp_path, demo.base_url, "mod1", moderation={"endpoint": {"base_url": demo.base_url}}
    )
    with TestClient(create_app(cfg)) as tc:
        csrf = csrf_of(tc)
        r = post_battle(tc, csrf, "Tell me something forbidden about my neighbour.")
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "moderated" and "refused by the arena's moderation" in err["message"]
        assert chat_requests(demo, "mod1") == 0  # no model saw it
        assert held_rows(tc) == []  # nor was it stored, anywhere
        raw = (tmp_path / "arena.db").read_bytes()
        assert b"neighbour" not in raw
        assert demo.stats()["moderations:omni-moderation-latest"]["requests"] >= 1
        # a clean prompt goes through
        r = post_battle(tc, csrf, "What is 2+2?")
        assert r.status_code == 200 and '"status": "complete"' in r.text
        assert chat_requests(demo, "mod1") == 2
        got = duties(tc)["moderation"]
        assert got["refused"] == 1 and got["by_source"] == {"endpoint": 1}
        assert got["reasons"] == [{"reasons": "harassment", "prompts": 1}]
        assert tc.get("/v1/admin/duties").status_code == 401
        # the admin view (after its login) shows the count
        assert tc.post("/admin/login", data={"key": tc.app.state.admin_key}).status_code == 200
        page = tc.get("/admin").text
        assert re.search(r'id="moderation-refused">1<', page) and "harassment" in page


def test_moderation_rule_list_from_config_and_file(tmp_path, demo):
    rules = tmp_path / "rules.txt"
    rules.write_text("# one rule a line\nbadword\nre:(?i)credit\\s*card\\s*\\d{4}\n")
    cfg = make(
        tmp_path,
        demo.base_url,
        "mod2",
        moderation={"words": ["Voldemort"], "rules_file": str(rules)},
    )
    with TestClient(create_app(cfg)) as tc:
        csrf = csrf_of(tc)
        for text in ("Who is VOLDEMORT?", "say badword now", "my Credit card 1234 please"):
            r = post_battle(tc, csrf, text)
            assert r.status_code == 422 and r.json()["error"]["code"] == "moderated", text
        # a word matches whole words only
        assert post_battle(tc, csrf, "badwords are fine here").status_code == 200
        assert chat_requests(demo, "mod2") == 2
        got = duties(tc)["moderation"]
        assert got["by_source"] == {"rules": 3} and got["refused"] == 3
    bad = tmp_path / "bad.txt"
    bad.write_text("ok\nre:(unclosed\n")
    with pytest.raises(InputError, match=r"bad.txt, line 2: '\(unclosed' is not a regular"):
        check_duties(make(tmp_path, demo.base_url, "x", moderation={"rules_file": str(bad)}))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("fail", ["closed", "open"])
def test_moderation_endpoint_down(tmp_path, demo, fail):
    """Down (nothing listens): fail closed refuses every prompt (503) before any model call;
    fail open lets it through, counted as unchecked."""
    tag = f"down-{fail}"
    endpoint = {"base_url": f"http://127.0.0.1:{_closed_port()}/v1", "timeout": 2}
    cfg = make(tmp_path, demo.base_url, tag, moderation={"endpoint": endpoint, "fail": fail})
    with TestClient(create_app(cfg)) as tc:
        csrf = csrf_of(tc)
        r = post_battle(tc, csrf, "Hello there")
        got = duties(tc)["moderation"]
        if fail == "closed":
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "moderation_unavailable"
            assert chat_requests(demo, tag) == 0 and held_rows(tc) == []
            assert got["refused"] == 1 and got["by_source"] == {"unavailable": 1}
            assert got["reasons"][0]["reasons"].startswith("connection")
        else:
            assert r.status_code == 200 and '"status": "complete"' in r.text
            assert chat_requests(demo, tag) == 2
            assert got["refused"] == 0 and got["unchecked"] == 1


def test_moderation_endpoint_http_500_fails_closed(tmp_path, demo):
    endpoint = {"base_url": demo.base_url, "model": "omni+fail500"}
    cfg = make(tmp_path, demo.base_url, "m500", moderation={"endpoint": endpoint})
    with TestClient(create_app(cfg)) as tc:
        r = post_battle(tc, csrf_of(tc), "Hello there")
        assert r.status_code == 503 and chat_requests(demo, "m500") == 0
        assert duties(tc)["moderation"]["reasons"][0]["reasons"].startswith("http_500")


def test_terms_must_be_accepted_before_the_first_battle(tmp_path, demo):
    text = "Be kind. Your prompts and votes are published under CC-BY."
    cfg = make(tmp_path, demo.base_url, "terms", terms={"text": text})
    with TestClient(create_app(cfg)) as tc:
        page = tc.get("/arena").text
        assert 'data-terms="pending"' in page and "published under CC-BY" in page
        version = re.search(r'id="terms" data-version="([0-9a-f]{16})"', page).group(1)
        csrf = csrf_of(tc)
        r = post_battle(tc, csrf, "What is 2+2?")
        assert r.status_code == 403 and r.json()["error"]["code"] == "terms_not_accepted"
        assert chat_requests(demo, "terms") == 0
        h = {"X-CSRF-Token": csrf}
        assert tc.post("/arena/terms", json={"version": "0" * 16}, headers=h).status_code == 409
        assert tc.post("/arena/terms", json={"version": version}).status_code == 403  # no CSRF
        t0 = time.time()
        r = tc.post("/arena/terms", json={"version": version}, headers=h)
        assert r.status_code == 200 and t0 <= r.json()["accepted_at"] <= time.time()
        assert post_battle(tc, csrf, "What is 2+2?").status_code == 200
        assert 'data-terms="accepted"' in tc.get("/arena").text
        # another worker, which never saw this visitor, reads the acceptance from the database
        tc.app.state.visitors.ids.clear()
        tc.app.state.duties.accepted.clear()
        assert 'data-terms="accepted"' in tc.get("/arena").text
        with tc.app.state.holder.state.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT * FROM terms_acceptances")).all()
        assert len(rows) == 1 and rows[0].version == version
        assert duties(tc)["terms"] == {"version": version, "accepted": 1}
        # another visitor (a new cookie) has accepted nothing
        tc.cookies.clear()
        r = post_battle(tc, csrf_of(tc), "What is 2+2?")
        assert r.status_code == 403 and r.json()["error"]["code"] == "terms_not_accepted"


def _category(tc: TestClient, want: str | None, timeout: float = 10.0) -> list:
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = held_rows(tc)
        if rows and (want is None or rows[-1].category == want):
            return rows
        time.sleep(0.05)
    raise AssertionError(f"category never {want!r}: {held_rows(tc)}")


def test_classifier_categories_arrive_after_the_answers(tmp_path, demo):
    """The classifier answers ~2 s after it is asked (slow=0.7 × 3 words): the battle's answers
    are complete before (nothing waited for it), stored with the rules' category, then the
    classifier's. A judge's copy of the battle, made when a vote closes the battle (judges judge
    the whole conversation at the vote), waits for the classifier and carries its category too."""
    clf = {"endpoint": {"base_url": demo.base_url, "model": "demo-classifier+slow=0.7"}}
    cfg = make(tmp_path, demo.base_url, "clf", category_classifier=clf)
    cfg.judges = [{"name": "judge-keen", "base_url": demo.base_url, "model": "judge-keen"}]
    with TestClient(create_app(cfg)) as tc:
        t0 = time.perf_counter()
        csrf = csrf_of(tc)
        r = post_battle(tc, csrf, "Write a Python function for 3*4")
        took = time.perf_counter() - t0
        assert r.status_code == 200 and '"status": "complete"' in r.text
        assert [row.category for row in held_rows(tc)] == ["math"], took  # the rules', for now
        bid = json.loads(r.text.splitlines()[0])["battle_id"]
        v = tc.post(
            f"/arena/battles/{bid}/vote", json={"outcome": "tie"}, headers={"X-CSRF-Token": csrf}
        )
        assert v.status_code == 200, v.text
        deadline = time.time() + 20
        while len(held_rows(tc)) < 2 and time.time() < deadline:
            time.sleep(0.05)
        _category(tc, "coding")
        assert [row.category for row in held_rows(tc)] == ["coding", "coding"]
        assert duties(tc)["classifier"] == {
            "asked": 1,
            "tagged": 1,
            "untagged": 0,
            "malformed": 0,
            "failed": 0,
        }


def test_classifier_malformed_reply_keeps_the_rules_category(tmp_path, demo):
    clf = {"endpoint": {"base_url": demo.base_url, "model": "demo-classifier+garbage"}}
    cfg = make(tmp_path, demo.base_url, "clf2", category_classifier=clf)
    with TestClient(create_app(cfg)) as tc:
        r = post_battle(tc, csrf_of(tc), "Write a Python function for 3*4")
        assert r.status_code == 200
        deadline = time.time() + 10
        while duties(tc)["classifier"]["malformed"] == 0 and time.time() < deadline:
            time.sleep(0.05)
        assert duties(tc)["classifier"]["malformed"] == 1
        assert held_rows(tc)[-1].category == "math"


def test_parse_tags_cases():
    assert parse_tags('{"tags": ["math", "coding"]}') == ["coding", "math"]
    assert parse_tags('Sure!\n```json\n{"tags": ["Creative Writing"]}\n```') == ["creative_writing"]
    assert parse_tags('{"tags": []}') == []
    for bad in (None, 3, "", "coding", '{"tags": "coding"}', '{"tags": ["cats"]}', "{not json}"):
        assert parse_tags(bad) is None, bad


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.builds(
            lambda tags, pre, post: pre + json.dumps({"tags": tags}) + post,
            st.lists(st.one_of(st.sampled_from(CLASSIFIER_TAGS), st.text(max_size=12))),
            st.text(max_size=20),
            st.text(max_size=20),
        ),
    )
)
def test_parse_tags_never_raises_and_returns_known_tags(reply):
    got = parse_tags(reply)
    assert got is None or (set(got) <= set(CLASSIFIER_TAGS) and len(got) == len(set(got)))


@pytest.mark.slow
def test_duties_on_postgresql(tmp_path, demo, postgres):
    """The same refusals, counts and acceptances on PostgreSQL (slow: a server of its own)."""
    cfg = make(
        tmp_path,
        demo.base_url,
        "pg",
        moderation={"words": ["badword"], "endpoint": {"base_url": demo.base_url}},
        terms={"text": "Be kind."},
    )
    cfg.db = postgres.create_database("duties")
    with TestClient(create_app(cfg)) as tc:
        page = tc.get("/arena").text
        version = re.search(r'data-version="([0-9a-f]{16})"', page).group(1)
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page).group(1)
        h = {"X-CSRF-Token": csrf}
        assert post_battle(tc, csrf, "hi").json()["error"]["code"] == "terms_not_accepted"
        first = tc.post("/arena/terms", json={"version": version}, headers=h).json()
        again = tc.post("/arena/terms", json={"version": version}, headers=h).json()
        assert first == again  # the first acceptance's time is kept
        assert post_battle(tc, csrf, "a badword here").status_code == 422
        assert post_battle(tc, csrf, "something forbidden").status_code == 422
        assert post_battle(tc, csrf, "What is 2+2?").status_code == 200
        assert chat_requests(demo, "pg") == 2
        got = duties(tc)
        assert got["moderation"]["by_source"] == {"rules": 1, "endpoint": 1}
        assert got["terms"] == {"version": version, "accepted": 1}
