"""The limits that must be global hold across hosts (issue 35, item 1): two real ``serve``
processes (different ports, nothing shared but one PostgreSQL database — as two hosts) with the
default ``limits = "auto"`` (the database, on PostgreSQL). One page identity, or one API key,
alternating between them gets its burst once, not twice; the page's cap on battles without a
vote counts the votes recorded through the other host; a page cookie, its CSRF token and an
admin session issued by one host are accepted by the other. The models are served by a real
OpenAI-compatible server process on loopback (stablearena.judging.endpoints.demo_server).

The tests with two ``serve`` processes take about a minute (two starts on PostgreSQL under the
shared machine's load): they are ``slow`` (``python -m pytest -m slow
tests/test_limits_across_hosts.py``). The default run checks the same limits with two
applications in this process (each its own state, writer and limiters: nothing shared but the
database) and the buckets' statement itself, on PostgreSQL."""

from __future__ import annotations

import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import sqlalchemy as sa
from arena_process import ServerProcess
from fastapi.testclient import TestClient

from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.security import DatabaseRateLimiter
from stablearena.service.settings import Settings

CSRF = re.compile(r'name="csrf-token" content="([0-9a-f]*)"')
#: the API keys' burst (no refill to speak of: 0.001 token a second)
KEY_BURST = 12
#: a page identity's burst of battles (fixed: 20) and its cap on battles without a vote
PAGE_BURST, OPEN_CAP = 20, 3


@pytest.fixture(scope="module")
def demo():
    with DemoServer(seed=0) as server:
        yield server


class TwoHosts:
    """Two ``serve`` processes on one PostgreSQL database, the demo models as endpoints."""

    def __init__(self, tmp_path, demo, postgres) -> None:  # noqa: ANN001
        config = tmp_path / "arena.toml"
        config.write_text(
            f"rate_limit = 0.001\nrate_burst = {KEY_BURST}\n\n"
            "[arena]\nmin_records = 0\nmax_open_battles = 1000\n\n"
            '[arena_page]\nprompts = "demo"\nvisitor_battles_per_hour = 0.001\n'
            f"visitor_open = {OPEN_CAP}\naddress_open = 1000\n\n"
            + "".join(
                f'[[models]]\nname = "{n}"\nbase_url = "{demo.base_url}"\nmodel = "{n}+slow=0"\n\n'
                for n in ("demo-ace", "demo-wild")
            )
        )
        db = postgres.create_database("p" + uuid.uuid4().hex[:12])
        self.hosts: list[ServerProcess] = []
        for _ in range(2):  # one after the other: the first migrates and prints the admin key
            self.hosts.append(ServerProcess(db, "--config", str(config), cwd=tmp_path).start())
        self.urls = [h.url for h in self.hosts]
        assert self.urls[0] != self.urls[1]
        self.admin = {"Authorization": f"Bearer {self.hosts[0].admin_key}"}

    def clients(self) -> list[httpx.Client]:
        return [httpx.Client(base_url=u, timeout=60) for u in self.urls]

    def key(self, name: str) -> str:
        """A new annotator key (one admin request: the admin key's burst is KEY_BURST too)."""
        with httpx.Client(base_url=self.urls[0], timeout=60) as c:
            r = c.post("/v1/admin/annotators", json={"name": name}, headers=self.admin)
        assert r.status_code == 201, r.text
        return r.json()["key"]

    def login(self, name: str) -> tuple[list[httpx.Client], str]:
        """An annotator signed in on the page through host 0: a client per host with its
        cookie, and its CSRF token (as host 0 gave it)."""
        c = self.clients()
        r = c[0].post(
            "/arena/login",
            data={"key": self.key(name)},
            headers={"Origin": self.urls[0]},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
        c[1].cookies.update(c[0].cookies)
        return c, page_csrf(c[0])

    def close(self) -> None:
        for h in self.hosts:
            h.stop()


@pytest.fixture
def db(postgres) -> str:
    return postgres.create_database("h" + uuid.uuid4().hex[:12])


# ------------------------------------------------------------------ the statement
def test_the_buckets_grant_a_burst_once_to_two_hosts_at_once(db):
    """Two hosts' :class:`~stablearena.service.store.limits.Buckets` (each its own engine and
    connections) taking from one bucket from 8 threads at once grant exactly its burst — the
    upsert is atomic — and then the wait until the next token; another bucket is untouched;
    a bucket refills by the database's clock; several tokens at once are as many as there are."""
    engines = [store.make_engine(db) for _ in range(2)]
    store.migrate(engines[0])
    hosts = [store.limits.Buckets(e) for e in engines]
    try:
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda k: hosts[k % 2].take("t:one", 0.01, 25), range(60)))
        assert got.count((1, 0.0)) == 25, got
        assert all(n == 0 and 95.0 < w <= 100.0 for n, w in got if not n), got  # 0.01/s
        assert hosts[1].take("t:other", 0.01, 25) == (1, 0.0)
        t0 = time.time()
        assert hosts[0].take("t:fast", 50.0, 1) == (1, 0.0)
        assert 0 < hosts[1].take("t:fast", 50.0, 1)[1] <= 0.02
        while time.time() < t0 + 0.1:
            time.sleep(0.02)
        assert hosts[1].take("t:fast", 50.0, 1) == (1, 0.0)  # refilled by the database's clock
        assert [hosts[k % 2].take("t:many", 0.001, 10, 4)[0] for k in range(4)] == [4, 4, 2, 0]
        hosts[0].sweep()  # full buckets go; the others stay
        with engines[0].connect() as conn:
            names = set(conn.execute(sa.text("SELECT name FROM rate_buckets")).scalars())
        assert {"t:one", "t:other", "t:many"} <= names
    finally:
        for h in hosts:
            h.close()
        for e in engines:
            e.dispose()


