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
    ``stablearena.data.io.read_battles(path)`` + ``MElo().fit`` vs a plain ``pyarrow.csv.read_csv``
    of the file (target: at most 2× the read alone); evalica's end to end from the same file
    (``pandas.read_csv(engine="pyarrow")``, label → ``Winner`` map, ``evalica.bradley_terry``
    on the name columns) is printed beside it.
(c) Online Elo, 1,000 shuffles × 100,000 battles: ``Elo(shuffles=1000).fit`` vs
    ``evalica.elo`` called once per shuffle on exactly the same orders (evalica has no
    shuffle-averaging call; its ``bootstrap`` resamples with replacement). evalica's time
    includes building each shuffled input (``shuffle_order`` + gathering the three columns),
    which is also timed on its own and printed.

(startup) Whole processes, each started cold (a new interpreter every time), repeats
    interleaved and medians printed: ``stablearena --help`` (target ≤ 0.3 s); ``stablearena
    rank`` on the built-in example (target ≤ 1.0 s); ``stablearena rank`` on the CSV of (b)
    against a process that only reads that CSV with ``pyarrow.csv.read_csv`` (target ≤ 2×); and
    the first run after a fresh install against later runs (target ≤ 2×): the package source is
    copied to an empty temporary directory (no bytecode, no numba cache; ``NUMBA_CACHE_DIR``
    pointed at an empty directory too) and run from there — the state right after
    ``pip install`` — once, then again. The first run of ``--method elo`` (whose update loop is
    numba-compiled on first use and cached) is timed the same way and printed for information.
    The command is the ``stablearena`` script beside this interpreter (no pyenv shim), else
    ``python -m stablearena``; ``--command`` overrides it. Needs no peer.

(counts) ``Battles.counts`` of the 1,000,000 battles of (a) in one worker process per source
    tree: this one's and each ``--baseline-src`` (e.g. ``git worktree add /tmp/base6acf
    6acf754`` and ``--baseline-src /tmp/base6acf/src``, the last tree with the numba counting
    kernel). The trees take turns (``--count-block`` calls each, ``--count-rounds`` rounds, the
    order reversed every other round); medians of wall and CPU (thread) time per call, their
    ratios, and whether every tree gave the same counts. ``--weighted`` adds random weights.
(choix) m-ELO from the integer arrays of (a) vs choix's fastest route from the same arrays:
    the win matrix by ``np.bincount`` and ``choix.ilsr_pairwise_dense``; wall and CPU time,
    interleaved; choix's BLAS on one thread like our fits (``--choix-blas-threads default``:
    as choix runs by default). Needs ``choix`` (in the bench extra).

Usage::

    python bench/bench_foundation.py                 # (a), (b), (c); 5 repeats ((c): 3)
    python bench/bench_foundation.py --only a c --repeats 7
    python bench/bench_foundation.py --only startup --process-repeats 9
    python bench/bench_foundation.py --json results.json
    python bench/bench_foundation.py --only counts --baseline-src /tmp/base6acf/src
    python bench/bench_foundation.py --only choix --repeats 21

(a)–(c) need ``pip install -e ".[bench]"`` (evalica).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from stablearena import Battles, MElo
from stablearena._threads import single_threaded_blas
from stablearena.data.io import read_battles
from stablearena.data.simulate import random_ratings, simulate_battles
from stablearena.raters.base import ELO_SCALE
from stablearena.raters.elo import Elo, shuffle_order

evalica: Any = None
EVALICA_WINNER: np.ndarray = np.zeros(0)
LABEL_TO_WINNER: dict[str, Any] = {}


