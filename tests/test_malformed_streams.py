"""Nothing a model sends wedges the arena (issue 32): one reader for model streams turns any
malformed input into a clean failure the outage breaker counts; the page's battles end with a
final line and never lock the visitor out; ``auto`` finishes and resumes; NULs never reach the
database. The models are served by a real OpenAI-compatible server process on loopback whose
``bad=KIND`` modes go wrong as real servers do (stablearena.endpoints.demo_server)."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
import time

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_arena_service import battle, open_page, vote
from test_arena_service import settings as arena_settings
from typer.testing import CliRunner

from stablearena.endpoints import EndpointClient, ModelEndpoint
from stablearena.endpoints.client import Malformed, StreamError, chunk_parts, message_parts
from stablearena.endpoints.demo_server import BAD_STREAMS, DemoServer
from stablearena.service.app import create_app

#: What each bad stream gives: (ok, reason)
EXPECTED = {
    "delta-str": (False, "bad_response"),
    "choices-int": (False, "bad_response"),
    "content-int": (False, "bad_response"),
    "usage-str": (True, None),
    "not-json": (False, "bad_response"),
    "bad-utf8": (False, "bad_response"),
    "nul": (True, None),
    "error": (False, "http_500"),
    "cut": (False, "dropped"),
    "huge": (False, "too_long"),
    "endless": (False, "too_long"),
    "no-blank": (False, "too_long"),
}


@pytest.fixture(scope="module")
def demo():
    with DemoServer(seed=0) as server:
        yield server


def _call(ep: ModelEndpoint, n: int = 1):
    async def go():
        async with EndpointClient(ep) as c:
            return [await c.answer("What is 17*23?") for _ in range(n)], c.breaker.failures

    return asyncio.run(go())


def test_every_kind_is_covered():
    assert set(EXPECTED) == set(BAD_STREAMS)


@pytest.mark.parametrize("kind", BAD_STREAMS)
def test_each_malformed_stream_is_a_clean_result(demo, kind):
    ep = ModelEndpoint("m", demo.base_url, f"demo-ace+bad={kind}", max_retries=0, timeout=30)
    (got,), failures = _call(ep)
    ok, reason = EXPECTED[kind]
    assert got.ok is ok and getattr(got, "reason", None) == reason, got
    assert failures == (0 if ok else 1)  # the breaker counts every failure
    if ok:
        assert isinstance(got.text, str) and "\x00" not in got.text
        assert got.completion_tokens >= 0 and math.isfinite(got.total_time)
    if kind == "nul":
        assert "a\ufffdb" in got.text
    if kind == "usage-str":
        assert got.usage_source == "estimated"  # a usage that is not numbers is ignored


def test_the_breaker_opens_on_malformed_chunks(demo):
    ep = ModelEndpoint(
        "m", demo.base_url, "demo-ace+bad=choices-int", max_retries=0, outage_after=3
    )
    got, _ = _call(ep, 4)
    assert [r.reason for r in got] == ["bad_response"] * 3 + ["outage"]


def test_a_non_streamed_reply_is_read_by_the_same_rules(demo):
    ep = ModelEndpoint("m", demo.base_url, "demo-ace", stream=False, max_answer_chars=10)
    (got,), _ = _call(ep)
    assert got.reason == "too_long"
    with pytest.raises(Malformed, match="content is int"):
        message_parts({"choices": [{"message": {"content": 5}}]})
    assert message_parts({"choices": [{"message": {"content": "a\x00"}}]})[0] == "a\ufffd"


def test_answer_cap_is_bounded():
    from stablearena.errors import InputError

    for bad in (0, 10**12, 1.5, "9"):
        with pytest.raises(InputError, match="max_answer_chars"):
            ModelEndpoint("m", "http://x/v1", "m", max_answer_chars=bad)


# ---------------------------------------------------------------------- fuzzing the reader
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3)
    ),
    max_leaves=8,
)
_chunkish = st.fixed_dictionaries(
    {},
    optional={
        "choices": st.one_of(
            _json,
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "delta": st.one_of(
                            _json, st.fixed_dictionaries({}, optional={"content": _json})
                        ),
                        "finish_reason": _json,
                    },
                ),
                max_size=3,
            ),
        ),
        "usage": st.one_of(
            _json, st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens"]), _json)
        ),
        "error": _json,
    },
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_json, _chunkish))
def test_any_json_shape_per_chunk(obj):
    """Property: a chunk of any JSON shape is read, or refused as Malformed / a stream error —
    nothing else is raised, and what is read is text, a short finish reason, whole counts."""
    try:
        parts, finish, usage = chunk_parts(obj)
    except (Malformed, StreamError):
        return
    assert all(isinstance(p, str) and p and "\x00" not in p for p in parts)
    assert finish is None or isinstance(finish, str)
    assert usage is None or all(isinstance(v, int) and v >= 0 for v in usage.values())


class _RawServer:
    """A one-connection-at-a-time HTTP server on loopback that answers every request with the
    bytes it is given (headers included): for cutting a stream at any byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.payload = b""
        self.stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    buf = b""
                    while b"\r\n\r\n" not in buf:
                        buf += conn.recv(65536)
                    head, _, rest = buf.partition(b"\r\n\r\n")
                    length = int(
                        next(
                            (
                                h.split(b":")[1]
                                for h in head.split(b"\r\n")
                                if h.lower().startswith(b"content-length")
                            ),
                            b"0",
                        )
                    )
                    while len(rest) < length:
                        rest += conn.recv(65536)
                    conn.sendall(self.payload)
                except OSError:
                    pass


