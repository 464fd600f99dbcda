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

It prints battles per second, the latency percentiles of each endpoint, staleness, missing
votes, the bare insert rate and the ratio, with the machine's load average before and after.

    python bench/bench_service.py [--backends sqlite,postgresql] [--models 200] [--duration 60]
        [--clients 32] [--annotators 64] [--warmup 5] [--bare-seconds 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


# ---------------------------------------------------------------------------------- HTTP
class Conn:
    """One keep-alive HTTP/1.1 connection (enough for JSON requests to our server)."""

    def __init__(self, host: str, port: int, key: str) -> None:
        self.host, self.port, self.key = host, port, key
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        data = b"" if body is None else json.dumps(body).encode()
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {self.key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        status = int((await self.reader.readline()).split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        payload = await self.reader.readexactly(length) if length else b""
        return status, (json.loads(payload) if payload else {})

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000.0, q)) if xs else float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc), 0 elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


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
    cpu = {"start": 0.0, "end": 0.0}
    stale_votes: list[int] = []
    stale_secs: list[float] = []
    rng = np.random.default_rng(0)

    async def client(k: int) -> None:
        conn = Conn(host, port, keys[k % len(keys)])
        try:
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                st, res = await conn.request("POST", "/v1/battles", {})
                t1 = time.perf_counter()
                if st != 200:
                    errors[st] = errors.get(st, 0) + 1
                    await asyncio.sleep(0.01)
                    continue
                b = res["battles"][0]
                p = 1.0 / (1.0 + np.exp(-(truth[b["model_a"]] - truth[b["model_b"]])))
                out = "model_a" if rng.random() < p else "model_b"
                st, res = await conn.request(
                    "POST", f"/v1/battles/{b['battle_id']}/vote", {"outcome": out}
                )
                t2 = time.perf_counter()
                if st != 200:
                    errors[st] = errors.get(st, 0) + 1
                    continue
                acked.append(b["battle_id"])
                if t0 >= warm_until:
                    lat["battles"].append(t1 - t0)
                    lat["vote"].append(t2 - t1)
                    if t2 <= end:
                        done["battles"] += 1
        finally:
            conn.close()

    async def cpu_probe() -> None:
        await asyncio.sleep(max(0.0, warm_until - time.perf_counter()))
        cpu["start"] = cpu_seconds(pid)
        await asyncio.sleep(max(0.0, end - time.perf_counter()))
        cpu["end"] = cpu_seconds(pid)

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
                    behind = max(0, n_acked - int(lb["as_of_vote"]))
                    stale_votes.append(behind)
                    stale_secs.append(time.time() - lb["fitted_at"] if behind else 0.0)
        finally:
            conn.close()

    await asyncio.gather(*(client(k) for k in range(args.clients)), watcher(), cpu_probe())
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
        "server_cpu_ms_per_battle": 1000.0 * (cpu["end"] - cpu["start"]) / max(done["battles"], 1),
        "server_cpu_share": (cpu["end"] - cpu["start"]) / args.duration,
    }


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
def run_backend(backend: str, args, workdir: Path) -> dict:
    from stablearena.client import ArenaClient
    from stablearena.service.testing import ServerProcess

    pg = None
    if backend == "sqlite":
        db_path = str(workdir / "bench.db")
        url = f"sqlite:///{db_path}"
    else:
        from stablearena.service.pgserver import PostgresServer

        pg = PostgresServer().start()
        url = pg.create_database("bench")
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
    server = ServerProcess(url, *sets, cwd=workdir).start()
    try:
        admin = ArenaClient(server.url, server.admin_key, timeout=120)
        names = [f"model-{k:03d}" for k in range(args.models)]
        for n in names:
            admin.add_model(n)
        keys = [admin.create_annotator(f"annotator-{k:03d}") for k in range(args.annotators)]
        rng = np.random.default_rng(1)
        truth = dict(zip(names, rng.normal(0, 1.0, args.models), strict=True))
        load_before = os.getloadavg()
        res = asyncio.run(load(server.url, keys, truth, args, server.admin_key, server.proc.pid))
        load_after = os.getloadavg()
        export = admin.export("jsonl")
        stored = {json.loads(line)["battle_id"] for line in export.decode().splitlines() if line}
        acked = res.pop("acked_ids")
        res["acknowledged"] = len(acked)
        res["acknowledged_missing"] = sum(1 for b in acked if b not in stored)
        health = admin.health()
        res["server"] = {"votes": health["votes"], "fit_as_of_vote": health["fit_as_of_vote"]}
        admin.close()
    finally:
        server.stop()
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
    return res


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
    ap.add_argument("--clients", type=int, default=32, help="concurrent clients (closed loop)")
    ap.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds before measuring")
    ap.add_argument(
        "--bare-seconds", type=float, default=10.0, help="seconds of the bare insert loop"
    )
    ap.add_argument("--refit-votes", type=int, default=100, help="arena.refit_votes (K)")
    ap.add_argument("--refit-seconds", type=float, default=5.0, help="arena.refit_seconds (T)")
    ap.add_argument("--min-records", type=int, default=50, help="arena.min_records (δ)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
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
            print(
                f"server process CPU: {res['server_cpu_ms_per_battle']:.2f} ms per battle, "
                f"{res['server_cpu_share']:.0%} of one core (the refit process not counted)"
            )
            print(
                f"errors: {res['errors'] or 'none'}; load average before/after: "
                f"{res['load_before'][0]:.2f} / {res['load_after'][0]:.2f}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=float))
    sys.exit(0)


if __name__ == "__main__":
    main()
