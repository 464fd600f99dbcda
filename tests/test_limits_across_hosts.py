"""The limits that must be global hold across hosts (issue 35, item 1): two real ``serve``
processes (different ports, nothing shared but one PostgreSQL database — as two hosts) with the
default ``limits = "auto"`` (the database, on PostgreSQL). One page identity, or one API key,
alternating between them gets its burst once, not twice; the page's cap on battles without a
vote counts the votes recorded through the other host; a page cookie, its CSRF token and an
admin session issued by one host are accepted by the other. The models are served by a real
OpenAI-compatible server process on loopback (stablearena.endpoints.demo_server)."""

from __future__ import annotations

import json
import re
import time
import uuid

import httpx
import pytest
from arena_process import ServerProcess

from stablearena.endpoints.demo_server import DemoServer

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
        db = postgres.create_database("h" + uuid.uuid4().hex[:12])
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
