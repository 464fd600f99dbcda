"""Pair selection speed: ours (anchor-free, O(N²) per pick) beside the paper's formulation.

For N = 20, 100, 200, 1000 models (a simulated arena of 20·N battles, m-ELO ratings) this times,
in the same run and on the same information matrix:

- ``d-opt`` / ``a-opt`` / ``rank-opt``: one pick, and one greedy batch of 64 (Σ — and Σ² or the
  ranking matrix Σ L Σ — updated after each pick); rank-opt's pick reads Σ L Σ, formed once per
  refresh (timed with the refresh below);
- the paper's formulation (``d-opt-grounded`` / ``a-opt-grounded``): the last model fixed and a
  determinant (D) or an inverse (A) per candidate pair. Its batch of 64 is the paper's top-K of
  one state, i.e. one scoring pass. Where scoring every candidate would take longer than
  ``--budget`` seconds, a random sample of candidates is timed and the full pass extrapolated
  (marked ``extrapolated``);
- one Sherman–Morrison update after a battle (of Σ, Σ² and Σ L Σ) and one full refresh after a
  refit (with the empirical-Bayes design estimate that d-opt, a-opt and rank-opt use by default:
  two O(N³) inverses and a solve; and with the plug-in estimate: one inverse), and the O(N³)
  forming of rank-opt's Σ L Σ after a refresh;
- peak memory (tracemalloc) of building the tracker (Σ and Σ², or Σ and Σ L Σ) and choosing a
  batch of 64 with a-opt (or rank-opt).

Medians of ``--repeats`` runs (the three designs' picks and batches in interleaved rounds). BLAS is limited to one thread for every contestant (the machine
is shared; see ``stablearena._threads.single_threaded_blas``).

    python bench/bench_selection.py [--sizes 20,100,200,1000] [--repeats 5] [--budget 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
import tracemalloc
import warnings

import numpy as np

from stablearena import MElo, StableArenaWarning
from stablearena._threads import single_threaded_blas
from stablearena.data.simulate import random_ratings, simulate_battles
from stablearena.design.selection import (
    AOptimal,
    DOptimal,
    InformationTracker,
    RankOptimal,
    grounded_criteria,
)


def median_time(fn, repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def interleaved(fns: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each function, the repeats taken in turn (round-robin)."""
    ts: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            ts[name].append(time.perf_counter() - t)
    return {name: float(np.median(v)) for name, v in ts.items()}