def test_leased_tokens_never_add_up_to_more_than_the_bucket(db):
    """Two hosts' limiters leasing up to 4 tokens at a time from one bucket of 10 (no refill to
    speak of), asked alternately: 10 requests pass in all, not 10 + the leases — every token a
    host spends itself was taken from the shared bucket; and a lease grows only while a process
    spends it."""
    engine = store.make_engine(db)
    store.migrate(engine)
    buckets = [store.limits.Buckets(engine) for _ in range(2)]
    try:
        lims = [DatabaseRateLimiter(0.001, 10, b, "keys") for b in buckets]
        assert lims[0].lease == 1  # a slow bucket: exact, one statement per request
        for lim in lims:
            lim.lease = 4
        waits = [lims[k % 2].take("k", slot=3) for k in range(16)]
        assert waits.count(0.0) == 10 and all(w > 900 for w in waits if w), waits
        assert DatabaseRateLimiter(50.0, 100, buckets[0]).lease == 5  # the default key limit
        # a key spread thin over three processes (a request each, its lease run out of time
        # meanwhile) takes one token a request, not a lease each: its 6 tokens give 6 answers
        thin = [DatabaseRateLimiter(0.001, 6, buckets[k % 2], "keys") for k in range(3)]
        for lim in thin:
            lim.lease, lim.LEASE_TTL = 4, 0.05
        waits = []
        for k in range(8):
            waits.append(thin[k % 3].take("k", slot=4))
            time.sleep(0.06)
        assert waits.count(0.0) == 6 and waits[6] > 0 and waits[7] > 0, waits
    finally:
        for b in buckets:
            b.close()
        engine.dispose()


