"""Identities of the /arena page (stablearena.service.visitors): one parser for every identity
token, a revoked key refused on every worker, a visitor's row made on its first battle (not when
the page is opened), the page's limits shared by the workers of ``serve --workers N``, and
fuzzed cookies and headers (never a 500). The models are served by a real OpenAI-compatible
server process on loopback (stablearena.judging.endpoints.demo_server)."""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import sqlalchemy as sa
from arena_process import ServerProcess
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.security import parse_cookie, parse_token, split_key
from stablearena.service.settings import Settings

CSRF = re.compile(r'name="csrf-token" content="([0-9a-f]*)"')


@pytest.fixture(scope="module")
def demo():
    with DemoServer(seed=0) as server:
        yield server


def make_settings(tmp_path, base_url: str, db: str | None = None) -> Settings:
    return Settings(
        db=db or f"sqlite:///{tmp_path / 'arena.db'}",
        fit_in_process=False,
        poll_seconds=0.05,
        seed=0,
        arena={"min_records": 0},
        models=[{"name": m, "base_url": base_url, "model": m} for m in ("demo-ace", "demo-wild")],
        arena_page={"prompts": "demo"},
    )


def admin(tc: TestClient) -> dict[str, str]:
    return {"Authorization": f"Bearer {tc.app.state.admin_key}"}


def page_csrf(client) -> str:  # noqa: ANN001
    r = client.get("/arena")
    assert r.status_code == 200, r.text
    return CSRF.search(r.text).group(1)


def battle(client, csrf: str, **headers: str):  # noqa: ANN001
    return client.post(
        "/arena/battles", json={"prompt": "What is 2+2?"}, headers={"X-CSRF-Token": csrf, **headers}
    )


def vote(client, csrf: str, bid: str, **headers: str):  # noqa: ANN001
    return client.post(
        f"/arena/battles/{bid}/vote",
        json={"outcome": "tie"},
        headers={"X-CSRF-Token": csrf, **headers},
    )


def raw(headers: dict[str, str]) -> dict[str, bytes]:
    """Header values as the bytes a client may send: Latin-1 (what the server decodes them
    as), else UTF-8."""
    out = {}
    for k, v in headers.items():
        try:
            out[k] = v.encode("latin-1")
        except UnicodeEncodeError:
            out[k] = v.encode()
    return out


def annotator_rows(engine) -> int:  # noqa: ANN001
    with engine.connect() as conn:
        return conn.execute(
            sa.select(sa.func.count()).select_from(store.tables.annotators)
        ).scalar_one()


# ------------------------------------------------------------------ one parser (item 2)
BAD_COOKIES = [
    "²." + "9" * 10 + "." + "a" * 64,  # a superscript digit: str.isdigit() says yes
    "1²." + "9" * 10 + "." + "a" * 64,
    "9" * 5000 + ".1.x",  # more digits than int() reads
    "1." + "9" * 5000 + "." + "a" * 64,
    "٣.1.x",  # an Arabic-Indic digit
    "v" + "0" * 16 + ".1.x",
    "",
    ".",
    "..",
    "1.2.3.4",
    "-1.99999999999." + "a" * 64,
    "0.99999999999." + "a" * 64,
    "\x00.1.2",
]


@pytest.mark.parametrize("value", BAD_COOKIES)
def test_the_token_parser_refuses_malformed_cookies(value):
    assert parse_cookie(value) is None


def test_the_token_parser_reads_the_forms_the_service_makes():
    c = parse_cookie("12.1999999999." + "ab" * 32)
    assert c is not None and c.annotator_id == 12 and c.expiry == 1999999999
    c = parse_cookie("12-0123456789abcdef.1999999999." + "ab" * 32)  # signed in with a key
    assert c is not None and c.annotator_id == 12 and c.key_id == "0123456789abcdef"
    assert parse_cookie("12-0123456789abcde.1999999999." + "ab" * 32) is None
    c = parse_cookie("v0123456789abcdef.1999999999." + "ab" * 32)
    assert c is not None and c.annotator_id is None and c.ident == "v0123456789abcdef"
    assert split_key("sa_0123456789abcdef_" + "A-_z" * 10) == "0123456789abcdef"
    for bad in ("sa_0123456789abcdeg_x", "sa_0123456789abcdef_", "sa_0123456789abcdef_\x00", 5):
        assert split_key(bad) is None  # type: ignore[arg-type]
    assert parse_token("session", "x" * 43) is not None
    assert parse_token("session", "x" * 101) is None and parse_token("session", "é" * 43) is None


