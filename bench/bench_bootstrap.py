"""Bootstrap benchmark (issue 5): 1,000 rounds of m-ELO on 1,000,000 battles of 200 models.

stablearena's bootstrap (``MElo().fit`` + ``uncertainty.bootstrap`` + percentile intervals,
every CPU) beside evalica's (``evalica.bootstrap(evalica.bradley_terry, …,
bootstrap_method="percentile")``) and arenakit's (``arenakit.bootstrap`` + ``score_ci``) on the
same simulated battles, in the same run.

Each contestant runs in its own subprocess (so memory is measured per contestant) on the same
arrays, saved once to a temporary ``.npz``. The timed section starts after the data are in the
contestant's own input format (our ``Battles``; evalica's integer arrays + ``Winner`` list;
arenakit's ``Arena``) and includes the point fit, all rounds and the percentile intervals —
each package's bootstrap call does its point fit too. Memory: the parent samples, every 50 ms,
the resident set (RSS) and the proportional set (PSS: shared pages split between the processes
sharing them — the honest total for forked workers) summed over the contestant's process tree;
the peak during the timed section is reported, with the level just before it.

Peers get a wall-time limit and a memory limit (RSS of their process tree); a contestant that
exceeds either is killed and reported as failed. For a peer that failed, the script then
measures it with ``--fallback-rounds`` rounds and prints the per-round time ratio, labelled as
such (an extrapolation, not a measurement of 1,000 rounds).

Usage::

    python bench/bench_bootstrap.py                       # 1M battles, 200 models, 1,000 rounds
    python bench/bench_bootstrap.py --repeats 5 --peers arenakit
    python bench/bench_bootstrap.py --battles 100000 --rounds 200 --json out.json

Needs ``pip install -e ".[bench]"`` (evalica, arenakit). Timings on a shared machine are noisy:
the medians of ``--repeats`` runs are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

# ----------------------------------------------------------------------------- the contestants


def _load(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    d = np.load(path)
    models = tuple(f"model_{k:03d}" for k in range(int(d["n_models"])))
    return d["model_a"], d["model_b"], d["outcome"], models


def child_ours(path: str, rounds: int, seed: int) -> dict[str, Any]:
    from stablearena import Battles, MElo
    from stablearena.raters.uncertainty import bootstrap

    a, b, o, models = _load(path)
    battles = Battles.from_arrays(a, b, o, models=models)
    _mark("start")
    t0 = time.perf_counter()
    fitted = MElo().fit(battles)
    boot = bootstrap(fitted, rounds=rounds, seed=seed)
    low, high = boot.percentile(0.95)
    wall = time.perf_counter() - t0
    _mark("stop")
    return {
        "wall": wall,
        "rounds_ok": int(len(boot.scores)),
        "width_median": float(np.median(high - low)),
        "workers": os.cpu_count(),
    }


def child_evalica(path: str, rounds: int, seed: int) -> dict[str, Any]:
    import evalica
    import pandas as pd

    a, b, o, _ = _load(path)
    codes = np.array(
        [evalica.Winner.X, evalica.Winner.Y, evalica.Winner.Draw, evalica.Winner.Draw], dtype=object
    )
    winners = list(codes[o])
    xs, ys = a.astype(np.int64), b.astype(np.int64)
    index = pd.Index(range(int(max(a.max(), b.max())) + 1))
    _mark("start")
    t0 = time.perf_counter()
    res = evalica.bootstrap(
        evalica.bradley_terry, xs, ys, winners, index=index, n_resamples=rounds,
        bootstrap_method="percentile", random_state=seed,
    )  # fmt: skip
    low, high = res.low.to_numpy(), res.high.to_numpy()
    wall = time.perf_counter() - t0
    _mark("stop")
    return {"wall": wall, "intervals": int(np.isfinite(low).sum() + np.isfinite(high).sum())}


def child_arenakit(path: str, rounds: int, seed: int) -> dict[str, Any]:
    import gc

    import arenakit
    from arenakit.schema import Battle

    a, b, o, models = _load(path)
    names = np.array(models, dtype=object)
    labels = np.array(["a", "b", "tie", "tie"], dtype=object)
    t_setup = time.perf_counter()
    battles = [
        Battle.model_construct(model_a=x, model_b=y, winner=w, item_id=None, voter_id=None)
        for x, y, w in zip(names[a], names[b], labels[o], strict=True)
    ]
    arena = arenakit.Arena(battles, models=list(models))
    del battles
    gc.collect()
    setup = time.perf_counter() - t_setup
    _mark("start")
    t0 = time.perf_counter()
    res = arenakit.bootstrap(arena, n_resamples=rounds, seed=seed)
    ci = res.score_ci(0.95)
    wall = time.perf_counter() - t0
    _mark("stop")
    return {
        "wall": wall,
        "setup_seconds": setup,
        "rounds_ok": int(res.n_resamples),
        "width_median_elo": float(np.median(ci[:, 1] - ci[:, 0]) * 400 / np.log(10)),
    }


CHILDREN = {"ours": child_ours, "evalica": child_evalica, "arenakit": child_arenakit}


def _mark(what: str) -> None:
    sys.stdout.write(f"@@{what}\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------------- the parent
def _tree(pid: int) -> list[int]:
    """pid and all its descendants (Linux /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return out


def _memory(pid: int) -> tuple[float, float]:
    """(RSS, PSS) in MiB summed over the process tree of pid."""
    rss = pss = 0.0
    for p in _tree(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) / 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) / 1024
        except OSError:
            continue
    return rss, pss


