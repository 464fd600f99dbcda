"""Several ``serve`` hosts on one PostgreSQL behind HAProxy: the deployment of
docs/guides/several-hosts.md (deploy/), run end to end on this machine (tests/hosts.py).

The default run keeps a smoke version (two hosts, HAProxy following /healthz, a host killed
-9 under load, a host draining); the whole scenario of the guide (a rolling restart of three
hosts under load, a host killed mid-stream, the refit leader killed, PostgreSQL restarted) is
``-m slow``: ``python -m pytest tests/test_hosts.py -m slow -s`` prints its figures.
"""

from __future__ import annotations

import ast
import json
import signal
import time
from pathlib import Path

import httpx
import pytest
from hosts import (
    DEPLOY,
    Cluster,
    Load,
    have_haproxy,
    head_of,
    old_version,
    tmpdir,
    unit_serve_args,
)
from pgserver import find_bin_dir

ROOT = Path(__file__).resolve().parents[1]
MIGRATIONS = ROOT / "src/stablearena/service/store/migrations/versions"

needs_stack = pytest.mark.skipif(
    find_bin_dir() is None or not have_haproxy(),
    reason="needs PostgreSQL and HAProxy from Debian's packages (.ci/run installs both)",
)

#: the previous release (main when issue 44's upgrade was measured): the slow test rolls three
#: hosts from it to this version, back, and forward again
PREVIOUS_RELEASE = "f57ec67"

#: the cluster's arena: fits every second or 50 votes (the leader's failover is timed by them)
SETTINGS = "[arena]\nrefit_seconds = 1\nrefit_votes = 50\n"


def _additive(tree: ast.Module) -> list[str]:
    """The operations of a migration's ``upgrade()`` that hosts of the previous version could
    not run beside: dropping or renaming a table, column or constraint, changing a column, or
    adding a column without a default that is not nullable."""
    up = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "upgrade")
    bad = []
    for node in ast.walk(up):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name = node.func.attr
        if name.startswith(("drop_", "rename_", "alter_column")) and name != "drop_index":
            bad.append(name)
        if name == "add_column":
            col = node.args[0] if node.args else None
            kw = {k.arg: k.value for k in col.keywords} if isinstance(col, ast.Call) else {}
            nullable = kw.get("nullable")
            if (
                isinstance(nullable, ast.Constant)
                and nullable.value is False
                and "server_default" not in kw
            ):
                bad.append(f"add_column {ast.unparse(col)} (NOT NULL without a default)")
    return bad


def test_migrations_are_additive() -> None:
    """During a rolling restart hosts of the old version serve beside a new host that has
    migrated the database: every migration only adds (tables, nullable or defaulted columns,
    indexes), so the old code's statements keep working on the new schema."""
    files = sorted(MIGRATIONS.glob("[0-9]*.py"))
    assert len(files) >= 7
    found = {f.name: _additive(ast.parse(f.read_text())) for f in files}
    assert not any(found.values()), found


def test_an_older_host_reads_the_endpoints_a_newer_host_stores() -> None:
    """During a rolling upgrade the new hosts store the models' endpoints (at start, from the
    config); the old hosts, which refuse keys they do not know, must still read them: a setting
    left at its default is not stored, so a setting added by the new version (here the newest
    two, ``max_answer_chars`` and ``family``) is absent unless it is used. (Stored in full, the
    old hosts refused every endpoint and answered 503 "no_models" to every page battle.)"""
    from stablearena.judging.endpoints import config
    from stablearena.judging.endpoints.config import ModelEndpoint
    from stablearena.service.holder import endpoint_from_json, endpoint_json

    ep = ModelEndpoint(name="m", base_url="http://x/v1", model="m1", max_concurrency=9)
    stored = json.loads(endpoint_json(ep))
    assert stored == {"base_url": "http://x/v1", "model": "m1", "max_concurrency": 9}
    assert endpoint_from_json("m", endpoint_json(ep)) == ep
    older = config._ENDPOINT_KEYS - {"max_answer_chars", "family"}
    assert set(stored) <= older
    full = ModelEndpoint(name="m", base_url="http://x/v1", model="m1", family="acme")
    assert endpoint_from_json("m", endpoint_json(full)) == full


