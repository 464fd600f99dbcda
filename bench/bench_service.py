"""Live arena throughput: ``stablearena serve`` under a closed loop of concurrent clients, beside
a bare loop of durable single-row inserts into the same database (the limit a per-request
commit would hit).

For each backend (SQLite file in WAL mode with synchronous=FULL; a throwaway PostgreSQL server
with fsync on, started here) this

1. starts ``stablearena serve`` as a child process on a fresh database (loopback, free port),
   adds ``--models`` models and ``--annotators`` annotator keys;
2. runs ``--clients`` concurrent clients for ``--duration`` seconds, each looping
   "POST /v1/battles, then POST /v1/battles/{id}/vote" (a *battle*: both acknowledged only when
   durable), voting by a simulated Bradley–Terry truth; a light asyncio HTTP/1.1 client with
   keep-alive is used so that the load generator takes little of the machine;
3. polls ``GET /v1/leaderboard`` every 0.5 s for its staleness (acknowledged votes not yet in
   it; seconds since the fit when votes are waiting);
4. reads the export and counts acknowledged votes that are missing (must be 0);
5. times ``--bare-seconds`` of single-row inserts, each committed durably, into the same
   database (sqlite3 / psycopg directly, one connection, no web stack).

``--floor`` adds the HTTP floor: the same clients, in the same run, against a null ASGI
application under uvicorn with the server's settings (uvloop, httptools, no access log, the
same number of worker processes), which answers the two routes with JSON of the same shape and
does nothing else — no key, no pair choice, no database. Its battles per second are what the
web stack alone allows on this machine: no service built on it can serve more.

It prints battles per second, the latency percentiles of each endpoint, staleness, missing
votes, the bare insert rate and the ratio, with the machine's load average before and after.

    python bench/bench_service.py [--backends sqlite,postgresql] [--models 200] [--duration 60]
        [--clients 32] [--annotators 64] [--warmup 5] [--bare-seconds 10] [--floor]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


# ---------------------------------------------------------------------------------- HTTP
class Conn(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection (enough for JSON requests to our server): a bare
    protocol object, one request in flight, so that the load generator, which shares the
    machine with the server, costs little CPU per request."""

    def __init__(self, host: str, port: int, key: str) -> None:
        self.host, self.port = host, port
        self.auth = f"Authorization: Bearer {key}\r\n".encode()
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future | None = None
        self.need = -1  # bytes of the whole response, once its head is read

    def connection_made(self, transport) -> None:  # noqa: ANN001
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        if self.need < 0:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(buf[: end + 2]).lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 : head.find(b"\r\n", at)]) if at >= 0 else 0
            self.need = end + 4 + length
        if len(buf) >= self.need and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionError("connection closed"))

    async def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        if self.transport is None or self.transport.is_closing():
            loop = asyncio.get_running_loop()
            await loop.create_connection(lambda: self, self.host, self.port)
        data = b"" if body is None else json.dumps(body).encode()
        self.buf.clear()
        self.need = -1
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(
            f"{method} {path} HTTP/1.1\r\nHost: x\r\n".encode()
            + self.auth
            + b"Content-Type: application/json\r\nContent-Length: "
            + str(len(data)).encode()
            + b"\r\n\r\n"
            + data
        )
        await self.waiter
        raw = bytes(self.buf[: self.need])
        status = int(raw[9:12])
        payload = raw[raw.find(b"\r\n\r\n") + 4 :]
        return status, (json.loads(payload) if payload else {})

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def play_battle(
    conn: Conn, truth: dict[str, float], rng: Any
) -> tuple[int, int, str | None, float, float, float]:
    """One battle of a closed-loop client: ask for the next pair, vote for a side with the true
    ratings' win probability (``rng.random()``). Returns the status of the pair request and of
    the vote (0 when no vote was sent), the battle id, and the times before the request, after
    it and after the vote."""
    t0 = time.perf_counter()
    st, res = await conn.request("POST", "/v1/battles", {})
    t1 = time.perf_counter()
    if st != 200:
        return st, 0, None, t0, t1, t1
    b = res["battles"][0]
    p = 1.0 / (1.0 + math.exp(-(truth[b["model_a"]] - truth[b["model_b"]])))
    out = "model_a" if rng.random() < p else "model_b"
    st_vote, _ = await conn.request("POST", f"/v1/battles/{b['battle_id']}/vote", {"outcome": out})
    return st, st_vote, b["battle_id"], t0, t1, time.perf_counter()


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, q)) if xs else float("nan")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc), 0 elsewhere."""
    fields = _stat(pid)
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0
    except (IndexError, ValueError):
        return 0.0


def process_tree(pid: int) -> dict[int, str]:
    """``pid`` and its descendants (Linux /proc), each with its role: ``api`` (a process that
    answers requests: the server, and each of its ``--workers``) or ``other`` (the refit
    processes and multiprocessing's helpers)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (fields := _stat(int(d.name))) is not None:
            parent[int(d.name)] = int(fields[1])
    out = {pid: "api"}
    grew = True
    while grew:
        grew = False
        for p, pp in parent.items():
            if pp in out and p not in out:
                try:
                    cmd = Path(f"/proc/{p}/cmdline").read_bytes()
                except OSError:
                    cmd = b""
                out[p] = "api" if b"stablearena.service.worker" in cmd else "other"
                grew = True
    return out


def tree_cpu(pids: dict[int, str]) -> dict[str, float]:
    """CPU seconds so far of the processes of :func:`process_tree`, summed by role."""
    out = {"api": 0.0, "other": 0.0}
    for p, role in pids.items():
        out[role] += cpu_seconds(p)
    return out


async def load(
    url: str, keys: list[str], truth: dict[str, float], args, admin_key: str, pid: int = 0
) -> dict:
    host, port = url.split("//")[1].split(":")
    port = int(port)
    lat = {"battles": [], "vote": [], "leaderboard": []}
    acked: list[str] = []
    errors: dict[int, int] = {}
    done = {"battles": 0}
    t_start = time.perf_counter()
    warm_until = t_start + args.warmup
    end = warm_until + args.duration
    cpu: dict[str, dict[str, float]] = {}
    stale_votes: list[int] = []
    stale_secs: list[float] = []
    rng = random.Random(0)

    async def client(k: int) -> None:
        conn = Conn(host, port, keys[k % len(keys)])
        try:
            while time.perf_counter() < end:
                st, st_vote, battle_id, t0, t1, t2 = await play_battle(conn, truth, rng)
                if st != 200:
                    errors[st] = errors.get(st, 0) + 1
                    await asyncio.sleep(0.01)
                    continue
                if st_vote != 200:
                    errors[st_vote] = errors.get(st_vote, 0) + 1
                    continue
                acked.append(battle_id)
                if t0 >= warm_until:
                    lat["battles"].append(t1 - t0)
                    lat["vote"].append(t2 - t1)
                    if t2 <= end:
                        done["battles"] += 1
        finally:
            conn.close()

    async def cpu_probe() -> None:
        # every process of the server's tree: the API process(es) with their threads (writer,
        # refitter, ...) and the others (the fit process, multiprocessing's helpers); a process
        # started during the run (e.g. a fit process restarted) counts from 0
        await asyncio.sleep(max(0.0, warm_until - time.perf_counter()))
        tree = process_tree(pid)
        cpu["start"] = {**tree_cpu(tree), "load": time.process_time()}
        await asyncio.sleep(max(0.0, end - time.perf_counter()))
        tree = {**tree, **process_tree(pid)}
        cpu["end"] = {**tree_cpu(tree), "load": time.process_time()}
        cpu["processes"] = {"api": sum(r == "api" for r in tree.values()), "other": len(tree)}

    offset = int(getattr(args, "prefill_offset", 0))

    async def watcher() -> None:
        conn = Conn(host, port, admin_key)
        try:
            while time.perf_counter() < end:
                await asyncio.sleep(0.5)
                n_acked = len(acked)
                t0 = time.perf_counter()
                st, lb = await conn.request("GET", "/v1/leaderboard")
                lat["leaderboard"].append(time.perf_counter() - t0)
                if st == 200 and time.perf_counter() >= warm_until:
                    # vote ids continue after the pre-filled votes' (--prefill)
                    behind = max(0, n_acked + offset - int(lb["as_of_vote"]))
                    stale_votes.append(behind)
                    stale_secs.append(time.time() - lb["fitted_at"] if behind else 0.0)
        finally:
            conn.close()

    await asyncio.gather(*(client(k) for k in range(args.clients)), watcher(), cpu_probe())
    n = max(done["battles"], 1)
    used = {k: cpu["end"][k] - cpu["start"][k] for k in ("api", "other", "load")}
    return {
        "battles_per_s": done["battles"] / args.duration,
        "battles": done["battles"],
        "acked_ids": acked,
        "p50_ms": {k: pct(v, 50) for k, v in lat.items()},
        "p99_ms": {k: pct(v, 99) for k, v in lat.items()},
        "staleness_votes": {
            "median": float(np.median(stale_votes)) if stale_votes else None,
            "max": max(stale_votes, default=None),
        },
        "staleness_seconds": {
            "median": float(np.median(stale_secs)) if stale_secs else None,
            "max": max(stale_secs, default=None),
        },
        "errors": errors,
        # CPU per battle (user + system), independent of how loaded the machine is
        "server_cpu_ms_per_battle": 1000.0 * used["api"] / n,
        "refit_cpu_ms_per_battle": 1000.0 * used["other"] / n,
        # all of the server's processes: API process(es) (incl. the refitter thread) + fit process
        "total_server_cpu_ms_per_battle": 1000.0 * (used["api"] + used["other"]) / n,
        "loadgen_cpu_ms_per_battle": 1000.0 * used["load"] / n,
        "server_cpu_share": used["api"] / args.duration,
        "cpu_share": {k: v / args.duration for k, v in used.items()},
        "api_processes": int(cpu["processes"]["api"]),
    }


def run_loop(coro):  # noqa: ANN001, ANN201
    """``asyncio.run`` on uvloop when it is installed (a cheaper load generator)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency of the service
        return asyncio.run(coro)
    return uvloop.run(coro)


# ---------------------------------------------------------------------------------- HTTP floor
_NULL_NAMES = [f"model-{k:03d}" for k in range(200)]
# the service's answers in shape (hot.py's templates)
_FLOOR_BATTLE = (
    '{"battles":[{"battle_id":"%s","model_a":"%s","model_b":"%s","strategy":"floor",'
    '"propensity":0.5,"served_at":%r,"expires_at":%r}]}'
)
_FLOOR_VOTE = (
    '{"battle_id":"%s","vote_id":%d,"outcome":"%s","revision":0,"recorded_at":%r,'
    '"replayed":false,"corrected":false,"model_a":"x","model_b":"y"}'
)
_FLOOR_BOARD = '{"as_of_vote":0,"fitted_at":%r,"models":[]}'


async def _floor_send(send: Any, body: str) -> None:
    """A 200 JSON answer of the floors' apps."""
    data = body.encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


async def null_app(scope: dict, receive: Any, send: Any) -> None:
    """The HTTP floor (``--floor``): answers ``POST /v1/battles`` with one battle of two random
    model names and ``POST /v1/battles/{id}/vote`` with a vote, both in the service's JSON
    shape, and ``GET /v1/leaderboard`` with an empty board; reads each body, does nothing else."""
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    more = True
    while more:
        msg = await receive()
        more = msg.get("more_body", False)
    path = scope["path"]
    now = time.time()
    if path == "/v1/battles":
        a, b = random.sample(_NULL_NAMES, 2)
        body = _FLOOR_BATTLE % (os.urandom(16).hex(), a, b, now, now + 3600.0)
    elif path.endswith("/vote"):
        body = _FLOOR_VOTE % (path[12:-5], 1, "model_a", now)
    else:
        body = _FLOOR_BOARD % now
    await _floor_send(send, body)


def writes_app() -> Any:
    """The durable floor (``--floor``, uvicorn ``--factory``): :func:`null_app`'s answers, but
    each battle and each vote written as the service writes them — ``store.insert_battles``
    and ``store.record_vote`` (the vote, its history and its pair count) through the
    service's group-commit ``store.Writer`` on the database ``BENCH_FLOOR_DB`` (the one the
    service run just used: its models and annotators), with the server's thread switch
    interval. No key check, no pair choice (two random models), no tracker, no refits."""
    from stablearena.service import store
    from stablearena.service.settings import Settings

    engine = store.make_engine(os.environ["BENCH_FLOOR_DB"])
    with engine.connect() as conn:
        model_ids = [
            int(r[0])
            for r in conn.execute(store.models.select().with_only_columns(store.models.c.id))
        ]
        who = int(
            conn.execute(
                store.annotators.select()
                .with_only_columns(store.annotators.c.id)
                .where(store.annotators.c.role == "annotator")
                .limit(1)
            ).scalar_one()
        )
    writer = store.Writer(engine, Settings().max_batch)
    outcome_code = {name: k for k, name in enumerate(store.OUTCOMES)}

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    sys.setswitchinterval(Settings().switch_interval)
                    writer.start()
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    writer.stop()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        raw = b""
        more = True
        while more:
            msg = await receive()
            raw += msg.get("body", b"")
            more = msg.get("more_body", False)
        path = scope["path"]
        now = time.time()
        if path == "/v1/battles":
            a, b = random.sample(model_ids, 2)
            bid = os.urandom(16).hex()
            row = {
                "id": bid,
                "annotator_id": who,
                "model_a": a,
                "model_b": b,
                "strategy": "floor",
                "propensity": 0.5,
                "served_at": now,
                "expires_at": now + 3600.0,
                "check": False,
            }
            await writer.submit_async(lambda conn: store.insert_battles(conn, [row]))
            names = _NULL_NAMES[a % 200], _NULL_NAMES[b % 200]
            body = _FLOOR_BATTLE % (bid, *names, now, now + 3600.0)
        elif path.endswith("/vote"):
            bid = path[12:-5]
            out = outcome_code[json.loads(raw)["outcome"]]
            res = await writer.submit_async(
                lambda conn: store.record_vote(conn, bid, who, out, now, 0.0)
            )
            body = _FLOOR_VOTE % (bid, res.vote_id or 0, store.OUTCOMES[out], now)
        else:
            body = _FLOOR_BOARD % now
        await _floor_send(send, body)

    return app


def run_floor(args, db: str | None = None) -> dict:
    """The same closed loop against :func:`null_app` (``db`` None) or :func:`writes_app` on
    ``db`` under uvicorn (``args.workers`` processes, the server's uvicorn settings)."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = ["bench_service:null_app"] if db is None else ["--factory", "bench_service:writes_app"]
    cmd = [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(Path(__file__).resolve().parent),
        *target,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(args.workers),
        "--no-access-log",
        "--log-level",
        "warning",
        "--timeout-keep-alive",
        "30",
    ]
    env = {**os.environ, "BENCH_FLOOR_DB": db or ""}
    proc = subprocess.Popen(cmd, env=env)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("the floor server did not start") from None
                time.sleep(0.1)
        time.sleep(1.0)  # the workers of a multi-process uvicorn start after the socket
        rng = np.random.default_rng(1)
        truth = dict(zip(_NULL_NAMES, rng.normal(0, 1.0, 200), strict=True))
        url = f"http://127.0.0.1:{port}"
        res = run_loop(load(url, ["floor"], truth, args, "floor", proc.pid))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    res.pop("acked_ids")
    return res


# ---------------------------------------------------------------------------------- bare loop
def bare_sqlite(path: str, seconds: float) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS bench_bare (id INTEGER PRIMARY KEY, payload TEXT)")
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO bench_bare (payload) VALUES (?)", ("x" * 64,))
        conn.execute("COMMIT")
        n += 1
    rate = n / (time.perf_counter() - t0)
    conn.close()
    return rate


def bare_postgres(url: str, seconds: float) -> float:
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_bare (id BIGSERIAL PRIMARY KEY, payload TEXT)"
        )
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            conn.execute("INSERT INTO bench_bare (payload) VALUES (%s)", ("x" * 64,))
            n += 1
        return n / (time.perf_counter() - t0)


# ---------------------------------------------------------------------------------- one backend
def prefill_annotators(n_votes: int, given: int | None) -> int:
    """Annotators of the pre-filled votes: ``given``, else 2,000 per million votes (10,000 at
    5M, about Chatbot Arena's ratio), at least 64."""
    return given if given is not None else max(64, n_votes // 500)


def prefill(
    url: str, n_votes: int, n_models: int, n_annotators: int, seed: int = 7
) -> tuple[float, str | None]:
    """Fill a fresh arena database with ``n_votes`` past votes (Bradley–Terry outcomes on the
    bench's models, uniform pairs, ``n_annotators`` annotators) in bulk through the store (its
    import: battles, votes and the pair counts together, as the server's writer keeps them);
    returns the seconds taken and the admin key (created here, on the database's first open)."""
    from stablearena.service import store

    t0 = time.perf_counter()
    engine = store.make_engine(url)
    admin_key = store.migrate(engine)
    rng = np.random.default_rng(seed)
    names = [f"model-{k:03d}" for k in range(n_models)]
    truth = rng.normal(0, 1.0, n_models)
    chunk = 500_000
    for start in range(0, n_votes, chunk):
        n = min(chunk, n_votes - start)
        a = rng.integers(0, n_models, n)
        b = (a + rng.integers(1, n_models, n)) % n_models
        p = 1 / (1 + np.exp(-(truth[a] - truth[b])))
        outcome = np.where(rng.random(n) < p, 0, 1)
        outcome[rng.random(n) < 0.1] = 2
        store.import_votes(
            engine,
            key=f"prefill-{start}",
            label=f"prefill {start}",
            model_names=names,
            annotator_names=[f"past-{k:05d}" for k in range(n_annotators)],
            model_a=a,
            model_b=b,
            annotator=rng.integers(0, n_annotators, n),
            outcome=outcome,
            timestamp=time.time() - 86400 + np.arange(n) * 1e-3,
            now=time.time(),
        )
    engine.dispose()
    return time.perf_counter() - t0, admin_key


def prefilled_sqlite(args, n_votes: int, dest: Path) -> tuple[float, float, str | None]:
    """``dest``: a copy of the SQLite database pre-filled with ``n_votes`` votes, built once
    into ``--prefill-cache`` (then copied for every run). Returns the seconds the build took
    (0 when it was cached), the seconds of the copy and the admin key."""
    import shutil

    n_ann = prefill_annotators(n_votes, args.prefill_annotators)
    cache = Path(args.prefill_cache)
    cache.mkdir(parents=True, exist_ok=True)
    built = cache / f"sqlite-{n_votes}-{args.models}m-{n_ann}a.db"
    key_file = built.with_suffix(".key")
    seconds = 0.0
    if not built.exists() or not key_file.exists():
        part = built.with_suffix(".part")
        for f in (part, Path(f"{part}-wal"), Path(f"{part}-shm")):
            f.unlink(missing_ok=True)
        seconds, admin_key = prefill(f"sqlite:///{part}", n_votes, args.models, n_ann)
        assert not Path(f"{part}-wal").exists(), "the WAL was not checkpointed"
        key_file.write_text(admin_key or "")
        part.rename(built)
    t0 = time.perf_counter()
    shutil.copyfile(built, dest)
    return seconds, time.perf_counter() - t0, key_file.read_text() or None


def prefilled_postgres(args, pg: Any, n_votes: int, name: str) -> tuple[float, float, str | None]:
    """A new database ``name`` on ``pg``, a copy (``CREATE DATABASE … TEMPLATE``) of one
    pre-filled with ``n_votes`` votes, built once per server. Returns the URL's build seconds
    (0 when built before), the copy's seconds and the admin key; the URL is ``pg.url(name)``."""
    built = args.pg_templates.get(n_votes)
    seconds = 0.0
    if built is None:
        tmpl = f"prefill_{n_votes}"
        seconds, key = prefill(
            pg.create_database(tmpl),
            n_votes,
            args.models,
            prefill_annotators(n_votes, args.prefill_annotators),
        )
        built = args.pg_templates[n_votes] = (tmpl, key)
    t0 = time.perf_counter()
    pg.create_database(name, template=built[0])
    return seconds, time.perf_counter() - t0, built[1]


def run_backend(
    backend: str, args, workdir: Path, n_prefill: int = 0, shared_pg: Any = None
) -> dict:
    """One run of the load on ``backend`` (a fresh database, or a copy of one pre-filled with
    ``n_prefill`` votes; ``shared_pg``: a PostgreSQL server to use and keep)."""
    import _suite  # noqa: F401 - tests/ on sys.path
    from arena_process import ServerProcess

    from stablearena.service.client import ArenaClient, ArenaError

    pg = None
    tag = f"bench{n_prefill}_{time.monotonic_ns()}"
    prefill_seconds, copy_seconds, admin_key = 0.0, 0.0, None
    if backend == "sqlite":
        db_path = str(workdir / f"{tag}.db")
        url = f"sqlite:///{db_path}"
        if n_prefill:
            prefill_seconds, copy_seconds, admin_key = prefilled_sqlite(
                args, n_prefill, Path(db_path)
            )
    else:
        from pgserver import PostgresServer

        if shared_pg is None:
            pg = PostgresServer().start()
        server_pg = shared_pg or pg
        if n_prefill:
            prefill_seconds, copy_seconds, admin_key = prefilled_postgres(
                args, server_pg, n_prefill, tag
            )
            url = server_pg.url(tag)
        else:
            url = server_pg.create_database(tag)
    sets = [
        "--set",
        "rate_limit=1000000",
        "--set",
        "rate_burst=1000000",
        "--set",
        f"arena.refit_votes={args.refit_votes}",
        "--set",
        f"arena.refit_seconds={args.refit_seconds}",
        "--set",
        f"arena.min_records={args.min_records}",
    ]
    for item in args.set:
        sets += ["--set", item]
    if args.workers != 1:
        sets += ["--workers", str(args.workers)]
    server = ServerProcess(url, *sets, cwd=workdir).start(timeout=1800)  # 5M: minutes
    server.admin_key = server.admin_key or admin_key
    try:
        admin = ArenaClient(server.url, server.admin_key, timeout=120)
        names = [f"model-{k:03d}" for k in range(args.models)]
        for n in names:
            try:
                admin.add_model(n)
            except ArenaError as exc:  # pre-filled already
                if exc.status != 409:
                    raise
        keys = [admin.create_annotator(f"annotator-{k:03d}") for k in range(args.annotators)]
        t_ready = time.perf_counter()
        while n_prefill and (admin.health().get("fit_as_of_vote") or 0) < n_prefill:
            time.sleep(1.0)  # start-up (the counts read once, the first fit) is not measured
        first_fit_wait = time.perf_counter() - t_ready
        rng = np.random.default_rng(1)
        truth = dict(zip(names, rng.normal(0, 1.0, args.models), strict=True))
        load_before = os.getloadavg()
        args.prefill_offset = n_prefill
        res = run_loop(load(server.url, keys, truth, args, server.admin_key, server.proc.pid))
        load_after = os.getloadavg()
        stored = stored_battles(url, n_prefill) if n_prefill else exported_battles(admin)
        acked = res.pop("acked_ids")
        res["acknowledged"] = len(acked)
        res["acknowledged_missing"] = sum(1 for b in acked if b not in stored)
        health = admin.health()
        res["server"] = {
            "votes": health["votes"],
            "fit_as_of_vote": health["fit_as_of_vote"],
            "live_counts": health.get("live_counts"),
            "rss_mb": _rss_mb(server.proc.pid),
            # the other processes of the server (the fit process, multiprocessing's helper)
            "other_rss_mb": sum(
                _rss_mb(p) for p, role in process_tree(server.proc.pid).items() if role != "api"
            ),
        }
        res["prefill"] = n_prefill
        res["prefill_seconds"] = prefill_seconds
        res["prefill_copy_seconds"] = copy_seconds
        res["first_fit_wait_seconds"] = first_fit_wait
        admin.close()
    finally:
        server.stop()
    if args.floor:
        res["floor_writes"] = run_floor(args, url)
    if getattr(args, "no_bare", False):
        res["bare_inserts_per_s"] = float("nan")
    else:
        res["bare_inserts_per_s"] = (
            bare_sqlite(db_path, args.bare_seconds)
            if backend == "sqlite"
            else bare_postgres(url, args.bare_seconds)
        )
    res["ratio_to_bare"] = res["battles_per_s"] / res["bare_inserts_per_s"]
    res["load_before"] = load_before
    res["load_after"] = load_after
    if pg is not None:
        pg.stop()
    elif backend == "postgresql":
        import psycopg

        dsn = f"host=127.0.0.1 port={shared_pg.port} user={shared_pg.user} dbname=postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{tag}"')
    else:
        for f in (db_path, f"{db_path}-wal", f"{db_path}-shm"):
            Path(f).unlink(missing_ok=True)
    return res


def exported_battles(admin: Any) -> set[str]:
    """The battle ids of the votes in the server's export."""
    export = admin.export("jsonl")
    return {json.loads(line)["battle_id"] for line in export.decode().splitlines() if line}


def stored_battles(url: str, after: int) -> set[str]:
    """The battle ids of the votes stored after vote id ``after`` (the pre-filled votes), read
    from the database itself: exporting millions of pre-filled votes to check the new ones
    would take minutes."""
    from stablearena.service import store

    engine = store.make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(f"SELECT battle_id FROM votes WHERE id > {int(after)}")
            return {r[0] for r in rows}
    finally:
        engine.dispose()


def _rss_mb(pid: int) -> float:
    """Resident memory of a process (MB), from /proc."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--backends",
        default="sqlite,postgresql",
        help="sqlite, postgresql or both (comma-separated)",
    )
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--annotators", type=int, default=64, help="annotator keys the clients share")
    ap.add_argument(
        "--clients",
        type=int,
        default=16,
        help="concurrent clients (closed loop; each has one request in flight)",
    )
    ap.add_argument("--workers", type=int, default=1, help="server worker processes (--workers)")
    ap.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds before measuring")
    ap.add_argument(
        "--bare-seconds", type=float, default=10.0, help="seconds of the bare insert loop"
    )
    ap.add_argument("--refit-votes", type=int, default=100, help="arena.refit_votes (K)")
    ap.add_argument("--refit-seconds", type=float, default=5.0, help="arena.refit_seconds (T)")
    ap.add_argument("--min-records", type=int, default=50, help="arena.min_records (δ)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another setting for the server (repeatable), e.g. arena.strategy=random",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also run the same clients against a null ASGI app under uvicorn (the HTTP floor)",
    )
    ap.add_argument(
        "--prefill",
        default="0",
        help="votes already in the database before the load, comma-separated sizes (e.g. "
        "0,100000,1000000): each size is a fresh database filled in bulk through the store",
    )
    ap.add_argument(
        "--prefill-annotators",
        type=int,
        default=None,
        help="annotators of the pre-filled votes (default: 2,000 per million votes, ≥ 64)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="repeat the sizes this many times, interleaved (0, 100k, 1M, 0, 100k, 1M, …)",
    )
    ap.add_argument(
        "--prefill-cache",
        default=str(Path(tempfile.gettempdir()) / "stablearena-bench-prefill"),
        help="directory of the pre-filled SQLite databases, built once and copied for each run "
        "(PostgreSQL: each size is built once per run of this script, as a template database)",
    )
    ap.add_argument("--no-bare", action="store_true", help="skip the bare insert loop")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    sizes = [int(float(x)) for x in args.prefill.split(",") if x.strip()]
    if sizes != [0] or args.rounds > 1:
        sys.exit(run_sizes(args, sizes))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = set(backends) - {"sqlite", "postgresql"}
    if bad:
        ap.error(f"unknown backend(s) {sorted(bad)}")
    print(
        f"# {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; "
        f"load average {os.getloadavg()[0]:.2f}; {args.models} models, {args.clients} clients, "
        f"{args.duration:g} s closed loop (+{args.warmup:g} s warm-up)",
        flush=True,
    )
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
        for backend in backends:
            res = run_backend(backend, args, Path(tmp))
            results[backend] = res
            print(f"\n## {backend}")
            print(
                f"battles/s (next pair + durable vote): {res['battles_per_s']:.1f}  ({res['battles']} battles)"
            )
            print(f"bare durable single-row inserts/s:    {res['bare_inserts_per_s']:.1f}")
            print(f"ratio battles/s ÷ bare inserts/s:     {res['ratio_to_bare']:.2f}")
            for ep in ("battles", "vote", "leaderboard"):
                print(
                    f"  {ep:12s} p50 {res['p50_ms'][ep]:7.2f} ms   p99 {res['p99_ms'][ep]:7.2f} ms"
                )
            print(
                f"staleness: median {res['staleness_votes']['median']} votes / "
                f"{res['staleness_seconds']['median']} s; max {res['staleness_votes']['max']} votes / "
                f"{res['staleness_seconds']['max']} s"
            )
            print(
                f"acknowledged votes: {res['acknowledged']}, missing from the export: {res['acknowledged_missing']}"
            )
            share = res["cpu_share"]
            print(
                f"CPU per battle: server {res['server_cpu_ms_per_battle']:.2f} ms "
                f"({res['api_processes']} process(es), {share['api']:.0%} of one core); "
                f"refit processes {res['refit_cpu_ms_per_battle']:.2f} ms ({share['other']:.0%}); "
                f"load generator {res['loadgen_cpu_ms_per_battle']:.2f} ms ({share['load']:.0%})"
            )
            print(
                f"errors: {res['errors'] or 'none'}; load average before/after: "
                f"{res['load_before'][0]:.2f} / {res['load_after'][0]:.2f}",
                flush=True,
            )
    if args.floor:
        res = run_floor(args)
        results["floor_http"] = res
        print(f"\n## floors: {args.workers} uvicorn worker process(es), the same clients")

        def floor_line(what: str, r: dict) -> None:
            cpu = r["server_cpu_ms_per_battle"] + r["refit_cpu_ms_per_battle"]
            print(
                f"{what:44s} {r['battles_per_s']:7.1f} battles/s   p99 battles "
                f"{r['p99_ms']['battles']:.2f} / vote {r['p99_ms']['vote']:.2f} ms   "
                f"server CPU {cpu:.2f} ms/battle"
            )

        floor_line("HTTP only (null ASGI app)", res)
        for backend in backends:
            fw = results[backend]["floor_writes"]
            floor_line(f"HTTP + the service's durable writes ({backend})", fw)
            bare = results[backend]["bare_inserts_per_s"]
            print(
                f"  {backend}: bare inserts/s {bare:.1f}; writes floor ÷ bare "
                f"{fw['battles_per_s'] / bare:.2f}; the service ÷ writes floor "
                f"{results[backend]['battles_per_s'] / fw['battles_per_s']:.2f}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=float))
    sys.exit(0)


def print_size_run(args, backend: str, n: int, res: dict) -> None:
    """One line per run of :func:`run_sizes`."""
    lc = res["server"].get("live_counts") or {}
    n_ann = prefill_annotators(n, args.prefill_annotators) if n else 0
    print(
        f"{backend:10s} prefill {n:>9,d} ({n_ann:>6,d} annotators; built in "
        f"{res['prefill_seconds']:6.1f} s, copied in {res['prefill_copy_seconds']:5.1f} s, "
        f"first fit waited {res['first_fit_wait_seconds']:5.1f} s): "
        f"{res['battles_per_s']:7.1f} battles/s, server CPU "
        f"{res['total_server_cpu_ms_per_battle']:.3f} ms/battle (API "
        f"{res['server_cpu_ms_per_battle']:.3f} + fit {res['refit_cpu_ms_per_battle']:.3f}), "
        f"staleness max {res['staleness_votes']['max']} votes / "
        f"{res['staleness_seconds']['max']} s (median {res['staleness_votes']['median']} / "
        f"{res['staleness_seconds']['median']}), missing {res['acknowledged_missing']}, "
        f"server RSS {res['server']['rss_mb']:.0f} MB (+ fit process "
        f"{res['server']['other_rss_mb']:.0f} MB), cells {lc.get('cells')}, "
        f"load {res['load_before'][0]:.1f}/{res['load_after'][0]:.1f}",
        flush=True,
    )


def run_sizes(args, sizes: list[int]) -> int:
    """``--prefill``: the same load on databases pre-filled with each size, the sizes repeated
    ``--rounds`` times interleaved; prints one line per run and the medians per size."""
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    print(
        f"# {platform.python_version()}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.2f}; {args.models} models, {args.clients} clients, "
        f"{args.duration:g} s per run (+{args.warmup:g} s warm-up); K={args.refit_votes}, "
        f"T={args.refit_seconds:g} s; sizes {sizes} × {args.rounds} rounds, interleaved",
        flush=True,
    )
    runs: dict[str, dict[int, list[dict]]] = {}
    args.pg_templates = {}
    shared_pg = None
    if "postgresql" in backends:
        import _suite  # noqa: F401 - tests/ on sys.path
        from pgserver import PostgresServer

        shared_pg = PostgresServer().start()  # one server: each size is built once on it
    try:
        with tempfile.TemporaryDirectory(prefix="bench-service-") as tmp:
            for _round in range(args.rounds):
                for backend in backends:
                    for n in sizes:
                        res = run_backend(backend, args, Path(tmp), n, shared_pg)
                        runs.setdefault(backend, {}).setdefault(n, []).append(res)
                        print_size_run(args, backend, n, res)
    finally:
        if shared_pg is not None:
            shared_pg.stop()
    print(
        "\n## medians (ratio to the empty database's); server CPU = every process of the "
        "server: the API process (its writer and refitter threads included) + the fit process"
    )
    for backend, by in runs.items():
        base = by.get(0) or next(iter(by.values()))

        def med(rs: list[dict], key: str) -> float:
            return float(np.median([r[key] for r in rs]))

        b_bps = med(base, "battles_per_s")
        b_cpu = med(base, "total_server_cpu_ms_per_battle")
        for n, rs in by.items():
            bps, cpu = med(rs, "battles_per_s"), med(rs, "total_server_cpu_ms_per_battle")
            print(
                f"{backend:10s} {n:>9,d} votes: {bps:7.1f} battles/s ({bps / b_bps:5.2f}), "
                f"server CPU {cpu:.3f} ms/battle ({cpu / b_cpu:5.2f}) = API "
                f"{med(rs, 'server_cpu_ms_per_battle'):.3f} + fit "
                f"{med(rs, 'refit_cpu_ms_per_battle'):.3f}; RSS {med([r['server'] for r in rs], 'rss_mb'):.0f} MB; "
                f"runs {len(rs)}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2, default=float))
    return 0


if __name__ == "__main__":
    main()
