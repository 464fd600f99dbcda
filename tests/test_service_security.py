"""The live arena against an attacker (issue 22, item 2): names with any printable character
manageable through the admin API, look-alike names refused, CSV export safe for spreadsheets,
strict request types and bounded admin values (4xx, never 500), only POST records a vote,
requests without a valid key limited per address, slow clients disconnected, SIGTERM drains.
Each test fails without its fix (docs/guides/live-arena-security.md)."""

from __future__ import annotations

import csv
import io
import json
import re
import signal
import socket
import time
from urllib.parse import quote

import httpx
import pytest
from arena_process import FAST, ServerProcess
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stablearena.errors import InputError
from stablearena.service.app import create_app
from stablearena.service.client import ArenaClient
from stablearena.service.settings import Settings

ODD_NAMES = [
    "gpt 4o",
    "org/model",
    "a/../b",
    "what?",
    "#1",
    "100%",
    "модель",
    "日本語",
    "emoji 🙂",
    "=SUM(A1)",
    ".",
    "..",
]


# ---------------------------------------------------------------------------------- fixtures
def _settings(db: str, **over) -> Settings:
    base = {
        "db": db,
        "fit_in_process": False,
        "poll_seconds": 0.05,
        "seed": 0,
        "rate_limit": 1e6,
        "rate_burst": 1_000_000,
        "arena": {"min_records": 0, "refit_votes": 1000, "refit_seconds": 1000.0},
    }
    base.update(over)
    return Settings.model_validate(base)


@pytest.fixture
def arena(tmp_path):
    opened = []

    def make(models=("a", "b", "c"), **over):
        tc = TestClient(create_app(_settings(f"sqlite:///{tmp_path / 'arena.db'}", **over)))
        tc.__enter__()
        opened.append(tc)
        admin = ArenaClient(
            "http://testserver", tc.app.state.admin_key, client=TestClient(tc.app), retries=0
        )
        for m in models:
            admin.add_model(m)
        return tc, admin

    yield make
    for tc in opened:
        tc.__exit__(None, None, None)


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# ---------------------------------------------------------------------------------- names
def test_any_printable_name_is_manageable(arena):
    """Models and annotators with spaces, '/', '?', '#', '%', '..' or non-ASCII names can be
    changed and revoked through the API (percent-encoded path parameters)."""
    tc, admin = arena()
    for name in ODD_NAMES:
        admin.add_model(name)
        assert admin.update_model(name, retired=True)["retired"] is True
        key = admin.create_annotator(name)
        assert tc.post("/v1/battles", headers=_auth(key)).status_code == 200
        admin.revoke_annotator(name)  # a key that cannot be revoked is a security hole
        r = tc.post("/v1/battles", headers=_auth(key))
        assert r.status_code == 401, (name, r.text)
    # by hand: the encoded path reaches the name, not another route
    admin.add_model("p/q")
    r = tc.patch(
        "/v1/admin/models/p%2Fq", json={"outage": True}, headers=_auth(tc.app.state.admin_key)
    )
    assert r.status_code == 200 and r.json()["model"]["name"] == "p/q"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("gpt\u200b4", "U+200B"),  # zero-width space
        ("\u202egpt-4", "U+202E"),  # right-to-left override
        ("a\u2066b", "U+2066"),  # left-to-right isolate
        ("a\u0007b", "U+0007"),  # control
        ("a\nb", "U+000A"),
        ("a\u00a0b", "U+00A0"),  # a space that is not U+0020
        ("a\ufeffb", "U+FEFF"),
    ],
)
def test_invisible_and_direction_characters_refused(arena, name, code):
    tc, admin = arena()
    key = _auth(tc.app.state.admin_key)
    for path in ("/v1/admin/models", "/v1/admin/annotators"):
        r = tc.post(path, json={"name": name}, headers=key)
        assert r.status_code == 422, r.text
        assert code in r.json()["error"]["message"], r.text
    assert name not in [m["name"] for m in admin.models()]