def test_unit_and_env_files_agree() -> None:
    """The systemd unit's ExecStart takes every variable from deploy/host.env, and the serve
    options it gives are ones `stablearena serve` knows."""
    env = dict(
        line.split("=", 1)
        for line in (DEPLOY / "host.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    args = unit_serve_args(env)
    assert args[args.index("--workers") + 1] == "1"
    from typer.testing import CliRunner

    from stablearena.cli import app

    out = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).output
    for opt in (a for a in args if a.startswith("--")):
        assert opt in out, opt


@needs_stack
def test_two_hosts_behind_haproxy_smoke() -> None:
    """Two hosts (each its own network namespace when root) behind the shipped haproxy.cfg:
    HAProxy routes to both; a host killed -9 under load is taken out by the /healthz check,
    its cut battles are refused on retry (409 "incomplete": the page starts a new battle), no
    acknowledged vote is lost; a host told to stop with drain_seconds answers /healthz 503
    "draining" while still serving, and HAProxy takes it out before it stops listening."""
    t0 = time.monotonic()
    with Cluster(tmpdir(), n=2, slow=0.1, settings=SETTINGS) as c:
        t_up = time.monotonic() - t0
        assert c.states()["h1"] == "UP" and c.states()["h2"] == "UP"
        load = Load(c.url, c.admin_key, page=3, api=2).start()
        time.sleep(0.5)
        cut = c.cut_battle()  # kills the host streaming it, after its first line
        victim = cut.pop("victim")
        t_down = c.wait_state(victim.name, "DOWN", 15)
        down_at = time.time()
        time.sleep(0.5)  # the load goes on with the dead host out
        load.stop()
        # the visitor's stream broke; the vote on that battle, sent again, is refused with 409
        # "incomplete" (its answers were not all stored); a new battle goes to the other host
        assert cut["stream"].startswith("cut"), cut
        assert cut["vote"][0] == 409 and cut["vote"][1]["error"]["code"] == "incomplete", cut
        assert cut["next_battle"]["done"] and cut["next_battle"]["status"] != "failed", cut
        assert cut["next_vote"] == 200 and cut["next_battle_host"] != victim.name, cut
        assert load.lost(c) == []
        assert len(load.acked) > 0
        for _bid, status, text in load.cut:
            assert status in (200, 409), (text, c.proxy_errors())
        # only requests the killed host had already taken, or that reached HAProxy while it
        # still listed the dead host UP, can fail: at most one per thread, none after DOWN
        assert len(load.failed) <= 5, (load.failed, c.proxy_errors())
        late = [f for f in load.failed if not cut["killed_at"] - 0.5 < f[0] < down_at + 0.5]
        assert late == [], (late, cut["killed_at"], down_at, c.proxy_errors())
        h2 = next(h for h in c.hosts[:2] if h is not victim)
        # drain: SIGTERM with drain_seconds = 3
        assert h2.server is not None and h2.server.proc is not None
        h2.server.proc.send_signal(signal.SIGTERM)
        code, body = c.healthz(h2)
        assert (code, body["status"]) == (503, "draining")
        t_out = c.wait_state(h2.name, "DOWN", 10)
        assert h2.server.proc.poll() is None  # HAProxy took it out while it still listened
    print(
        f"\nsmoke: up in {t_up:.1f} s; cut battle {cut}; {victim.name} DOWN {t_down:.1f} s "
        f"after kill -9; {h2.name} DOWN "
        f"{t_out:.1f} s after SIGTERM; {load.requests} requests, {len(load.acked)} acked votes, "
        f"{len(load.failed)} failed {load.failed}, {len(load.cut)} cut battles {load.cut}; "
        f"netns={c.netns}; "
        f"total {time.monotonic() - t0:.1f} s"
    )


@pytest.mark.slow
@needs_stack
def test_three_hosts_rolling_restart_and_faults() -> None:
    """The guide's whole scenario on three hosts under a load of page battles and API votes:
    a rolling restart (drain in HAProxy, SIGTERM, start — which migrates —, enable) with 0
    failed requests and 0 lost acknowledged votes; a host killed -9 mid-stream (0 lost votes);
    the refit leader killed (failover time until another host publishes a fit); PostgreSQL
    restarted (hosts' /healthz 503 → HAProxy out → back; failed requests counted)."""
    figures: dict[str, object] = {}
    tmp = tmpdir()
    # the hosts start on the previous release (or, without it, the version before the newest
    # migration)
    old = old_version(tmp, PREVIOUS_RELEASE) or old_version(tmp)
    with Cluster(tmp, n=3, slow=0.1, settings=SETTINGS, old_src=old) as c:
        # 1. a rolling upgrade (the first new host migrates while old ones serve), a roll back
        # (the schema moved back with the new version, then each host restarted on the old
        # one) and the upgrade again, under load; after the first host of each roll, what
        # either version made is used on the other

        def schema() -> str:
            return c.sql("SELECT version_num FROM alembic_version")[0][0]

        head = schema()
        load = Load(c.url, c.admin_key, page=4, api=4).start()
        time.sleep(2)
        h1, h2 = c.hosts[0], c.hosts[1]
        up = [c.roll(h1)]
        across = {"new on old": c.across(h1, h2), "old on new": c.across(h2, h1)}
        up += [c.roll(h) for h in c.hosts[1:]]
        migrated = schema()
        back: list[dict[str, float]] = []
        said = ""
        if old is not None:
            said = c.migrate(head_of(old))
            back = [c.roll(h1, old)]
            across["old on new, back"] = c.across(h1, h2)
            across["new on old, back"] = c.across(h2, h1)
            back += [c.roll(h, old) for h in c.hosts[1:]]
        rolled_back = schema()
        again = [c.roll(h) for h in c.hosts] if old is not None else []
        time.sleep(2)
        load.stop()
        figures["upgrade"] = {
            "old_version": str(old) if old else None,
            "schema_before": head,
            "schema_after": migrated,
            "migrate_back": said,
            "schema_rolled_back": rolled_back,
            "schema_again": schema(),
            "across": across,
        }
        figures["roll"] = {
            "requests": load.requests,
            "acked": len(load.acked),
            "failed": len(load.failed),
            "failures": load.failed[:20],
            "lost": len(load.lost(c)),
            "cut": load.cut,
            "steps": [{k: round(v, 2) for k, v in s.items()} for s in up + back + again],
        }
        print("\nroll:", figures["upgrade"], figures["roll"], flush=True)
        assert load.failed == []
        assert load.lost(c) == []
        assert all(
            code == (201 if k == "key made on a" else 200)
            for x in across.values()
            for k, code in x.items()
        ), across
        assert all(h.starts == (4 if old is not None else 2) for h in c.hosts)

        # 2. a host killed -9 mid-stream (the one streaming a page battle)
        load = Load(c.url, c.admin_key, page=4, api=4).start()
        time.sleep(2)
        cut = c.cut_battle()
        victim = cut.pop("victim")
        c.wait_state(victim.name, "DOWN", 15)
        down_at = time.time()
        time.sleep(2)
        load.stop()
        figures["kill"] = {
            "cut_battle": cut,
            "requests": load.requests,
            "acked": len(load.acked),
            "failed": len(load.failed),
            "failures": load.failed,
            "cut": load.cut,
            "lost": len(load.lost(c)),
            "proxy_errors": c.proxy_errors() if load.failed else [],
        }
        assert cut["vote"][0] == 409 and cut["next_vote"] == 200, cut
        assert load.lost(c) == []
        for _bid, status, text in load.cut:
            assert status in (200, 409), (text, c.proxy_errors())
        late = [f for f in load.failed if not cut["killed_at"] - 0.5 < f[0] < down_at + 0.5]
        assert late == [], (late, cut["killed_at"], down_at, c.proxy_errors())
        c.start_host(victim)
        c.wait_state(victim.name, "UP", 30)

        # 3. the refit leader killed
        load = Load(c.url, c.admin_key, page=2, api=4).start()
        failovers = []
        for _ in range(2):
            leader = c.refit_leader(30)
            assert leader is not None
            c.kill_host(leader)
            t_kill = time.monotonic()
            before = c.newest_fit()
            # until another host publishes a fit: an event, not a deadline (the failover time
            # is a figure this slow test prints with -s, not a limit); the guard only keeps a
            # hung cluster from holding the run for ever
            while c.newest_fit() <= before:
                if time.monotonic() - t_kill > 900:
                    raise AssertionError("no host published a fit in 15 min: the cluster hangs")
                time.sleep(0.02)
            failovers.append(round(time.monotonic() - t_kill, 2))
            c.start_host(leader)
            c.wait_state(leader.name, "UP", 30)
        load.stop()
        figures["leader"] = {"failover_s": failovers, "lost": len(load.lost(c))}
        assert load.lost(c) == []

        # 4. PostgreSQL restarted under load
        load = Load(c.url, c.admin_key, page=2, api=2).start()
        time.sleep(1)
        assert c.pg is not None
        t_halt, halt_wall = time.monotonic(), time.time()
        c.pg.halt()
        out = [c.wait_state(h.name, "DOWN", 20) for h in c.hosts]
        time.sleep(2)
        c.pg.resume()
        t_back, back_wall = time.monotonic(), time.time()
        back = [c.wait_state(h.name, "UP", 60) for h in c.hosts]
        time.sleep(2)
        load.stop()
        fails = [f[0] for f in load.failed]
        internal = [x for h in c.hosts if h.server for x in h.server.stderr if "Error" in x]
        figures["postgres"] = {
            "down_s": round(t_back - t_halt, 2),
            # failures from the halt (s after it) to the last one (s after the restart)
            "first_failure_after_halt_s": round(min(fails) - halt_wall, 2) if fails else None,
            "last_failure_after_restart_s": round(max(fails) - back_wall, 2) if fails else None,
            "server_errors": internal[-20:],
            "hosts_out_after_s": [round(x, 2) for x in out],
            "hosts_back_after_s": [round(x, 2) for x in back],
            "requests": load.requests,
            "failed": len(load.failed),
            "failure_kinds": sorted({f[1] + " " + f[2][:40] for f in load.failed}),
            "lost": len(load.lost(c)),
        }
        assert load.lost(c) == []
        ok = httpx.get(c.url + "/healthz", timeout=10)
        assert ok.status_code == 200
    print("\nfigures:", figures)


@pytest.fixture(scope="module")
def demo():
    from stablearena.judging.endpoints.demo_server import DemoServer

    with DemoServer() as server:
        yield server


def test_the_visitors_address_behind_a_trusted_load_balancer(tmp_path, demo):
    """Behind a load balancer every connection comes from its address, so the limits per
    address would count all visitors as one: ``trusted_proxies`` makes ``serve`` read the
    client from X-Forwarded-For (HAProxy's ``option forwardfor``) — and only then: without it
    the header is ignored, so a client cannot choose the address it is counted as. New
    identities per address (a burst of 5) show it."""
    from arena_process import page_server

    def new_identities(url: str, forwarded: str) -> list[int]:
        codes = []
        for _ in range(6):
            with httpx.Client(timeout=30) as c:  # no cookie: a new visitor each time
                codes.append(
                    c.get(url + "/arena", headers={"X-Forwarded-For": forwarded}).status_code
                )
        return codes

    for trusted, sub in ((True, "trusted"), (False, "untrusted")):
        (tmp_path / sub).mkdir()
        config = 'trusted_proxies = ["127.0.0.1"]\n' if trusted else ""
        with page_server(
            tmp_path / sub, demo.base_url, ("demo-ace", "demo-fair"), 0.0, config
        ) as s:
            first = new_identities(s.url, "198.51.100.7")
            assert first[:5] == [200] * 5 and first[5] == 429, first
            other = new_identities(s.url, "203.0.113.9")
            if trusted:  # another visitor's address: its own burst
                assert other[:5] == [200] * 5, other
            else:  # the header ignored: the same address (loopback), still limited
                assert other == [429] * 6, other


@needs_stack
def test_three_hosts_show_one_board() -> None:
    """Issue 44: ``/leaderboard`` was drawn by each host at its first request after a fit, from
    the votes it saw then, so hosts showing the same fit showed different boards. The boards are
    now drawn once per fit by one worker and stored (service.public_boards): under votes that
    keep coming, every page and every ``/v1/leaderboard`` body that names the same fit is the
    same on the three hosts (``/v1/leaderboard`` but for the alert of a later fit held back,
    which each host reads within poll_seconds), and once the votes stop every body is the same
    byte for byte."""
    import re

    with Cluster(tmpdir(), n=3, slow=0.02, settings=SETTINGS) as c:
        load = Load(c.url, c.admin_key, page=2, api=2).start()
        time.sleep(4)
        pages: dict[str, dict[str, str]] = {}  # "fit N, vote V" → host → body
        boards: dict[str, dict[str, str]] = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for h in c.hosts:
                for path, seen in (("/leaderboard", pages), ("/leaderboard?style=true", pages)):
                    r = httpx.get(h.url + path, timeout=30)
                    assert r.status_code == 200, r.text[:300]
                    m = re.search(r"\(fit (\d+), vote (\d+)\)", r.text)
                    if m:
                        seen.setdefault(f"{path} {m.group(0)}", {})[h.name] = r.text
                r = httpx.get(h.url + "/v1/leaderboard", timeout=30)
                if r.status_code == 200:
                    b = r.json()
                    key = f"{b['as_of_vote']} {b['fitted_at']}"
                    boards.setdefault(key, {})[h.name] = r.text
            time.sleep(0.2)
        load.stop()
        # the votes have stopped: the fit they started may still be running (a busy machine),
        # and each host reads its board within poll_seconds; read until the three agree (the
        # 10-min guard only keeps hosts that never agree from holding the run for ever)
        settle = time.monotonic() + 600
        while True:
            time.sleep(1)
            settled = {
                path: {h.name: httpx.get(h.url + path, timeout=30).text for h in c.hosts}
                for path in ("/v1/leaderboard", "/leaderboard", "/leaderboard?style=true")
            }
            if all(len(set(v.values())) == 1 for v in settled.values()):
                break
            if time.monotonic() > settle:
                break
    assert all(len(set(v.values())) == 1 for v in settled.values()), settled
    differ = {k: sorted(v) for k, v in pages.items() if len(set(v.values())) > 1}
    assert differ == {}, differ
    # the same fit's body on every host, but for a later fit held back (fit_alert, stale):
    # each host reads that within poll_seconds, so under votes two hosts may differ on it
    apart = {}  # the fields that differ between hosts for the same fit
    for k, v in boards.items():
        bodies = [json.loads(x) for x in v.values()]
        fields = {f for b in bodies for f in b if any(b.get(f) != o.get(f) for o in bodies)}
        fields -= {"fit_alert", "stale"}
        if fields:
            apart[k] = {f: [b.get(f) for b in bodies] for f in sorted(fields) if f != "annotators"}
    assert apart == {}, apart
    assert any(len(v) == 3 for v in pages.values()), {k: sorted(v) for k, v in pages.items()}
    assert any(len(v) == 3 for v in boards.values())
    print(f"\none board: {len(pages)} (page, fit) seen, {len(boards)} fits of /v1/leaderboard")
