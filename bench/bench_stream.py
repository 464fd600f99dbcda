"""Logs bigger than memory: ``stablearena rank DIR`` on a directory of Parquet files.

Times the whole command as a process and reads its peak resident memory (``wait4``), beside a
process that only decodes the same columns of the same files with ``pyarrow.dataset`` (the
floor for any reader), in the same run. Then checks the leaderboard: on a sample of the files
that fits in memory, the streamed command (``read_counts``, batch by batch) must give the same
leaderboard as the in-memory path (``read_battles`` of the sample, every battle in memory, then
``MElo().fit``): same order, ratings equal to 1e-6 Elo points.

Targets (issue 12): 100 million battles, peak RSS ≤ 1.5 GB, ≤ 60 s on 2 cores.

Usage::

    python bench/bench_stream.py --generate 100_000_000 --data /tmp/battles-100m   # writes, runs, deletes
    python bench/bench_stream.py --data /tmp/battles-100m --keep                   # reuse a directory
    python bench/bench_stream.py --generate 10_000_000 --repeats 3                 # quicker look

The data are written by ``bench/gen_battles.py`` (10,000,000 battles per file, row groups of
1,000,000, model names dictionary-encoded; about 5 MB per million battles).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_battles import write_log  # noqa: E402


def run_measured(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, bytes]:
    """(wall seconds, peak RSS in MB, stdout) of one process (its own rusage via wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out_chunks = []
    assert proc.stdout is not None and proc.stderr is not None
    # read stdout fully before waiting (a large JSON could fill the pipe)
    out_chunks.append(proc.stdout.read())
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {err.decode()[-800:]}")
    return elapsed, usage.ru_maxrss / 1024.0, b"".join(out_chunks)


READ_ONLY = """
import sys, pyarrow.dataset as ds
rows = 0
for batch in ds.dataset(sys.argv[1], format="parquet").to_batches(columns=["model_a", "model_b", "winner"]):
    rows += batch.num_rows
print(rows)
"""


def compare_sample(sample: Path, command: list[str]) -> dict[str, Any]:
    """Streamed command vs in-memory library path on a sample directory."""
    from stablearena import MElo
    from stablearena.data.io import read_battles

    _, _, out = run_measured([*command, "rank", str(sample), "-f", "json"])
    streamed = json.loads(out)
    battles = read_battles(sample)  # every battle in memory
    fitted = MElo().fit(battles)
    memory = fitted.to_dict()
    order_s = [m["model"] for m in streamed["models"]]
    order_m = [m["model"] for m in memory["models"]]
    rs = {m["model"]: m["rating"] for m in streamed["models"]}
    rm = {m["model"]: m["rating"] for m in memory["models"]}
    return {
        "battles": len(battles),
        "same_order": order_s == order_m,
        "max_rating_diff": max(abs(rs[k] - rm[k]) for k in rm),
        "same_n_battles": streamed["n_battles"] == memory["n_battles"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, help="directory of Parquet battle files")
    ap.add_argument("--generate", type=int, help="write this many battles to --data first")
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--keep", action="store_true", help="keep generated data")
    ap.add_argument("--repeats", type=int, default=1, help="timed runs of the command")
    ap.add_argument("--sample-files", type=int, default=1, help="files in the in-memory sample")
    ap.add_argument(
        "--command",
        nargs="+",
        default=[sys.executable, "-m", "stablearena"],
        help="how to start stablearena",
    )
    args = ap.parse_args(argv)
    made = None
    data = args.data
    if args.generate:
        if data is None:
            made = data = Path(tempfile.mkdtemp(prefix="stablearena-stream-"))
        t0 = time.perf_counter()
        write_log(data, args.generate, models=args.models)
        print(f"generated {args.generate:,} battles in {time.perf_counter() - t0:.1f} s")
    if data is None or not data.is_dir():
        ap.error("give --data DIR (existing) or --generate N")
    files = sorted(data.glob("*.parquet"))
    size = sum(f.stat().st_size for f in files)
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    print(f"data: {data} — {len(files)} Parquet files, {size / 1e6:.0f} MB")
    try:
        ours, reads = [], []
        payload: dict[str, Any] = {}
        for _ in range(args.repeats):
            t, rss, out = run_measured([*args.command, "rank", str(data), "-f", "json"])
            ours.append((t, rss))
            payload = json.loads(out)
            t2, rss2, _ = run_measured([sys.executable, "-c", READ_ONLY, str(data)])
            reads.append((t2, rss2))
        med_t = statistics.median(t for t, _ in ours)
        med_rss = statistics.median(r for _, r in ours)
        print(
            f"stablearena rank DIR : median {med_t:.1f} s, peak RSS {med_rss:.0f} MB "
            f"(n={len(ours)}; targets <= 60 s, <= 1536 MB); {payload['n_battles']:,} battles, "
            f"{payload['n_models']} models, {payload['convergence']['solver']} converged="
            f"{payload['convergence']['converged']}"
        )
        med_r = statistics.median(t for t, _ in reads)
        print(
            f"pyarrow.dataset decode of the same columns (floor): median {med_r:.1f} s, peak RSS "
            f"{statistics.median(r for _, r in reads):.0f} MB;  rank / decode = {med_t / med_r:.2f}x"
        )
        print(f"top five: {', '.join(m['model'] for m in payload['models'][:5])}")
        with tempfile.TemporaryDirectory(prefix="stablearena-sample-") as tmp:
            sample = Path(tmp)
            for f in files[: args.sample_files]:
                os.symlink(f, sample / f.name)
            check = compare_sample(sample, args.command)
        print(
            f"sample of {check['battles']:,} battles: streamed vs in-memory leaderboard — same order "
            f"{check['same_order']}, max |rating difference| {check['max_rating_diff']:.2e} Elo points, "
            f"same n_battles {check['same_n_battles']}"
        )
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        if made is not None and not args.keep:
            shutil.rmtree(made, ignore_errors=True)
        elif args.generate and not args.keep:
            shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
