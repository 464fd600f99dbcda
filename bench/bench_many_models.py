"""Thousands of models (issue 32): ``rank --ci fisher`` and ``next-pairs`` at 1,000 / 4,000 / 8,000.

For each size N this writes a simulated battle log (``gen_battles.write_log``: N models with
Elo-scale ratings of sd 200, 15·N battles — 30 per model — between uniformly random pairs, so
the comparison graph is sparse and connected) and runs, each as its own ``stablearena``
subprocess on that log:

- ``rank`` (the floor: the m-ELO fit alone, no intervals);
- ``rank --ci fisher`` (the fit, then Fisher intervals, rank intervals and tiers);
- ``next-pairs -k 10`` (the fit, then the default design, d-opt with the empirical-Bayes
  estimate, choosing a greedy batch of 10).

Printed per run: wall time, CPU time (user + system, from the child's rusage) and peak resident
memory (the kernel's high-water mark VmHWM of the process, read every 0.1 s, and ru_maxrss at the
end). A run past ``--timeout`` seconds is killed and reported as "did not finish", with the
memory it held when killed. The load average is printed with each line (the machine is shared).

    python bench/bench_many_models.py [--sizes 1000,4000,8000] [--timeout 120] [--json out.json]

Run it with the code under test first on PYTHONPATH (the subprocesses inherit it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_battles import write_log  # noqa: E402

COMMANDS: dict[str, list[str]] = {
    "rank (fit only, floor)": ["rank", "--format", "json"],
    "rank --ci fisher": ["rank", "--ci", "fisher", "--format", "json"],
    "next-pairs -k 10": ["next-pairs", "-k", "10", "--format", "json"],
}


def _hwm_kb(pid: int) -> int:
    """The process's peak resident set so far (VmHWM, kB); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(args: list[str], timeout: float) -> dict[str, Any]:
    """One ``stablearena`` subprocess: wall, CPU and peak RSS; killed after ``timeout`` s."""
    cmd = [sys.executable, "-m", "stablearena", *args]
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _hwm_kb(proc.pid))
            done.wait(0.1)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    killed = False
    while True:  # reap the child ourselves, with its own resource usage (os.wait4)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - t0 > timeout:
            peak[0] = max(peak[0], _hwm_kb(proc.pid))
            proc.kill()
            killed = True
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    th.join()
    cpu = usage.ru_utime + usage.ru_stime
    peak_kb = max(peak[0], usage.ru_maxrss)
    err.seek(0)
    tail = err.read().decode(errors="replace").strip().splitlines()[-1:]
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(peak_kb / 1024),
        "finished": not killed,
        "returncode": None if killed else proc.returncode,
        "stderr_tail": tail,
        "load_avg": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,4000,8000")
    ap.add_argument("--per-model", type=int, default=30, help="battles per model")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--only", default="", help="comma-separated command labels to run")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, PYTHONPATH={os.environ.get('PYTHONPATH', '')}"
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            log = Path(tmp) / f"m{n}"
            write_log(log, n * args.per_model // 2, models=n, seed=0)
            for label, cmd in COMMANDS.items():
                if only and not any(o in label for o in only):
                    continue
                r = run([*cmd, str(log)], args.timeout)
                r.update(models=n, battles=n * args.per_model // 2, command=label)
                results.append(r)
                if r["finished"]:
                    what = f"{r['wall_s']:7.1f} s wall, {r['cpu_s']:7.1f} s CPU, peak RSS {r['peak_rss_mb']:6,} MB"
                    if r["returncode"]:
                        what += f"  FAILED (exit {r['returncode']}): {' '.join(r['stderr_tail'])}"
                else:
                    what = (
                        f"did not finish in {args.timeout:.0f} s ({r['cpu_s']:.1f} s CPU), "
                        f"{r['peak_rss_mb']:,} MB peak RSS at kill"
                    )
                load = " ".join(f"{x:.2f}" for x in r["load_avg"])
                print(f"{n:6,} models  {label:24s} {what}   [load {load}]", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
