"""Foundation benchmark: stablearena vs evalica (and pyarrow's CSV reader) on the same inputs.

Three measurements, each timed for both sides in the same run, repeats interleaved
(ours, theirs, ours, theirs, …) so that load from other processes hits both alike; the medians
and their ratio are printed. One warm-up call of each side precedes the timed repeats (numba
compiles or loads its cache there; pyarrow and the OS warm their caches).

(a) m-ELO end to end on 1,000,000 simulated battles of 200 models given as integer arrays:
    ``Battles.from_arrays`` + ``MElo().fit`` vs ``evalica.bradley_terry`` on the same arrays.
    evalica's end to end counts what its API needs from the same integer arrays: the outcome
    codes turned into its ``Winner`` list, plus the call (which does its own indexing, the
    list conversion and the Rust solve). It is given ``index=pd.Index(range(200))`` so that it
    does not build an index of its own.
(b) The same battles from a CSV file with model names as strings:
    ``stablearena.io.read_battles(path)`` + ``MElo().fit`` vs a plain ``pyarrow.csv.read_csv``
    of the file (target: at most 2× the read alone); evalica's end to end from the same file
    (``pandas.read_csv(engine="pyarrow")``, label → ``Winner`` map, ``evalica.bradley_terry``
    on the name columns) is printed beside it.
(c) Online Elo, 1,000 shuffles × 100,000 battles: ``Elo(shuffles=1000).fit`` vs
    ``evalica.elo`` called once per shuffle on exactly the same orders (evalica has no
    shuffle-averaging call; its ``bootstrap`` resamples with replacement). evalica's time
    includes building each shuffled input (``shuffle_order`` + gathering the three columns),
    which is also timed on its own and printed.

Usage::

    python bench/bench_foundation.py                 # all three, 5 repeats ((c): 3)
    python bench/bench_foundation.py --only a c --repeats 7
    python bench/bench_foundation.py --json results.json

Needs ``pip install -e ".[bench]"`` (evalica).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from stablearena import Battles, MElo
from stablearena.io import read_battles
from stablearena.raters.base import ELO_SCALE
from stablearena.raters.elo import Elo, shuffle_order
from stablearena.simulate import random_ratings, simulate_battles

try:
    import evalica
except ImportError:  # pragma: no cover - the bench extra is missing
    sys.exit('evalica is not installed: pip install -e ".[bench]"')

#: Our outcome codes (A, B, TIE, TIE_BOTH_BAD) as evalica Winner values (X, Y, Draw, Draw).
EVALICA_WINNER = np.array(
    [evalica.Winner.X, evalica.Winner.Y, evalica.Winner.Draw, evalica.Winner.Draw], dtype=np.int64
)
LABEL_TO_WINNER = {
    "model_a": evalica.Winner.X,
    "model_b": evalica.Winner.Y,
    "tie": evalica.Winner.Draw,
    "tie (bothbad)": evalica.Winner.Draw,
}


def timed_pair(
    ours: Callable[[], Any], theirs: Callable[[], Any], repeats: int
) -> tuple[list[float], list[float], Any, Any]:
    """Warm up both, then time ``repeats`` interleaved calls of each; return the times and
    the last results."""
    out_ours, out_theirs = ours(), theirs()
    t_ours: list[float] = []
    t_theirs: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out_ours = ours()
        t1 = time.perf_counter()
        out_theirs = theirs()
        t2 = time.perf_counter()
        t_ours.append(t1 - t0)
        t_theirs.append(t2 - t1)
    return t_ours, t_theirs, out_ours, out_theirs


def fmt_times(ts: list[float]) -> str:
    return (
        f"median {statistics.median(ts):.4f} s  (min {min(ts):.4f}, max {max(ts):.4f}, n={len(ts)})"
    )


def elo_points_from_evalica_bt(scores: pd.Series, index: list) -> np.ndarray:
    """evalica's Bradley–Terry strengths π → mean-zero Elo points ln π / C."""
    x = np.log(scores.reindex(index).to_numpy(dtype=float))
    return (x - x.mean()) / ELO_SCALE


def simulated_log(n_models: int, n_battles: int, seed: int) -> Battles:
    # "paper" rule: ties with probability 2p(1−p), so ties-as-half matters
    return simulate_battles(
        random_ratings(n_models, seed=seed), n_battles, rule="paper", seed=seed + 1
    )


