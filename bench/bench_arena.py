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
    PYTHONPATH=src python bench/bench_arena.py --steady 30 [--battles 200] [--slow 0.1]
    PYTHONPATH=src python bench/bench_arena.py --steady 30 --slow 0.1 --target both  # + ratios

``--turns T`` (T > 1, burst only) adds conversations: each round also holds every battle for T
turns (the first prompt, then T − 1 follow-ups through ``POST /arena/battles/{id}/turns``, each
read to the end, then the vote) beside the one-turn battles, and the direct phase makes the same
T pairs of calls with the growing conversation (2k − 1 messages at turn k): it reports the
worker's CPU per one-turn battle, per T-turn battle and per extra turn, and the added time to
first token of the follow-up turns. The floor relay has no conversations (``--target floor``
ignores ``--turns``).

``--idle S`` measures what a host costs when nobody uses it: the arena (after ``--battles``
battles and votes, so that it has a published fit and boards to watch for) and the floor relay
each left alone for S seconds, their CPU per second of wall time, the ratio, and the arena's
per thread (its watchers poll the database every ``poll_seconds``).

``--workers N`` runs the arena as ``serve --workers N`` (N worker processes on one socket); the
worker CPU figures are then those of all the serving processes (``serve`` and its workers; the
fit and drawing processes are counted in neither phase).

``--battles 1 --rounds 41`` measures one battle at a time (the arena's own latency, no queue).
``--target floor`` runs the same load through ``bench/floor_relay.py`` instead of the arena: a
bare asyncio relay with the arena's model client and nothing else (no pair choice, storage,
identity or framework) — what any one-process Python relay adds, the floor for the arena's
figures.

Two ways to hold N battles at once. The default is a **burst**: all N start in the same
instant, every round (the harshest case: the median battle's first token waits for the work of
the N/2 battles ahead of it). ``--steady S`` keeps N battles **in flight** for S seconds: N
clients, each holding one battle after another (reading both answers to the end and voting, as
a person on the page does), their first battles spread evenly over one battle's length, so the
starts are spread as in a live arena rather than synchronised; the direct phase makes the same
two streaming calls per battle, read to the end. Battles that start in the first
``--warmup`` seconds are not timed. ``--slow`` paces the demo model's words (``--slow 0.1``: the
44-word answer of demo-ace to the default prompt streams over 4.4 s; before the demo conversed,
its answers had 9 words and ``--slow 0.5`` gave the same length).
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
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from stablearena.judging.endpoints.demo_server import DemoServer

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


def tasks(pid: int) -> list[tuple[int, str, float, float]]:
    """(thread id, name, user, system CPU seconds so far) of each live thread of a process
    (/proc/PID/task), by thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            f = (task / "stat").read_text().rsplit(")", 1)[1].split()
            name = (task / "comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        out.append((int(task.name), name, int(f[11]) / tick, int(f[12]) / tick))
    return sorted(out)


def thread_cpu(pid: int) -> str:
    """CPU seconds of each thread of a process so far, user + system (/proc/PID/task)."""
    return "; ".join(
        f"{name}[{tid}] {user:.2f} user + {system:.2f} system"
        for tid, name, user, system in tasks(pid)
        if user + system >= 0.05
    )


def start_floor(base_url: str, slow: float, n: int) -> tuple[subprocess.Popen, str, str]:
    """The floor relay (bench/floor_relay.py) in its own process, as the worker is, its models'
    pools as large as the arena's (``n``)."""
    relay = str(Path(__file__).with_name("floor_relay.py"))
    cmd = [sys.executable, relay, base_url, str(slow), str(n)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"listening on (http://\S+) ", line)
    if not m:
        raise RuntimeError(f"the floor relay did not start: {line!r}")
    return proc, m.group(1), ""