def run_child(
    name: str, data: str, rounds: int, seed: int, time_limit: float, mem_limit_mb: float
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        name,
        "--data",
        data,
        "--rounds",
        str(rounds),
        "--seed",
        str(seed),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    marks: dict[str, float] = {}
    lines: list[str] = []

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("@@"):
                marks[line[2:].strip()] = time.perf_counter()
            else:
                lines.append(line)

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    samples: list[tuple[float, float, float]] = []
    t_begin = time.perf_counter()
    failure = None
    while proc.poll() is None:
        rss, pss = _memory(proc.pid)
        now = time.perf_counter()
        samples.append((now, rss, pss))
        if rss > mem_limit_mb:
            failure = f"killed: memory {rss:.0f} MiB > limit {mem_limit_mb:.0f} MiB after {now - marks.get('start', t_begin):.1f} s"
        elif "start" in marks and now - marks["start"] > time_limit:
            failure = f"killed: over the time limit of {time_limit:.0f} s"
        if failure:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait()
    th.join(timeout=5)
    stderr = proc.stderr.read() if proc.stderr else ""
    out: dict[str, Any] = {"contestant": name, "rounds": rounds}
    if failure is None and proc.returncode != 0:
        failure = f"exit code {proc.returncode}: {stderr.strip().splitlines()[-1] if stderr.strip() else ''}"
    start, stop = marks.get("start", t_begin), marks.get("stop", time.perf_counter())
    during = [(r, p) for t, r, p in samples if start <= t <= stop] or [
        (r, p) for _, r, p in samples[-1:]
    ]
    before = [(r, p) for t, r, p in samples if t < start]
    out["peak_rss_mb"] = max(r for r, _ in during) if during else float("nan")
    out["peak_pss_mb"] = max(p for _, p in during) if during else float("nan")
    out["before_pss_mb"] = before[-1][1] if before else float("nan")
    if failure:
        out["failed"] = failure
        return out
    result = json.loads(lines[-1])
    out.update(result)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--battles", type=int, default=1_000_000)
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3, help="runs of ours (median reported)")
    ap.add_argument("--peer-repeats", type=int, default=1, help="runs of each peer")
    ap.add_argument("--peers", nargs="*", default=["evalica", "arenakit"])
    ap.add_argument("--time-limit", type=float, default=900.0, help="seconds per peer run")
    ap.add_argument("--mem-limit", type=float, default=4096.0, help="MiB (RSS of the process tree)")
    ap.add_argument("--fallback-rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        res = CHILDREN[args.child](args.data, args.rounds, args.seed)
        sys.stdout.write(json.dumps(res) + "\n")
        return

    from stablearena.data.simulate import random_ratings, simulate_battles

    b = simulate_battles(random_ratings(args.models, seed=1), args.battles, seed=2)
    print(
        f"{args.battles:,} simulated battles of {args.models} models (Bradley–Terry, no ties), "
        f"{args.rounds} rounds; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    report: dict[str, Any] = {
        "battles": args.battles,
        "models": args.models,
        "rounds": args.rounds,
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        data = str(Path(tmp) / "battles.npz")
        np.savez(
            data, model_a=b.model_a, model_b=b.model_b, outcome=b.outcome, n_models=args.models
        )
        ours = []
        for _ in range(args.repeats):
            r = run_child(
                "ours", data, args.rounds, args.seed, 10 * args.time_limit, 10 * args.mem_limit
            )
            report["runs"].append(r)
            print(_line(r), flush=True)
            ours.append(r)
        ok = [r for r in ours if "failed" not in r]
        if not ok:
            raise SystemExit("our bootstrap failed")
        med = {
            k: statistics.median(r[k] for r in ok) for k in ("wall", "peak_pss_mb", "peak_rss_mb")
        }
        print(
            f"ours: median {med['wall']:.2f} s, peak PSS {med['peak_pss_mb']:.0f} MiB "
            f"(RSS summed over processes {med['peak_rss_mb']:.0f} MiB)",
            flush=True,
        )
        report["ours"] = med
        for peer in args.peers:
            runs = []
            for _ in range(args.peer_repeats):
                r = run_child(peer, data, args.rounds, args.seed, args.time_limit, args.mem_limit)
                report["runs"].append(r)
                print(_line(r), flush=True)
                runs.append(r)
            good = [r for r in runs if "failed" not in r]
            entry: dict[str, Any] = {}
            if good:
                wall = statistics.median(r["wall"] for r in good)
                pss = statistics.median(r["peak_pss_mb"] for r in good)
                entry = {
                    "wall": wall,
                    "peak_pss_mb": pss,
                    "time_ratio": wall / med["wall"],
                    "memory_ratio": pss / med["peak_pss_mb"],
                }
                print(
                    f"{peer}: median {wall:.2f} s, peak PSS {pss:.0f} MiB → {peer}/ours: "
                    f"time {wall / med['wall']:.1f}×, memory {pss / med['peak_pss_mb']:.1f}×",
                    flush=True,
                )
            else:
                entry["failed"] = runs[-1]["failed"]
                small = run_child(
                    peer, data, args.fallback_rounds, args.seed, args.time_limit, args.mem_limit
                )
                report["runs"].append(small)
                print(_line(small), flush=True)
                if "failed" not in small:
                    per_peer = small["wall"] / args.fallback_rounds
                    per_ours = med["wall"] / args.rounds
                    entry.update(fallback=small, per_round_ratio=per_peer / per_ours)
                    print(
                        f"{peer}: failed at {args.rounds} rounds ({runs[-1]['failed']}); with "
                        f"{args.fallback_rounds} rounds {small['wall']:.1f} s = {per_peer:.2f} s/round "
                        f"(point fit included) vs ours {per_ours * 1000:.1f} ms/round → per-round "
                        f"ratio {per_peer / per_ours:.0f}× (extrapolated, not a {args.rounds}-round run)",
                        flush=True,
                    )
            report[peer] = entry
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


def _line(r: dict[str, Any]) -> str:
    head = f"  {r['contestant']:>8} {r['rounds']:>5} rounds: "
    mem = (
        f"peak PSS {r['peak_pss_mb']:.0f} MiB (+{r['peak_pss_mb'] - r['before_pss_mb']:.0f} over the "
        f"{r['before_pss_mb']:.0f} before the call; RSS summed {r['peak_rss_mb']:.0f})"
    )
    if "failed" in r:
        return head + r["failed"] + "; " + mem
    return head + f"{r['wall']:.2f} s, " + mem


if __name__ == "__main__":
    main()
