"""What bounded influence's age ramp costs an honest arena (docs/guides/rigging.md).

No attacker. On each arena and seed, the new default defence
(``am-elo+screen+influence+bounded``, cap 2, ramp 100 votes) is fitted once and its bounded
weights multiplied by min(1, age / ramp_days) for each ``--ramp-days``; honest accounts' ages
are uniform on [0, 365] days (:data:`stablearena.simulation.attacks.HONEST_MAX_AGE_DAYS`, drawn per seed).
Prints Kendall τ to the reference per ramp, and the change against no age ramp paired by seed
(mean ± SE, :func:`stablearena.analysis.metrics.paired_difference`). Arenas as in the guide's honest-cost
table: simulated (20 models, 90 honest + 10 flippers, 20,000 battles; τ to the truth), LLMFAO
with 10 % of the annotators with ≥ 50 records flipped (τ to today's screened fit of the clean
log), and the Chatbot Arena 2024 counts at 2 % (the rigging experiment's honest arenas; τ to
m-ELO on the full counts).

    python bench/bench_age_ramp.py [--seeds 10] [--ramp-days 0,7,30,90] [--arenas sim,llmfao,cba]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np


def arenas(which: str, seed: int):
    """(counts by annotator, reference scores) of arena ``which`` on ``seed``."""
    from stablearena.crowd.screening import screen_log
    from stablearena.data import datasets
    from stablearena.simulation import attacks as A
    from stablearena.simulation.perturbation import perturb_annotators, simulate_arena

    if which == "sim":
        sim = simulate_arena(profiles={"honest": 90, "flipper": 10}, seed=seed)
        return sim.battles.counts(by_annotator=True), np.asarray(sim.true_ratings)
    if which == "llmfao":
        log = datasets.load("llmfao")
        clean = screen_log(log)
        ref = np.asarray(clean.fitted.scores)
        counts = log.counts(by_annotator=True)
        rec = np.bincount(counts.annotator, counts.totals, len(counts.annotators))
        names = [n for n, r in zip(counts.annotators, rec, strict=True) if r >= 50]
        flipped = perturb_annotators(log, "flip", 0.1, seed=seed, eligible=names)
        return flipped.battles.counts(by_annotator=True), ref
    arena = A.honest_arena(datasets.load("chatbot-arena-2024"), fraction=0.02, seed=seed)
    return arena.counts, arena.truth


def main() -> None:
    from stablearena.analysis.metrics import kendall_tau, paired_difference
    from stablearena.simulation import attacks as A

    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--ramp-days", default="0,7,30,90")
    ap.add_argument("--arenas", default="sim,llmfao,cba")
    args = ap.parse_args()
    ramps = [float(x) for x in args.ramp_days.split(",")]
    d = "am-elo+screen+influence+bounded"
    for which in args.arenas.split(","):
        taus: dict[float, list[float]] = {r: [] for r in ramps}
        for seed in range(args.seeds):
            counts, ref = arenas(which, seed)
            rng = np.random.default_rng((seed, 1))
            names = counts.annotators or ()
            ages = dict(zip(names, rng.uniform(0, A.HONEST_MAX_AGE_DAYS, len(names)), strict=True))
            fits = A._Fits(ages=ages)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for r in ramps:
                    fits.ramp_days = r
                    x, _ = A.defence_scores(d, counts, fits, key=0)
                    ok = np.isfinite(x)
                    taus[r].append(kendall_tau(x[ok], np.asarray(ref)[ok]))
            print(which, seed, {r: round(t[-1], 4) for r, t in taus.items()}, flush=True)
        base = np.array(taus[ramps[0]])
        for r in ramps:
            t = np.array(taus[r])
            p = paired_difference(t - base)
            print(
                f"{which} ramp_days {r:g}: tau {t.mean():.4f} ± {t.std(ddof=1) / len(t) ** 0.5:.4f}"
                f"  minus ramp {ramps[0]:g}: {p['mean_diff']:+.4f} ± {p['se']:.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