def test_names_normalised_to_nfc(arena):
    tc, admin = arena()
    admin.add_model("caf\u0065\u0301")  # e + combining acute
    names = [m["name"] for m in admin.models()]
    assert "caf\u00e9" in names and "caf\u0065\u0301" not in names
    r = tc.post(
        "/v1/admin/models", json={"name": "caf\u00e9"}, headers=_auth(tc.app.state.admin_key)
    )
    assert r.status_code == 409  # the same name, not a look-alike second model
    assert admin.update_model("caf\u0065\u0301", outage=True)["name"] == "caf\u00e9"
    admin.update_model("caf\u00e9", outage=False)
    key = _auth(admin.create_annotator("Zo\u0065\u0308"))
    r = tc.post("/v1/battles", json={"models": ["caf\u0065\u0301", "a"]}, headers=key)
    assert r.status_code == 200, r.text
    assert {r.json()["battles"][0]["model_a"], r.json()["battles"][0]["model_b"]} == {
        "a",
        "caf\u00e9",
    }
    admin.revoke_annotator("Zo\u00eb")


def test_import_refuses_invisible_names(tmp_path):
    from stablearena.service import store
    from stablearena.service.seed import import_log

    log = tmp_path / "log.csv"
    log.write_text("model_a,model_b,winner\ngpt\u202e4,b,model_a\nb,c,model_b\n")
    engine = store.make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    store.migrate(engine)
    with pytest.raises(InputError, match="U\\+202E"):
        import_log(engine, log)


# ---------------------------------------------------------------------------------- CSV
def test_csv_export_is_formula_safe(arena):
    """OWASP: text cells starting with = + - @ tab CR are prefixed with ' (numbers stay)."""
    tc, admin = arena(models=('=HYPERLINK("http://x")', "+1", "-2+3", "@SUM(A1)", "ok"))
    key = admin.create_annotator("=cmd|' /C calc'!A0")
    client = ArenaClient("http://testserver", key, client=TestClient(tc.app), retries=0)
    for _ in range(6):
        b = client.next_battles()[0]
        client.vote(b["battle_id"], "model_a")
    rows = list(csv.DictReader(io.StringIO(admin.export("csv").decode())))
    assert len(rows) == 6
    for r in rows:
        for col in ("model_a", "model_b", "judge"):
            assert not r[col].startswith(("=", "+", "-", "@", "\t", "\r")), r
        assert r["judge"] == "'=cmd|' /C calc'!A0"
        assert float(r["tstamp"]) > 0
    assert {r["model_a"] for r in rows} | {r["model_b"] for r in rows} <= {
        '\'=HYPERLINK("http://x")',
        "'+1",
        "'-2+3",
        "'@SUM(A1)",
        "ok",
    }


def test_cli_csv_is_formula_safe_and_keeps_negative_numbers():
    from stablearena.cli import _csv_text

    text = _csv_text([{"model": "=1+2", "score": -1.5, "note": "-x"}, {"model": "@a", "score": 2}])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1] == ["'=1+2", "-1.5", "'-x"]
    assert rows[2] == ["'@a", "2", ""]


# ---------------------------------------------------------------------------------- types
@pytest.mark.parametrize("k", ["3", True, 3.0, "1", None, [1]])
def test_battle_k_is_strictly_an_integer(arena, k):
    tc, admin = arena()
    key = admin.create_annotator("ann")
    r = tc.post("/v1/battles", json={"k": k}, headers=_auth(key))
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == "k"


@pytest.mark.parametrize(
    "body",
    [
        {"refit_votes": "3"},
        {"refit_votes": True},
        {"refit_votes": 10**30},
        {"min_records": 10**20},
        {"battle_ttl": 1e300},
        {"refit_seconds": 1e300},
        {"boost_factor": 1e9},
        {"boost_until": 10**19},
        {"correction_window": 1e12},
        {"warm_start": 1},
        {"exploration": "0.5"},
        {"policy": 3},
    ],
)
def test_admin_values_strict_and_bounded(arena, body):
    tc, admin = arena()
    before = admin.config()
    r = tc.patch("/v1/admin/config", json=body, headers=_auth(tc.app.state.admin_key))
    assert r.status_code == 422, r.text
    assert admin.config() == before


