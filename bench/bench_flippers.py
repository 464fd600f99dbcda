"""The live arena's flipper acceptance run, repeated over seeds and summarised paired by seed.

Each seed runs :func:`simulated_arena_run` (tests/arena_process.py) — a ``stablearena serve``
child process on a fresh SQLite file, 30 models (true spread 200 Elo), 100 annotators of whom
10 flip every vote, 20,000 votes on pairs the arena chooses, Stable Arena screening with
δ = 50, ε = 0, exclude — and compares Kendall τ with the truth of the service's am-ELO against
m-ELO on all votes. It prints each seed, then the paired difference (mean ± standard error over
seeds, seeds won / tied / lost) and the flippers flagged.

``--offline`` adds the same arenas with uniformly random pairs fitted in process (no service):
:func:`stablearena.crowd.screening.screen_log` (the same screening) against m-ELO on all votes, to
separate the raters from the pair choice.

    python bench/bench_flippers.py [--seeds 11] [--first 0] [--votes 20000] [--offline 20]
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import numpy as np


def summary(label: str, diffs: list[float]) -> None:
    from stablearena.analysis.metrics import paired_difference

    p = paired_difference(diffs)
    print(
        f"{label}: {len(diffs)} seeds, tau(am-ELO) - tau(m-ELO, all votes) = "
        f"{p['mean_diff']:+.4f} +- {p['se']:.4f} (standard error); won {p['won']}, "
        f"tied {p['tied']}, lost {p['lost']}"
    )


def offline(seeds: int, votes: int) -> list[float]:
    from stablearena import MElo
    from stablearena.analysis.metrics import kendall_tau
    from stablearena.crowd.screening import screen_log
    from stablearena.data.simulate import random_ratings, simulate_battles

    diffs = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        truth = random_ratings(30, spread=200.0, seed=seed)
        ability = rng.uniform(0.5, 1.5, 100)
        ability[rng.choice(100, 10, replace=False)] *= -1.0
        b = simulate_battles(truth, votes, abilities=ability, seed=seed + 1000)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            am = screen_log(b, min_records=50, ability_threshold=0.0).fitted
            me = MElo().fit(b)
        diffs.append(kendall_tau(truth, am.scores) - kendall_tau(truth, me.scores))
    return diffs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=11, help="service runs (0 = none)")
    ap.add_argument("--first", type=int, default=0, help="first seed")
    ap.add_argument("--votes", type=int, default=20_000)
    ap.add_argument("--offline", type=int, default=0, help="seeds of the in-process comparison")
    args = ap.parse_args()
    import _suite  # noqa: F401 - tests/ on sys.path
    from arena_process import simulated_arena_run

    diffs, flagged, honest = [], [], []
    for seed in range(args.first, args.first + args.seeds):
        with tempfile.TemporaryDirectory() as d:
            r = simulated_arena_run(
                Path(d), n_models=30, n_annotators=100, n_votes=args.votes, threads=8, seed=seed
            )
        diffs.append(r["tau_am_elo"] - r["tau_m_elo_all_votes"])
        flagged.append(f"{r['flippers_flagged']}/{r['flippers']}")
        honest.append(r["honest_flagged"])
        print(
            f"seed {seed}: tau am-ELO {r['tau_am_elo']:.4f}, m-ELO all votes "
            f"{r['tau_m_elo_all_votes']:.4f}; flippers flagged {flagged[-1]}, honest flagged "
            f"{honest[-1]}; weighing 0 or flagged: flippers {r['flippers_silenced']}, honest "
            f"{r['honest_silenced']}; {r['votes']} votes in {r['seconds']:.0f} s",
            flush=True,
        )
    if diffs:
        summary("service (pairs chosen by the arena)", diffs)
        print(f"flippers flagged per seed: {', '.join(flagged)}; honest flagged: {sum(honest)}")
    if args.offline:
        summary("in process (uniformly random pairs)", offline(args.offline, args.votes))


if __name__ == "__main__":
    main()