def children(pid: int) -> list[int]:
    """The live child processes of ``pid``."""
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def serving_cpu(pid: int) -> float:
    """CPU seconds of the serving processes: ``serve`` and, with ``--workers N``, its worker
    processes (not the fit and drawing processes, which are counted in neither figure)."""
    total = cpu_seconds(pid)
    for child in children(pid):
        try:
            if b"stablearena.service.worker" in Path(f"/proc/{child}/cmdline").read_bytes():
                total += cpu_seconds(child)
        except OSError:  # it ended meanwhile
            pass
    return total


def start_serve(
    tmp: str, base_url: str, slow: float, n: int, workers: int = 1
) -> tuple[subprocess.Popen, str, str]:
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
    cmd += ["--db", f"sqlite:///{tmp}/bench.db", "--workers", str(workers)]
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


def thread_seconds(pid: int) -> dict[str, float]:
    """CPU seconds so far per thread name of a process (threads of one name summed)."""
    out: dict[str, float] = {}
    for _, name, user, system in tasks(pid):
        out[name] = out.get(name, 0.0) + user + system
    return out


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its live children (the arena's fit and render processes)."""
    total = cpu_seconds(pid)
    for child in children(pid):
        try:
            total += tree_cpu(child)
        except OSError:  # it ended meanwhile
            pass
    return total


async def run_idle(args: argparse.Namespace) -> None:
    """``--idle S``: the arena's and the floor's CPU per second while nobody uses them."""
    with DemoServer(seed=0) as demo, tempfile.TemporaryDirectory() as tmp:
        got = {}
        for target in ("floor", "arena"):
            start = start_floor if target == "floor" else partial(start_serve, tmp)
            proc, url, _ = start(demo.base_url, 0.0, max(args.battles, 1))
            try:
                async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as c:
                    async with c.get(url + "/arena") as r:
                        csrf = re.search(r'csrf-token" content="(\w+)"', await r.text()).group(1)
                    for _ in range(args.battles):  # votes, a fit, boards to watch for
                        await held(url, c, csrf, "What is 17*23?")
                    if target == "arena":  # the public boards drawn: somebody watched
                        for _ in range(600):  # the first fit published
                            async with c.get(url + "/v1/leaderboard") as r:
                                if r.status == 200:
                                    break
                            await asyncio.sleep(0.1)
                        async with c.get(url + "/leaderboard") as r:
                            await r.read()
                await asyncio.sleep(max(10.0, args.warmup))  # drawings done
                t0, c0, th0 = time.monotonic(), tree_cpu(proc.pid), thread_seconds(proc.pid)
                await asyncio.sleep(args.idle)
                wall = time.monotonic() - t0
                used = tree_cpu(proc.pid) - c0
                th1 = thread_seconds(proc.pid)
                per = {k: (v - th0.get(k, 0.0)) / wall for k, v in th1.items()}
                got[target] = used / wall
                busy = ", ".join(
                    f"{k} {v * 1e3:.1f}" for k, v in sorted(per.items(), key=lambda x: -x[1]) if v
                )
                print(
                    f"{target}: idle for {wall:.0f} s after {args.battles} battles: "
                    f"{used / wall * 1e3:.2f} ms of CPU a second (process and children; per "
                    f"thread, ms/s: {busy or 'none'}); load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            finally:
                proc.terminate()
                proc.wait(30)
        f, a = got["floor"], got["arena"]
        ratio = f"×{a / f:.1f}" if f > 0 else "(the floor used no measurable CPU)"
        print(f"idle CPU a second, arena / floor: {a * 1e3:.2f} / {f * 1e3:.2f} ms {ratio}")


def _content(line: bytes) -> bool:
    """Whether an SSE line of the demo server carries a piece of content."""
    return line.startswith(b"data:") and b'"content": "' in line and b'"content": ""' not in line


async def direct(
    c: aiohttp.ClientSession, base_url: str, slow: float, prompt: str, full: bool = False
) -> float:
    """Time to the first content piece of two concurrent direct calls (one per model) on the
    long-lived client ``c``; with ``full``, both answers are read to the end (a steady-state
    battle), else each call stops at its first piece (a burst)."""
    t0 = time.perf_counter()

    async def one(model: str) -> float:
        first = float("nan")
        body = {"model": f"{model}+slow={slow}", "stream": True}
        body["messages"] = [{"role": "user", "content": prompt}]
        async with c.post(base_url + "/chat/completions", json=body) as r:
            async for line in r.content:
                if first != first and _content(line):
                    first = time.perf_counter() - t0
                    if not full:
                        break
        return first

    return min(await asyncio.gather(*(one(m) for m in MODELS)))


async def held(
    url: str, client: aiohttp.ClientSession, csrf: str, prompt: str, follow: tuple[str, ...] = ()
) -> tuple[float, str, str]:
    """(time to the first streamed piece, battle id, end status) of one held battle; with
    ``follow``, its follow-up turns too (each read to the end), the first-piece time of each
    follow-up appended to the tuple as a list."""
    h = {"X-CSRF-Token": csrf, "Origin": url}
    first, bid, status = float("nan"), "", ""
    later: list[float] = []
    for k, text in enumerate((prompt, *follow)):
        path = "/arena/battles" if k == 0 else f"/arena/battles/{bid}/turns"
        t0, got = time.perf_counter(), float("nan")
        async with client.post(url + path, json={"prompt": text}, headers=h) as r:
            async for line in r.content:
                if not line.strip():
                    continue
                m = json.loads(line)
                if "battle_id" in m:
                    bid = m["battle_id"]
                elif "delta" in m and got != got:
                    got = time.perf_counter() - t0
                elif m.get("done"):
                    status = m["status"]
        if k == 0:
            first = got
        else:
            later.append(got)
        if status != "complete":
            break
    vote = f"{url}/arena/battles/{bid}/vote"
    async with client.post(vote, json={"outcome": "tie"}, headers=h) as r:
        await r.read()
    return (first, bid, status, later) if follow else (first, bid, status)


async def direct_turns(
    c: aiohttp.ClientSession, base_url: str, slow: float, prompts: tuple[str, ...]
) -> list[float]:
    """The direct calls of a conversation: per turn, two concurrent calls (one per model) with
    the conversation so far (each model's own answers), read to the end; the time to the first
    content piece of each turn after the first."""
    history: dict[str, list[dict[str, str]]] = {m: [] for m in MODELS}
    firsts: list[float] = []
    for k, prompt in enumerate(prompts):
        t0 = time.perf_counter()

        async def one(model: str, prompt: str = prompt, t0: float = t0) -> float:
            first, text = float("nan"), []
            body = {"model": f"{model}+slow={slow}", "stream": True}
            body["messages"] = [*history[model], {"role": "user", "content": prompt}]
            async with c.post(base_url + "/chat/completions", json=body) as r:
                async for line in r.content:
                    if _content(line):
                        if first != first:
                            first = time.perf_counter() - t0
                        text.append(json.loads(line[5:])["choices"][0]["delta"]["content"])
            history[model] += [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": "".join(text)},
            ]
            return first

        got = min(await asyncio.gather(*(one(m) for m in MODELS)))
        if k:
            firsts.append(got)
    return firsts


async def steady(
    n: int, seconds: float, warmup: float, spread: float, one: Callable[[int], Awaitable[Any]]
) -> tuple[list[Any], float, int]:
    """N clients in a closed loop for ``seconds``: client i starts at i/N of ``spread``, then
    holds one battle after another. Returns the results of the battles started after
    ``warmup`` and ended within the run, the time spent in battles per second of the run
    (the mean number in flight, by Little's law) and the battles ended in all."""
    t0 = time.perf_counter()
    timed: list[Any] = []
    busy = [0.0]
    ended = [0]

    async def client(i: int) -> None:
        await asyncio.sleep(spread * i / n)
        while time.perf_counter() - t0 < seconds:
            s0 = time.perf_counter()
            got = await one(i)
            s1 = time.perf_counter()
            ended[0] += 1
            if s1 - t0 <= seconds:
                busy[0] += s1 - max(s0, t0 + warmup) if s1 - t0 > warmup else 0.0
            if s0 - t0 >= warmup and s1 - t0 <= seconds:
                timed.append(got)

    await asyncio.gather(*(client(i) for i in range(n)))
    return timed, busy[0] / (seconds - warmup), ended[0]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


async def run(args: argparse.Namespace) -> dict[str, float] | None:
    prompt = "What is 17*23?"
    with DemoServer(seed=0) as demo, tempfile.TemporaryDirectory() as tmp:
        if args.target == "floor":
            proc, url, admin = start_floor(demo.base_url, args.slow, args.battles)
        else:
            proc, url, admin = start_serve(
                tmp, demo.base_url, args.slow, args.battles, args.workers
            )
        try:
            clients = []
            for _ in range(args.battles):
                c = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
                async with c.get(url + "/arena") as r:
                    page = await r.text()
                clients.append((c, re.search(r'csrf-token" content="(\w+)"', page).group(1)))
            # the direct calls: one client per battle slot, as each person has their own. The
            # clients of both phases are aiohttp's, the cheapest we measured, so that this
            # process's own work weighs as little as it can on either phase
            # kept-alive connections dropped before the model server drops them (between
            # phases they idle longer than its keep-alive, and a reused stale one failed a
            # round with ServerDisconnectedError)
            shared = [
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(keepalive_timeout=1))
                for _ in range(args.battles)
            ]
            rss0 = rss_mb(proc.pid)
            if args.steady:
                all_ids, summary = await run_steady(args, demo, proc, url, clients, shared, prompt)
                await report_end(proc, url, admin, rss0, all_ids, clients, shared)
                return summary
            added, rates, extra = [], [], []
            all_ids: list[str] = []
            convo: dict[str, list] = {"ids": [], "one": [], "many": [], "added": []}
            for k in range(args.rounds):  # interleaved: direct, arena, direct, arena…
                t0, m0, b0 = time.perf_counter(), cpu_seconds(demo.proc.pid), time.process_time()
                d = await asyncio.gather(
                    *(direct(c, demo.base_url, args.slow, prompt) for c in shared)
                )
                t_direct = time.perf_counter() - t0
                m1, b1 = cpu_seconds(demo.proc.pid), time.process_time()
                t0, c0 = time.perf_counter(), serving_cpu(proc.pid)
                got = await asyncio.gather(*(held(url, c, t, prompt) for c, t in clients))
                t_arena, cpu = time.perf_counter() - t0, serving_cpu(proc.pid) - c0
                m2, b2 = cpu_seconds(demo.proc.pid), time.process_time()
                n = len(clients)
                phases = (((b1 - b0) + (m1 - m0)) / n, ((b2 - b1) + (m2 - m1) + cpu) / n)
                extra.append(phases[1] - phases[0])
                convo.setdefault("last_one", []).append(cpu / n)
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
                if args.turns > 1 and args.target == "arena":
                    await conversation_round(
                        args, demo, proc, url, clients, shared, prompt, k, convo
                    )
                    all_ids += convo["ids"][-len(clients) :]
            later = added[1:] or added  # the first round pays the start (connections, first fit)
            print(
                f"rounds 2-{len(added)}: added time to first token, median of the rounds' p50 "
                f"{statistics.median(a[0] for a in later) * 1e3:.1f} ms, of their p99 "
                f"{statistics.median(a[1] for a in later) * 1e3:.1f} ms; the arena's extra CPU "
                f"per battle (worker, client and model server together, vs calling directly) "
                f"{statistics.median(extra[1:] or extra) * 1e3:.2f} ms"
            )
            if convo["many"]:
                one_cpu = statistics.median(convo["one"][1:] or convo["one"])
                many = statistics.median(convo["many"][1:] or convo["many"])
                print(
                    f"conversations, rounds 2-{len(convo['many'])}: worker CPU per one-turn battle "
                    f"{one_cpu * 1e3:.2f} ms, per {args.turns}-turn battle {many * 1e3:.2f} ms: "
                    f"{(many - one_cpu) / (args.turns - 1) * 1e3:.2f} ms per extra turn; added "
                    f"time to first token of a follow-up, median of the rounds' p50 "
                    f"{statistics.median(convo['added'][1:] or convo['added']) * 1e3:.1f} ms"
                )
            await report_end(proc, url, admin, rss0, all_ids, clients, shared)
        finally:
            proc.terminate()
            proc.wait(30)


FOLLOW = ("And 18*23?", "What is 19*23?", "And the capital of France?", "What is 20*23?")


async def conversation_round(
    args: argparse.Namespace,
    demo: DemoServer,
    proc: subprocess.Popen,
    url: str,
    clients: list[tuple[aiohttp.ClientSession, str]],
    shared: list[aiohttp.ClientSession],
    prompt: str,
    k: int,
    convo: dict[str, list],
) -> None:
    """One round of conversations (``--turns``): every battle held for T turns at once, beside
    the same direct calls; the worker CPU per battle recorded with the one-turn round's."""
    follow = tuple(FOLLOW[j % len(FOLLOW)] for j in range(args.turns - 1))
    d = await asyncio.gather(
        *(direct_turns(c, demo.base_url, args.slow, (prompt, *follow)) for c in shared)
    )
    t0, c0 = time.perf_counter(), serving_cpu(proc.pid)
    got = await asyncio.gather(*(held(url, c, t, prompt, follow) for c, t in clients))
    cpu = serving_cpu(proc.pid) - c0
    n = len(got)
    assert all(g[2] == "complete" for g in got), [g[2] for g in got]
    a = [x for g in got for x in g[3]]
    dd = [x for ds in d for x in ds]
    added = statistics.median(a) - statistics.median(dd)
    convo["ids"] += [g[1] for g in got]
    convo["one"].append(convo.get("last_one", [cpu / n])[-1])
    convo["many"].append(cpu / n)
    convo["added"].append(added)
    print(
        f"  conversations of {args.turns} turns: worker CPU per battle {cpu / n * 1e3:.2f} ms "
        f"({cpu / n / args.turns * 1e3:.2f} ms per turn); follow-up ttft direct p50 "
        f"{statistics.median(dd) * 1e3:.1f} ms, arena p50 {statistics.median(a) * 1e3:.1f} ms, "
        f"added {added * 1e3:.1f} ms; {time.perf_counter() - t0:.1f} s"
    )


async def report_end(
    proc: subprocess.Popen,
    url: str,
    admin: str,
    rss0: float,
    all_ids: list[str],
    clients: list[tuple[aiohttp.ClientSession, str]],
    shared: list[aiohttp.ClientSession],
) -> None:
    """Check that every battle held is stored complete and every vote counted; memory."""
    rss1 = rss_mb(proc.pid)
    print(f"worker threads' CPU over the run (s): {thread_cpu(proc.pid)}")
    if not admin:  # the floor relay stores nothing
        print(
            f"{len(all_ids)} battles relayed by the floor (nothing stored); RSS {rss0:.0f} → "
            f"{rss1:.0f} MB; load average {os.getloadavg()[0]:.1f}"
        )
        await close_all(clients, shared)
        return
    async with httpx.AsyncClient(base_url=url, timeout=60) as c:
        auth = {"Authorization": f"Bearer {admin}"}
        ex = (await c.get("/v1/export", headers=auth)).text.splitlines()
        held_rows = (
            await c.get(f"/v1/admin/held?limit={min(10000, len(all_ids) + 10)}", headers=auth)
        ).json()["battles"]
    voted = {json.loads(x)["battle_id"] for x in ex}
    lost = set(all_ids) - voted
    complete = {h["battle_id"] for h in held_rows if h["status"] == "complete"}
    print(
        f"{len(all_ids)} battles: {len(voted)} votes exported, {len(lost)} lost; "
        f"held complete {len(complete & set(all_ids))} of them; "
        f"worker RSS {rss0:.0f} → {rss1:.0f} MB; load average {os.getloadavg()[0]:.1f}"
    )
    await close_all(clients, shared)


async def close_all(
    clients: list[tuple[aiohttp.ClientSession, str]], shared: list[aiohttp.ClientSession]
) -> None:
    for c, _ in clients:
        await c.close()
    for c in shared:
        await c.close()


async def run_steady(
    args: argparse.Namespace,
    demo: DemoServer,
    proc: subprocess.Popen,
    url: str,
    clients: list[tuple[aiohttp.ClientSession, str]],
    shared: list[aiohttp.ClientSession],
    prompt: str,
) -> tuple[list[str], dict[str, float]]:
    """``--steady``: per round, N battles in flight for S seconds called directly, then
    through the arena (module docstring). Returns the ids of every battle held and the medians
    over the rounds (added time to first token p50/p99, extra CPU per battle of all three
    processes against direct, the worker's CPU per battle; seconds)."""
    t0 = time.perf_counter()
    await direct(shared[0], demo.base_url, args.slow, prompt, full=True)
    spread = time.perf_counter() - t0  # one battle's length, unloaded
    n, all_ids, added, extra, worker = len(clients), [], [], [], []
    warm = args.warmup

    async def arena_one(i: int) -> tuple[float, str, str]:
        c, t = clients[i]
        got = await held(url, c, t, prompt)
        all_ids.append(got[1])
        return got

    for k in range(args.rounds):
        m0, b0, w0 = cpu_seconds(demo.proc.pid), time.process_time(), serving_cpu(proc.pid)
        d, in_d, n_d = await steady(
            n,
            args.steady,
            warm,
            spread,
            lambda i: direct(shared[i], demo.base_url, args.slow, prompt, full=True),
        )
        m1, b1, w1 = cpu_seconds(demo.proc.pid), time.process_time(), serving_cpu(proc.pid)
        got, in_a, n_a = await steady(n, args.steady, warm, spread, arena_one)
        m2, b2, w2 = cpu_seconds(demo.proc.pid), time.process_time(), serving_cpu(proc.pid)
        a = [g[0] for g in got]
        bad = [g[2] for g in got if g[2] != "complete"]
        assert not bad, bad
        if not a or not d:
            raise SystemExit(
                f"no battle was timed in round {k + 1} (direct {len(d)}, arena {len(a)}): one "
                f"battle lasts {spread:.1f} s unloaded, and only those that start after "
                f"--warmup {warm:g} s and end within --steady {args.steady:g} s count; raise "
                "--steady or lower --slow (the demo's answers are ~40 words)"
            )
        p50 = statistics.median(a) - statistics.median(d)
        p99 = pct(a, 0.99) - pct(d, 0.99)
        added.append((p50, p99))
        cpu_d = ((b1 - b0) + (m1 - m0) + (w1 - w0)) / n_d
        cpu_a = ((b2 - b1) + (m2 - m1) + (w2 - w1)) / n_a
        extra.append(cpu_a - cpu_d)
        worker.append((w2 - w1) / n_a)
        print(
            f"round {k + 1} ({args.steady:.0f} s each, timed after {warm:.0f} s): in flight "
            f"direct {in_d:.0f}, arena {in_a:.0f}; ttft direct p50 "
            f"{statistics.median(d) * 1e3:.1f} ms p99 {pct(d, 0.99) * 1e3:.1f} ms "
            f"({len(d)} battles); arena p50 {statistics.median(a) * 1e3:.1f} ms p99 "
            f"{pct(a, 0.99) * 1e3:.1f} ms ({len(a)}); added p50 {p50 * 1e3:.1f} ms, p99 "
            f"{p99 * 1e3:.1f} ms; answers/s arena {2 * n_a / args.steady:.0f} (direct "
            f"{2 * n_d / args.steady:.0f}); worker CPU per battle {(w2 - w1) / n_a * 1e3:.2f} ms; "
            f"load average {os.getloadavg()[0]:.1f}\n  CPU per battle of all three processes: "
            f"direct {cpu_d * 1e3:.2f} ms (client {(b1 - b0) / n_d * 1e3:.2f} + model server "
            f"{(m1 - m0) / n_d * 1e3:.2f} + idle worker {(w1 - w0) / n_d * 1e3:.2f}), arena "
            f"{cpu_a * 1e3:.2f} ms (client {(b2 - b1) / n_a * 1e3:.2f} + model server "
            f"{(m2 - m1) / n_a * 1e3:.2f} + worker {(w2 - w1) / n_a * 1e3:.2f})"
        )
    print(
        f"rounds 1-{len(added)}: added time to first token with {n} battles in flight, median "
        f"of the rounds' p50 {statistics.median(x[0] for x in added) * 1e3:.1f} ms, of their "
        f"p99 {statistics.median(x[1] for x in added) * 1e3:.1f} ms; the arena's extra CPU per "
        f"battle {statistics.median(extra) * 1e3:.2f} ms"
    )
    summary = {
        "added_p50": statistics.median(x[0] for x in added),
        "added_p99": statistics.median(x[1] for x in added),
        "extra_cpu": statistics.median(extra),
        "worker_cpu": statistics.median(worker),
    }
    return all_ids, summary


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--battles", type=int, default=200)
    p.add_argument("--slow", type=float, default=0.01)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--steady", type=float, default=0.0, help="seconds per phase with N battles in flight"
    )
    p.add_argument(
        "--target",
        choices=("arena", "floor", "both"),
        default="arena",
        help="floor: bench/floor_relay.py instead of the arena (the least a relay adds); both "
        "(--steady): the floor, then the arena, in one run, and their ratios",
    )
    p.add_argument("--warmup", type=float, default=5.0, help="--steady: seconds not timed")
    p.add_argument(
        "--workers", type=int, default=1, help="the arena's worker processes (serve --workers)"
    )
    p.add_argument(
        "--idle",
        type=float,
        default=0.0,
        help="seconds to leave the arena and the floor alone, then their CPU per second",
    )
    p.add_argument(
        "--turns", type=int, default=1, help="burst: also hold each battle for this many turns"
    )
    args = p.parse_args()
    if args.idle:
        asyncio.run(run_idle(args))
        return
    if args.target != "both":
        asyncio.run(run(args))
        return
    if not args.steady:
        p.error("--target both needs --steady S")
    got = {}
    for target in ("floor", "arena"):
        print(f"--- {target}", flush=True)
        got[target] = asyncio.run(run(argparse.Namespace(**{**vars(args), "target": target})))
    f, a = got["floor"], got["arena"]
    print(
        f"arena / floor with {args.battles} battles in flight: extra CPU per battle "
        f"{a['extra_cpu'] * 1e3:.2f} / {f['extra_cpu'] * 1e3:.2f} ms = "
        f"×{a['extra_cpu'] / f['extra_cpu']:.2f}; worker CPU per battle "
        f"{a['worker_cpu'] * 1e3:.2f} / {f['worker_cpu'] * 1e3:.2f} ms = "
        f"×{a['worker_cpu'] / f['worker_cpu']:.2f}; added time to first token p50 "
        f"{a['added_p50'] * 1e3:.1f} / {f['added_p50'] * 1e3:.1f} ms, p99 "
        f"{a['added_p99'] * 1e3:.1f} / {f['added_p99'] * 1e3:.1f} ms; load average "
        f"{os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
