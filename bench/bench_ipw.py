"""Interval coverage under the live arena's adaptive design: unweighted, inverse-propensity
weights read as frequencies, and the sampling-weight sandwich (docs/guides/intervals.md).

Each arena: ``--models`` true ratings (normal, sd ``--spread`` Elo), ``--battles`` battles served
by the live arena's rule (stablearena.design.serving_draw.simulate_served: the ``--strategy`` pick with
probability 1 − ``--exploration``, else a uniform pair; m-ELO refitted every ``--refit-every``
battles and the tracker refreshed), each vote from the Bradley–Terry truth. Prints, for every
analysis of stablearena.simulation.experiments.ipw.IPW_VARIANTS, the coverage of the nominal 95%
intervals of the differences R_i − R_j and of the ratings (mean-1000 normalisation) ± its
standard error over arenas, the mean interval widths, their ratio to the sampling sandwich's,
and the RMSE of the differences — with the machine's load average before and after.

One process, one BLAS thread: the design is sequential and each arena small (200 arenas of
1,000 battles: about a minute on an idle core; the run prints its progress on stderr).

    nice -n 5 python bench/bench_ipw.py                        # 200 arenas, a-opt, ε = 0.1
    nice -n 5 python bench/bench_ipw.py --exploration 0.3 --arenas 50 --json out.json
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arenas", type=int, default=200, help="simulated arenas (seeds)")
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--battles", type=int, default=1000, help="battles per arena")
    parser.add_argument("--strategy", default="a-opt", help="the arena's pair selector")
    parser.add_argument("--exploration", type=float, default=0.1, help="the exploration floor ε")
    parser.add_argument("--refit-every", type=int, default=50)
    parser.add_argument("--spread", type=float, default=200.0, help="sd of the true ratings")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="FILE", help="also write the summary as JSON")
    args = parser.parse_args(argv)

    from stablearena.simulation.experiments.ipw import IpwCoverageConfig, run_ipw_coverage

    config = IpwCoverageConfig(
        arenas=args.arenas,
        n_models=args.models,
        n_battles=args.battles,
        strategy=args.strategy,
        exploration=args.exploration,
        refit_every=args.refit_every,
        spread=args.spread,
        seed=args.seed,
    )
    load_before = os.getloadavg()
    summary = run_ipw_coverage(config, progress=sys.stderr.isatty())
    load_after = os.getloadavg()
    summary["load_before"], summary["load_after"] = load_before, load_after
    ref = summary["variants"]["ipw sampling sandwich"]["difference_width"]
    print(
        f"{config.arenas} arenas × {config.n_models} models × {config.n_battles} battles, "
        f"strategy {config.strategy}, ε = {config.exploration}, refit every "
        f"{config.refit_every}; effective battles of the weights (Σw)²/Σw² = "
        f"{summary['effective_battles']:.0f}; explored {summary['explored']:.1%}; "
        f"{summary['arenas_with_prior']} arenas needed the existence prior"
    )
    head = (
        f"{'analysis':<28} {'differences':>16} {'ratings':>16} {'width (diff.)':>14} "
        f"{'÷ sampling':>10} {'RMSE (diff.)':>12}"
    )
    print(head)
    for name, v in summary["variants"].items():
        print(
            f"{name:<28} {v['differences']:.3f} ± {v['differences_se']:.3f}    "
            f"{v['ratings']:.3f} ± {v['ratings_se']:.3f}    {v['difference_width']:>10.1f}    "
            f"{v['difference_width'] / ref:>10.3f} {v['difference_rmse']:>12.1f}"
        )
    print(
        f"{summary['seconds']:.0f} s; load average before {load_before[0]:.2f}, after "
        f"{load_after[0]:.2f} (1 min), {os.cpu_count()} CPUs"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
