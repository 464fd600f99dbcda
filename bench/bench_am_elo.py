"""am-ELO benchmark: stablearena's am-ELO beside crowd-kit's NoisyBT, and the 1M-battle scale test.

(a) The same simulated arena of 100,000 battles, 50 models, 200 annotators (140 honest with
    abilities U(0.5, 1.5), 30 flippers, 20 random voters, 10 who always vote for the model shown
    first), Bradley–Terry votes without ties (NoisyBT cannot take ties). Timed for both sides in
    the same run, repeats interleaved (ours, theirs, ours, …), medians and their ratio printed:

    - ours: ``Battles.from_arrays`` + ``AmElo().fit`` (exact Newton, converged to ‖∇‖/n ≤ 1e-9);
    - crowd-kit: ``NoisyBradleyTerry(n_iter=100).fit`` on the DataFrame it needs
      (``worker, left, right, label``; building that frame is timed apart and not counted).

    Quality, same run: detection AUC of each method's annotator score (am-ELO's ability;
    NoisyBT's ``skills_``) for flippers vs honest annotators and for all bad annotators vs honest
    (AUC = probability that a bad annotator scores below an honest one), and Kendall τ of the
    model ratings with the true strengths.

(b) The acceptance scale test: 1,000,000 battles, 200 models, 1,000 annotators of whom 20%
    flip. am-ELO end to end (median of repeats), its Kendall τ with the truth beside m-ELO fitted
    on the honest annotators' battles alone, and the flipper detection AUC.

Usage::

    python bench/bench_am_elo.py                  # both, 3 repeats
    python bench/bench_am_elo.py --only a --repeats 5
    python bench/bench_am_elo.py --json results.json

Needs ``pip install -e ".[bench]"`` for crowd-kit (part (a) is skipped without it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from stablearena import Battles, MElo
from stablearena.analysis.metrics import kendall_tau, prediction_auc
from stablearena.raters.annotator import AmElo
from stablearena.simulation.perturbation import simulate_arena

try:
    from crowdkit.aggregation import NoisyBradleyTerry
except ImportError:  # pragma: no cover - the bench extra is missing
    NoisyBradleyTerry = None


def detection_auc(score: np.ndarray, bad: np.ndarray) -> float:
    """P(a bad annotator's score < an honest one's), ties half (Mann–Whitney)."""
    return prediction_auc(-np.asarray(score, float), np.asarray(bad, float))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def machine() -> dict[str, Any]:
    try:
        from threadpoolctl import threadpool_info

        blas = [f"{i['internal_api']}:{i['num_threads']}" for i in threadpool_info()]
    except ImportError:
        blas = []
    return {"cpus": os.cpu_count(), "load_avg": os.getloadavg(), "blas_threads": blas}


def part_a(repeats: int) -> dict[str, Any]:
    sim = simulate_arena(
        50,
        100_000,
        profiles={"honest": 140, "flipper": 30, "random": 20, "always_a": 10},
        seed=2025,
    )
    b = sim.battles
    arrays = (b.model_a, b.model_b, b.outcome)
    ann_names = np.array(b.annotators, dtype=object)[b.annotator]
    model_names = np.array(b.models, dtype=object)
    flippers = sim.of_profile("flipper")
    bad = ~sim.honest

    def ours() -> Any:
        battles = Battles.from_arrays(*arrays, models=b.models, annotator=ann_names)
        return AmElo().fit(battles)

    t_frame, frame = timed(
        lambda: pd.DataFrame(
            {
                "worker": ann_names,
                "left": model_names[b.model_a],
                "right": model_names[b.model_b],
                "label": np.where(b.outcome == 0, model_names[b.model_a], model_names[b.model_b]),
            }
        )
    )

    def theirs() -> Any:
        return NoisyBradleyTerry(n_iter=100).fit(frame)

    ours()  # warm-up
    have_peer = NoisyBradleyTerry is not None
    if have_peer:
        theirs()
    t_ours, t_theirs = [], []
    for _ in range(repeats):
        t, fitted = timed(ours)
        t_ours.append(t)
        if have_peer:
            t, peer = timed(theirs)
            t_theirs.append(t)
    out: dict[str, Any] = {
        "arena": "100,000 battles, 50 models, 200 annotators (140 honest, 30 flippers, 20 random, 10 always-A)",
        "am_elo_seconds": statistics.median(t_ours),
        "am_elo_converged": fitted.convergence.converged,
        "am_elo_grad_norm": fitted.convergence.grad_norm,
        "am_elo_auc_flippers": detection_auc(
            fitted.abilities[~bad | flippers], flippers[~bad | flippers]
        ),
        "am_elo_auc_all_bad": detection_auc(fitted.abilities, bad),
        "am_elo_tau": kendall_tau(sim.true_ratings, fitted.ratings),
    }
    if have_peer:
        skills = peer.skills_.reindex(list(b.annotators)).to_numpy()
        scores = peer.scores_.reindex(list(b.models)).to_numpy()
        out |= {
            "noisybt_seconds": statistics.median(t_theirs),
            "noisybt_frame_seconds": t_frame,
            "noisybt_auc_flippers": detection_auc(
                skills[~bad | flippers], flippers[~bad | flippers]
            ),
            "noisybt_auc_all_bad": detection_auc(skills, bad),
            "noisybt_tau": kendall_tau(sim.true_ratings, scores),
            "ratio_noisybt_over_am_elo": statistics.median(t_theirs) / statistics.median(t_ours),
        }
    return out


def part_b(repeats: int) -> dict[str, Any]:
    sim = simulate_arena(200, 1_000_000, profiles={"honest": 800, "flipper": 200}, seed=7)
    b = sim.battles
    arrays = (b.model_a, b.model_b, b.outcome)
    ann_names = np.array(b.annotators, dtype=object)[b.annotator]

    def ours() -> Any:
        return AmElo().fit(Battles.from_arrays(*arrays, models=b.models, annotator=ann_names))

    ours()
    times = []
    for _ in range(repeats):
        t, fitted = timed(ours)
        times.append(t)
    t_counts, _ = timed(lambda: AmElo().fit(b.counts(by_annotator=True)))
    honest = sim.honest
    m_honest = MElo().fit(b.take(honest[b.annotator]))
    ab = fitted.abilities
    return {
        "arena": "1,000,000 battles, 200 models, 1,000 annotators (800 honest, 200 flippers)",
        "am_elo_seconds": statistics.median(times),
        "am_elo_seconds_all": times,
        "am_elo_from_counts_seconds": t_counts,
        "iterations": fitted.convergence.iterations,
        "grad_norm": fitted.convergence.grad_norm,
        "converged": fitted.convergence.converged,
        "tau_am_elo": kendall_tau(sim.true_ratings, fitted.ratings),
        "tau_m_elo_honest_only": kendall_tau(sim.true_ratings, m_honest.ratings),
        "tau_m_elo_all": kendall_tau(sim.true_ratings, MElo().fit(b).ratings),
        "flipper_auc": detection_auc(ab, ~honest),
        "max_flipper_ability": float(ab[~honest].max()),
        "min_honest_ability": float(ab[honest].min()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=["a", "b"], default=["a", "b"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    results: dict[str, Any] = {"machine": machine()}
    print(f"machine: {results['machine']}")
    if "a" in args.only:
        a = part_a(args.repeats)
        results["a"] = a
        print(f"\n(a) {a['arena']}")
        print(
            f"  am-ELO   {a['am_elo_seconds']:.3f} s  AUC flippers {a['am_elo_auc_flippers']:.4f}  "
            f"AUC all bad {a['am_elo_auc_all_bad']:.4f}  tau {a['am_elo_tau']:.4f}  "
            f"(converged {a['am_elo_converged']}, |g|/n {a['am_elo_grad_norm']:.1e})"
        )
        if "noisybt_seconds" in a:
            print(
                f"  NoisyBT  {a['noisybt_seconds']:.3f} s  AUC flippers {a['noisybt_auc_flippers']:.4f}  "
                f"AUC all bad {a['noisybt_auc_all_bad']:.4f}  tau {a['noisybt_tau']:.4f}  "
                f"(+{a['noisybt_frame_seconds']:.3f} s building its DataFrame, not counted)"
            )
            print(f"  time ratio NoisyBT / am-ELO: {a['ratio_noisybt_over_am_elo']:.1f}x")
        else:
            print("  crowd-kit not installed: NoisyBT skipped (pip install crowd-kit)")
    if "b" in args.only:
        r = part_b(args.repeats)
        results["b"] = r
        print(f"\n(b) {r['arena']}")
        print(
            f"  am-ELO end to end {r['am_elo_seconds']:.3f} s (median of {len(r['am_elo_seconds_all'])}; "
            f"from counts {r['am_elo_from_counts_seconds']:.3f} s), {r['iterations']} Newton iterations, "
            f"|g|/n {r['grad_norm']:.1e}"
        )
        print(
            f"  Kendall tau vs truth: am-ELO {r['tau_am_elo']:.4f}, m-ELO honest only "
            f"{r['tau_m_elo_honest_only']:.4f} (difference {r['tau_am_elo'] - r['tau_m_elo_honest_only']:+.4f}), "
            f"m-ELO all {r['tau_m_elo_all']:.4f}"
        )
        print(
            f"  flipper AUC {r['flipper_auc']:.4f} (max flipper ability {r['max_flipper_ability']:.3f}, "
            f"min honest {r['min_honest_ability']:.3f})"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2, default=float)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