def load_evalica() -> None:
    """Import the peer of (a)–(c) (the start-up section needs none)."""
    global evalica, EVALICA_WINNER, LABEL_TO_WINNER
    try:
        import evalica as ev
    except ImportError:  # pragma: no cover - the bench extra is missing
        sys.exit('evalica is not installed: pip install -e ".[bench]" (or run --only startup)')
    evalica = ev
    #: Our outcome codes (A, B, TIE, TIE_BOTH_BAD) as evalica Winner values (X, Y, Draw, Draw).
    EVALICA_WINNER = np.array(
        [ev.Winner.X, ev.Winner.Y, ev.Winner.Draw, ev.Winner.Draw], dtype=np.int64
    )
    LABEL_TO_WINNER = {
        "model_a": ev.Winner.X,
        "model_b": ev.Winner.Y,
        "tie": ev.Winner.Draw,
        "tie (bothbad)": ev.Winner.Draw,
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


# ---------------------------------------------------------------------------- counting
#: A worker process that times ``Battles.counts`` of the source tree on its PYTHONPATH: it loads
#: the arrays, builds the battles, warms up (numba compiles or loads its cache there in trees
#: that use it), prints a digest of the counts, then answers each line "K" on stdin with the
#: wall and CPU times of K calls. Only ``Battles.from_arrays`` and ``Battles.counts`` are used,
#: so any tree of the project since the counting kernel can be timed.
COUNT_WORKER = """
import json, sys, time
import numpy as np
from stablearena import Battles
d = np.load(sys.argv[1])
m = int(d["m"])
kw = {"weight": d["w"]} if d["w"].size else {}
battles = Battles.from_arrays(d["a"], d["b"], d["o"], models=[f"m{k}" for k in range(m)], **kw)
c = battles.counts()
digest = [len(c.i), float((c.i * m + c.j) @ (c.wins + 2 * c.losses + 3 * c.ties + 5 * c.ties_both_bad))]
print(json.dumps({"digest": digest, "numba": "numba" in sys.modules}), flush=True)
for line in sys.stdin:
    out = []
    for _ in range(int(line)):
        w0, c0 = time.perf_counter(), time.thread_time()
        battles.counts()
        out.append((time.perf_counter() - w0, time.thread_time() - c0))
    print(json.dumps(out), flush=True)
"""


def start_count_worker(src: Path, data: Path) -> tuple[subprocess.Popen, dict[str, Any]]:
    """A :data:`COUNT_WORKER` importing stablearena from ``src``; returns it and its digest."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.Popen(
        [sys.executable, "-c", COUNT_WORKER, str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"the counting worker on {src} failed to start")
    return proc, json.loads(line)


def bench_counts(
    sim: Battles, baseline_srcs: list[Path], rounds: int, block: int, weighted: bool
) -> dict[str, Any]:
    """``Battles.counts`` on the simulated log in a worker per source tree (this one's and each
    of ``baseline_srcs``), ``rounds`` rounds of ``block`` calls each, the order of the trees
    reversed every other round; medians of the wall and the CPU (thread) time per call."""
    med = statistics.median
    trees = {"this tree": SRC}
    for k, src in enumerate(baseline_srcs, 1):
        trees[f"baseline{k}" if len(baseline_srcs) > 1 else "baseline"] = src
    rng = np.random.default_rng(0)
    w = rng.exponential(1.0, len(sim)) if weighted else np.zeros(0)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="stablearena-bench-") as tmp:
        data = Path(tmp) / "battles.npz"
        np.savez(data, a=sim.model_a, b=sim.model_b, o=sim.outcome, m=sim.n_models, w=w)
        workers = {k: start_count_worker(src, data) for k, src in trees.items()}
        try:
            digests = {k: info["digest"] for k, (_, info) in workers.items()}
            times: dict[str, list[tuple[float, float]]] = {k: [] for k in trees}
            names = list(trees)
            for r in range(rounds):
                for k in names if r % 2 == 0 else names[::-1]:
                    proc = workers[k][0]
                    assert proc.stdin is not None and proc.stdout is not None
                    proc.stdin.write(f"{block}\n")
                    proc.stdin.flush()
                    times[k].extend(tuple(x) for x in json.loads(proc.stdout.readline()))
        finally:
            for proc, _ in workers.values():
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=60)
    kind = "weighted " if weighted else ""
    print(
        f"(counts) Battles.counts of {len(sim):,} {kind}battles / {sim.n_models} models, "
        f"{rounds} interleaved rounds x {block} calls per tree"
    )
    for k, src in trees.items():
        wall, cpu = [t[0] for t in times[k]], [t[1] for t in times[k]]
        numba_used = workers[k][1]["numba"]
        print(
            f"    {k:<10} {str(src):<30} wall median {med(wall) * 1e3:6.2f} ms "
            f"(p25 {np.percentile(wall, 25) * 1e3:.2f}), CPU median {med(cpu) * 1e3:6.2f} ms "
            f"(p25 {np.percentile(cpu, 25) * 1e3:.2f}); numba imported: {numba_used}"
        )
        results[k] = {"src": str(src), "wall_s": wall, "cpu_s": cpu, "numba": numba_used}
    for k in list(trees)[1:]:
        same = digests["this tree"] == digests[k]
        ratio_wall = med(results[k]["wall_s"]) / med(results["this tree"]["wall_s"])
        ratio_cpu = med(results[k]["cpu_s"]) / med(results["this tree"]["cpu_s"])
        print(
            f"    {k} / this tree = {ratio_wall:.2f}x wall, {ratio_cpu:.2f}x CPU "
            f"(>= 1: this tree at least as fast); same counts: {same}"
        )
        results[k].update(ratio_wall=ratio_wall, ratio_cpu=ratio_cpu, same_counts=same)
    return results


def bench_choix(sim: Battles, repeats: int, choix_blas_threads: str = "one") -> dict[str, Any]:
    """m-ELO from integer arrays vs choix's fastest path from the same arrays: the win matrix
    (ties as half a win each way, as m-ELO counts them) by ``np.bincount`` and
    ``choix.ilsr_pairwise_dense`` (iterative Luce spectral ranking, the maximum-likelihood
    Bradley–Terry strengths; tolerance 1e-8), its BLAS on one thread like ours
    (``choix_blas_threads="one"``) or as choix runs by default (``"default"``: OpenBLAS's
    threads, which on a busy machine cost it several times more)."""
    try:
        import choix
    except ImportError:  # pragma: no cover - the bench extra is missing
        sys.exit('choix is not installed: pip install -e ".[bench]"')
    a, b, o, names = sim.model_a, sim.model_b, sim.outcome, sim.models
    m = len(names)
    score_a = np.array([1.0, 0.0, 0.5, 0.5])

    def ours() -> Any:
        return MElo().fit(Battles.from_arrays(a, b, o, models=names))

    def theirs() -> np.ndarray:
        s = score_a[o]
        wins = np.bincount(a * m + b, s, m * m) + np.bincount(b * m + a, 1.0 - s, m * m)
        if choix_blas_threads == "default":
            return choix.ilsr_pairwise_dense(wins.reshape(m, m))
        with single_threaded_blas():  # as inside our fits
            return choix.ilsr_pairwise_dense(wins.reshape(m, m))

    fitted, params = ours(), theirs()  # warm-up
    wall: dict[str, list[float]] = {"ours": [], "choix": []}
    cpu: dict[str, list[float]] = {"ours": [], "choix": []}
    for r in range(repeats):  # interleaved, the order reversed every other round
        for k in ("ours", "choix") if r % 2 == 0 else ("choix", "ours"):
            w0, c0 = time.perf_counter(), time.thread_time()
            if k == "ours":
                fitted = ours()
            else:
                params = theirs()
            wall[k].append(time.perf_counter() - w0)
            cpu[k].append(time.thread_time() - c0)
    t_ours, t_theirs = wall["ours"], wall["choix"]
    diff = float(np.max(np.abs((params - params.mean()) / ELO_SCALE - (fitted.ratings - 1000))))
    med = statistics.median
    med_o, med_t = med(t_ours), med(t_theirs)
    cpu_o, cpu_t = med(cpu["ours"]), med(cpu["choix"])
    print(f"(choix) m-ELO, {len(sim):,} battles / {m} models from integer arrays")
    print(f"    stablearena Battles.from_arrays + MElo().fit    : {fmt_times(t_ours)}")
    print(
        f"    np.bincount win matrix + choix.ilsr_pairwise_dense: {fmt_times(t_theirs)}"
        f"   (choix's BLAS threads: {choix_blas_threads})"
    )
    print(f"    CPU (thread) time medians: stablearena {cpu_o:.4f} s, choix {cpu_t:.4f} s")
    print(
        f"    choix / stablearena = {med_t / med_o:.2f}x wall, {cpu_t / cpu_o:.2f}x CPU"
        "   (target >= 2)"
    )
    print(f"    agreement: max |rating difference| {diff:.2e} Elo points")
    return {
        "ours_s": t_ours,
        "choix_s": t_theirs,
        "ours_cpu_s": cpu["ours"],
        "choix_cpu_s": cpu["choix"],
        "ratio": med_t / med_o,
        "ratio_cpu": cpu_t / cpu_o,
        "max_diff_elo": diff,
    }


# ---------------------------------------------------------------------------- whole processes
SRC = Path(__file__).resolve().parents[1] / "src"


def default_command() -> list[str]:
    """The ``stablearena`` script beside this interpreter (what a user's shell runs, without a
    pyenv shim in front), else ``python -m stablearena``."""
    script = Path(sys.executable).with_name("stablearena")
    return [str(script)] if script.exists() else [sys.executable, "-m", "stablearena"]


def run_process(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Wall time of one process, started cold; it must succeed."""
    t0 = time.perf_counter()
    out = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=600
    )
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {out.stderr.decode()[-500:]}")
    return elapsed


