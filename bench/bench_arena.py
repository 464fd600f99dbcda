"""Held battles under load: N concurrent streaming battles through one ``serve`` worker against
the local demo model server, and the same calls made to the model server directly.

Reports the worker's CPU time per battle (relaying both answers and the vote included); the
CPU per battle of all three processes (this client, the worker, the model server) in each phase
— on a machine whose cores are all busy, the arena's extra CPU per battle times the battles
served before the median one is about what the burst adds to the median time to first token;
the arena's added time to first token (first streamed piece of either answer, vs the first
content piece of two direct concurrent calls), p50 and p99; answers per second; the worker's
memory (RSS) before and after; and checks that every battle is stored complete and every vote
counted.

    PYTHONPATH=src python bench/bench_arena.py [--battles 200] [--slow 0.01] [--rounds 2]

``--battles 1 --rounds 41`` measures one battle at a time (the arena's own latency, no queue).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from stablearena.endpoints.demo_server import DemoServer

MODELS = ("demo-ace", "demo-wild")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def start_serve(tmp: str, base_url: str, slow: float, n: int) -> tuple[subprocess.Popen, str, str]:
    cfg = Path(tmp) / "arena.toml"
    limits = f"visitor_open = {n}\naddress_open = {n * 2}\nvisitors_per_hour = 1e9\n"
    limits += "visitor_battles_per_hour = 1e9\naddress_battles_per_hour = 1e9\n"
    models = "".join(
        f'[[models]]\nname = "{m}"\nbase_url = "{base_url}"\nmodel = "{m}+slow={slow}"\n'
        f"max_concurrency = {n}\n\n"
        for m in MODELS
    )
    cfg.write_text(
        f"keep_alive_timeout = 600\n\n[arena]\nrefit_seconds = 5\n\n[arena_page]\n{limits}\n{models}"
    )
    cmd = [sys.executable, "-m", "stablearena", "serve", "--config", str(cfg), "--port", "0"]
    cmd += ["--db", f"sqlite:///{tmp}/bench.db"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    admin = url = None
    while url is None:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("serve exited")
        if line.strip().startswith("sa_"):
            admin = line.strip()
        m = re.search(r"listening on (http://\S+) ", line)
        url = m.group(1) if m else None
    while True:  # the socket listens once the application has started
        try:
            httpx.get(url + "/healthz", timeout=5)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    return proc, url, admin


async def direct(c: httpx.AsyncClient, base_url: str, slow: float, prompt: str) -> float:
    """Time to the first content piece of two concurrent direct calls (one per model) on the
    long-lived client ``c`` (as the arena's own clients are)."""
    t0 = time.perf_counter()

    async def one(model: str) -> float:
        body = {"model": f"{model}+slow={slow}", "stream": True}
        body["messages"] = [{"role": "user", "content": prompt}]
        async with c.stream("POST", base_url + "/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                if (
                    line.startswith("data:")
                    and '"content": "' in line
                    and '"content": ""' not in line
                ):
                    return time.perf_counter() - t0
        return float("nan")

    return min(await asyncio.gather(*(one(m) for m in MODELS)))


async def held(
    url: str, client: httpx.AsyncClient, csrf: str, prompt: str
) -> tuple[float, str, str]:
    """(time to the first streamed piece, battle id, end status) of one held battle."""
    h = {"X-CSRF-Token": csrf, "Origin": url}
    t0 = time.perf_counter()
    first, bid, status = float("nan"), "", ""
    async with client.stream("POST", "/arena/battles", json={"prompt": prompt}, headers=h) as r:
        async for line in r.aiter_lines():
            if not line:
                continue
            m = json.loads(line)
            if "battle_id" in m:
                bid = m["battle_id"]
            elif "delta" in m and first != first:
                first = time.perf_counter() - t0
            elif m.get("done"):
                status = m["status"]
    await client.post(f"/arena/battles/{bid}/vote", json={"outcome": "tie"}, headers=h)
    return first, bid, status


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


async def run(args: argparse.Namespace) -> None:
    prompt = "What is 17*23?"
    with DemoServer(seed=0) as demo, tempfile.TemporaryDirectory() as tmp:
        proc, url, admin = start_serve(tmp, demo.base_url, args.slow, args.battles)
        try:
            clients = []
            for _ in range(args.battles):
                c = httpx.AsyncClient(base_url=url, timeout=300)
                page = (await c.get("/arena")).text
                clients.append((c, re.search(r'csrf-token" content="(\w+)"', page).group(1)))
            limits = httpx.Limits(max_connections=4 * args.battles)
            shared = httpx.AsyncClient(timeout=300, limits=limits)
            rss0 = rss_mb(proc.pid)
            added, rates, extra = [], [], []
            all_ids: list[str] = []
            for k in range(args.rounds):  # interleaved: direct, arena, direct, arena…
                t0, m0, b0 = time.perf_counter(), cpu_seconds(demo.proc.pid), time.process_time()
                d = await asyncio.gather(
                    *(direct(shared, demo.base_url, args.slow, prompt) for _ in clients)
                )
                t_direct = time.perf_counter() - t0
                m1, b1 = cpu_seconds(demo.proc.pid), time.process_time()
                t0, c0 = time.perf_counter(), cpu_seconds(proc.pid)
                got = await asyncio.gather(*(held(url, c, t, prompt) for c, t in clients))
                t_arena, cpu = time.perf_counter() - t0, cpu_seconds(proc.pid) - c0
                m2, b2 = cpu_seconds(demo.proc.pid), time.process_time()
                n = len(clients)
                phases = (((b1 - b0) + (m1 - m0)) / n, ((b2 - b1) + (m2 - m1) + cpu) / n)
                extra.append(phases[1] - phases[0])
                a = [g[0] for g in got]
                assert all(g[2] == "complete" for g in got), [g[2] for g in got]
                all_ids += [g[1] for g in got]
                p50 = statistics.median(a) - statistics.median(d)
                p99 = pct(a, 0.99) - pct(d, 0.99)
                added.append((p50, p99))
                rates.append(2 * len(got) / t_arena)
                print(
                    f"round {k + 1}: ttft direct p50 {statistics.median(d) * 1e3:.1f} ms "
                    f"p99 {pct(d, 0.99) * 1e3:.1f} ms; arena p50 {statistics.median(a) * 1e3:.1f} ms "
                    f"p99 {pct(a, 0.99) * 1e3:.1f} ms; added p50 {p50 * 1e3:.1f} ms, p99 "
                    f"{p99 * 1e3:.1f} ms; answers/s {2 * len(got) / t_arena:.0f} "
                    f"(direct {2 * len(d) / t_direct:.0f}); worker CPU per battle "
                    f"{cpu / len(got) * 1e3:.2f} ms"
                )
                print(
                    f"  CPU per battle, all three processes: direct {phases[0] * 1e3:.2f} ms "
                    f"(client {(b1 - b0) / n * 1e3:.2f} + model server {(m1 - m0) / n * 1e3:.2f}); "
                    f"arena {phases[1] * 1e3:.2f} ms (client {(b2 - b1) / n * 1e3:.2f} + worker "
                    f"{cpu / n * 1e3:.2f} + model server {(m2 - m1) / n * 1e3:.2f}); the arena's "
                    f"extra {extra[-1] * 1e3:.2f} ms × {n // 2} battles before the median one = "
                    f"{extra[-1] * (n // 2) * 1e3:.0f} ms of CPU"
                )
            later = added[1:] or added  # the first round pays the start (connections, first fit)
            print(
                f"rounds 2-{len(added)}: added time to first token, median of the rounds' p50 "
                f"{statistics.median(a[0] for a in later) * 1e3:.1f} ms, of their p99 "
                f"{statistics.median(a[1] for a in later) * 1e3:.1f} ms; the arena's extra CPU "
                f"per battle (worker, client and model server together, vs calling directly) "
                f"{statistics.median(extra[1:] or extra) * 1e3:.2f} ms"
            )
            rss1 = rss_mb(proc.pid)
            async with httpx.AsyncClient(base_url=url, timeout=60) as c:
                auth = {"Authorization": f"Bearer {admin}"}
                ex = (await c.get("/v1/export", headers=auth)).text.splitlines()
                held_rows = (
                    await c.get(f"/v1/admin/held?limit={len(all_ids) + 10}", headers=auth)
                ).json()["battles"]
            voted = {json.loads(x)["battle_id"] for x in ex}
            lost = set(all_ids) - voted
            print(
                f"{len(all_ids)} battles: {len(voted)} votes exported, {len(lost)} lost; "
                f"held complete {sum(h['status'] == 'complete' for h in held_rows)}; "
                f"worker RSS {rss0:.0f} → {rss1:.0f} MB; load average {os.getloadavg()[0]:.1f}"
            )
            for c, _ in clients:
                await c.aclose()
            await shared.aclose()
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--battles", type=int, default=200)
    p.add_argument("--slow", type=float, default=0.01)
    p.add_argument("--rounds", type=int, default=2)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