@pytest.mark.parametrize(
    "body",
    [
        {"name": "m", "boost_until": 10**20},
        {"name": "m", "boost": "2"},
        {"name": "m", "boost": float("inf")},
        {"name": 5},
        {"name": "m", "extra": 1},
    ],
)
def test_model_values_strict_and_bounded(arena, body):
    tc, _ = arena()
    r = tc.post("/v1/admin/models", content=json.dumps(body), headers=_auth(tc.app.state.admin_key))
    assert r.status_code == 422, r.text
    r = tc.patch("/v1/admin/models/a", json={"retired": 1}, headers=_auth(tc.app.state.admin_key))
    assert r.status_code == 422, r.text


def _targets(key: dict, akey: dict, battle: str) -> list[tuple[str, str, dict]]:
    """Every route that takes a body: (method, path, headers)."""
    return [
        ("POST", "/v1/battles", key),
        ("POST", f"/v1/battles/{battle}/vote", key),
        ("PATCH", "/v1/admin/config", akey),
        ("POST", "/v1/admin/models", akey),
        ("POST", "/v1/admin/annotators", akey),
        ("PATCH", "/v1/admin/models/a", akey),
    ]


def test_malformed_bodies_are_4xx(arena):
    tc, admin = arena()
    akey = _auth(tc.app.state.admin_key)
    key = _auth(admin.create_annotator("ann"))
    battle = tc.post("/v1/battles", headers=key).json()["battles"][0]["battle_id"]
    deep = b"[" * 60_000
    deep_obj = b'{"a":' * 10_000 + b"1" + b"}" * 10_000
    bodies = [b"{", b"\xff\xfe", b"nul", deep, deep_obj, b"NaN", b"[]", b'"x"', b"1e999999"]
    for method, path, headers in _targets(key, akey, battle):
        for body in bodies:
            for ctype in ("application/json", "text/plain", "multipart/form-data; boundary=x"):
                r = tc.request(
                    method, path, content=body, headers={**headers, "Content-Type": ctype}
                )
                assert 400 <= r.status_code < 500, (method, path, body[:20], ctype, r.text)
        r = tc.request(method, path, content=b" " * 70_000, headers=headers)
        assert r.status_code == 413, r.text


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(
    ["k", "models", "outcome", "name", "role", "boost", "boost_until", "retired", "outage"]
    + ["refit_votes", "battle_ttl", "exploration", "strategy", "policy", "confidence"]
)
_bodies = _json | st.dictionaries(_keys, _json, max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=_bodies, target=st.integers(0, 5))
def test_fuzzed_bodies_never_500(arena_once, body, target):
    tc, key, akey, battle = arena_once
    method, path, headers = _targets(key, akey, battle)[target]
    r = tc.request(method, path, content=json.dumps(body, allow_nan=True), headers=headers)
    assert r.status_code < 500, (method, path, body, r.text)


@pytest.fixture(scope="module")
def arena_once(tmp_path_factory):
    db = tmp_path_factory.mktemp("fuzz") / "arena.db"
    with TestClient(create_app(_settings(f"sqlite:///{db}"))) as tc:
        admin = ArenaClient(
            "http://testserver", tc.app.state.admin_key, client=TestClient(tc.app), retries=0
        )
        for m in ("a", "b", "c"):
            admin.add_model(m)
        key = _auth(admin.create_annotator("fuzzer"))
        battle = tc.post("/v1/battles", headers=key).json()["battles"][0]["battle_id"]
        yield tc, key, _auth(tc.app.state.admin_key), battle