# ------------------------------------------------------------------ two applications
@pytest.fixture(scope="module")
def two_apps(demo, postgres):
    """Two live arena applications in this process on one PostgreSQL database, as two hosts."""

    db = postgres.create_database("a" + uuid.uuid4().hex[:12])

    def settings() -> Settings:
        return Settings(
            db=db,
            fit_in_process=False,
            poll_seconds=0.05,
            seed=0,
            rate_limit=0.001,
            rate_burst=KEY_BURST,
            arena={"min_records": 0, "max_open_battles": 1000},
            models=[
                {"name": m, "base_url": demo.base_url, "model": f"{m}+slow=0"}
                for m in ("demo-ace", "demo-wild")
            ],
            arena_page={
                "prompts": "demo",
                "visitor_battles_per_hour": 0.001,
                "visitor_open": OPEN_CAP,
                "address_open": 1000,
            },
        )

    with TestClient(create_app(settings())) as a:
        admin_key = a.app.state.admin_key
        with TestClient(create_app(settings())) as b:
            yield a, b, {"Authorization": f"Bearer {admin_key}"}


def app_login(two_apps, name: str) -> str:
    """An annotator key for ``name`` signed in on the page through app 0 (the cookie copied to
    app 1); its CSRF token."""
    a, b, admin = two_apps
    r = a.post("/v1/admin/annotators", json={"name": name}, headers=admin)
    assert r.status_code == 201, r.text
    r = a.post("/arena/login", data={"key": r.json()["key"]}, follow_redirects=False)
    assert r.status_code == 303, r.text
    b.cookies.update(a.cookies)
    return page_csrf(a)


def test_an_api_key_gets_its_burst_once_from_two_apps(two_apps):
    a, b, admin = two_apps
    key = a.post("/v1/admin/annotators", json={"name": "app-key"}, headers=admin).json()["key"]
    codes = [
        (a, b)[k % 2]
        .post("/v1/battles", json={"k": 1}, headers={"Authorization": f"Bearer {key}"})
        .status_code
        for k in range(KEY_BURST + 4)
    ]
    assert codes == [200] * KEY_BURST + [429] * 4, codes


def test_a_page_identity_gets_its_burst_once_from_two_apps(two_apps):
    """Battles of one identity alternately on each app (each voted on through the other, so
    the cap on open battles is met only if the votes are seen): PAGE_BURST pass, not twice."""
    csrf = app_login(two_apps, "app-page")
    apps = two_apps[:2]
    codes = []
    for k in range(PAGE_BURST + 3):
        r = battle(apps[k % 2], csrf)
        codes.append(r.status_code)
        if r.status_code == 200:
            assert vote(apps[(k + 1) % 2], csrf, completed(r)).status_code == 200
        else:
            assert "too many battles" in r.text, r.text
    assert codes == [200] * PAGE_BURST + [429] * 3, codes


def test_votes_through_the_other_app_free_the_cap_on_open_battles(two_apps):
    a, b, _ = two_apps
    csrf = app_login(two_apps, "app-open")
    bids = [completed(battle(a, csrf)) for _ in range(OPEN_CAP)]
    r = battle(b, csrf)
    assert r.status_code == 429 and "too_many_open" in r.text, r.text
    for bid in bids:
        assert vote(b, csrf, bid).status_code == 200
    completed(battle(a, csrf))


# ------------------------------------------------------------------ two serve processes
@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory, demo, postgres):
    th = TwoHosts(tmp_path_factory.mktemp("two-hosts"), demo, postgres)
    try:
        yield th
    finally:
        th.close()


def page_csrf(client: httpx.Client) -> str:
    r = client.get("/arena")
    assert r.status_code == 200, r.text
    return CSRF.search(r.text).group(1)


def battle(client: httpx.Client, csrf: str) -> httpx.Response:
    return client.post(
        "/arena/battles",
        json={"prompt": "What is 2+2?"},
        headers={"X-CSRF-Token": csrf, "Origin": str(client.base_url).rstrip("/")},
    )


def vote(client: httpx.Client, csrf: str, bid: str) -> httpx.Response:
    return client.post(
        f"/arena/battles/{bid}/vote",
        json={"outcome": "tie"},
        headers={"X-CSRF-Token": csrf, "Origin": str(client.base_url).rstrip("/")},
    )


