"""Tie and covariance models side by side with leaderbot, on leaderbot's own data (Table D.1).

For every configuration of leaderbot's Table D.1 (Bradley–Terry with ties as half and without
ties, Rao–Kupper and Davidson with k_cov ∈ {none, 0, 3} and k_tie ∈ {0, 1, 10, 20}) this script
fits leaderbot (``model.train()``, its defaults: BFGS, tol 1e-8, 1500 iterations) in a
subprocess with a time limit, and stablearena's model of the same form (``tie_form="leaderbot"``)
on the same pair counts, in the same run. It prints the fit times, their ratio (leaderbot /
stablearena) and both NLLs per comparison (leaderbot's is its own loss without its penalty
terms). Configurations leaderbot does not finish within the limit are reported as such.

Data: the Chatbot Arena pair counts of 2024-08-14 shipped with leaderbot (both-bad ties dropped,
1,374,996 comparisons): the copy bundled with stablearena (``stablearena.data.datasets.path(
"chatbot-arena-2024")``, byte-identical to leaderbot's ``leaderbot/data/chatbotarena_20240814.json``).

Timing: stablearena is timed warm (after one untimed fit) as the median of ``--repeats`` fits
(one fit for configurations slower than 5 s); leaderbot as the median of ``--lb-repeats`` runs of
``train()`` on a fresh model after an untimed ``loss()`` call that compiles its numba kernels.
Both run with one BLAS thread (stablearena limits itself; leaderbot's subprocess gets
``OPENBLAS_NUM_THREADS=1`` unless ``--lb-threads`` says otherwise).

    python bench/bench_ties.py                       # all 30, 600 s limit per leaderbot fit
    python bench/bench_ties.py --ids 7,19 --repeats 9  # the single-threshold models only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from stablearena import PairCounts
from stablearena.analysis.comparison import ModelConfig, table_d1_configurations
from stablearena.data.datasets import path as dataset_path

HERE = Path(__file__).resolve().parent

LEADERBOT_CHILD = r"""
import json, statistics, sys, time
import numpy as np
import leaderbot as lb
cfg = json.loads(sys.argv[1])
raw = json.load(open(cfg["path"]))
X = np.asarray(raw["X"], dtype=np.int64)
Y = np.asarray(raw["Y"], dtype=np.int64)[:, :3].copy()   # both-bad ties dropped
if cfg["drop_ties"]:
    Y[:, 2] = 0
keep = Y.sum(axis=1) > 0
data = {"X": X[keep], "Y": Y[keep], "models": list(raw["models"])}
cls = {"bt": lb.models.BradleyTerry, "rk": lb.models.RaoKupper, "dv": lb.models.Davidson}[cfg["cls"]]
kw = {"k_cov": cfg["k_cov"]}
if cfg["cls"] != "bt":
    kw["k_tie"] = cfg["k_tie"]
times = []
for _ in range(cfg["repeats"]):
    model = cls(data, **kw)
    try:
        model.loss(np.zeros(model.n_param))  # compile the numba kernel outside the timing
    except Exception:
        pass
    t0 = time.perf_counter()
    model.train()
    times.append(time.perf_counter() - t0)
nll = float(model.loss(return_jac=False, constraint=False))
print(json.dumps({"seconds": statistics.median(times), "runs": len(times), "nll": nll,
                  "n_param": int(model.n_param)}))