# ---------------------------------------------------------------------------------- methods
def test_only_post_records_a_vote(arena):
    tc, admin = arena()
    key = _auth(admin.create_annotator("ann"))
    battle = tc.post("/v1/battles", headers=key).json()["battles"][0]["battle_id"]
    body = json.dumps({"outcome": "model_a"})
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        r = tc.request(method, f"/v1/battles/{battle}/vote", content=body, headers=key)
        assert r.status_code == 405, (method, r.text)
    r = tc.request("GET", "/v1/battles", content=b"{}", headers=key)
    assert r.status_code == 405
    assert admin.export("jsonl").strip() == b""  # nothing recorded
    assert tc.post(f"/v1/battles/{battle}/vote", content=body, headers=key).status_code == 200


# ---------------------------------------------------------------------------------- open battles
_ARENA = {"min_records": 0, "refit_votes": 1000, "refit_seconds": 1000.0}


def test_battles_served_but_not_voted_are_capped(arena):
    tc, admin = arena(arena={**_ARENA, "max_open_battles": 3})
    key = _auth(admin.create_annotator("hoarder"))
    got = [tc.post("/v1/battles", headers=key).json()["battles"][0] for _ in range(3)]
    r = tc.post("/v1/battles", headers=key)
    assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_open", r.text
    assert "3" in r.json()["error"]["message"]
    assert tc.post("/v1/battles", json={"k": 2}, headers=key).status_code == 429
    other = _auth(admin.create_annotator("someone else"))
    assert tc.post("/v1/battles", headers=other).status_code == 200  # per annotator
    vote = {"outcome": "tie"}
    assert tc.post(f"/v1/battles/{got[0]['battle_id']}/vote", json=vote, headers=key).is_success
    assert tc.post("/v1/battles", headers=key).status_code == 200
    assert tc.post("/v1/battles", headers=key).status_code == 429


def test_public_counts_show_played_battles_only(arena):
    tc, admin = arena()
    key = _auth(admin.create_annotator("ann"))
    served = [tc.post("/v1/battles", headers=key).json()["battles"][0] for _ in range(5)]
    assert [m["battles"] for m in tc.get("/v1/models").json()["models"]] == [0, 0, 0]
    b = served[0]
    tc.post(f"/v1/battles/{b['battle_id']}/vote", json={"outcome": "model_a"}, headers=key)
    counts = {m["name"]: m["battles"] for m in tc.get("/v1/models").json()["models"]}
    assert counts[b["model_a"]] == counts[b["model_b"]] == 1 and sum(counts.values()) == 2


def test_open_battles_expire_and_their_rows_are_deleted(arena):
    import sqlalchemy as sa

    from stablearena.service import store
    from stablearena.service.api import battles as battles_api

    tc, admin = arena(arena={**_ARENA, "max_open_battles": 2, "battle_ttl": 0.5})
    key = _auth(admin.create_annotator("ann"))
    voted = tc.post("/v1/battles", headers=key).json()["battles"][0]["battle_id"]
    tc.post(f"/v1/battles/{voted}/vote", json={"outcome": "tie"}, headers=key)
    for _ in range(2):
        assert tc.post("/v1/battles", headers=key).status_code == 200
    assert tc.post("/v1/battles", headers=key).status_code == 429
    time.sleep(0.6)  # expired: no longer open
    hot = tc.app.state.hot
    old_keep, battles_api._KEEP_EXPIRED = battles_api._KEEP_EXPIRED, 0.0
    try:
        hot.next_sweep = 0.0
        assert tc.post("/v1/battles", headers=key).status_code == 200
        engine = tc.app.state.engine
        deadline = time.time() + 10
        while time.time() < deadline:
            with engine.connect() as conn:
                n = conn.execute(sa.select(sa.func.count()).select_from(store.battles)).scalar()
            if n == 2:  # the voted one and the one just served
                break
            time.sleep(0.05)
        assert n == 2
    finally:
        battles_api._KEEP_EXPIRED = old_keep


