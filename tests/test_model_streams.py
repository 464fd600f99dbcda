"""What a model sends never wedges the arena (issue 32): every malformed stream of a real
broken server — the demo server's ``bad=KIND`` modes, and any bytes hypothesis makes, fed
through a loopback socket — ends as an answer or as a failure the circuit breaker counts; page
battles against such a model all end with their final line and never lock the visitor out, on
SQLite and PostgreSQL; ``stablearena auto`` finishes and resumes."""

from __future__ import annotations

import asyncio
import json
import math
import re
import socket
import threading
import time
import uuid

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stablearena.judging.endpoints import EndpointClient, ModelEndpoint
from stablearena.judging.endpoints.demo_server import BAD_KINDS, DemoServer
from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.settings import Settings

#: What each of the demo server's malformed streams ends as (None: an answer).
EXPECTED = {
    **{k: "bad_response" for k in BAD_KINDS},
    "nul": None,
    "surrogate": None,
    "error": "http_500",
    "cut": "dropped",
    "huge": "too_long",
    "endless": "too_long",
    "endless_idle": "timeout",
}
REASONS = {"bad_response", "http_500", "dropped", "too_long", "timeout", "connection"}
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")


@pytest.fixture(scope="module")
def demo():
    with DemoServer(seed=0) as server:
        yield server


def _bad(base_url: str, model: str, **kw) -> ModelEndpoint:
    kw = {"max_retries": 0, "timeout": 5.0, **kw}
    return ModelEndpoint("broken", base_url, model, **kw)


#: only keeps a hung call from hanging the suite (a call here ends within its 0.2-5 s timeout)
HANG_SECONDS = 60.0


def _call(ep: ModelEndpoint, stream: list[str] | None = None):
    async def go():
        async with EndpointClient(ep) as c:
            res = await c.complete(c.messages("What is 17*23?"), stream.append if stream else None)
            return res, c.breaker.failures

    return asyncio.run(asyncio.wait_for(go(), HANG_SECONDS))


def _check(res) -> None:
    """The reader's invariant: an answer of clean text and finite numbers >= 0, or a failure
    with a known reason."""
    if res.ok:
        assert isinstance(res.text, str) and not _CONTROL.search(res.text)
        assert res.finish_reason is None or (
            isinstance(res.finish_reason, str) and not _CONTROL.search(res.finish_reason)
        )
        for v in (res.ttft, res.total_time):
            assert isinstance(v, float) and math.isfinite(v) and v >= 0
        for v in (res.prompt_tokens, res.completion_tokens):
            assert type(v) is int and 0 <= v < 2**31
    else:
        assert res.reason in REASONS, res
        assert isinstance(res.detail, str) and not _CONTROL.search(res.detail)


# ----------------------------------------------------------------------------- one per kind
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_each_malformed_stream_is_a_failure_the_breaker_counts(demo, kind):
    timeout = 1.0 if kind == "endless_idle" else 5.0
    res, failures = _call(_bad(demo.base_url, f"demo-ace+bad={kind}", timeout=timeout))
    _check(res)
    assert (None if res.ok else res.reason) == EXPECTED[kind], res
    assert failures == (0 if res.ok else 1)  # the breaker counted it
    # an endless answer ended by the cap (too_long), keep-alives by the timeout: EXPECTED
    if kind == "nul":  # C0 controls are removed on reading: nothing PostgreSQL cannot store
        assert res.text == "Hello abc"
    if kind == "surrogate":
        assert res.text == "Hello x\ufffdy"


def test_answer_over_the_cap_is_stopped(demo):
    """``max_answer_chars``: a longer answer, streamed or not, fails ``too_long`` (the
    connection closed), and a 5 MB one under the default cap of 200,000 characters too."""
    assert ModelEndpoint("m", demo.base_url, "m").max_answer_chars == 200_000
    for stream in (True, False):
        res, failures = _call(_bad(demo.base_url, "demo-ace", max_answer_chars=10, stream=stream))
        assert res.reason == "too_long" and "max_answer_chars = 10" in res.detail
        assert failures == 1
    res, _ = _call(_bad(demo.base_url, "demo-ace", max_answer_chars=10_000))
    assert res.ok  # under the cap: untouched
    res, _ = _call(ModelEndpoint("m", demo.base_url, "demo-ace+bad=huge", max_retries=0))
    assert res.reason == "too_long"
    from stablearena.errors import InputError

    for bad in (0, -1, 1.5, True, 10**10):
        with pytest.raises(InputError, match="max_answer_chars"):
            ModelEndpoint("m", demo.base_url, "m", max_answer_chars=bad)