@settings(max_examples=200, deadline=None)
@given(
    value=st.one_of(
        st.text(max_size=400),
        st.builds(
            lambda n, tail: "9" * n + tail,
            st.integers(0, 6000),
            st.sampled_from(["", ".1." + "a" * 64, "²", ".²." + "a" * 64]),
        ),
    )
)
def test_the_token_parser_never_raises_on_any_text(value):
    """Any unicode at any length: a token of the one form, or None — never an exception."""
    c = parse_cookie(value)
    assert c is None or (c.ident.isascii() and str(c.expiry).isascii())
    assert split_key(value) is None or split_key(value).isascii()
    m = parse_token("session", value)
    assert m is None or value.isascii()


def test_crafted_identity_cookies_are_no_identity_not_a_500(tmp_path, demo):
    """A crafted cookie (a superscript digit, 5,000 digits, …) is treated as no identity: the
    page gives a new visitor's cookie, a post is a 403, the dashboard asks to log in."""
    with TestClient(create_app(make_settings(tmp_path, demo.base_url))) as tc:
        for value in BAD_COOKIES[:5]:
            tc.cookies.clear()
            r = tc.get("/arena", headers=raw({"Cookie": f"sa_arena={value}"}))
            assert r.status_code in (200, 429), (value[:20], r.status_code, r.text[:200])
            r = tc.post(
                "/arena/battles",
                json={"prompt": "hi"},
                headers=raw({"Cookie": f"sa_arena={value}", "X-CSRF-Token": "x"}),
            )
            assert r.status_code == 403, (value[:20], r.status_code, r.text[:200])
            assert "no arena identity" in r.json()["error"]["message"]
            r = tc.get("/admin", headers=raw({"Cookie": f"stablearena_admin={value}"}))
            assert r.status_code in (303, 307, 200, 429), (value[:20], r.status_code)
        for origin in ("http://[", "http://[::1", "http://a:b:c"):  # urlsplit raises on these
            r = tc.post("/arena/login", data={"key": "x"}, headers={"Origin": origin})
            assert r.status_code == 403, (origin, r.status_code)


# ------------------------------------------------------------------ revoked keys (item 1)
def test_a_revoked_key_can_neither_battle_nor_vote_through_the_page(tmp_path, demo):
    with TestClient(create_app(make_settings(tmp_path, demo.base_url))) as tc:
        key = tc.post("/v1/admin/annotators", json={"name": "ann"}, headers=admin(tc)).json()["key"]
        r = tc.post("/arena/login", data={"key": key}, follow_redirects=False)
        assert r.status_code == 303
        csrf = page_csrf(tc)
        lines = [json.loads(x) for x in battle(tc, csrf).text.splitlines()]
        assert lines[-1]["status"] == "complete"
        bid = lines[0]["battle_id"]
        assert tc.delete("/v1/admin/annotators/ann", headers=admin(tc)).status_code == 200
        r = vote(tc, csrf, bid)
        assert r.status_code == 403 and "revoked" in r.json()["error"]["message"], r.text
        r = battle(tc, csrf)
        assert r.status_code == 403 and "revoked" in r.json()["error"]["message"], r.text
        # a new key for the same annotator does not bring back the revoked key's cookie ...
        key = tc.post("/v1/admin/annotators", json={"name": "ann"}, headers=admin(tc)).json()["key"]
        assert vote(tc, csrf, bid).status_code == 403
        assert battle(tc, csrf).status_code == 403
        # ... signing in with the new key does
        tc.post("/arena/login", data={"key": key}, follow_redirects=False)
        assert vote(tc, page_csrf(tc), bid).status_code == 200


def _pinned(url: str, n: int = 2) -> dict[int, httpx.Client]:
    """Keep-alive connections until one is on each of the ``n`` workers."""
    by_worker: dict[int, httpx.Client] = {}
    spare = []
    for _ in range(200):
        c = httpx.Client(base_url=url, timeout=60)
        w = c.get("/healthz").json()["worker"]
        if w in by_worker:
            spare.append(c)
        else:
            by_worker[w] = c
        if len(by_worker) == n:
            break
    for c in spare:
        c.close()
    assert set(by_worker) == set(range(n))
    return by_worker