def test_votes_through_another_worker_close_open_battles(tmp_path):
    db = f"sqlite:///{tmp_path / 'arena.db'}"
    s = _settings(db, arena={**_ARENA, "max_open_battles": 2})
    with TestClient(create_app(s)) as a, TestClient(create_app(s)) as b:
        admin = ArenaClient("http://t", a.app.state.admin_key, client=TestClient(a.app), retries=0)
        for m in ("a", "b", "c"):
            admin.add_model(m)
        key = _auth(admin.create_annotator("ann"))
        got = [a.post("/v1/battles", headers=key).json()["battles"][0] for _ in range(2)]
        assert a.post("/v1/battles", headers=key).status_code == 429
        for g in got:
            vote = b.post(
                f"/v1/battles/{g['battle_id']}/vote", json={"outcome": "tie"}, headers=key
            )
            assert vote.status_code == 200, vote.text
        time.sleep(1.1)  # a worker asks the database at most once a second per annotator
        assert a.post("/v1/battles", headers=key).status_code == 200


# ---------------------------------------------------------------------------------- strangers
def test_requests_without_a_valid_key_are_limited_per_address(arena):
    tc, admin = arena(unauthenticated_burst=5, unauthenticated_rate_limit=0.01)
    key = _auth(admin.create_annotator("ann"))
    bad = _auth("sa_0123456789abcdef_not-a-real-secret")
    codes = [tc.post("/v1/battles", headers=bad).status_code for _ in range(5)]
    assert codes == [401] * 5
    for method, path, headers in [
        ("POST", "/v1/battles", bad),
        ("POST", "/v1/battles", {}),
        ("POST", "/v1/battles/" + "0" * 32 + "/vote", bad),
        ("GET", "/v1/annotators", bad),
        ("GET", "/v1/admin/config", {}),
    ]:
        r = tc.request(method, path, headers=headers)
        assert r.status_code == 429, (method, path, r.text)
        assert float(r.headers["Retry-After"]) > 0
    from stablearena.service.dashboard import COOKIE

    r = tc.get("/admin/poll", headers={"Cookie": f"{COOKIE}=not-a-session"})
    assert r.status_code == 429, r.text  # an invalid dashboard session counts too
    # a valid key from the same address is not affected; public reads neither
    assert tc.post("/v1/battles", headers=key).status_code == 200
    assert tc.get("/v1/models").status_code == 200


# ---------------------------------------------------------------------------------- processes
def _slow_client(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(b"POST /v1/battles HTTP/1.1\r\nHost: x\r\n")
    return s


def _closed(s: socket.socket) -> bool:
    try:
        s.sendall(b"X")
        s.settimeout(0.05)
        return s.recv(1) == b""
    except (TimeoutError, BlockingIOError):
        return False
    except OSError:
        return True


@pytest.fixture(scope="module")
def short_timeouts(tmp_path_factory):
    """One ``serve`` process (header_timeout 2 s, keep-alive 1 s) for the socket-level tests:
    starting and stopping one takes about 9 of their 10 seconds."""
    db = f"sqlite:///{tmp_path_factory.mktemp('sockets') / 'arena.db'}"
    args = [*FAST, "--set", "header_timeout=2", "--set", "keep_alive_timeout=1"]
    with ServerProcess(db, *args) as srv:
        yield srv


def test_slow_clients_cannot_hold_the_server(short_timeouts):
    """Slowloris: connections sending their headers a byte a second are closed after
    ``header_timeout``; meanwhile a normal client is served: its answer comes while slow
    connections are still held open (not only after the server dropped them)."""
    srv = short_timeouts
    slow = [_slow_client(srv.url) for _ in range(40)]
    host, port = srv.url.removeprefix("http://").split(":")
    idle = socket.create_connection((host, int(port)), timeout=10)  # sends nothing
    start = time.monotonic()
    held_while_served = []
    while time.monotonic() - start < 4.5:
        for s in slow:
            try:
                s.send(b"X")  # one header byte per connection per second
            except OSError:
                pass
        assert httpx.get(srv.url + "/v1/models", timeout=30).status_code == 200
        held_while_served.append(not _closed(slow[-1]))
        time.sleep(1.0)
    assert held_while_served[0], held_while_served  # served with the slow ones still open
    closed = sum(_closed(s) for s in slow)
    assert closed == len(slow), f"{closed} of {len(slow)} slow connections closed"
    assert _closed(idle)
    for s in (*slow, idle):
        s.close()
    # headers without end: 431 and closed past 64 KiB (not buffered without limit)
    big = socket.create_connection((host, int(port)), timeout=10)
    try:
        big.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000)
    except OSError:
        pass
    assert big.recv(100).startswith(b"HTTP/1.1 431")
    big.close()