# ------------------------------------------------------------------------------ the page
def _settings(db: str, base_url: str, bad: str) -> Settings:
    broken = {"name": "broken", "base_url": base_url, "model": bad, "max_retries": 0}
    broken.update(timeout=2.0, outage_after=1000)
    return Settings(
        db=db,
        fit_in_process=False,
        poll_seconds=0.05,
        seed=0,
        arena={"min_records": 0, "refit_votes": 1000, "refit_seconds": 60},
        models=[{"name": "demo-ace", "base_url": base_url, "model": "demo-ace"}, broken],
        arena_page={"visitor_battles_per_hour": 1e6, "address_battles_per_hour": 1e6},
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'arena.db'}"
    return request.getfixturevalue("postgres").create_database("s" + uuid.uuid4().hex[:12])


def test_a_model_sending_each_malformed_stream_in_turn_never_wedges_the_page(demo, db):
    """The issue's acceptance: every page battle ends with a final line, a failed battle is
    stored failed and holds nothing open, the visitor (cap: 3 open battles) is never locked
    out; a NUL in an answer is stored without it on SQLite and PostgreSQL."""
    bad = f"demo-wild+bad=cycle+id={uuid.uuid4().hex[:8]}"
    with TestClient(create_app(_settings(db, demo.base_url, bad))) as tc:
        r = tc.get("/arena")
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)
        head = {"X-CSRF-Token": csrf}
        for kind in (*BAD_KINDS, "delta_str"):
            r = tc.post("/arena/battles", json={"prompt": "What is 17*23?"}, headers=head)
            assert r.status_code == 200, (kind, r.text)  # never locked out
            lines = [json.loads(x) for x in r.text.splitlines()]
            last = lines[-1]
            assert last.get("done") is True, (kind, lines[-3:])  # the final line
            bid = lines[0]["battle_id"]
            want = "complete" if EXPECTED[kind] is None else "failed"
            assert last["status"] == want, (kind, last)
            if want == "failed":
                assert EXPECTED[kind] in last["failure"]
                vote = tc.post(f"/arena/battles/{bid}/vote", json={"outcome": "tie"}, headers=head)
                assert vote.status_code == 409
            else:
                vote = tc.post(f"/arena/battles/{bid}/vote", json={"outcome": "tie"}, headers=head)
                assert vote.status_code == 200
            with tc.app.state.engine.connect() as conn:
                row = conn.execute(
                    sa.select(store.tables.held_battles).where(
                        store.tables.held_battles.c.battle_id == bid
                    )
                ).one()
            assert row.status == want and row.open_until is None
        with tc.app.state.engine.connect() as conn:
            texts = conn.execute(sa.select(store.tables.battle_answers.c.text)).scalars().all()
        assert "Hello abc" in texts  # the NUL and the BEL removed, stored on either database
        assert not any(t and _CONTROL.search(t) for t in texts)
        models = {m["name"]: m for m in tc.get("/v1/models").json()["models"]}
        assert not models["demo-ace"]["outage"]


def test_prompts_with_a_nul_or_only_white_space_are_refused(demo, db, tmp_path):
    """One prompt check (``prompt_problem``) for the page and the prompts files: a NUL or
    another control character, or white space only, is a 422 naming the problem (a NUL was a
    503 "retry later" on PostgreSQL; white space started a battle)."""
    with TestClient(create_app(_settings(db, demo.base_url, "demo-wild"))) as tc:
        r = tc.get("/arena")
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)
        head = {"X-CSRF-Token": csrf}
        for prompt, words in (
            ("a\x00b", "U+0000"),
            ("x\x1by", "U+001B"),
            ("   \n\t ", "only white space"),
        ):
            r = tc.post("/arena/battles", json={"prompt": prompt}, headers=head)
            assert r.status_code == 422 and words in r.text, (prompt, r.status_code, r.text)
        r = tc.post("/arena/battles", json={"prompt": "hi", "prompt_id": "p\x00"}, headers=head)
        assert r.status_code == 422 and "U+0000" in r.text
        with tc.app.state.engine.connect() as conn:
            n = conn.execute(sa.select(sa.func.count()).select_from(store.tables.battles))
            assert n.scalar() == 0
    from stablearena.errors import InputError
    from stablearena.judging.auto_arena import read_prompts

    for text in (" \t", "a\x00b"):
        (tmp_path / "p.jsonl").write_text(json.dumps({"id": "q1", "prompt": text}))
        with pytest.raises(InputError, match="'q1'"):
            read_prompts(tmp_path / "p.jsonl")


