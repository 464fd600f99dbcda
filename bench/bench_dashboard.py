"""What the live dashboard costs the votes: latency of ``POST /v1/battles`` and of votes while
the dashboard is open and polled, against the same arena with nobody looking, in one run.

1. starts ``stablearena serve`` on a fresh SQLite database (loopback, free port), seeded with
   ``--seed-battles`` simulated battles of ``--models`` models by ``--seed-annotators``
   annotators (``--import``), so that every fit is Chatbot-Arena-sized and each drawing of the
   dashboard costs what it would there;
2. runs ``--clients`` concurrent clients in a closed loop (a battle = next pair + durable vote,
   the keep-alive client of bench_service.py) for the whole run;
3. alternates phases of ``--phase`` seconds, ``--repeats`` times each, interleaved: **off**
   (nobody requests a dashboard page) and **on** (``--viewers`` open public pages, each polling
   ``/dashboard/poll`` every 3 s and fetching the new content when a newer fit has been drawn,
   as the page's script does, plus one logged-in admin view polling ``/admin/poll`` every 5 s).
   The server runs with ``dashboard_idle`` = ``--idle`` seconds, so drawing stops in the off
   phases; the first ``--settle`` seconds of each phase are not measured (a drawing under way
   ends);
4. prints, per condition, the median over its phases of the p50 and p99 of each endpoint, the
   battles per second, the CPU of the server process and of its children (refit and render
   processes), the fits drawn, and the ratio on/off.

    python bench/bench_dashboard.py [--models 129] [--clients 16] [--viewers 4] [--phase 40]
        [--repeats 3] [--settle 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_service import Conn, cpu_seconds, pct, play_battle  # noqa: E402 - the same client


def children_cpu(pid: int) -> float:
    """CPU seconds of the direct children of ``pid`` (the refit and render processes)."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        total += sum(cpu_seconds(int(k)) for k in kids)
    return total


async def run(url: str, keys: list[str], admin_key: str, truth: dict, args, pid: int) -> dict:
    import httpx

    host, port = url.split("//")[1].split(":")
    port = int(port)
    rng = np.random.default_rng(0)
    phase = {"name": "warm-up", "measure": False}
    lat: dict[str, dict[str, list[float]]] = {}
    count: dict[str, int] = {}
    stop = asyncio.Event()

    async def client(k: int) -> None:
        conn = Conn(host, port, keys[k % len(keys)])
        try:
            while not stop.is_set():
                st, st_vote, _, t0, t1, t2 = await play_battle(conn, truth, rng)
                if st != 200:
                    await asyncio.sleep(0.01)
                    continue
                if phase["measure"] and st_vote == 200:
                    name = phase["name"]
                    d = lat.setdefault(name, {"battles": [], "vote": []})
                    d["battles"].append(t1 - t0)
                    d["vote"].append(t2 - t1)
                    count[name] = count.get(name, 0) + 1
        finally:
            conn.close()

    tasks = [asyncio.create_task(client(k)) for k in range(args.clients)]
    # the viewers run in their own process, so that they do not slow the voting clients down
    ctx = multiprocessing.get_context("spawn")
    on, done, seen = ctx.Event(), ctx.Event(), ctx.Queue()
    viewers = ctx.Process(target=viewers_main, args=(url, admin_key, args.viewers, on, done, seen))
    viewers.start()
    phases = []
    await asyncio.sleep(args.warmup)
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for r in range(args.repeats):
            for cond in ("off", "on"):
                name = f"{cond}-{r}"
                phase.update(name=name, measure=False)
                (on.set if cond == "on" else on.clear)()
                await asyncio.sleep(args.settle)
                s0 = (await http.get("/dashboard/poll")).json() if cond == "on" else None
                c0, k0, t0 = cpu_seconds(pid), children_cpu(pid), time.perf_counter()
                phase["measure"] = True
                await asyncio.sleep(args.phase - args.settle)
                phase["measure"] = False
                dt = time.perf_counter() - t0
                c1, k1 = cpu_seconds(pid), children_cpu(pid)
                s1 = (await http.get("/dashboard/poll")).json() if cond == "on" else None
                d = lat.get(name, {"battles": [], "vote": []})
                res = {
                    "phase": name,
                    "condition": cond,
                    "battles_per_s": count.get(name, 0) / dt,
                    "p50_ms": {k: pct(v, 50) for k, v in d.items()},
                    "p99_ms": {k: pct(v, 99) for k, v in d.items()},
                    "server_cpu_share": (c1 - c0) / dt,
                    "children_cpu_share": (k1 - k0) / dt,
                    "load": os.getloadavg()[0],
                }
                if cond == "on":
                    res["views"] = [s0["version"], s1["version"]]
                phases.append(res)
                print(
                    f"  {name:6s} battles/s {res['battles_per_s']:6.1f}  vote p50/p99 "
                    f"{res['p50_ms']['vote']:6.1f} / {res['p99_ms']['vote']:6.1f} ms  battles "
                    f"p50/p99 {res['p50_ms']['battles']:6.1f} / {res['p99_ms']['battles']:6.1f} ms"
                    f"  server CPU {res['server_cpu_share']:.0%}, children {res['children_cpu_share']:.0%}"
                    + (f"  views {res['views'][0]}→{res['views'][1]}" if cond == "on" else ""),
                    flush=True,
                )
    stop.set()
    done.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    drawings: dict[int, dict] = {}
    while True:
        item = await asyncio.to_thread(seen.get)
        if item is None:
            break
        drawings[item["fit_id"]] = item
    viewers.join(timeout=60)
    return {"phases": phases, "drawings": list(drawings.values())}