def bench_arrays(sim: Battles, repeats: int) -> dict[str, Any]:
    a, b, o, names = sim.model_a, sim.model_b, sim.outcome, sim.models
    index = pd.Index(range(len(names)))

    def ours() -> Any:
        return MElo().fit(Battles.from_arrays(a, b, o, models=names))

    def theirs() -> Any:
        return evalica.bradley_terry(a, b, EVALICA_WINNER[o].tolist(), index=index)

    t_ours, t_theirs, fitted, res = timed_pair(ours, theirs, repeats)
    diff = np.max(
        np.abs(elo_points_from_evalica_bt(res.scores, list(index)) - (fitted.ratings - 1000))
    )
    med_o, med_t = statistics.median(t_ours), statistics.median(t_theirs)
    print(f"(a) m-ELO, {len(sim):,} battles / {len(names)} models from integer arrays")
    print(f"    stablearena Battles.from_arrays + MElo().fit : {fmt_times(t_ours)}")
    print(f"    evalica.bradley_terry (+ Winner list)        : {fmt_times(t_theirs)}")
    print(
        f"    evalica / stablearena = {med_t / med_o:.1f}x   (targets: ours <= 0.1 s, ratio >= 10)"
    )
    print(
        f"    agreement: max |rating difference| {diff:.2e} Elo points "
        f"(ours: {fitted.convergence.iterations} Newton steps, |g|/n {fitted.convergence.grad_norm:.1e}; "
        f"evalica: {res.iterations} MM iterations, tolerance 1e-6)"
    )
    return {
        "ours_s": t_ours,
        "evalica_s": t_theirs,
        "ratio": med_t / med_o,
        "max_diff_elo": float(diff),
    }


def write_csv(sim: Battles, path: Path) -> None:
    names = np.array(sim.models, dtype=object)
    labels = np.array(["model_a", "model_b", "tie", "tie (bothbad)"], dtype=object)
    table = pa.table(
        {
            "model_a": pa.array(names[sim.model_a], pa.string()),
            "model_b": pa.array(names[sim.model_b], pa.string()),
            "winner": pa.array(labels[sim.outcome], pa.string()),
        }
    )
    pacsv.write_csv(table, path)