_GOOD = [
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"The answer "}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"is 391."}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


@pytest.fixture(scope="module")
def raw_server():
    s = _RawServer()
    yield s
    s.stop = True
    s.sock.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cut=st.integers(0, 10_000),
    noise=st.binary(max_size=40),
    crlf=st.booleans(),
    chunked=st.booleans(),
)
def test_any_byte_cut_through_a_real_socket(raw_server, cut, noise, crlf, chunked):
    """Property: a stream cut at any byte, with any bytes after it, sent over a real socket, is
    an answer or a failure within the call's timeout — never an exception or a hang."""
    body = b"".join(_GOOD)
    body = body[: cut % (len(body) + 1)] + noise
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    if chunked:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        payload = (
            head + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n" if body else head + b"0\r\n\r\n"
        )
    else:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        payload = head + body
    raw_server.payload = payload
    ep = ModelEndpoint("m", raw_server.url, "m", max_retries=0, timeout=5, outage_after=10**6)
    t0 = time.perf_counter()
    (got,), _ = _call(ep)
    assert time.perf_counter() - t0 < 6
    assert got.ok in (True, False)
    if got.ok:
        assert isinstance(got.text, str)


# ---------------------------------------------------------------------- the page and auto
@pytest.mark.parametrize("kind", BAD_STREAMS)
def test_page_battles_end_and_never_lock_the_visitor_out(tmp_path, demo, kind):
    """Each malformed stream in turn: five battles in a row from one visitor (the cap on open
    battles is 3) all end with a final line; failed ones are never votable, complete ones are."""
    s = arena_settings(tmp_path, demo.base_url, models=("demo-ace", f"demo-wild+bad={kind}"))
    s.models = [{**m, "max_retries": 0} for m in s.models]  # one attempt: the test's time
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        for _ in range(5):
            lines = battle(tc, csrf)
            last = lines[-1]
            assert last.get("done") is True and last["status"] in ("complete", "failed"), lines
            ok = EXPECTED[kind][0]
            assert last["status"] == ("complete" if ok else "failed"), last
            code = vote(tc, csrf, lines[0]["battle_id"]).status_code
            assert code == (200 if ok else 409)


def test_a_nul_in_an_answer_on_postgresql(tmp_path, demo, postgres):
    url = postgres.create_database("nul" + str(int(time.time() * 1000) % 10**9))
    s = arena_settings(tmp_path, demo.base_url, models=("demo-ace", "demo-wild+bad=nul"))
    s.db = url
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        lines = battle(tc, csrf)
        assert lines[-1]["status"] == "complete"
        assert vote(tc, csrf, lines[0]["battle_id"]).status_code == 200
        ex = tc.get(
            "/v1/export?texts=true", headers={"Authorization": f"Bearer {tc.app.state.admin_key}"}
        )
        row = json.loads(ex.text.splitlines()[0])
        assert "\ufffd" in row["answer_a"] + row["answer_b"]


@pytest.mark.parametrize("prompt", ["   \n\t ", "What is\x00 2+2?", ""])
def test_a_prompt_that_is_blank_or_holds_a_nul_is_a_clear_422(tmp_path, demo, prompt):
    s = arena_settings(tmp_path, demo.base_url)
    with TestClient(create_app(s)) as tc:
        csrf = open_page(tc)
        r = tc.post("/arena/battles", json={"prompt": prompt}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] in ("prompt", "body.prompt")


def test_auto_finishes_and_resumes_with_a_model_that_sends_malformed_chunks(tmp_path, demo):
    from stablearena.cli import app
    from stablearena.endpoints.demo import demo_prompts

    models = tmp_path / "models.toml"
    models.write_text(
        "".join(
            f'[[models]]\nname = "{n}"\nbase_url = "{demo.base_url}"\nmodel = "{m}"\n'
            "max_retries = 0\n\n"
            for n, m in [
                ("ace", "demo-ace"),
                ("fair", "demo-fair"),
                ("broken", "demo-wild+bad=delta-str"),
                ("zeros", "demo-wild+bad=nul"),
            ]
        )
    )
    judges = tmp_path / "judges.toml"
    judges.write_text(
        f'[[judges]]\nname = "judge-keen"\nbase_url = "{demo.base_url}"\nmodel = "judge-keen"\n'
    )
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in demo_prompts(20, seed=4)))
    journal, out = tmp_path / "run.jsonl", tmp_path / "out.json"
    args = ["auto", str(prompts), "--models", str(models), "--judges", str(judges)]
    args += ["--design", "round-robin", "--budget", "60", "--journal", str(journal)]
    first = CliRunner().invoke(app, [*args, "-o", str(out)])
    assert first.exit_code == 0, first.output
    done = json.loads(out.read_text())
    assert done["failed_judgements"].get("bad_response", 0) > 0
    # resume with a larger budget: the journal is replayed, the run goes on and finishes
    again = CliRunner().invoke(
        app, [*args[:-4], "--budget", "120", "--journal", str(journal), "-o", str(out)]
    )
    assert again.exit_code == 0, again.output
    assert json.loads(out.read_text())["resumed"] > 0