def viewers_main(url: str, admin_key: str, n: int, on, done, seen) -> None:
    """``n`` open public pages and one admin view, while ``on`` is set: each polls as the
    page's script does (every 3 s; admin 5 s) and fetches the new content when a newer fit has
    been drawn. The admin view reports each drawing it sees to ``seen`` (``None`` at the end)."""
    import httpx

    async def viewer(k: int, admin: bool) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            poll, frag, every = "/dashboard/poll", "/dashboard/fragment", 3.0
            if admin:
                r = await http.post("/admin/login", data={"key": admin_key})
                assert r.status_code == 303, r.text
                poll, frag, every = "/admin/poll", "/admin/fragment", 5.0
            version = None
            await asyncio.sleep(k * 0.7)
            while not done.is_set():
                if on.is_set():
                    if version is None:
                        await http.get("/admin" if admin else "/")
                    s = (await http.get(poll, params={"v": version or ""})).json()
                    if admin and s.get("last_render"):
                        seen.put(s["last_render"])
                    if s["version"] != version:
                        await http.get(frag)
                        version = s["version"]
                else:
                    version = None
                await asyncio.sleep(every)

    async def main() -> None:
        await asyncio.gather(*(viewer(k, k == n) for k in range(n + 1)))

    try:
        asyncio.run(main())
    finally:
        seen.put(None)


def request_costs(url: str, admin_key: str, pid: int, n: int) -> dict[str, dict[str, float]]:
    """Server CPU (and wall time) per dashboard request, one client, no other load."""
    import httpx

    out = {}
    with httpx.Client(base_url=url, timeout=60) as http:
        http.post("/admin/login", data={"key": admin_key})
        for path in (
            "/",
            "/dashboard/poll",
            "/dashboard/fragment",
            "/admin",
            "/admin/poll",
            "/admin/fragment",
            "/healthz",
        ):
            http.get(path)
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            for _ in range(n):
                r = http.get(path)
            out[path] = {
                "server_cpu_ms": 1000 * (cpu_seconds(pid) - c0) / n,
                "wall_ms": 1000 * (time.perf_counter() - t0) / n,
                "bytes_sent": int(r.headers.get("content-length", len(r.content))),
            }
    return out


