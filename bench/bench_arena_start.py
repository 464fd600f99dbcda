"""Time from ``stablearena serve --demo`` to the first possible vote on /arena: start the
command, open /arena, start a battle and read both answers until the votes open. Then the time
an idle ``serve`` takes from SIGTERM to its exit (issue 32: 5.0-5.3 s before, 0.3 s after).

    PYTHONPATH=src python bench/bench_arena_start.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import httpx


def start(tmp: str, *flags: str) -> tuple[subprocess.Popen, str]:
    """Start ``stablearena serve`` with ``flags`` on a new SQLite file: (the process, its URL
    once it says it listens)."""
    cmd = [sys.executable, "-m", "stablearena", "serve", *flags, "--port", "0"]
    cmd += ["--db", f"sqlite:///{tmp}/demo-{time.time_ns()}.db"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("serve exited before it listened")
        m = re.search(r"listening on (http://\S+) ", line)
        if m:
            return proc, m.group(1)


def idle_stop(tmp: str) -> float:
    """Seconds from SIGTERM to the exit of a ``serve`` idle for 1 s since it listened (its fit
    process still warming up)."""
    proc, _ = start(tmp)
    time.sleep(1.0)
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    return time.perf_counter() - t0


def one_run(tmp: str) -> tuple[float, float]:
    """(seconds to the page, seconds to the first possible vote) of one start."""
    t0 = time.perf_counter()
    proc, url = start(tmp, "--demo")
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            while True:
                try:
                    r = c.get("/arena")
                    break
                except httpx.TransportError:
                    time.sleep(0.02)
            t_page = time.perf_counter() - t0
            csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', r.text).group(1)
            prompt = c.get("/arena/prompt").json()
            with c.stream(
                "POST",
                "/arena/battles",
                json={"prompt": prompt["prompt"], "prompt_id": prompt["id"]},
                headers={"X-CSRF-Token": csrf, "Origin": url},
            ) as s:
                last = None
                for line in s.iter_lines():
                    if line:
                        last = json.loads(line)
            assert last and last.get("status") == "complete", last
            return t_page, time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one_run(tmp) for _ in range(args.runs)]
        stops = [idle_stop(tmp) for _ in range(args.runs)]
    for k, (page, vote) in enumerate(runs):
        print(f"run {k + 1}: page {page:.2f} s, first possible vote {vote:.2f} s")
    print(
        f"median: page {statistics.median(r[0] for r in runs):.2f} s, "
        f"first possible vote {statistics.median(r[1] for r in runs):.2f} s, "
        f"idle SIGTERM to exit {statistics.median(stops):.2f} s; "
        f"load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
