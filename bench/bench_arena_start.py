"""Time from ``stablearena serve --demo`` to the first possible vote on /arena: start the
command, open /arena, start a battle and read both answers until the votes open.

    PYTHONPATH=src python bench/bench_arena_start.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import httpx


def one_run(tmp: str) -> tuple[float, float]:
    """(seconds to the page, seconds to the first possible vote) of one start."""
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "stablearena", "serve", "--demo", "--port", "0"]
    cmd += ["--db", f"sqlite:///{tmp}/demo-{time.time_ns()}.db"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        url = None
        while url is None:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("serve --demo exited")
            m = re.search(r"listening on (http://\S+) ", line)
            url = m.group(1) if m else None
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
    for k, (page, vote) in enumerate(runs):
        print(f"run {k + 1}: page {page:.2f} s, first possible vote {vote:.2f} s")
    print(
        f"median: page {statistics.median(r[0] for r in runs):.2f} s, "
        f"first possible vote {statistics.median(r[1] for r in runs):.2f} s; "
        f"load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
