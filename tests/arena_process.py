"""Running ``stablearena serve`` as a child process (tests, benchmarks, acceptance runs; not
part of the package: the benchmarks under bench/ import it from here).

:class:`ServerProcess` starts the command on a free port (``--port 0``), reads the admin key
(first start) and the address it prints, waits until ``/healthz`` answers, and can be killed
with SIGKILL (the crash tests) or stopped. :func:`simulated_arena_run` drives a simulated arena
with flipping annotators through one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

__all__ = ["BURST_LIMITS", "ServerProcess", "page_burst", "page_server", "simulated_arena_run"]

#: Rate limits out of the way of a test or benchmark driving the arena at full speed.
FAST = ["--set", "rate_limit=1000000", "--set", "rate_burst=1000000"]


class ServerProcess:
    """``stablearena serve --db DB --port 0 [args]`` in a child process."""

    def __init__(
        self,
        db: str,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        port: int = 0,
        prefix: tuple[str, ...] = (),
        src: str | Path | None = None,
    ) -> None:
        """``port``: 0 picks a free one; ``prefix``: a command the server runs under (e.g.
        ``ip netns exec NS``: tests/hosts.py's hosts); ``src``: the package's source tree
        (default this checkout's; tests/hosts.py runs an older version's too)."""
        self.db = db
        self.port = port
        self.prefix = list(prefix)
        self.args = [str(a) for a in args]
        self.env = {**os.environ, **(env or {})}
        src = str(src or Path(__file__).resolve().parents[1] / "src")
        self.env["PYTHONPATH"] = src + os.pathsep + self.env.get("PYTHONPATH", "")
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.admin_key: str | None = None
        self.lines: list[str] = []
        self.stderr: list[str] = []

    def start(self, timeout: float = 120.0) -> ServerProcess:
        cmd = [
            *self.prefix,
            sys.executable,
            "-m",
            "stablearena",
            "serve",
            "--db",
            self.db,
            "--port",
            str(self.port),
            *self.args,
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.cwd,
        )
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        deadline = time.time() + timeout
        assert self.proc.stdout is not None
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"the server exited with {self.proc.returncode}: {''.join(self.stderr)[-3000:]}"
                    )
                continue
            self.lines.append(line)
            text = line.strip()
            if text.startswith("sa_"):
                self.admin_key = text
            if "listening on http://" in text:
                self.url = text.split("listening on ", 1)[1].split()[0]
                break
        threading.Thread(target=self._drain_stdout, daemon=True).start()
        while time.time() < deadline:
            try:
                if httpx.get(self.url + "/healthz", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited: {''.join(self.stderr)[-3000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"the server did not answer within {timeout} s")

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _drain_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def page_server(
    tmp: Path,
    base_url: str,
    models: tuple[str, ...],
    slow: float,
    config: str = "",
    model_config: str = "",
):
    """A ``serve`` process in ``tmp`` whose ``models`` are the demo server's at ``base_url``
    (each word streamed ``slow`` seconds apart), with the extra TOML ``config`` before them
    and ``model_config`` (lines such as ``max_concurrency = 2``) in each model's table."""
    toml = tmp / "arena.toml"
    toml.write_text(
        config
        + "".join(
            f'[[models]]\nname = "{name}"\nbase_url = "{base_url}"\n'
            f'model = "{name}+slow={slow:g}"\n{model_config}\n'
            for name in models
        )
    )
    server = ServerProcess(f"sqlite:///{tmp / 'arena.db'}", "--config", str(toml), cwd=tmp).start()
    try:
        yield server
    finally:
        server.stop()


def simulated_arena_run(
    tmp_path: Path, *, n_models: int, n_annotators: int, n_votes: int, threads: int, seed: int = 0
) -> dict[str, Any]:
    """Drive a simulated arena through the API of a ``stablearena serve`` child process on a
    fresh SQLite file in ``tmp_path`` (the arena chooses every pair): ``n_models`` models with
    true ratings of spread 200 Elo, ``n_annotators`` annotators of ability U(0.5, 1.5), 10% of
    them flipping every vote (ability negated), ``n_votes`` votes from ``threads`` client
    threads; Stable Arena screening with δ = 50, ε = 0, exclude. Returns the votes, the
    flippers flagged, honest annotators flagged, and Kendall τ with the truth of the service's
    am-ELO and of m-ELO on all votes; ``*_silenced``: flagged or weighing 0 (votes that do not count) (the live arena's acceptance run; ``bench/bench_flippers.py``
    repeats it over seeds)."""
    import numpy as np

    from stablearena.analysis.metrics import kendall_tau
    from stablearena.data.simulate import random_ratings
    from stablearena.raters.base import ELO_SCALE
    from stablearena.service.client import ArenaClient

    rng = np.random.default_rng(seed)
    truth_r = random_ratings(n_models, spread=200.0, seed=seed)
    models = [f"model-{k:02d}" for k in range(n_models)]
    truth = dict(zip(models, truth_r, strict=True))
    names = [f"ann-{k:03d}" for k in range(n_annotators)]
    n_flip = max(1, n_annotators // 10)
    flippers = set(rng.choice(names, n_flip, replace=False).tolist())
    ability = {n: rng.uniform(0.5, 1.5) * (-1.0 if n in flippers else 1.0) for n in names}
    server = ServerProcess(
        f"sqlite:///{tmp_path / 'sim.db'}",
        *FAST,
        "--set",
        "arena.min_records=50",
        "--set",
        "arena.ability_threshold=0",
        "--set",
        "arena.policy='exclude'",
        cwd=tmp_path,
    ).start()
    t0 = time.time()
    try:
        admin = ArenaClient(server.url, server.admin_key, timeout=120)
        for m in models:
            admin.add_model(m)
        keys = {n: admin.create_annotator(n) for n in names}
        per_thread = [names[k::threads] for k in range(threads)]
        votes_each = n_votes // threads

        def run(group: list[str], seed: int) -> None:
            r = np.random.default_rng(seed)
            clients = {n: ArenaClient(server.url, keys[n], timeout=120) for n in group}
            for t in range(votes_each):
                name = group[t % len(group)]
                (b,) = clients[name].next_battles()
                z = ability[name] * ELO_SCALE * (truth[b["model_a"]] - truth[b["model_b"]])
                out = "model_a" if r.random() < 1.0 / (1.0 + np.exp(-z)) else "model_b"
                clients[name].vote(b["battle_id"], out)
            for c in clients.values():
                c.close()

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(run, per_thread, range(threads)))
        seconds = time.time() - t0
        admin.refit()
        am = admin.leaderboard()
        m_all = admin.leaderboard(method="m-elo")
        ann = admin.annotators()
        admin.close()
    finally:
        server.stop()
    flagged = {a["annotator"] for a in ann["annotators"] if a["flagged"]}
    # the crowd rule flags an account only when its ability's upper bound is below ε; one whose
    # shrunk ability is at or below 0 without that confidence weighs 0: its votes do not count
    silenced = flagged | {a["annotator"] for a in ann["annotators"] if a.get("weight") == 0.0}

    def tau(payload: dict) -> float:
        rated = {m["model"]: m["rating"] for m in payload["models"]}
        common = [m for m in models if m in rated]
        return kendall_tau([truth[m] for m in common], [rated[m] for m in common])

    return {
        "votes": m_all["n_battles"],
        "seconds": seconds,
        "flippers": len(flippers),
        "flippers_flagged": len(flippers & flagged),
        "honest_flagged": len(flagged - flippers),
        "flippers_silenced": len(flippers & silenced),
        "honest_silenced": len(silenced - flippers),
        "tau_am_elo": tau(am),
        "tau_m_elo_all_votes": tau(m_all),
        "am_elo_battles_in_fit": am["n_battles"],
    }


#: The page's limits out of the way of a burst of visitors from one address (bench_burst, the
#: burst test): each visitor is a new identity from 127.0.0.1.
BURST_LIMITS = (
    "[arena_page]\nvisitor_open = 1000\naddress_open = 100000\nvisitors_per_hour = 1e9\n"
    "visitor_battles_per_hour = 1e9\naddress_battles_per_hour = 1e9\n"
)


async def page_burst(url: str, n: int, prompt: str = "What is 17*23?") -> list[dict[str, Any]]:
    """``n`` visitors of the page at ``url`` (each a new identity: its own cookie and CSRF
    token, got first) start a battle in the same instant; each reads its stream to the end and
    votes on a complete battle. One record per visitor: ``status`` and ``headers`` of the
    battle's response; ``error`` (a refusal's JSON error); ``events`` — every NDJSON line
    with the seconds since the burst started; ``battle_id``; ``vote`` (the vote's status,
    None without one). The times are for bench/bench_burst.py; tests read the order."""
    import json
    import re

    import aiohttp

    sessions = []
    try:
        for _ in range(n):
            c = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
            sessions.append(c)
            async with c.get(url + "/arena") as r:
                page = await r.text()
            csrf = re.search(r'csrf-token" content="(\w+)"', page).group(1)
            c.headers.update({"X-CSRF-Token": csrf, "Origin": url})  # type: ignore[attr-defined]
        go = asyncio.Event()
        t0 = [0.0]

        async def one(c: aiohttp.ClientSession) -> dict[str, Any]:
            await go.wait()
            rec: dict[str, Any] = {"events": [], "battle_id": None, "vote": None, "error": None}
            async with c.post(url + "/arena/battles", json={"prompt": prompt}) as r:
                rec["status"], rec["headers"] = r.status, dict(r.headers)
                if r.status != 200:
                    rec["error"] = (await r.json())["error"]
                    rec["events"].append((time.perf_counter() - t0[0], {"refused": r.status}))
                    return rec
                async for line in r.content:
                    if line.strip():
                        item = json.loads(line)
                        rec["events"].append((time.perf_counter() - t0[0], item))
                        rec["battle_id"] = rec["battle_id"] or item.get("battle_id")
            done = rec["events"][-1][1] if rec["events"] else {}
            if done.get("status") == "complete":
                vote = f"{url}/arena/battles/{rec['battle_id']}/vote"
                async with c.post(vote, json={"outcome": "tie"}) as r:
                    await r.read()
                    rec["vote"] = r.status
            return rec

        tasks = [asyncio.ensure_future(one(c)) for c in sessions]
        await asyncio.sleep(0.1)
        t0[0] = time.perf_counter()
        go.set()
        return list(await asyncio.gather(*tasks))
    finally:
        for c in sessions:
            await c.close()
