"""Several ``stablearena serve`` hosts on one PostgreSQL database behind HAProxy, on one machine
(tests/test_hosts.py and bench/bench_hosts.py; not part of the package).

Runs the shipped deployment of docs/guides/several-hosts.md: ``deploy/haproxy.cfg`` (HAProxy
from Debian's packages, its runtime API on a unix socket), each host started with the
``ExecStart`` line of ``deploy/stablearena.service`` and the settings of ``deploy/arena.toml``,
PostgreSQL with ``deploy/postgresql.conf``.

**Separate hosts.** As root, where ``ip netns`` works, each host is a network namespace of its
own (its own loopback, its own address 10.A.B.1k on a bridge, a veth pair): a host shares
nothing with the others but the database and the network, every host listens on the same port
8000 of its own address, and PostgreSQL sees each host's connections come from that host's
address (how :meth:`Cluster.refit_leader` finds the host holding the refit lock). PostgreSQL,
the demo model server and HAProxy listen on the bridge's address 10.A.B.1. Elsewhere the hosts
are processes on 127.0.0.1, each on its own port (``Cluster.netns`` says which).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from arena_process import ServerProcess
from pgserver import PostgresServer, free_port

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
MODELS = ("demo-ace", "demo-sharp", "demo-solid")

__all__ = ["Cluster", "Load", "have_haproxy", "head_of", "netns_possible", "old_version"]


def have_haproxy() -> bool:
    return shutil.which("haproxy") is not None or Path("/usr/sbin/haproxy").exists()


def _haproxy_bin() -> str:
    return shutil.which("haproxy") or "/usr/sbin/haproxy"


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


def netns_possible() -> bool:
    """Root with ``ip`` and network namespaces that can be made (tried once)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    name = f"sap{os.getpid() % 100000}"
    try:
        _sh("ip", "netns", "add", name)
        _sh("ip", "netns", "del", name)
        return True
    except (subprocess.CalledProcessError, OSError):
        return False


def unit_serve_args(env: dict[str, str]) -> list[str]:
    """The ``serve`` arguments of ``deploy/stablearena.service``'s ExecStart line, its
    ``${VAR}`` taken from ``env`` (the host's host.env)."""
    text = (DEPLOY / "stablearena.service").read_text()
    line = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    words = shlex.split(line.removeprefix("ExecStart="))
    words = [re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], w) for w in words]
    assert words[1] == "serve", words
    return words[2:]