class TwoWorkers:
    """``serve --workers 2`` on a fresh SQLite file, the demo models as endpoints, a refill of
    the page's battles per identity too slow to matter (only the burst of 20 passes) and no
    caps on open battles in the way; a keep-alive connection to each worker."""

    def __init__(self, tmp_path, demo) -> None:  # noqa: ANN001
        config = tmp_path / "arena.toml"
        config.write_text(
            '[arena]\nmin_records = 0\n\n[arena_page]\nprompts = "demo"\n'
            "visitor_battles_per_hour = 0.001\nvisitor_open = 1000\naddress_open = 1000\n\n"
            + "".join(
                f'[[models]]\nname = "{n}"\nbase_url = "{demo.base_url}"\nmodel = "{n}"\n\n'
                for n in ("demo-ace", "demo-wild")
            )
        )
        db = f"sqlite:///{tmp_path / 'arena.db'}"
        self.server = ServerProcess(db, "--workers", "2", "--config", str(config), cwd=tmp_path)
        self.server.start()
        self.url = self.server.url
        self.origin = {"Origin": self.url}
        self.admin = {"Authorization": f"Bearer {self.server.admin_key}"}
        self.w = _pinned(self.url)
        for c in self.w.values():  # each worker ready (one still loading answers 503)
            for _ in range(100):
                if c.get("/arena/prompt").status_code != 503:
                    break
                time.sleep(0.1)

    def repin(self) -> dict[int, httpx.Client]:
        """Fresh connections, one on each worker (an idle keep-alive connection is closed by
        the server after a few seconds: the client's next request may reach the other one)."""
        for c in self.w.values():
            c.close()
        self.w = _pinned(self.url)
        return self.w

    def login(self, name: str) -> tuple[dict[int, httpx.Client], str]:
        """A new annotator key for ``name``, signed in on the page: a client per worker with its
        cookie, and its CSRF token (no new visitor is made: the address's burst of new
        identities stays whole for the test of that limit)."""
        key = self.w[0].post("/v1/admin/annotators", json={"name": name}, headers=self.admin)
        w = {k: httpx.Client(base_url=self.url, timeout=60) for k in (0, 1)}
        for k, c in w.items():  # new connections: pin them to their workers again
            while c.get("/healthz").json()["worker"] != k:
                c.close()
                c = w[k] = httpx.Client(base_url=self.url, timeout=60)
        r = w[0].post(
            "/arena/login",
            data={"key": key.json()["key"]},
            headers=self.origin,
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
        w[1].cookies.update(w[0].cookies)
        return w, page_csrf(w[0])

    def close(self) -> None:
        for c in self.w.values():
            c.close()
        self.server.stop()


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory, demo):
    if sys.platform == "win32":  # pragma: no cover
        pytest.skip("record locks and fd passing: POSIX")
    tw = TwoWorkers(tmp_path_factory.mktemp("two-workers"), demo)
    try:
        yield tw
    finally:
        tw.close()


def test_a_revoked_key_is_refused_on_every_worker(two_workers):
    """``serve --workers 2``: an annotator signed in on the page uses both workers; its key is
    revoked through worker 0; at once, worker 1 refuses its vote and its battles (403)."""
    tw = two_workers
    w, csrf = tw.login("ann-revoked")
    assert page_csrf(w[1]) == csrf  # worker 1 knows the identity too
    bids = []
    for c in (w[0], w[1]):
        r = battle(c, csrf, **tw.origin)
        lines = [json.loads(x) for x in r.text.splitlines()]
        assert lines[-1]["status"] == "complete", r.text
        bids.append(lines[0]["battle_id"])
    assert vote(w[1], csrf, bids[0], **tw.origin).status_code == 200
    r = w[0].delete("/v1/admin/annotators/ann-revoked", headers=tw.admin)
    assert r.status_code == 200
    r = vote(w[1], csrf, bids[1], **tw.origin)  # no wait: the vote's transaction sees it
    assert r.status_code == 403 and "revoked" in r.json()["error"]["message"], r.text
    r = battle(w[1], csrf, **tw.origin)
    assert r.status_code == 403 and "revoked" in r.json()["error"]["message"], r.text
    assert vote(w[0], csrf, bids[1], **tw.origin).status_code == 403
    for c in w.values():
        c.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'arena.db'}"
    pg = request.getfixturevalue("postgres")
    return pg.create_database("i" + uuid.uuid4().hex[:12])