def build(n: int, seed: int = 0, estimate: str = "empirical-bayes") -> InformationTracker:
    battles = simulate_battles(random_ratings(n, seed=seed), 20 * n, seed=seed + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        fitted = MElo().fit(battles)
    return InformationTracker.from_fitted(fitted, estimate=estimate)  # type: ignore[arg-type]


def paper_pick_time(tracker: InformationTracker, kind: str, budget: float, repeats: int):
    """Seconds for one full grounded scoring pass (measured or extrapolated)."""
    m = tracker.n_models
    iu, ju = np.triu_indices(m, 1)
    n_cand = len(iu)
    # probe the cost per candidate on a small sample
    rng = np.random.default_rng(0)
    probe = rng.choice(n_cand, size=min(n_cand, 16), replace=False)
    t = time.perf_counter()
    grounded_criteria(tracker.info, tracker.weights, iu[probe], ju[probe], kind)
    per = (time.perf_counter() - t) / len(probe)
    if per * n_cand * repeats <= budget:
        secs = median_time(
            lambda: grounded_criteria(tracker.info, tracker.weights, iu, ju, kind), repeats
        )
        return secs, "measured"
    if per * n_cand * repeats <= 3 * budget:
        secs = median_time(
            lambda: grounded_criteria(tracker.info, tracker.weights, iu, ju, kind), 1
        )
        return secs, "measured once"
    sample = rng.choice(
        n_cand, size=max(16, min(n_cand, int(budget / max(per, 1e-9) / 3))), replace=False
    )
    secs = median_time(
        lambda: grounded_criteria(tracker.info, tracker.weights, iu[sample], ju[sample], kind),
        max(1, min(repeats, 3)),
    )
    return secs * n_cand / len(sample), f"extrapolated from {len(sample)} of {n_cand} candidates"


def peak_memory(n: int, rank: bool = False) -> int:
    tracemalloc.start()
    tr = build(n)
    if rank:
        _ = tr.ranking_matrix()
        RankOptimal().select(tr, 64, rng=0)
    else:
        _ = tr.sigma2
        AOptimal().select(tr, 64, rng=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def measure(n: int, repeats: int, budget: float) -> dict:
    tr = build(n)
    _ = tr.sigma2
    _ = tr.ranking_matrix()
    DOptimal().select(tr, 2, rng=0)  # compile the kernels
    AOptimal().select(tr, 2, rng=0)
    RankOptimal().select(tr, 2, rng=0)
    row: dict = {"n_models": n}
    contestants = (
        ("d-opt", DOptimal(), "d"),
        ("a-opt", AOptimal(), "a"),
        ("rank-opt", RankOptimal(), None),
    )
    # interleaved repeats, so that a burst of load from other jobs hits every contestant alike
    picks = interleaved(
        {name: (lambda s=sel: s.select(tr, 1, rng=1)) for name, sel, _ in contestants}, repeats
    )
    batches = interleaved(
        {name: (lambda s=sel: s.select(tr, 64, rng=1)) for name, sel, _ in contestants}, repeats
    )
    for name, _, kind in contestants:
        pick, batch = picks[name], batches[name]
        row[name] = {"pick_ms": pick * 1e3, "batch64_ms": batch * 1e3}
        if kind is None:  # no published formulation to compare with
            continue
        paper, how = paper_pick_time(tr, kind, budget, repeats)
        row[name].update(
            paper_pick_ms=paper * 1e3,
            paper_batch64_ms=paper * 1e3,
            paper=how,
            pick_speedup=paper / pick,
            batch_speedup=paper / batch,
        )
    work = tr.copy()
    row["update_ms"] = median_time(lambda: work.add(0, 1), repeats) * 1e3

    def form_ranking(t: InformationTracker) -> None:
        t._lmat = None  # noqa: SLF001 - time the forming of Σ L Σ alone
        _ = t.ranking_matrix()

    row["ranking_matrix_ms"] = median_time(lambda: form_ranking(work), max(1, repeats // 2)) * 1e3

    plug = work.with_estimate("plug-in")

    def refresh(t: InformationTracker) -> None:
        t.refresh(t.scores)
        _ = t.sigma, t.sigma2

    row["refresh_ms"] = median_time(lambda: refresh(work), max(1, repeats // 2)) * 1e3
    row["refresh_plug_in_ms"] = median_time(lambda: refresh(plug), max(1, repeats // 2)) * 1e3
    mem = peak_memory(n)
    row["peak_mb"] = mem / 2**20
    row["peak_bytes_per_n2"] = mem / n**2
    row["peak_rank_opt_mb"] = peak_memory(n, rank=True) / 2**20
    return row


def run(sizes: list[int], repeats: int, budget: float) -> list[dict]:
    rows = []
    for n in sizes:
        row = measure(n, repeats, budget)
        rows.append(row)
        print_row(row)
    return rows


def print_row(r: dict) -> None:
    n = r["n_models"]
    for name in ("d-opt", "a-opt", "rank-opt"):
        x = r[name]
        paper = (
            f" | paper's pick {x['paper_pick_ms']:12.1f} ms ({x['paper']}) | "
            f"ratio pick {x['pick_speedup']:10.0f}x, batch {x['batch_speedup']:8.1f}x"
            if "paper" in x
            else " | (no published formulation)"
        )
        print(
            f"N={n:5d} {name:8s}: pick {x['pick_ms']:8.2f} ms | batch of 64 {x['batch64_ms']:8.1f} ms"
            + paper,
            flush=True,
        )
    print(
        f"N={n:5d} update after a battle {r['update_ms']:.2f} ms (Σ, Σ², Σ L Σ) | refresh after a "
        f"refit {r['refresh_ms']:.1f} ms (plug-in estimate {r['refresh_plug_in_ms']:.1f} ms) + "
        f"rank-opt's Σ L Σ {r['ranking_matrix_ms']:.1f} ms | peak memory {r['peak_mb']:.1f} MB = "
        f"{r['peak_bytes_per_n2']:.0f} bytes × N² (a-opt; rank-opt {r['peak_rank_opt_mb']:.1f} MB)",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="20,100,200,1000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--budget", type=float, default=20.0, help="seconds per full paper pass before sampling"
    )
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; BLAS limited to 1 thread; medians of {args.repeats}",
        flush=True,
    )
    with single_threaded_blas():
        rows = run(sizes, args.repeats, args.budget)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load_average": list(load), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