class Net:
    """A bridge in this namespace and one namespace per host (root only); ``close`` removes
    them."""

    made = 0  # namespaces are removed lazily: each Net of a process gets new names

    def __init__(self, n: int) -> None:
        pid = os.getpid()
        Net.made += 1
        self.tag = f"sa{pid % 100000}{chr(96 + Net.made % 26)}"
        self.prefix = f"10.{100 + pid % 100}.{(pid // 100) % 250}"
        self.bridge = f"{self.tag}b"
        self.gateway = f"{self.prefix}.1"
        self.names: list[str] = []
        _sh("ip", "link", "add", self.bridge, "type", "bridge")
        try:
            _sh("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _sh("ip", "link", "set", self.bridge, "up")
            for k in range(1, n + 1):
                ns, veth = f"{self.tag}h{k}", f"{self.tag}v{k}"
                _sh("ip", "netns", "add", ns)
                self.names.append(ns)
                _sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _sh("ip", "link", "set", veth, "master", self.bridge)
                _sh("ip", "link", "set", veth, "up")
                _sh("ip", "-n", ns, "addr", "add", f"{self.address(k)}/24", "dev", "eth0")
                _sh("ip", "-n", ns, "link", "set", "eth0", "up")
                _sh("ip", "-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def address(self, k: int) -> str:
        return f"{self.prefix}.{10 + k}"

    def close(self) -> None:
        for k, ns in enumerate(self.names, 1):
            subprocess.run(["ip", "link", "del", f"{self.tag}v{k}"], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


@dataclass
class Host:
    """One ``serve`` host: its number (1, 2, …), address, port and current process."""

    k: int
    address: str
    port: int
    prefix: tuple[str, ...]
    env: dict[str, str]
    server: ServerProcess | None = None
    starts: int = 0
    #: the source tree it runs (None: this checkout's; an older version's during an upgrade)
    src: Path | None = None

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    @property
    def name(self) -> str:
        return f"h{self.k}"

    @property
    def pid(self) -> int:
        assert self.server is not None and self.server.proc is not None
        return self.server.proc.pid


class Cluster:
    """PostgreSQL, the demo model server, ``n`` hosts and HAProxy (context manager).

    ``url`` is HAProxy's address, ``admin_key`` the arena's admin key."""

    def __init__(
        self,
        tmp: Path,
        n: int = 3,
        *,
        slow: float = 0.02,
        netns: bool | None = None,
        settings: str = "",
        haproxy: bool = True,
        old_src: Path | None = None,
    ) -> None:
        """``old_src``: the hosts start with this older version's source tree (and a config
        without the settings it does not know); :meth:`roll` restarts each with this
        checkout's (an upgrade)."""
        self.tmp = Path(tmp)
        self.n = n
        self.slow = slow
        self.netns = netns_possible() if netns is None else netns
        self.settings = settings
        self.with_haproxy = haproxy
        self.old_src = old_src
        self.net: Net | None = None
        self.pg: PostgresServer | None = None
        self.demo: subprocess.Popen | None = None
        self.haproxy: subprocess.Popen | None = None
        self.hosts: list[Host] = []
        self.url = ""
        self.admin_key = ""
        self.socket = str(self.tmp / "haproxy.sock")
        self.haproxy_log = self.tmp / "haproxy.log"

    # ------------------------------------------------------------------------- start / stop
    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self.netns:
            self.net = Net(3)  # three namespaces whatever n: HAProxy's file names h1..h3
            gateway = self.net.gateway
        else:
            gateway = "127.0.0.1"
        listen = "127.0.0.1" + (f",{gateway}" if self.netns else "")
        trust = f"{self.net.prefix}.0/24" if self.net else None
        self.pg = PostgresServer(listen=listen, conf=DEPLOY / "postgresql.conf", trust=trust)
        self.pg.start()
        self.pg.create_database("arena")
        self.db = f"postgresql+psycopg://{self.pg.user}@{gateway}:{self.pg.port}/arena"
        self.local_db = self.pg.url("arena")
        self.gateway = gateway
        demo_cmd = [
            sys.executable,
            "-m",
            "stablearena.judging.endpoints.demo_server",
            "--host",
            gateway,
        ]
        demo_cmd += ["--port", "0", "--seed", "0", "--exit-with-parent"]
        self.demo = subprocess.Popen(demo_cmd, stdout=subprocess.PIPE, text=True)
        line = self.demo.stdout.readline() if self.demo.stdout else ""
        m = re.search(r"(http://\S+)", line)
        if not m:
            raise RuntimeError(f"the demo server did not start: {line!r}")
        self.demo_url = m.group(1)
        toml = self.tmp / "arena.toml"
        toml.write_text(self._config())
        self.config = toml
        # the older version's: without the settings it does not know (drain_seconds,
        # trusted_proxies)
        self.old_config = self.tmp / "arena-old.toml"
        self.old_config.write_text(
            "".join(
                x
                for x in self._config().splitlines(True)
                if not x.startswith(("drain_", "trusted_proxies"))
            )
        )
        for k in range(1, 4):
            if self.netns:
                assert self.net is not None
                addr, port = self.net.address(k), 8000
                prefix: tuple[str, ...] = ("ip", "netns", "exec", self.net.names[k - 1])
            else:
                addr, port, prefix = "127.0.0.1", free_port(), ()
            env = {
                "STABLEARENA_DB": self.db,
                "STABLEARENA_HOST": addr,
                "STABLEARENA_PORT": str(port),
                "STABLEARENA_WORKERS": "1",
            }
            self.hosts.append(Host(k, addr, port, prefix, env, src=self.old_src))
        # the first host migrates the database and makes the admin key; the others start
        # together (each migrates too, under the migration lock: nothing left to do)
        self.start_host(self.hosts[0])
        rest = [threading.Thread(target=self.start_host, args=(h,)) for h in self.hosts[1 : self.n]]
        for t in rest:
            t.start()
        for t in rest:
            t.join()
        for h in self.hosts[1 : self.n]:
            if h.starts == 0:
                raise RuntimeError(f"host {h.name} did not start")
        if self.with_haproxy:
            self.start_haproxy()

    def _config(self) -> str:
        """deploy/arena.toml, the test's settings, HAProxy's address trusted for X-Forwarded-For,
        the rate limits out of the load's way (the load's visitors all come from this machine's
        one address; docs/guides/several-hosts.md), the models."""
        base = (DEPLOY / "arena.toml").read_text()
        page = "[arena_page]\nvisitor_open = 50\naddress_open = 100000\n"
        page += "visitors_per_hour = 1e9\nvisitor_battles_per_hour = 1e9\n"
        page += "address_battles_per_hour = 1e9\n\n"
        models = "".join(
            f'[[models]]\nname = "{m}"\nbase_url = "{self.demo_url}"\n'
            f'model = "{m}+slow={self.slow:g}"\nmax_concurrency = 200\n\n'
            for m in MODELS
        )
        fast = "rate_limit = 1000000\nrate_burst = 1000000\n"
        fast += f'trusted_proxies = ["{self.gateway}"]\n'  # HAProxy connects from there
        return f"{base}\n{fast}{self.settings}\n{page}{models}"

    def serve_args(self, h: Host) -> list[str]:
        """The unit's ExecStart arguments for host ``h`` (its config path made this test's)."""
        args = unit_serve_args(h.env)
        args[args.index("--config") + 1] = str(self.old_config if h.src else self.config)
        return args

    def start_host(self, h: Host) -> Host:
        args = self.serve_args(h)
        db = args[args.index("--db") + 1]
        rest = [
            a
            for i, a in enumerate(args)
            if a not in ("--db", "--port") and (i == 0 or args[i - 1] not in ("--db", "--port"))
        ]
        h.server = ServerProcess(db, *rest, port=h.port, prefix=h.prefix, cwd=self.tmp, src=h.src)
        h.server.start()
        h.starts += 1
        if h.server.admin_key:
            self.admin_key = h.server.admin_key
        return h

    def stop_host(self, h: Host) -> float:
        """SIGTERM and wait for the exit; returns the seconds it took."""
        t0 = time.monotonic()
        assert h.server is not None
        h.server.stop()
        return time.monotonic() - t0

    def kill_host(self, h: Host) -> None:
        assert h.server is not None
        h.server.kill()

    def start_haproxy(self) -> None:
        port = free_port()
        env = {
            **os.environ,
            "SA_BIND": f"127.0.0.1:{port}",
            "SA_SOCKET": self.socket,
            "SA_LOG_LEVEL": "info",
        }
        for h in self.hosts:
            env[f"SA_HOST{h.k}"] = f"{h.address}:{h.port}"
        cfg = DEPLOY / "haproxy.cfg"
        check = subprocess.run([_haproxy_bin(), "-c", "-f", str(cfg)], env=env, capture_output=True)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy -c: {check.stderr.decode()[-2000:]}")
        log = self.haproxy_log.open("w")
        self.haproxy = subprocess.Popen(
            [_haproxy_bin(), "-db", "-f", str(cfg)], env=env, stdout=log, stderr=log
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        unused = [h for h in self.hosts if h.starts == 0]
        while time.time() < deadline and self.haproxy.poll() is None:
            with contextlib.suppress(OSError):
                # a server line with no host behind it counts as up until its check fails
                # twice: requests sent there meanwhile fail after their retries (503 "no server
                # is available") — the hosts this cluster does not run are put in maintenance
                for h in unused:
                    self.runtime(f"set server arena/{h.name} state maint")
                unused = []
                states = self.states()
                if all(states[h.name] == "UP" for h in self.hosts[: self.n]):
                    return
            time.sleep(0.1)
        raise RuntimeError(f"HAProxy did not see the hosts up: {self.haproxy_log.read_text()}")

    def close(self) -> None:
        if self.haproxy is not None and self.haproxy.poll() is None:
            self.haproxy.terminate()
            self.haproxy.wait(10)
        for h in self.hosts:
            if h.server is not None:
                h.server.kill()
        if self.demo is not None and self.demo.poll() is None:
            self.demo.terminate()
            self.demo.wait(10)
        if self.pg is not None:
            self.pg.stop()
        if self.net is not None:
            self.net.close()

    # ----------------------------------------------------------------------- HAProxy's API
    def runtime(self, command: str) -> str:
        """One command of HAProxy's runtime API (the unix socket of deploy/haproxy.cfg)."""
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.socket)
            s.sendall(command.encode() + b"\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode()

    def stats(self) -> dict[str, dict[str, str]]:
        """``show stat`` of the arena backend's servers, by name."""
        lines = self.runtime("show stat").splitlines()
        head = lines[0].lstrip("# ").split(",")
        rows = [dict(zip(head, x.split(","), strict=False)) for x in lines[1:] if x]
        return {r["svname"]: r for r in rows if r.get("pxname") == "arena"}

    def proxy_errors(self) -> list[str]:
        """HAProxy's log lines for requests it answered 5xx or that ended abnormally (its
        termination state is not "----"): what a failed assertion shows beside its request."""
        lines = self.haproxy_log.read_text(errors="replace").splitlines()
        return [
            ln
            for ln in lines
            if re.search(r"\s5\d\d\s", ln) or re.search(r"\s- - (?!----)[\w-]{4}\s", ln)
        ][-40:]

    def states(self) -> dict[str, str]:
        """Each server's status as HAProxy sees it (UP, DOWN, DRAIN, MAINT, "UP 1/2", …)."""
        return {k: v["status"] for k, v in self.stats().items() if k.startswith("h")}

    def wait_state(self, name: str, want: str, timeout: float = 30.0) -> float:
        """Seconds until HAProxy reports server ``name`` as ``want``."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.states().get(name) == want:
                return time.monotonic() - t0
            time.sleep(0.05)
        raise AssertionError(f"{name} not {want} after {timeout} s: {self.states()}")

    def drain(self, h: Host, timeout: float = 60.0) -> float:
        """``set server arena/hK state drain``, then wait until no session is on it."""
        self.runtime(f"set server arena/{h.name} state drain")
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if int(self.stats()[h.name]["scur"] or 0) == 0:
                return time.monotonic() - t0
            time.sleep(0.05)
        raise AssertionError(f"{h.name} still has sessions after {timeout} s")

    def ready(self, h: Host) -> None:
        self.runtime(f"set server arena/{h.name} state ready")

    def roll(self, h: Host, src: Path | None = None) -> dict[str, float]:
        """The rolling-restart step of docs/guides/several-hosts.md for one host: drain in
        HAProxy, SIGTERM and wait, start (it migrates), wait for HAProxy's check, enable. The
        host comes back on ``src`` (None: this checkout's version; an older source tree: a
        roll back)."""
        t = {"drain": self.drain(h), "stop": self.stop_host(h)}
        t0 = time.monotonic()
        h.src = src
        self.start_host(h)
        t["start"] = time.monotonic() - t0
        self.ready(h)
        t["up"] = self.wait_state(h.name, "UP")
        return t

    def migrate(self, revision: str) -> str:
        """``stablearena migrate --db … --to REVISION`` with this checkout's version (the roll
        back of the guide's "Upgrades both ways"); returns what it said."""
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        cmd = [sys.executable, "-m", "stablearena", "migrate", "--db", self.local_db]
        out = subprocess.run(
            [*cmd, "--to", revision], env=env, capture_output=True, text=True, check=True
        )
        return out.stderr.strip()

    def across(self, a: Host, b: Host) -> dict[str, int]:
        """What one host made, used on another (straight to the hosts, not through HAProxy):
        a page identity (its cookie and CSRF token) given by ``a`` starts a battle on ``b``, that
        battle is voted on through ``a``; an API key made through ``a`` serves a battle on
        ``b``, voted on through ``a``; a battle served by ``a`` takes its vote on ``b``. Each
        request's status (200 expected; 201 for the key made)."""
        out: dict[str, int] = {}
        ca = httpx.Client(base_url=a.url, timeout=60)
        cb = httpx.Client(base_url=b.url, timeout=60)
        try:
            page = ca.get("/arena")
            out["page on a"] = page.status_code
            csrf = re.search(r'csrf-token" content="(\w+)"', page.text).group(1)
            cookie = {"Cookie": f"sa_arena={page.cookies['sa_arena']}", "X-CSRF-Token": csrf}

            def page_battle(c: httpx.Client, url: str) -> tuple[int, str]:
                h = {**cookie, "Origin": url}
                with c.stream("POST", "/arena/battles", json={"prompt": "2+2?"}, headers=h) as r:
                    lines = [json.loads(x) for x in r.iter_lines() if x.strip()]
                ok = r.status_code == 200 and lines and lines[-1].get("done")
                return (r.status_code if ok else 599), lines[0].get(
                    "battle_id", ""
                ) if lines else ""

            out["page battle on b"], bid = page_battle(cb, b.url)
            out["page vote on a"] = ca.post(
                f"/arena/battles/{bid}/vote",
                json={"outcome": "tie"},
                headers={**cookie, "Origin": a.url},
            ).status_code
            out["page battle on a"], bid = page_battle(ca, a.url)
            out["page vote on b"] = cb.post(
                f"/arena/battles/{bid}/vote",
                json={"outcome": "model_a"},
                headers={**cookie, "Origin": b.url},
            ).status_code
            admin = {"Authorization": f"Bearer {self.admin_key}"}
            name = f"across-{random.getrandbits(40):010x}"
            made = ca.post(
                "/v1/admin/annotators", json={"name": name, "role": "annotator"}, headers=admin
            )
            out["key made on a"] = made.status_code
            key = {"Authorization": f"Bearer {made.json()['key']}"}
            r = cb.post("/v1/battles", json={}, headers=key)
            out["api battle on b"] = r.status_code
            bid = r.json()["battles"][0]["battle_id"]
            out["api vote on a"] = ca.post(
                f"/v1/battles/{bid}/vote", json={"outcome": "model_b"}, headers=key
            ).status_code
            r = ca.post("/v1/battles", json={}, headers=key)
            out["api battle on a"] = r.status_code
            bid = r.json()["battles"][0]["battle_id"]
            out["api vote on b"] = cb.post(
                f"/v1/battles/{bid}/vote", json={"outcome": "tie"}, headers=key
            ).status_code
        finally:
            ca.close()
            cb.close()
        return out

    # ------------------------------------------------------------------------ the database
    def sql(self, query: str, *params: Any) -> list[tuple]:
        import psycopg

        assert self.pg is not None
        with psycopg.connect(
            f"host=127.0.0.1 port={self.pg.port} user={self.pg.user} dbname=arena",
            autocommit=True,
            connect_timeout=5,
        ) as conn:
            return list(conn.execute(query, params).fetchall())

    def newest_fit(self) -> int:
        return self.sql("SELECT coalesce(max(id), 0) FROM fits")[0][0]

    def refit_leader(self, timeout: float = 30.0) -> Host | None:
        """The host whose session holds the refit lock (pg_locks: an advisory lock on
        REFIT_LOCK), found by the address its connection comes from (netns) or by the local
        port of its socket (/proc); ``None`` when no host took it within ``timeout``."""
        from stablearena.service.store.tables import REFIT_LOCK

        deadline = time.monotonic() + timeout
        query = (
            "SELECT host(a.client_addr), a.client_port FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
            "AND l.granted AND l.objid = %s AND l.classid = %s"
        )
        lo, hi = REFIT_LOCK & 0xFFFFFFFF, REFIT_LOCK >> 32
        while time.monotonic() < deadline:
            for addr, port in self.sql(query, lo, hi):
                for h in self.hosts:
                    if (
                        h.server is None
                        or h.server.proc is None
                        or h.server.proc.poll() is not None
                    ):
                        continue
                    if self.netns and addr == h.address:
                        return h
                    if not self.netns and port in _local_ports(h.pid):
                        return h
            time.sleep(0.01)
        return None

    def host_named(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def cut_battle(self) -> dict[str, Any]:
        """A page battle through HAProxy whose host is killed -9 after its first line (the
        host named by HAProxy's X-Arena-Host header): what the visitor's stream got, what the
        vote on that battle answers when sent again, and whether a new battle then works."""
        c = httpx.Client(base_url=self.url, timeout=60)
        page = c.get("/arena")
        csrf = re.search(r'csrf-token" content="(\w+)"', page.text).group(1)
        h = {"X-CSRF-Token": csrf, "Origin": self.url}
        out: dict[str, Any] = {}
        with c.stream("POST", "/arena/battles", json={"prompt": "2+2?"}, headers=h) as r:
            lines = r.iter_lines()
            first = json.loads(next(lines))
            out["battle_id"] = bid = first["battle_id"]
            victim = self.host_named(r.headers["x-arena-host"])
            out["host"] = victim.name
            self.kill_host(victim)
            out["killed_at"] = time.time()
            got: list[dict] = []
            try:
                for line in lines:
                    if line.strip():
                        got.append(json.loads(line))
                out["stream"] = "ended" if got and got[-1].get("done") else "cut"
            except httpx.HTTPError as exc:
                out["stream"] = f"cut ({type(exc).__name__})"
        vote = c.post(f"/arena/battles/{bid}/vote", json={"outcome": "tie"}, headers=h)
        out["vote"] = (vote.status_code, vote.json())
        with c.stream("POST", "/arena/battles", json={"prompt": "2+2?"}, headers=h) as r:
            again = [json.loads(x) for x in r.iter_lines() if x.strip()]
            out["next_battle_host"] = r.headers.get("x-arena-host")
            status = r.status_code
        out["next_battle"] = again[-1] if again else None
        assert again and "battle_id" in again[0], (status, again, out)
        bid2 = again[0]["battle_id"]
        out["next_vote"] = c.post(
            f"/arena/battles/{bid2}/vote", json={"outcome": "tie"}, headers=h
        ).status_code
        c.close()
        out["victim"] = victim
        return out

    def healthz(self, h: Host) -> tuple[int, dict]:
        r = httpx.get(h.url + "/healthz", timeout=15)
        return r.status_code, r.json()


def _local_ports(pid: int) -> set[int]:
    """Local TCP ports of the sockets open in ``pid`` and its children (/proc)."""
    from procs import children

    ports: set[int] = set()
    for p in {pid, *children(pid)}:
        inodes = set()
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{p}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
        for table in ("tcp", "tcp6"):
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{p}/net/{table}").read_text().splitlines()[1:]:
                    f = line.split()
                    if f[9] in inodes:
                        ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


# ---------------------------------------------------------------------------------- the load
@dataclass
class Load:
    """Page battles and API votes through ``url`` from threads, until :meth:`stop`.

    Every request counts: ``failed`` lists each failure (a transport error or a status that is
    not the expected one: 200 for battles and votes) with the time and the phase; ``acked``
    holds each acknowledged vote as (battle id, outcome); ``cut`` the page battles whose stream
    ended without its end line (the host died under it), with what their vote answered.
    ``api_rate`` paces the API threads (a load lighter than back to back)."""

    url: str
    admin_key: str
    page: int = 4
    api: int = 4
    #: API battles per second over all the API threads, evenly spaced (0: back to back)
    api_rate: float = 0.0
    acked: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[float, str, str]] = field(default_factory=list)
    cut: list[tuple[str, int, str]] = field(default_factory=list)
    requests: int = 0
    battles: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Load:
        admin = httpx.Client(base_url=self.url, timeout=60)
        h = {"Authorization": f"Bearer {self.admin_key}"}
        keys = []
        for k in range(self.api):
            name = f"load-{random.getrandbits(40):010x}-{k}"
            r = admin.post(
                "/v1/admin/annotators", json={"name": name, "role": "annotator"}, headers=h
            )
            r.raise_for_status()
            keys.append(r.json()["key"])
        admin.close()
        for k in range(self.page):
            self._threads.append(threading.Thread(target=self._page, args=(k,), daemon=True))
        for key in keys:
            self._threads.append(threading.Thread(target=self._api, args=(key,), daemon=True))
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> Load:
        self._stop.set()
        for t in self._threads:
            t.join(120)
        return self

    def _fail(self, what: str, detail: str) -> None:
        """A failed request; the thread waits 0.1 s before its next one, as a client backs off."""
        with self._lock:
            self.failed.append((time.time(), what, detail[:300]))
        time.sleep(0.1)

    def _ack(self, battle_id: str, outcome: str) -> None:
        with self._lock:
            self.acked.append((battle_id, outcome))

    def _count(self) -> None:
        with self._lock:
            self.requests += 1

    def _api(self, key: str) -> None:
        c = httpx.Client(base_url=self.url, timeout=60, headers={"Authorization": f"Bearer {key}"})
        rng = random.Random(key)
        period = self.api / self.api_rate if self.api_rate > 0 else 0.0
        next_at = time.monotonic() + rng.random() * period
        while not self._stop.is_set():
            if period:
                self._stop.wait(max(next_at - time.monotonic(), 0.0))
                next_at = max(next_at + period, time.monotonic() - period)
            try:
                self._count()
                r = c.post("/v1/battles", json={})
                if r.status_code != 200:
                    self._fail("api battle", f"{r.status_code} {r.text}")
                    continue
                bid = r.json()["battles"][0]["battle_id"]
                outcome = rng.choice(["model_a", "model_b", "tie"])
                self._count()
                r = c.post(f"/v1/battles/{bid}/vote", json={"outcome": outcome})
                if r.status_code != 200:
                    self._fail("api vote", f"{r.status_code} {r.text}")
                    continue
                self._ack(bid, outcome)
            except httpx.HTTPError as exc:
                self._fail("api", repr(exc))
        c.close()

    def _page(self, k: int) -> None:
        c = httpx.Client(base_url=self.url, timeout=60)
        csrf = ""
        rng = random.Random(k)
        while not self._stop.is_set():
            try:
                if not csrf:
                    self._count()
                    r = c.get("/arena")
                    if r.status_code != 200:
                        self._fail("page", f"{r.status_code} {r.text[:200]}")
                        continue
                    csrf = re.search(r'csrf-token" content="(\w+)"', r.text).group(1)
                h = {"X-CSRF-Token": csrf, "Origin": self.url}
                bid, done = "", False
                self._count()
                with c.stream("POST", "/arena/battles", json={"prompt": "2+2?"}, headers=h) as r:
                    if r.status_code != 200:
                        r.read()
                        self._fail("page battle", f"{r.status_code} {r.text}")
                        continue
                    try:
                        for line in r.iter_lines():
                            if not line.strip():
                                continue
                            m = json.loads(line)
                            bid = m.get("battle_id", bid)
                            if m.get("done") and m.get("status") == "failed":
                                self._fail("page battle", f"answer failed {m}")
                            done = done or bool(m.get("done"))
                    except httpx.HTTPError:
                        done = False
                with self._lock:
                    self.battles += 1
                outcome = rng.choice(["model_a", "model_b", "tie", "both_bad"])
                self._count()
                r = c.post(f"/arena/battles/{bid}/vote", json={"outcome": outcome}, headers=h)
                if r.status_code == 200:
                    self._ack(bid, outcome)
                    if not done:  # the stream broke after the battle was complete
                        with self._lock:
                            self.cut.append((bid, 200, "voted"))
                elif not done and r.status_code >= 500:
                    # the vote reached HAProxy while it still listed the dead host: a failed
                    # request (its time is checked against the host's DOWN)
                    self._fail("page vote (cut battle)", f"{r.status_code} {r.text}")
                elif not done:
                    # the host died mid-stream: the vote is refused (the page shows the answer
                    # and starts a new battle); not a failed request
                    with self._lock:
                        self.cut.append((bid, r.status_code, r.text[:200]))
                else:
                    self._fail("page vote", f"{r.status_code} {r.text}")
            except httpx.HTTPError as exc:
                self._fail("page", repr(exc))
        c.close()

    def lost(self, cluster: Cluster) -> list[tuple[str, str]]:
        """Acknowledged votes missing from the database (or stored with another outcome)."""
        from stablearena.service.store import OUTCOMES

        rows = cluster.sql("SELECT battle_id, outcome FROM votes WHERE NOT superseded")
        stored = {b: OUTCOMES[o] if isinstance(o, int) else o for b, o in rows}
        return [(b, o) for b, o in self.acked if stored.get(b) != o]


def old_version(tmp: Path, commit: str | None = None) -> Path | None:
    """The source tree of ``commit`` or, by default, of this checkout just before its newest
    migration was added (``git archive`` of that commit's parent into ``tmp``), or ``None``
    without git history: hosts of that version run beside hosts that migrated past it during a
    rolling upgrade."""
    versions = "src/stablearena/service/store/migrations/versions"
    if commit is not None:
        try:
            out = tmp / f"old-{commit}"
            out.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", commit, "src"], capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
            return out / "src"
        except (subprocess.CalledProcessError, OSError):
            return None
    try:
        newest = sorted(p.name for p in (ROOT / versions).glob("[0-9]*.py"))[-1]
        added = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "log",
                "-1",
                "--format=%H",
                "--diff-filter=A",
                "--",
                f"{versions}/{newest}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not added:
            return None
        out = tmp / "old"
        out.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", f"{added}^", "src"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
        return out / "src"
    except (subprocess.CalledProcessError, OSError, IndexError):
        return None


def head_of(src: Path) -> str:
    """The newest schema revision of the source tree ``src`` (its migrations' file names)."""
    versions = src / "stablearena/service/store/migrations/versions"
    return sorted(p.name for p in versions.glob("[0-9]*.py"))[-1].split("_", 1)[0]


def tmpdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="stablearena-hosts-"))


if __name__ == "__main__":  # a cluster to look at by hand: python tests/hosts.py
    with Cluster(tmpdir()) as c:
        print("HAProxy:", c.url, "admin key:", c.admin_key, "netns:", c.netns, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