def test_opening_the_page_stores_nobody_until_a_battle(tmp_path, demo, db_url):
    with TestClient(create_app(make_settings(tmp_path, demo.base_url, db_url))) as tc:
        engine = tc.app.state.engine
        before = annotator_rows(engine)
        for _ in range(5):  # the burst of new identities per address
            tc.cookies.clear()
            page_csrf(tc)
            assert tc.cookies.get("sa_arena")
        assert annotator_rows(engine) == before  # cookies given, no row
        csrf = page_csrf(tc)  # the last visitor, its cookie kept
        assert tc.get("/arena/prompt").status_code == 200
        assert vote(tc, csrf, "nope").status_code == 403  # no battle yet: still no row
        assert annotator_rows(engine) == before
        lines = [json.loads(x) for x in battle(tc, csrf).text.splitlines()]
        assert lines[-1]["status"] == "complete"
        assert annotator_rows(engine) == before + 1
        assert vote(tc, csrf, lines[0]["battle_id"]).status_code == 200
        lines = [json.loads(x) for x in battle(tc, csrf).text.splitlines()]
        assert vote(tc, csrf, lines[0]["battle_id"]).status_code == 200
        assert annotator_rows(engine) == before + 1  # one visitor, one row
        with engine.connect() as conn:
            names = {
                r.name
                for r in conn.execute(
                    sa.select(store.tables.annotators.c.name)
                    .join(
                        store.tables.battles,
                        store.tables.battles.c.annotator_id == store.tables.annotators.c.id,
                    )
                    .where(store.tables.battles.c.id == lines[0]["battle_id"])
                )
            }
        assert len(names) == 1 and re.fullmatch(r"visitor-[0-9a-f]{16}", names.pop())


def test_a_visitor_stored_at_once_by_many_workers_is_one_row(db_url):
    """Workers storing one visitor at the same moment (its first battles on several workers)
    all get the same row."""
    engine = store.make_engine(db_url)
    store.migrate(engine)
    try:
        with ThreadPoolExecutor(8) as pool:
            ids = list(
                pool.map(
                    lambda _: store.held.visitor_id(engine, "visitor-00ff", time.time(), True),
                    range(16),
                )
            )
        assert len(set(ids)) == 1 and ids[0] is not None
        assert store.held.visitor_id(engine, "visitor-0100", time.time(), False) is None
    finally:
        engine.dispose()


# ------------------------------------------------------------------ shared limits (item 4)
def test_the_page_limits_are_one_per_host_across_workers(two_workers):
    """``serve --workers 2``: new identities from one address, asked alternately of each
    worker, pass 5 times (the burst), not 10 (a bucket per worker)."""
    w = two_workers.repin()
    codes, served = [], []
    for k in range(12):
        c = w[k % 2]
        c.cookies.clear()
        codes.append(c.get("/arena").status_code)
        served.append(c.get("/healthz").json()["worker"])  # (a connection may be re-opened)
    assert min(served.count(0), served.count(1)) >= 4, served  # both workers asked
    assert codes.count(200) == 5 and codes.count(429) == 7, codes


def test_one_identity_gets_its_battles_once_across_workers(two_workers):
    """``serve --workers 2``: one identity's page battles, started alternately on each worker,
    pass 20 times (the burst per identity; the refill is negligible), not 40."""
    w, csrf = two_workers.login("ann-limited")
    codes = []
    for k in range(24):
        r = battle(w[k % 2], csrf, **two_workers.origin)
        codes.append(r.status_code)
        if r.status_code == 429:
            assert "too many battles" in r.json()["error"]["message"]
    assert codes.count(200) == 20 and codes.count(429) == 4, codes
    for c in w.values():
        c.close()


def test_login_attempts_are_limited_once_per_host(two_workers):
    """``serve --workers 2``: wrong keys posted to the page's login form alternately on each
    worker are refused 401 at most 10 times (the burst per address, shared with the logins of
    the tests above, plus the refill meanwhile), then 429 — not 10 per worker."""
    w = two_workers.repin()
    codes = []
    t0 = time.monotonic()
    for k in range(20):  # 10 per worker: each would pass them all with a bucket of its own
        r = w[k % 2].post(
            "/arena/login", data={"key": "sa_0123456789abcdef_wrong"}, headers=two_workers.origin
        )
        codes.append(r.status_code)
    refill = 0.5 * (time.monotonic() - t0)  # an attempt every 2 s comes back
    assert set(codes) <= {401, 429}, codes
    assert codes.count(401) <= 10 + refill + 1 and codes.count(429) > 0, (codes, refill)


# ------------------------------------------------------------------ fuzz (item 5)
latin1 = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters=";"))
tokenish = st.one_of(
    latin1,
    st.builds(
        lambda a, b, c: f"{a}.{b}.{c}",
        st.one_of(st.integers(-5, 10**30).map(str), latin1),
        st.one_of(st.integers(-5, 10**30).map(str), latin1),
        st.one_of(st.text("0123456789abcdef", min_size=60, max_size=70), latin1),
    ),
    st.integers(0, 6000).map(lambda n: "9" * n),
)