def test_sigterm_drains_in_flight_requests(tmp_path):
    """SIGTERM while a vote's body is still arriving: the vote is answered (200), recorded,
    and the server exits 0."""
    db = f"sqlite:///{tmp_path / 'arena.db'}"
    srv = ServerProcess(db, *FAST).start()
    try:
        admin = ArenaClient(srv.url, srv.admin_key, retries=0)
        for m in ("a", "b", "x%2Fy"):  # (the test client decodes a path twice: here only)
            admin.add_model(m)
        assert admin.update_model("x%2Fy", retired=True)["name"] == "x%2Fy"
        key = admin.create_annotator("ann")
        battle = ArenaClient(srv.url, key, retries=0).next_battles()[0]["battle_id"]
        body = b'{"outcome": "model_a"}'
        host, port = srv.url.removeprefix("http://").split(":")
        s = socket.create_connection((host, int(port)), timeout=20)
        s.sendall(
            f"POST /v1/battles/{battle}/vote HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}"
            f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body[:5]
        )
        time.sleep(0.5)
        assert srv.proc is not None
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert srv.proc.poll() is None  # still draining
        s.sendall(body[5:])
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
        s.close()
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert srv.proc.wait(timeout=30) == 0, "".join(srv.stderr)[-2000:]
    finally:
        srv.stop()
    from stablearena.service import store

    engine = store.make_engine(db)
    rows, _ = store.vote_log(engine, False)
    engine.dispose()
    assert [r.battle_id for r in rows] == [battle]