"""


def load_counts() -> tuple[PairCounts, Path]:
    path = dataset_path("chatbot-arena-2024")
    raw = json.loads(path.read_text())
    counts = PairCounts.from_arrays(raw["models"], np.asarray(raw["X"]), np.asarray(raw["Y"]))
    return counts.drop_both_bad(), path


def leaderbot_fit(cfg: ModelConfig, path: Path, limit: float, repeats: int, threads: int) -> dict:
    spec = {
        "path": str(path),
        "cls": {"m-elo": "bt", "bt": "bt", "rao-kupper": "rk", "davidson": "dv"}[cfg.method],
        "k_cov": cfg.k_cov,
        "k_tie": cfg.k_tie,
        "drop_ties": cfg.method == "bt",
        "repeats": repeats,
    }
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    try:
        out = subprocess.run(
            [sys.executable, "-c", LEADERBOT_CHILD, json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=limit * repeats + 60,  # + start-up and numba compilation
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"finished": False, "note": f"did not finish in {limit * repeats:.0f} s"}
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"finished": False, "note": f"failed: {tail[:80]}"}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if res["seconds"] > limit:
        return {"finished": False, "note": f"took {res['seconds']:.0f} s > limit", **res}
    res["finished"] = True
    res["wall"] = time.perf_counter() - t0
    return res


def ours_fit(cfg: ModelConfig, counts: PairCounts, repeats: int) -> dict:
    rater = cfg.rater()
    t0 = time.perf_counter()
    fit = rater.fit(counts)  # warm-up (also the result when the fit is slow)
    first = time.perf_counter() - t0
    times = [first]
    if first < 5.0:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fit = rater.fit(counts)
            times.append(time.perf_counter() - t0)
    return {
        "seconds": statistics.median(times),
        "runs": len(times),
        "nll": float(fit.nll),
        "n_param": int(getattr(fit, "n_params", fit.n_models)),
        "converged": bool(fit.convergence.converged),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--time-limit", type=float, default=600.0, help="seconds per leaderbot fit")
    ap.add_argument("--ids", default="", help="comma-separated Table D.1 IDs (default: all 30)")
    ap.add_argument("--repeats", type=int, default=7, help="stablearena repeats for fast fits")
    ap.add_argument("--lb-repeats", type=int, default=1, help="leaderbot repeats")
    ap.add_argument("--lb-threads", type=int, default=1, help="BLAS threads for leaderbot")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()

    counts, path = load_counts()
    configs = table_d1_configurations("leaderbot")
    ids = [int(x) for x in args.ids.split(",") if x.strip()] or list(range(1, 31))
    print(
        f"data: {path} ({counts.n_comparisons:,.0f} comparisons, {len(counts)} pairs, {counts.n_models} models)"
    )
    print(
        f"leaderbot: limit {args.time_limit:.0f} s per fit, {args.lb_repeats} run(s), {args.lb_threads} BLAS thread(s)"
    )
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")
    head = f"{'ID':>3}  {'configuration':<32} {'params':>6}  {'leaderbot s':>11} {'ours s':>9} {'ratio':>7}  {'NLL leaderbot':>13} {'NLL ours':>11} {'ours − lb':>10}"
    print(head)
    print("-" * len(head))
    rows = []
    for k in ids:
        cfg = configs[k - 1]
        ours = ours_fit(cfg, counts, args.repeats)
        lb = leaderbot_fit(cfg, path, args.time_limit, args.lb_repeats, args.lb_threads)
        row = {"id": k, "config": cfg.label, "ours": ours, "leaderbot": lb}
        rows.append(row)
        if lb.get("finished"):
            ratio = lb["seconds"] / ours["seconds"]
            text = (
                f"{k:>3}  {cfg.label:<32} {ours['n_param']:>6}  {lb['seconds']:>11.2f} {ours['seconds']:>9.3f} "
                f"{ratio:>6.0f}×  {lb['nll']:>13.7f} {ours['nll']:>11.7f} {ours['nll'] - lb['nll']:>+10.2e}"
            )
        else:
            text = (
                f"{k:>3}  {cfg.label:<32} {ours['n_param']:>6}  {'—':>11} {ours['seconds']:>9.3f} {'—':>7}  "
                f"{'—':>13} {ours['nll']:>11.7f}   leaderbot {lb['note']}"
            )
        if not ours["converged"]:
            text += "  (ours: not converged)"
        print(text, flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