@pytest.fixture(scope="module")
def fuzz_client(tmp_path_factory, demo):
    s = make_settings(tmp_path_factory.mktemp("fuzz"), demo.base_url)
    s.arena_page.visitors_per_hour = 1e9  # a fuzzed cookie is a new visitor: not a 429
    with TestClient(create_app(s)) as tc:
        yield tc


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cookie=tokenish,
    admin_cookie=tokenish,
    csrf=latin1,
    authorization=st.one_of(latin1, latin1.map(lambda t: "Bearer " + t), tokenish),
    origin=st.one_of(st.none(), latin1, latin1.map(lambda t: "http://" + t)),
    forwarded=latin1,
    route=st.sampled_from(["page", "prompt", "battle", "vote", "admin", "models", "login"]),
)
def test_fuzzed_identity_cookies_and_headers_never_give_a_500(
    fuzz_client, cookie, admin_cookie, csrf, authorization, origin, forwarded, route
):
    """Any cookie, CSRF token, Authorization header or Origin: a clear 4xx or the normal
    anonymous handling, never a 500; and the page still works for a real visitor after."""
    tc = fuzz_client
    tc.cookies.clear()
    headers = raw(
        {
            "Cookie": f"sa_arena={cookie}; stablearena_admin={admin_cookie}",
            "X-CSRF-Token": csrf,
            "Authorization": authorization,
            "X-Forwarded-For": forwarded,  # not read by the service: must change nothing
            **({"Origin": origin} if origin is not None else {}),
        }
    )
    if route == "page":
        r = tc.get("/arena", headers=headers)
    elif route == "prompt":
        r = tc.get("/arena/prompt", headers=headers)
    elif route == "battle":
        r = tc.post("/arena/battles", json={"prompt": "hi"}, headers=headers)
    elif route == "vote":
        r = tc.post("/arena/battles/x/vote", json={"outcome": "tie"}, headers=headers)
    elif route == "admin":
        r = tc.get("/admin/poll", headers=headers)
    elif route == "models":
        r = tc.get("/v1/models", headers=headers)
    else:
        r = tc.post("/arena/login", data={"key": authorization}, headers=headers)
    assert r.status_code < 500, (route, r.status_code, r.text[:300])
    if r.status_code >= 400 and route not in ("page", "login"):
        assert r.json()["error"]["message"]
    tc.cookies.clear()
    assert tc.get("/arena").status_code == 200  # not stuck


def test_sign_out_forgets_the_account_in_this_browser_only(tmp_path, demo):
    """``POST /arena/logout``: the page offers it once signed in; afterwards the browser is a new
    visitor (the account's votes stay, its key still signs in); a post from another site is
    refused and leaves the sign-in in place."""
    with TestClient(create_app(make_settings(tmp_path, demo.base_url))) as tc:
        key = tc.post("/v1/admin/annotators", json={"name": "ann"}, headers=admin(tc)).json()["key"]
        assert tc.post("/arena/login", data={"key": key}, follow_redirects=False).status_code == 303
        page = tc.get("/arena").text
        assert 'signed in as <b id="who">ann</b>' in page and 'action="/arena/logout"' in page
        csrf = page_csrf(tc)
        bid = json.loads(battle(tc, csrf).text.splitlines()[0])["battle_id"]
        assert vote(tc, csrf, bid).status_code == 200
        r = tc.post("/arena/logout", headers={"Origin": "https://evil.example"})
        assert r.status_code == 403
        assert "signed in as" in tc.get("/arena").text  # still signed in
        r = tc.post("/arena/logout", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/arena"
        assert "sa_arena=" in r.headers["set-cookie"] and "Max-Age=0" in r.headers["set-cookie"]
        tc.cookies.clear()  # what the browser does with an expired cookie
        page = tc.get("/arena").text
        assert "signed in as" not in page and "voting as" in page and 'id="signin-link"' in page
        # the account and its vote stay; its key still signs in
        rows = [json.loads(x) for x in tc.get("/v1/export", headers=admin(tc)).text.splitlines()]
        assert [r["judge"] for r in rows] == ["ann"], rows
        assert tc.post("/arena/login", data={"key": key}, follow_redirects=False).status_code == 303
        assert "signed in as" in tc.get("/arena").text