def timed_processes(
    cases: dict[str, list[str]], repeats: int, env: dict[str, str] | None = None
) -> dict[str, list[float]]:
    """Run each case ``repeats`` times, interleaved (a, b, a, b, …) after one warm-up each."""
    for argv in cases.values():
        run_process(argv, env)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for k, argv in cases.items():
            times[k].append(run_process(argv, env))
    return times


def fresh_install(tmp: Path) -> dict[str, str]:
    """A copy of the package source with no bytecode and an empty numba cache: what an
    interpreter finds right after ``pip install`` (whose own wheels' bytecode exists)."""
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(SRC, tmp / "src", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (tmp / "numba-cache").mkdir()
    return {
        **os.environ,
        "PYTHONPATH": str(tmp / "src"),
        "NUMBA_CACHE_DIR": str(tmp / "numba-cache"),
    }


def bench_startup(
    command: list[str], csv_path: Path, repeats: int, fresh_repeats: int
) -> dict[str, Any]:
    med = statistics.median
    results: dict[str, Any] = {"command": command}
    print(f"(startup) whole processes, started cold; command: {' '.join(command)}")
    base = timed_processes(
        {
            "python": [sys.executable, "-c", "pass"],
            "help": [*command, "--help"],
            "rank_example": [*command, "rank"],
        },
        repeats,
    )
    print(f"    python -c pass (interpreter start)     : {fmt_times(base['python'])}")
    print(
        f"    stablearena --help                    : {fmt_times(base['help'])}   (target <= 0.3 s)"
    )
    print(
        f"    stablearena rank (built-in example)   : {fmt_times(base['rank_example'])}   (target <= 1.0 s)"
    )
    csv_cases = timed_processes(
        {
            "rank_csv": [*command, "rank", str(csv_path)],
            "pyarrow_read": [
                sys.executable,
                "-c",
                f"import pyarrow.csv as c; c.read_csv({str(csv_path)!r})",
            ],
        },
        repeats,
    )
    ratio = med(csv_cases["rank_csv"]) / med(csv_cases["pyarrow_read"])
    print(f"    stablearena rank {csv_path.name:<20} : {fmt_times(csv_cases['rank_csv'])}")
    print(f"    python: pyarrow.csv.read_csv of it    : {fmt_times(csv_cases['pyarrow_read'])}")
    print(f"    rank / pyarrow-read process = {ratio:.2f}x   (target <= 2)")
    results.update(base)
    results.update(csv_cases)
    results["csv_ratio"] = ratio
    # first run after a fresh install vs later runs
    fresh: dict[str, dict[str, list[float]]] = {}
    module = [sys.executable, "-m", "stablearena"]
    for label, args in (
        ("rank_example", ["rank"]),
        ("rank_csv", ["rank", str(csv_path)]),
        ("rank_elo_example", ["rank", "--method", "elo"]),
    ):
        first, later = [], []
        for k in range(fresh_repeats):
            with tempfile.TemporaryDirectory(prefix="stablearena-fresh-") as tmp:
                env = fresh_install(Path(tmp) / f"install-{k}")
                first.append(run_process([*module, *args], env))
                later.extend(run_process([*module, *args], env) for _ in range(3))
        fresh[label] = {"first": first, "later": later}
        r = med(first) / med(later)
        target = "" if label == "rank_elo_example" else "   (target <= 2)"
        print(
            f"    fresh install, stablearena {' '.join(args)[:22]:<22}: first run median "
            f"{med(first):.3f} s, later runs median {med(later):.3f} s, ratio {r:.2f}x{target}"
        )
    results["fresh"] = fresh
    return results


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
    ap.add_argument(
        "--only",
        nargs="+",
        choices=["a", "b", "c", "startup", "counts", "choix"],
        default=["a", "b", "c"],
    )
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats of (a) and (b)")
    ap.add_argument("--elo-repeats", type=int, default=3, help="timed repeats of (c)")
    ap.add_argument("--battles", type=int, default=1_000_000)
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--elo-battles", type=int, default=100_000)
    ap.add_argument("--shuffles", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the raw timings here")
    ap.add_argument(
        "--process-repeats", type=int, default=7, help="timed processes per case of (startup)"
    )
    ap.add_argument(
        "--fresh-repeats", type=int, default=3, help="fresh installs per case of (startup)"
    )
    ap.add_argument(
        "--command",
        nargs="+",
        help="how to start stablearena for (startup) (default: the script beside this python)",
    )
    ap.add_argument(
        "--baseline-src",
        type=Path,
        nargs="+",
        default=[],
        help="(counts): also time Battles.counts of these source trees (e.g. the src/ of a "
        "checkout of an older commit), interleaved with this tree's, each in its own process",
    )
    ap.add_argument("--count-rounds", type=int, default=40, help="interleaved rounds of (counts)")
    ap.add_argument("--count-block", type=int, default=5, help="calls per round of (counts)")
    ap.add_argument("--weighted", action="store_true", help="(counts) on weighted battles")
    ap.add_argument(
        "--choix-blas-threads",
        choices=["one", "default"],
        default="one",
        help="(choix): choix's BLAS on one thread like stablearena's fits (default), or as is",
    )
    args = ap.parse_args(argv)

    if set(args.only) & {"a", "b", "c"}:
        load_evalica()
        print(f"evalica {evalica.__version__}, numpy {np.__version__}, pyarrow {pa.__version__}")
    print(f"{describe_machine()}")
    results: dict[str, Any] = {}
    if "startup" in args.only:
        with tempfile.TemporaryDirectory(prefix="stablearena-bench-") as tmp:
            csv_path = Path(tmp) / "battles_1m.csv"
            write_csv(simulated_log(args.models, args.battles, args.seed), csv_path)
            results["startup"] = bench_startup(
                args.command or default_command(),
                csv_path,
                args.process_repeats,
                args.fresh_repeats,
            )
    if "a" in args.only or "b" in args.only:
        sim = simulated_log(args.models, args.battles, args.seed)
        if "a" in args.only:
            results["a"] = bench_arrays(sim, args.repeats)
        if "b" in args.only:
            with tempfile.TemporaryDirectory(prefix="stablearena-bench-") as tmp:
                results["b"] = bench_csv(sim, args.repeats, Path(tmp))
        del sim
    if "counts" in args.only or "choix" in args.only:
        sim = simulated_log(args.models, args.battles, args.seed)
        if "counts" in args.only:
            results["counts"] = bench_counts(
                sim, args.baseline_src, args.count_rounds, args.count_block, args.weighted
            )
        if "choix" in args.only:
            results["choix"] = bench_choix(sim, args.repeats, args.choix_blas_threads)
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