def seed_log(path: Path, models: list[str], args) -> dict[str, float]:
    from stablearena.data.simulate import simulate_battles

    rng = np.random.default_rng(1)
    ratings = rng.normal(1000, 120, len(models))
    abilities = rng.uniform(0.5, 1.5, args.seed_annotators)
    battles = simulate_battles(
        ratings,
        args.seed_battles,
        abilities=abilities,
        models=models,
        annotators=[f"seed-{k:03d}" for k in range(args.seed_annotators)],
        seed=2,
    )
    battles.to_frame().to_csv(path, index=False)
    scale = np.log(10) / 400
    return {m: float(r * scale) for m, r in zip(models, ratings - ratings.mean(), strict=True)}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--models", type=int, default=129)
    ap.add_argument("--seed-battles", type=int, default=100_000, help="simulated battles imported")
    ap.add_argument("--seed-annotators", type=int, default=100)
    ap.add_argument("--annotators", type=int, default=32, help="annotator keys the clients share")
    ap.add_argument("--clients", type=int, default=16, help="concurrent voting clients")
    ap.add_argument("--viewers", type=int, default=4, help="open public pages in the on phases")
    ap.add_argument("--phase", type=float, default=40.0, help="seconds per phase")
    ap.add_argument("--settle", type=float, default=10.0, help="unmeasured seconds per phase")
    ap.add_argument("--repeats", type=int, default=3, help="phases of each condition")
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--idle", type=float, default=5.0, help="the server's dashboard_idle")
    ap.add_argument("--share", type=float, default=0.2, help="the server's dashboard_share")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    if args.settle >= args.phase:
        ap.error("--settle must be shorter than --phase")

    import _suite  # noqa: F401 - tests/ on sys.path
    from arena_process import ServerProcess

    from stablearena.service.client import ArenaClient

    print(
        f"# {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; load "
        f"average {os.getloadavg()[0]:.2f}; {args.models} models, {args.seed_battles:,} seeded "
        f"battles, {args.clients} voting clients, {args.viewers} viewers + 1 admin in 'on' "
        f"phases; {args.repeats} × ({args.phase:g} s off, {args.phase:g} s on), first "
        f"{args.settle:g} s of each unmeasured",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        work = Path(tmp)
        models = [f"model-{k:03d}" for k in range(args.models)]
        truth = seed_log(work / "seed.csv", models, args)
        server = ServerProcess(
            f"sqlite:///{work / 'arena.db'}",
            "--import",
            str(work / "seed.csv"),
            "--set",
            "rate_limit=1000000",
            "--set",
            "rate_burst=1000000",
            "--set",
            f"dashboard_idle={args.idle}",
            "--set",
            f"dashboard_share={args.share}",
            cwd=work,
        ).start(timeout=600)
        try:
            admin = ArenaClient(server.url, server.admin_key, timeout=300)
            keys = [admin.create_annotator(f"client-{k:03d}") for k in range(args.annotators)]
            admin.refit()
            res = asyncio.run(run(server.url, keys, server.admin_key, truth, args, server.proc.pid))
            time.sleep(args.settle)
            res["requests"] = request_costs(server.url, server.admin_key, server.proc.pid, 50)
            admin.close()
        finally:
            server.stop()
    summary = {}
    for cond in ("off", "on"):
        rows = [p for p in res["phases"] if p["condition"] == cond]
        summary[cond] = {
            "battles_per_s": float(np.median([p["battles_per_s"] for p in rows])),
            "vote_p50_ms": float(np.median([p["p50_ms"]["vote"] for p in rows])),
            "vote_p99_ms": float(np.median([p["p99_ms"]["vote"] for p in rows])),
            "battles_p50_ms": float(np.median([p["p50_ms"]["battles"] for p in rows])),
            "battles_p99_ms": float(np.median([p["p99_ms"]["battles"] for p in rows])),
            "server_cpu_share": float(np.median([p["server_cpu_share"] for p in rows])),
            "children_cpu_share": float(np.median([p["children_cpu_share"] for p in rows])),
        }
    off, on = summary["off"], summary["on"]
    print("\n## medians over the phases of each condition")
    print(f"{'':28s} {'off':>10s} {'on':>10s} {'on/off':>8s}")
    for key, label in (
        ("vote_p50_ms", "vote p50 (ms)"),
        ("vote_p99_ms", "vote p99 (ms)"),
        ("battles_p50_ms", "POST /v1/battles p50 (ms)"),
        ("battles_p99_ms", "POST /v1/battles p99 (ms)"),
        ("battles_per_s", "battles/s"),
        ("server_cpu_share", "server process CPU (cores)"),
        ("children_cpu_share", "refit+render CPU (cores)"),
    ):
        print(f"{label:28s} {off[key]:10.2f} {on[key]:10.2f} {on[key] / off[key]:8.2f}")
    drawn = [d for d in res["drawings"] if d["status"] == "stored"]
    if drawn:
        cpu = [d["cpu_seconds"] for d in drawn]
        wall = [d["wall_seconds"] for d in drawn]
        size = [sum(d["sizes"].values()) for d in drawn]
        print(
            f"\none drawing of the dashboard (render process, nice 10; {len(drawn)} seen by the "
            f"admin view): median {np.median(cpu):.2f} s CPU, {np.median(wall):.2f} s wall; "
            f"stored pages {np.median(size) / 1e3:.0f} kB gzip"
        )
    print("\nper dashboard request, one client and no votes (server process):")
    for path, c in res["requests"].items():
        print(
            f"  GET {path:22s} {c['server_cpu_ms']:6.2f} ms CPU  {c['wall_ms']:6.2f} ms wall  "
            f"{c['bytes_sent'] / 1e3:8.1f} kB sent"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, **res}, indent=2, default=float))


if __name__ == "__main__":
    main()