def bench_csv(sim: Battles, repeats: int, workdir: Path) -> dict[str, Any]:
    path = workdir / "battles_1m.csv"
    write_csv(sim, path)
    size_mb = path.stat().st_size / 1e6

    def ours() -> Any:
        return MElo().fit(read_battles(path))

    def plain_read() -> Any:
        return pacsv.read_csv(path)

    def evalica_csv() -> Any:
        df = pd.read_csv(path, engine="pyarrow")
        winners = df["winner"].map(LABEL_TO_WINNER).astype(np.int64).tolist()
        return evalica.bradley_terry(df["model_a"], df["model_b"], winners)

    t_ours, t_read, fitted, table = timed_pair(ours, plain_read, repeats)
    _, t_eval, _, res = timed_pair(ours, evalica_csv, max(1, repeats // 2))
    assert table.num_rows == len(sim)
    x = np.log(res.scores.reindex(list(fitted.models)).to_numpy(dtype=float))
    diff = np.max(np.abs((x - x.mean()) / ELO_SCALE - (fitted.ratings - 1000)))
    med_o, med_r, med_e = (statistics.median(t) for t in (t_ours, t_read, t_eval))
    print(f"(b) the same from a CSV file ({size_mb:.1f} MB, model names as strings)")
    print(f"    stablearena read_battles + MElo().fit : {fmt_times(t_ours)}")
    print(f"    pyarrow.csv.read_csv alone            : {fmt_times(t_read)}")
    print(f"    stablearena / pyarrow read = {med_o / med_r:.2f}x   (target <= 2)")
    print(
        f"    evalica from the CSV (pandas+pyarrow read, map, bradley_terry): {fmt_times(t_eval)}"
    )
    print(
        f"    evalica / stablearena = {med_e / med_o:.1f}x;  max |rating difference| {diff:.2e} Elo points"
    )
    return {
        "ours_s": t_ours,
        "pyarrow_read_s": t_read,
        "evalica_s": t_eval,
        "ratio_vs_read": med_o / med_r,
        "evalica_ratio": med_e / med_o,
        "csv_mb": size_mb,
    }


def bench_elo(sim: Battles, shuffles: int, repeats: int, seed: int = 0) -> dict[str, Any]:
    a, b, o, names = sim.model_a, sim.model_b, sim.outcome, sim.models
    n = len(sim)
    index = pd.Index(range(len(names)))
    winners = EVALICA_WINNER[o]
    prep_times: list[float] = []

    def ours() -> Any:
        return Elo(shuffles=shuffles, seed=seed).fit(sim)

    def theirs() -> np.ndarray:
        total = np.zeros(len(names))
        prep = 0.0
        for s in range(shuffles):
            t0 = time.perf_counter()
            order = shuffle_order(n, seed, s)
            xs, ys, ws = a[order], b[order], winners[order].tolist()
            prep += time.perf_counter() - t0
            res = evalica.elo(xs, ys, ws, index=index)
            total += res.scores.reindex(index).to_numpy(dtype=float)
        prep_times.append(prep)
        return total / shuffles

    t_ours, t_theirs, fitted, mean_theirs = timed_pair(ours, theirs, repeats)
    diff = float(np.max(np.abs(fitted.ratings - mean_theirs)))
    med_o, med_t = statistics.median(t_ours), statistics.median(t_theirs)
    print(
        f"(c) online Elo, {shuffles:,} shuffles x {n:,} battles / {len(names)} models (K=4, init 1000)"
    )
    print(
        f"    stablearena Elo(shuffles={shuffles}).fit     : {fmt_times(t_ours)}   (target <= 5 s)"
    )
    print(f"    evalica.elo x {shuffles} on the same orders : {fmt_times(t_theirs)}")
    print(
        f"      of which building the shuffled inputs: median {statistics.median(prep_times[1:] or prep_times):.3f} s"
    )
    print(f"    evalica / stablearena = {med_t / med_o:.1f}x")
    print(
        f"    agreement of the mean ratings over the same orders: max |difference| {diff:.2e} Elo points"
    )
    return {
        "ours_s": t_ours,
        "evalica_s": t_theirs,
        "evalica_prep_s": prep_times,
        "ratio": med_t / med_o,
        "max_diff_elo": diff,
    }


def describe_machine() -> str:
    """CPU count, load average and BLAS threads: m-ELO's Newton step calls LAPACK, whose
    threads slow it down badly when other processes compete for the cores."""
    parts = [f"{os.cpu_count()} CPUs"]
    if hasattr(os, "getloadavg"):
        parts.append("load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    try:
        from threadpoolctl import threadpool_info

        blas = sorted({f"{d['internal_api']}={d['num_threads']}" for d in threadpool_info()})
        parts.append("BLAS threads " + ", ".join(blas))
    except ImportError:
        parts.append("BLAS threads unknown (threadpoolctl not installed)")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", choices=["a", "b", "c"], default=["a", "b", "c"])
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats of (a) and (b)")
    ap.add_argument("--elo-repeats", type=int, default=3, help="timed repeats of (c)")
    ap.add_argument("--battles", type=int, default=1_000_000)
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--elo-battles", type=int, default=100_000)
    ap.add_argument("--shuffles", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the raw timings here")
    args = ap.parse_args(argv)

    print(f"evalica {evalica.__version__}, numpy {np.__version__}, pyarrow {pa.__version__}")
    print(f"{describe_machine()}")
    results: dict[str, Any] = {}
    if "a" in args.only or "b" in args.only:
        sim = simulated_log(args.models, args.battles, args.seed)
        if "a" in args.only:
            results["a"] = bench_arrays(sim, args.repeats)
        if "b" in args.only:
            with tempfile.TemporaryDirectory(prefix="stablearena-bench-") as tmp:
                results["b"] = bench_csv(sim, args.repeats, Path(tmp))
        del sim
    if "c" in args.only:
        sim = simulated_log(args.models, args.elo_battles, args.seed + 100)
        results["c"] = bench_elo(sim, args.shuffles, args.elo_repeats, args.seed)
    print(f"{describe_machine()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