def _read_response(s: socket.socket) -> tuple[bytes, bytes]:
    """One HTTP response from ``s``: (status line and headers, body by its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return data, b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return head, body


def test_oversized_bodies_get_413_and_the_connection_stays_usable(short_timeouts):
    """A body over ``max_body_bytes`` of any size — 66-100 KB used to get an empty 431, and the
    next request on the connection a 431 too — gets a 413 with a JSON error, on the hot front
    and on FastAPI's routes, with Content-Length or chunked; the next request on the same
    keep-alive connection is served (a real server process, one raw socket per body)."""
    srv = short_timeouts
    host, port = srv.url.removeprefix("http://").split(":")
    key = srv.admin_key
    sizes = (65_537, 100_000, 1_000_000)
    for path in ("/v1/battles", "/v1/admin/models"):
        for size in sizes:
            for chunked in (False, True):
                s = socket.create_connection((host, int(port)), timeout=20)
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n"
                    "Content-Type: application/json\r\n"
                )
                if chunked:
                    body = f"{size:x}\r\n".encode() + b" " * size + b"\r\n0\r\n\r\n"
                    head += "Transfer-Encoding: chunked\r\n\r\n"
                else:
                    body = b" " * size
                    head += f"Content-Length: {size}\r\n\r\n"
                try:
                    s.sendall(head.encode() + body)
                except OSError:  # the server may close once it has answered
                    pass
                status, payload = _read_response(s)
                where = (path, size, chunked)
                assert status.startswith(b"HTTP/1.1 413"), (where, status)
                assert json.loads(payload)["error"]["code"] == "too_large", where
                if b"connection: close" in status.lower():
                    assert s.recv(1) == b"", where  # closed cleanly
                else:  # kept alive: the next request is served
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                    status, payload = _read_response(s)
                    assert status.startswith(b"HTTP/1.1 200"), (where, status, payload)
                s.close()


# ---------------------------------------------------------------- one name validator (issue 32)
BAD_NAMES = [
    ("gpt\u200b4", "U+200B"),  # invisible
    ("\u202egpt-4", "U+202E"),  # bidirectional override
    ("a\u2066b", "U+2066"),  # isolate
    ("a\u00a0b", "U+00A0"),  # look-alike space
    ("a\u0007b", "U+0007"),  # control
    ("a\ufeffb", "U+FEFF"),
]
_ENDPOINT = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}


@pytest.mark.parametrize(("name", "code"), BAD_NAMES)
def test_put_endpoint_refuses_the_names_post_refuses(arena, name, code):
    """``PUT /v1/admin/models/{name}/endpoint`` creates a model: it refuses every name
    ``POST /v1/admin/models`` refuses, with the same status and the same message."""
    tc, admin = arena()
    key = _auth(tc.app.state.admin_key)
    post = tc.post("/v1/admin/models", json={"name": name}, headers=key)
    put = tc.put(f"/v1/admin/models/{quote(name, safe='')}/endpoint", json=_ENDPOINT, headers=key)
    assert post.status_code == put.status_code == 422, (post.text, put.text)
    assert code in put.json()["error"]["message"], put.text
    assert put.json()["error"]["code"] == post.json()["error"]["code"]
    assert name not in [m["name"] for m in admin.models()]


def test_a_decomposed_name_is_found_the_same_way_in_path_and_body(arena):
    """A model created under a decomposed (NFD) spelling by PUT is stored as NFC and can be
    retired, given an outage and have its endpoint removed by that spelling or the NFC one."""
    tc, admin = arena()
    key = _auth(tc.app.state.admin_key)
    nfd, nfc = "cafe\u0301", "caf\u00e9"
    r = tc.put(f"/v1/admin/models/{quote(nfd)}/endpoint", json=_ENDPOINT, headers=key)
    assert r.status_code == 200 and r.json()["created"] is True, r.text
    assert r.json()["endpoint"]["name"] == nfc
    assert [m["name"] for m in admin.models() if m["name"].startswith("caf")] == [nfc]
    r = tc.patch(f"/v1/admin/models/{quote(nfd)}", json={"retired": True}, headers=key)
    assert r.status_code == 200 and r.json()["model"]["name"] == nfc, r.text
    assert r.json()["model"]["retired"] is True
    # the same endpoint again by the other spelling: an update, not a second model
    r = tc.put(f"/v1/admin/models/{quote(nfc)}/endpoint", json=_ENDPOINT, headers=key)
    assert r.status_code == 200 and r.json()["created"] is False, r.text
    r = tc.delete(f"/v1/admin/models/{quote(nfd)}/endpoint", headers=key)
    assert r.status_code == 200 and r.json()["removed"] is True, r.text
    # a name with a slash (allowed, percent-encoded in the path) gets and loses an endpoint
    admin.add_model("org/model")
    r = tc.put("/v1/admin/models/org%2Fmodel/endpoint", json=_ENDPOINT, headers=key)
    assert r.status_code == 200 and r.json()["endpoint"]["name"] == "org/model", r.text
    r = tc.delete("/v1/admin/models/org%2Fmodel/endpoint", headers=key)
    assert r.status_code == 200 and r.json()["removed"] is True, r.text
    # an annotator created by its NFD spelling is revoked by it
    admin.create_annotator(nfd)
    r = tc.delete(f"/v1/admin/annotators/{quote(nfd)}", headers=key)
    assert r.status_code == 200 and r.json()["name"] == nfc, r.text


def test_a_stored_name_from_before_validation_stays_addressable(arena):
    """A model stored under a name the validator now refuses (created by PUT before it used
    the validator) is still found by its exact spelling, so it can be retired."""
    tc, admin = arena()
    key = _auth(tc.app.state.admin_key)
    st = tc.app.state.arena
    odd = "\u202eevil"
    from stablearena.service import store

    with st.engine.begin() as conn:
        store.add_model(conn, odd, 1.0, 0)
    admin.add_model("d")  # an admin write reloads the caches
    r = tc.patch(f"/v1/admin/models/{quote(odd, safe='')}", json={"retired": True}, headers=key)
    assert r.status_code == 200 and r.json()["model"]["name"] == odd, r.text


@pytest.mark.parametrize(("name", "code"), BAD_NAMES[:3])
def test_config_files_refuse_the_names_routes_refuse(name, code):
    """``[[models]]`` and ``[[judges]]`` tables and ``[arena_page] categories`` name models,
    annotators and categories: the same validator, an error naming the table and character."""
    from stablearena.judging.endpoints.config import models_from_toml
    from stablearena.judging.judges import judges_from_toml
    from stablearena.service.arena_settings import ArenaPage

    table = {"name": name, **_ENDPOINT}
    with pytest.raises(InputError, match=f"models\\]\\] #1: name: .*{re.escape(code)}"):
        models_from_toml({"models": [table]})
    with pytest.raises(InputError, match=f"judges\\]\\] #1: name: .*{re.escape(code)}"):
        judges_from_toml({"judges": [table]})
    with pytest.raises(ValueError, match=re.escape(code)):
        ArenaPage(categories={name: "x"})
    nfd = models_from_toml({"models": [{**table, "name": "cafe\u0301"}]})
    assert nfd[0].name == "caf\u00e9"


# ---------------------------------------------------------------- bounded admin values (issue 32)
@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("timeout", 1e308, "from 0.01 to 86400"),
        ("timeout", 0, "from 0.01 to 86400"),
        ("max_concurrency", 1e12, "a whole number from 1 to 10000"),
        ("max_concurrency", 10**12, "a whole number from 1 to 10000"),
        ("max_concurrency", True, "a whole number from 1 to 10000"),
        ("max_retries", 10**30, "a whole number from 0 to 100"),
        ("max_retries", "3", "a whole number from 0 to 100"),
        ("backoff", -1, "from 0 to 3600"),
        ("outage_cooldown", 1e300, "from 0 to 86400"),
        ("price", {"prompt": 1e308}, "price.prompt must be a number from 0 to 1e+06"),
    ],
)
def test_endpoint_values_are_bounded_with_the_field_value_and_range(arena, field, value, allowed):
    """``timeout`` 1e308 and ``max_concurrency`` 1e12 were accepted: every numeric endpoint
    setting has a range; out of it, PUT answers 422 and the TOML readers raise, naming the
    field, the value and the range."""
    from stablearena.judging.endpoints.config import models_from_toml

    tc, admin = arena()
    key = _auth(tc.app.state.admin_key)
    r = tc.put("/v1/admin/models/m1/endpoint", json={**_ENDPOINT, field: value}, headers=key)
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert field in message and allowed in message, message
    assert "m1" not in [m["name"] for m in admin.models()]
    with pytest.raises(InputError, match=re.escape(allowed)):
        models_from_toml({"models": [{"name": "m1", **_ENDPOINT, field: value}]})


@pytest.mark.parametrize(
    "item",
    [
        "rate_limit=1e308",
        "unauthenticated_rate_limit=inf",
        "max_body_bytes=1e12",
        "poll_seconds=1e308",
        "max_batch=1000000000000",
        "keep_fits=1000000000000",
        "dashboard_idle=1e308",
        "max_connections=1000000000000",
        "arena.ability_threshold=1e308",
        "arena_page.cookie_days=1e308",
        "arena_page.visitor_battles_per_hour=1e308",
        "arena_page.visitor_open=1000000000000",
        "arena_page.max_prompt_chars=1000000000000",
        "arena_page.probe_seconds=1e308",
    ],
)
def test_serve_settings_are_bounded(item):
    """Every numeric setting of ``serve`` has an upper bound: an error naming the field and the
    value (never a server that starts with an infinite rate or a year-long poll)."""
    from stablearena.service.settings import load_settings

    field = item.split("=")[0].split(".")[-1]
    with pytest.raises(InputError, match=re.escape(field) + ".*less than or equal"):
        load_settings(sets=[item])