def completed(r: httpx.Response) -> str:
    """The id of a page battle that streamed to its end."""
    assert r.status_code == 200, r.text
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert lines[-1]["status"] == "complete", r.text
    return lines[0]["battle_id"]


@pytest.mark.slow
def test_one_page_identity_gets_its_burst_once_across_two_hosts(two_hosts):
    """One identity's page battles, started alternately on each host (each voted on at once,
    so the cap on open battles stays out of the way), pass PAGE_BURST times, not twice that:
    the bucket is a row of the shared database, not one per host."""
    c, csrf = two_hosts.login("ann-page-limit")
    codes = []
    for k in range(PAGE_BURST + 4):
        r = battle(c[k % 2], csrf)
        codes.append(r.status_code)
        if r.status_code == 200:
            assert vote(c[k % 2], csrf, completed(r)).status_code == 200
        else:
            assert r.status_code == 429 and "too many battles" in r.text, r.text
    assert codes.count(200) == PAGE_BURST and codes.count(429) == 4, codes
    for x in c:
        x.close()


@pytest.mark.slow
def test_one_api_key_gets_its_burst_once_across_two_hosts(two_hosts):
    """One API key asking for battles alternately of each host gets KEY_BURST answers, then
    429 on both hosts — not KEY_BURST per host."""
    key = two_hosts.key("ann-api-limit")
    c = two_hosts.clients()
    codes = []
    for k in range(KEY_BURST + 6):
        r = c[k % 2].post("/v1/battles", json={"k": 1}, headers={"Authorization": f"Bearer {key}"})
        codes.append(r.status_code)
        assert r.status_code in (200, 429), r.text
    assert codes.count(200) == KEY_BURST, codes
    assert codes[KEY_BURST:] == [429] * 6, codes
    for x in c:
        x.close()


@pytest.mark.slow
def test_votes_through_the_other_host_free_the_cap_on_open_battles(two_hosts):
    """OPEN_CAP battles served by host 0 and voted on through host 1: host 0 serves the next
    one (its own count of the identity's open battles learns the votes from the database), and
    the cap itself is the database's count on either host."""
    c, csrf = two_hosts.login("ann-open-cap")
    bids = [completed(battle(c[0], csrf)) for _ in range(OPEN_CAP)]
    r = battle(c[1], csrf)  # the other host: the database counts OPEN_CAP open
    assert r.status_code == 429 and "too_many_open" in r.text, r.text
    for bid in bids:
        assert vote(c[1], csrf, bid).status_code == 200
    completed(battle(c[0], csrf))  # was 429 too_many_open until the battles expired
    for x in c:
        x.close()


@pytest.mark.slow
def test_cookie_csrf_and_admin_session_are_valid_on_both_hosts(two_hosts):
    """A visitor's cookie and CSRF token made by host 0 are accepted by host 1 (a battle on
    host 1, its vote on host 0), and an admin session opened on host 1 is valid on host 0:
    the cookie's key is in the database, and so are the sessions."""
    c = two_hosts.clients()
    csrf = page_csrf(c[0])  # a new visitor: host 0 gives the cookie
    c[1].cookies.update(c[0].cookies)
    assert page_csrf(c[1]) == csrf
    bid = completed(battle(c[1], csrf))
    assert vote(c[0], csrf, bid).status_code == 200
    r = c[1].post(
        "/admin/login",
        data={"key": two_hosts.hosts[0].admin_key},
        headers={"Origin": two_hosts.urls[1]},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    c[0].cookies.update(c[1].cookies)
    r = c[0].get("/admin", follow_redirects=False)
    assert r.status_code == 200 and "/admin/logout" in r.text, (r.status_code, r.text[:300])
    c[1].post("/admin/logout", headers={"Origin": two_hosts.urls[1]}, follow_redirects=False)
    time.sleep(0.05)
    assert c[0].get("/admin", follow_redirects=False).status_code == 303  # closed everywhere
    for x in c:
        x.close()