# ------------------------------------------------------------------------------ auto
def test_auto_with_a_malformed_model_finishes_and_resumes(demo, tmp_path, cli):
    """``stablearena auto`` with a model sending each malformed stream in turn records each
    failure, finishes (exit 0), and a second run on the journal resumes and finishes."""
    bad = f"demo-wild+bad=cycle+id={uuid.uuid4().hex[:8]}"
    models = tmp_path / "models.toml"
    models.write_text(
        "".join(
            f'[[models]]\nname = "{m}"\nbase_url = "{demo.base_url}"\nmodel = "{m}"\n\n'
            for m in ("demo-ace", "demo-sharp")
        )
        + f'[[models]]\nname = "broken"\nbase_url = "{demo.base_url}"\nmodel = "{bad}"\n'
        "max_retries = 0\ntimeout = 2.0\n"
    )
    judges = tmp_path / "judges.toml"
    judges.write_text(
        f'[[judges]]\nname = "judge-keen"\nbase_url = "{demo.base_url}"\nmodel = "judge-keen"\n'
    )
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "\n".join(json.dumps({"id": f"q{k}", "prompt": f"What is {k}*7?"}) for k in range(8))
    )
    journal = tmp_path / "run.jsonl"
    cmd = ["auto", str(prompts), "--models", str(models), "--judges", str(judges),
           "--budget", "60", "--journal", str(journal), "--parallel", "4", "--rater", "m-elo"]  # fmt: skip
    for run in range(2):
        code, _, err = cli(*cmd)
        assert code == 0, err[-3000:]
        assert "internal error" not in err.lower()
        if run == 1:
            assert "resumed" in err
    records = [json.loads(x) for x in journal.read_text().splitlines()]
    failed = [r for r in records if r.get("type") == "answer" and not r["ok"]]
    assert "bad_response" in {r["reason"] for r in failed} <= REASONS
    assert all(not _CONTROL.search(r.get("text", "")) for r in records if r.get("type") == "answer")


# ------------------------------------------------------------------------------ fuzzing
class FeedServer:
    """A loopback HTTP server answering each request with the pieces set in ``pieces`` (a
    pause between them, so that the client reads them apart), then closing the connection;
    with ``endless`` it repeats the last piece until the client goes away."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.endless = False
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        pieces, endless = list(self.pieces), self.endless
        with conn:
            try:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    buf += conn.recv(65536)
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
                while len(rest) < length:
                    rest += conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Connection: close\r\n\r\n"
                )
                for p in pieces:
                    conn.sendall(p)
                    time.sleep(0.0005)
                while endless and pieces:
                    conn.sendall(pieces[-1])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def feed():
    server = FeedServer()
    yield server
    server.close()


_scalar = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
_json = st.recursive(
    _scalar,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=8,
)
_content = st.text(max_size=30) | _json
_choice = st.fixed_dictionaries(
    {},
    optional={
        "delta": st.fixed_dictionaries({}, optional={"content": _content}) | _json,
        "finish_reason": st.sampled_from(["stop", "length", None]) | _json,
        "index": _json,
    },
)
_usage = st.fixed_dictionaries(
    {},
    optional={"prompt_tokens": _json | st.integers(0, 10**12), "completion_tokens": _json},
)
_chunk = (
    st.fixed_dictionaries(
        {},
        optional={
            "choices": st.lists(_choice | _json, max_size=3) | _json,
            "usage": _usage | _json,
            "error": _json,
        },
    )
    | _json
)


@st.composite
def _stream(draw) -> tuple[list[bytes], bool]:
    """A stream's bytes cut at arbitrary points: chunks of any JSON shape, text with NULs and
    controls, any encoding, raw junk, with or without ``[DONE]``; maybe endless."""
    events = []
    for obj in draw(st.lists(_chunk, max_size=6)):
        raw = json.dumps(obj, ensure_ascii=draw(st.booleans()))
        enc = draw(st.sampled_from(["utf-8", "utf-8", "utf-16", "latin-1"]))
        data = raw.encode(enc, "replace" if enc == "latin-1" else "surrogatepass")
        events.append(b"data: " + data + b"\n\n")
    if draw(st.booleans()):
        events.insert(draw(st.integers(0, len(events))), draw(st.binary(max_size=40)))
    if draw(st.booleans()):
        events.append(b"data: [DONE]\n\n")
    raw = b"".join(events)
    if draw(st.booleans()):
        raw = raw.replace(b"\n", b"\r\n")
    cuts = sorted({c % (len(raw) + 1) for c in draw(st.lists(st.integers(0, 10**6), max_size=6))})
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    endless = draw(st.integers(0, 9)) == 0
    if endless:  # then the same chunk over and over: by the cap, or keep-alives by the timeout
        pieces.append(draw(st.sampled_from([b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n',
                                            b": ping\n\n"])))  # fmt: skip
    return [p for p in pieces if p], endless


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_stream(), st.integers(1, 300))
def test_any_stream_is_an_answer_or_a_counted_failure(feed, stream, cap):
    """Hypothesis: any bytes a model server sends, read through a real socket by the client,
    give an answer (clean text, finite numbers >= 0) or a failure the breaker counts; never an
    exception, never a hang (an endless stream ends by ``max_answer_chars`` or the timeout)."""
    feed.pieces, feed.endless = stream
    ep = ModelEndpoint("m", feed.url, "m", max_retries=0, timeout=0.2, max_answer_chars=cap)
    res, failures = _call(ep)  # a hang fails by HANG_SECONDS
    _check(res)
    assert failures == (0 if res.ok else 1)
    if res.ok:
        assert len(res.text) <= cap
