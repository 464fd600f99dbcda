"""The cost of keeping the rate limits in the database (settings ``limits``): ``stablearena
serve`` on PostgreSQL under the closed loop of bench/bench_service.py (each client: ``POST
/v1/battles`` then its vote, two requests that each take a token from the key's bucket), in
three modes interleaved over ``--rounds`` rounds on one PostgreSQL server (fsync on), each run
on a fresh database:

- ``host``: ``limits = "host"``, the buckets in the process's memory (a million a second);
- ``database``: ``limits = "database"``, a row of ``rate_buckets`` per key, at a million a
  second: a process leases 16 tokens per upsert (DatabaseRateLimiter.MAX_LEASE);
- ``database-exact``: the same at 10 a second with a burst of a billion: a lease of 1, one
  upsert per request (the straight version; the burst never runs out in a run).

No request is refused in any mode.

Per run it prints battles per second, the serve process's CPU per battle and PostgreSQL's (every
process of the server: the backends do the upserts), p50/p99 of both requests; then the medians
per mode, and the difference per request (a battle is two requests).

    python bench/bench_limits.py [--rounds 3] [--duration 20] [--clients 16] [--models 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _suite  # noqa: E402,F401 - tests/ on sys.path
from bench_service import load, process_tree, run_loop, tree_cpu  # noqa: E402

_MILLION = ["--set", "rate_limit=1000000", "--set", "rate_burst=1000000"]
MODES = {
    "host": [*_MILLION, "--set", "limits='host'"],
    "database": [*_MILLION, "--set", "limits='database'"],
    "database-exact": [
        "--set",
        "rate_limit=10",
        "--set",
        "rate_burst=1000000000",
        "--set",
        "limits='database'",
    ],
}


async def with_db_cpu(coro, pg_pid: int, warmup: float, duration: float) -> tuple[dict, float]:  # noqa: ANN001
    """``coro`` (bench_service.load) and the CPU seconds PostgreSQL's processes used in its
    measured window (after the warm-up)."""
    box: dict[str, float] = {}

    async def probe() -> None:
        await asyncio.sleep(warmup)
        tree = process_tree(pg_pid)
        box["start"] = sum(tree_cpu(tree).values())
        await asyncio.sleep(duration)
        tree = {**tree, **process_tree(pg_pid)}
        box["end"] = sum(tree_cpu(tree).values())

    res, _ = await asyncio.gather(coro, probe())
    return res, box["end"] - box["start"]


def one_run(pg, mode: str, args, workdir: Path) -> dict:  # noqa: ANN001
    from arena_process import ServerProcess

    from stablearena.service.client import ArenaClient

    name = "lim" + uuid.uuid4().hex[:10]
    url = pg.create_database(name)
    sets = [*MODES[mode], "--set", "arena.min_records=50"]
    server = ServerProcess(url, *sets, cwd=workdir).start(timeout=600)
    try:
        admin = ArenaClient(server.url, server.admin_key, timeout=120)
        names = [f"model-{k:03d}" for k in range(args.models)]
        for n in names:
            admin.add_model(n)
        keys = [admin.create_annotator(f"annotator-{k:03d}") for k in range(args.annotators)]
        admin.close()
        rng = np.random.default_rng(1)
        truth = dict(zip(names, rng.normal(0, 1.0, args.models), strict=True))
        pg_pid = int((pg.data / "postmaster.pid").read_text().split()[0])
        load_before = os.getloadavg()[0]
        res, db_cpu = run_loop(
            with_db_cpu(
                load(server.url, keys, truth, args, server.admin_key, server.proc.pid),
                pg_pid,
                args.warmup,
                args.duration,
            )
        )
        res["db_cpu_ms_per_battle"] = 1000.0 * db_cpu / max(res["battles"], 1)
        res["load"] = (load_before, os.getloadavg()[0])
    finally:
        server.stop()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=20.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--annotators", type=int, default=32)
    args = ap.parse_args()
    from pgserver import PostgresServer

    modes = tuple(MODES)
    out: dict[str, list[dict]] = {m: [] for m in modes}
    print(
        f"# {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; PostgreSQL; "
        f"{args.models} models, {args.clients} clients, {args.rounds} rounds of "
        f"{args.duration:g} s per mode (+{args.warmup:g} s warm-up)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as tmp, PostgresServer() as pg:
        for r in range(args.rounds):
            for mode in modes[r % 3 :] + modes[: r % 3]:  # each mode first once
                res = one_run(pg, mode, args, Path(tmp))
                out[mode].append(res)
                print(
                    f"round {r} {mode:14s} {res['battles_per_s']:7.1f} battles/s  serve CPU "
                    f"{res['server_cpu_ms_per_battle']:.2f} ms/battle  PostgreSQL CPU "
                    f"{res['db_cpu_ms_per_battle']:.2f} ms/battle  p50/p99 battles "
                    f"{res['p50_ms']['battles']:.1f}/{res['p99_ms']['battles']:.1f} ms, vote "
                    f"{res['p50_ms']['vote']:.1f}/{res['p99_ms']['vote']:.1f} ms  errors "
                    f"{res['errors'] or 'none'}  load {res['load'][0]:.1f}→{res['load'][1]:.1f}",
                    flush=True,
                )
                time.sleep(1.0)
    med = {
        m: {
            k: statistics.median(x[k] for x in out[m])
            for k in ("battles_per_s", "server_cpu_ms_per_battle", "db_cpu_ms_per_battle")
        }
        for m in modes
    }
    for m in modes:
        print(
            f"median {m:14s} {med[m]['battles_per_s']:7.1f} battles/s  serve CPU "
            f"{med[m]['server_cpu_ms_per_battle']:.2f} ms/battle  PostgreSQL CPU "
            f"{med[m]['db_cpu_ms_per_battle']:.2f} ms/battle"
        )
    h = med["host"]
    for m in modes[1:]:
        d = med[m]
        print(
            f"{m} - host, per request (a battle is 2): serve CPU "
            f"{(d['server_cpu_ms_per_battle'] - h['server_cpu_ms_per_battle']) / 2:+.3f} ms, "
            f"PostgreSQL CPU {(d['db_cpu_ms_per_battle'] - h['db_cpu_ms_per_battle']) / 2:+.3f} "
            f"ms; battles/s {100.0 * (d['battles_per_s'] / h['battles_per_s'] - 1):+.1f} %"
        )


if __name__ == "__main__":
    main()
