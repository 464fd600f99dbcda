"""The automatic arena's measurement: judge calls to rank 8 demo models right, by design.

A local arena of the 8 demo models of known quality (error rates 0.02 … 0.86 on checkable
prompts; the true order is theirs) and the 5 demo judges (three honest, right with probability
0.9, 0.8, 0.7 per call; one that always prefers the first answer; one adversarial, the 0.9
judge's verdict inverted), on ``--prompts`` demo prompts. Each battle is judged by one judge
in both orders. Designs, each run per seed to ``--cap`` judge calls (or until its battles run
out):

(a) the information design, as shipped (``stablearena.judging.auto_arena``): the pair from
    ``stablearena.design.selection.DEFAULT_STRATEGY`` (or ``--info-design``) at the am-ELO fit
    refitted every batch, and the judge chosen by its estimated ability
    (``stablearena.judging.auto_arena.JudgeSteering``);
(b) round-robin: every pair on every prompt, the judge drawn per battle (a hash: every judge
    alike);
(c) Arena-Hard-Auto's design: every model against one baseline model (``--baseline``) on
    every prompt, the judge drawn per battle as in (b).

At every ``--step`` judge calls, Kendall τ between the ratings of the judgements so far and the
true order, by m-ELO (Bradley–Terry, every judgement alike; the issue's rater for all three
designs) and by am-ELO (each judge an annotator with its own ability). A seed's **calls to
τ ≥ 0.9** is the first checkpoint from which τ stays ≥ 0.9 up to the cap (a run that never gets
there counts as the cap and is reported as censored; an am-ELO fit that fails counts as below).
Paired by seed: the differences (b) − (a) and (c) − (a) under each rater, mean ± SE and seeds
won. The **truth-known bound**: the fewest judge calls whose best allocation over the pairs,
with the true outcome probabilities known, reaches an expected pairwise agreement of 0.95
(τ = 0.9 for a ranking without ties) in the normal approximation of the Bradley–Terry errors
(:class:`stablearena.simulation.experiments.selection.RankingAsymptotics`), and the same for battles
spread evenly over all pairs — once with every battle's judge drawn uniformly from the five
(the judges of (b) and (c)), once with every battle sent to the best judge (judge-keen, the
best that a design choosing judges can do). **Judge weighting**: per design, the calls saved by am-ELO against
m-ELO on the same judgements, and τ of both every ``--am-step`` calls, paired by seed.

The bulk runs in process (:class:`stablearena.judging.endpoints.demo.LocalDemoClient`: the demo
server's own reply function, no HTTP); ``--http-seeds K`` runs the first K seeds' design (a)
again through the real demo server over loopback HTTP and checks that the judgements are the
same.

    python bench/bench_auto.py [--seeds 10] [--prompts 600] [--cap 10000] [--step 100]
        [--am-step 2000] [--http-seeds 1] [--info-design rank-opt] [--json out.json]
    python bench/bench_auto.py --merge a.json b.json [same --prompts/--cap/--step/--am-step]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np


def truth_scores():
    from stablearena.judging.endpoints.demo import DEMO_MODELS

    return -np.array([m.error_rate for m in DEMO_MODELS])


def outcome_moments(judges: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Expected score e_ij of model i against j in one battle (judge drawn uniformly from
    ``judges``, default the five demo judges; both orders, disagreeing orders a tie) and its
    variance v_ij."""
    from stablearena.judging.endpoints.demo import DEMO_JUDGES, DEMO_MODELS

    judges = DEMO_JUDGES if judges is None else judges

    c = 1.0 - np.array([m.error_rate for m in DEMO_MODELS])
    m = len(c)
    e, v = np.zeros((m, m)), np.zeros((m, m))
    for i in range(m):
        for j in range(m):
            if i == j:
                continue
            right = {"x": c[i] * (1 - c[j]), "y": (1 - c[i]) * c[j]}
            right["tie"] = 1.0 - right["x"] - right["y"]
            px = pt = 0.0
            for judge in judges:
                if judge.kind == "first":
                    pt += 1.0 / len(judges)
                    continue
                q = judge.accuracy
                for r, pr in right.items():
                    # one order's verdict in battle terms: r with prob q, each other (1-q)/2
                    probs = {k: (q if k == r else (1 - q) / 2) for k in ("x", "y", "tie")}
                    if judge.kind == "inverted":
                        probs = {"x": probs["y"], "y": probs["x"], "tie": probs["tie"]}
                    wx, wy = probs["x"] ** 2, probs["y"] ** 2  # both orders agree
                    px += pr * wx / len(judges)
                    pt += pr * (1.0 - wx - wy) / len(judges)
            e[i, j] = px + 0.5 * pt
            v[i, j] = px + 0.25 * pt - e[i, j] ** 2
    return e, v


def asymptotics(judges: tuple | None = None):
    from stablearena.raters.bradley_terry import solve_bradley_terry
    from stablearena.simulation.experiments.selection import RankingAsymptotics

    e, v = outcome_moments(judges)
    m = e.shape[0]
    iu, ju = np.triu_indices(m, 1)
    sol = solve_bradley_terry(m, iu, ju, np.ones(len(iu)), e[iu, ju])
    x = sol.x - sol.x.mean()
    p = 1.0 / (1.0 + np.exp(-(x[:, None] - x[None, :])))
    return RankingAsymptotics(truth=truth_scores(), limit=x, sens=p * (1 - p), var=np.maximum(v, 0))


def arena(
    design: str | None,
    seed: int,
    n_prompts: int,
    cap: int,
    baseline: str,
    base_url: str | None = None,
):
    from stablearena.judging.auto_arena import AutoArena, AutoConfig, Prompt
    from stablearena.judging.endpoints import EndpointClient
    from stablearena.judging.endpoints.demo import DEMO_MODELS, LocalDemoClient, demo_prompts
    from stablearena.judging.endpoints.demo_server import demo_endpoints
    from stablearena.judging.judges import JudgeClient, demo_judges

    prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(n_prompts, seed)]
    if base_url is None:
        models = [LocalDemoClient(m.name, seed=seed) for m in DEMO_MODELS]
        judges = [
            JudgeClient(
                j, client=LocalDemoClient(j.name, seed=seed, system_prompt=j.endpoint.system_prompt)
            )
            for j in demo_judges("http://127.0.0.1:1/v1")
        ]
    else:
        model_cfg, judge_cfg = demo_endpoints(base_url)
        models = [EndpointClient(m) for m in model_cfg]
        judges = [JudgeClient(j) for j in judge_cfg]
    cfg = AutoConfig(budget=cap, design=design, baseline=baseline, seed=seed, parallel=16)
    return AutoArena(models, judges, prompts, cfg)


def bounds(asym, upper: int) -> tuple[float | None, float | None]:
    """Judge calls (two a battle) of the best allocation and of battles spread evenly over all
    pairs that reach an expected pairwise agreement of 0.95 (None: not within ``upper``)."""
    best = asym.least_battles(0.95, upper, tol=1e-4)
    lo, hi = 1.0, float(upper)
    if asym.uniform_pairwise(hi) < 0.95:
        return (None if best is None else 2 * best), None
    while hi - lo > 1e-4 * upper:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if asym.uniform_pairwise(mid) >= 0.95 else (mid, hi)
    return (None if best is None else 2 * best), 2 * hi


def tau_curve(result, steps: list[int], rater: str) -> tuple[list[float], int]:
    """τ at each step (judge calls) of the judgements so far; failed fits give NaN."""
    from stablearena.analysis.metrics import kendall_tau
    from stablearena.errors import StableArenaError
    from stablearena.raters.base import get_rater

    battles = result.battles()
    calls = np.cumsum([r["calls"] for r in result.judgements])
    ok = np.cumsum([r["outcome"] is not None for r in result.judgements])
    truth = truth_scores()
    out, failed = [], 0
    for s in steps:
        n = int(ok[np.searchsorted(calls, s, side="right") - 1]) if calls[0] <= s else 0
        sub = battles.take(np.arange(n))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fitted = get_rater(rater).fit(sub)
            out.append(kendall_tau(truth, np.asarray(fitted.scores)))
        except StableArenaError:
            out.append(float("nan"))
            failed += 1
    return out, failed


def calls_to(steps: list[int], curve: list[float], target: float = 0.9) -> tuple[float, bool]:
    """First step from which the curve stays >= target (NaN counts as below); censored at the
    last step when it never does."""
    c = np.nan_to_num(np.asarray(curve, dtype=float), nan=-1.0)
    below = np.flatnonzero(c < target - 1e-12)
    if len(below) == 0:
        return float(steps[0]), False
    k = int(below[-1]) + 1
    if k >= len(steps):
        return float(steps[-1]), True
    return float(steps[k]), False


def summary(label: str, diffs: list[float], digits: int = 0) -> str:
    from stablearena.analysis.metrics import paired_difference

    p = paired_difference(diffs)
    z = f", z {p['mean_diff'] / p['se']:+.1f}" if p["se"] > 0 else ""
    return (
        f"{label}: {p['mean_diff']:+.{digits}f} ± {p['se']:.{digits}f} (seeds won {p['won']}, "
        f"tied {p['tied']}, lost {p['lost']}{z})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first", type=int, default=0, help="first seed")
    ap.add_argument("--prompts", type=int, default=600)
    ap.add_argument("--cap", type=int, default=10000, help="judge calls per run at most")
    ap.add_argument("--step", type=int, default=100, help="judge calls between tau checkpoints")
    ap.add_argument("--am-step", type=int, default=2000, help="checkpoints of the tau table")
    ap.add_argument("--baseline", default="demo-fair", help="baseline model of design (c)")
    ap.add_argument("--http-seeds", type=int, default=1)
    ap.add_argument(
        "--info-design",
        default=None,
        help="selector of design (a) (default: selection.DEFAULT_STRATEGY)",
    )
    ap.add_argument("--json", default=None, help="write every figure to this file")
    ap.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="JSON",
        help="run nothing: summarise the seeds of these --json files (runs split over processes)",
    )
    args = ap.parse_args()
    from stablearena.analysis.metrics import paired_difference
    from stablearena.judging.endpoints.demo_server import DemoServer

    designs = {
        "information": args.info_design,
        "round-robin": "round-robin",
        "arena-hard": "baseline",
    }
    steps = list(range(args.step, args.cap + 1, args.step))
    am_steps = list(range(args.am_step, args.cap + 1, args.am_step))
    per_seed: list[dict] = []
    for seed in [] if args.merge else range(args.first, args.first + args.seeds):
        row: dict = {"seed": seed}
        for name, design in designs.items():
            t0 = time.perf_counter()
            res = arena(design, seed, args.prompts, args.cap, args.baseline).run()
            run_s = time.perf_counter() - t0
            last = int(sum(r["calls"] for r in res.judgements))
            use = [s for s in steps if s <= last] or [last]
            row[name] = {"calls": last, "seconds": run_s, "steps": use}
            calls_by_judge: dict[str, int] = {}
            for r in res.judgements:
                calls_by_judge[r["judge"]] = calls_by_judge.get(r["judge"], 0) + r["calls"]
            row[name]["judges"] = {k: v / max(last, 1) for k, v in calls_by_judge.items()}
            for rater in ("m-elo", "am-elo"):
                curve, failed = tau_curve(res, use, rater)
                n, censored = calls_to(use, curve)
                row[name][rater] = {
                    "calls_to_0.9": n,
                    "censored": censored,
                    "curve": curve,
                    "failed_fits": failed,
                }
            if name == "information":
                if seed - args.first < args.http_seeds:
                    with DemoServer(seed=seed) as server:
                        t0 = time.perf_counter()
                        over = arena(
                            design, seed, args.prompts, args.cap, args.baseline, server.base_url
                        ).run()
                        http_s = time.perf_counter() - t0

                    def key(r: dict) -> tuple:
                        return (r["judge"], r["x"], r["y"], r["prompt_id"], r["outcome"])

                    same = sorted(map(key, over.judgements)) == sorted(map(key, res.judgements))
                    row["http"] = {
                        "same_judgements": same,
                        "seconds": http_s,
                        "judgements": len(over.judgements),
                    }
        per_seed.append(row)
        print(
            f"seed {seed}: "
            + "; ".join(
                f"{k} "
                + ", ".join(
                    f"{r} {row[k][r]['calls_to_0.9']:.0f}{'+' if row[k][r]['censored'] else ''}"
                    for r in ("m-elo", "am-elo")
                )
                + f" ({row[k]['seconds']:.0f} s)"
                for k in designs
            )
            + (
                f"; over HTTP same judgements: {row['http']['same_judgements']} "
                f"({row['http']['seconds']:.0f} s)"
                if "http" in row
                else ""
            ),
            flush=True,
        )

    if args.merge:
        for path in args.merge:
            with open(path) as fh:
                per_seed += json.load(fh)["per_seed"]
        per_seed.sort(key=lambda r: r["seed"])
        same = [r["http"]["same_judgements"] for r in per_seed if "http" in r]
        print(f"seeds {[r['seed'] for r in per_seed]}; over HTTP same judgements: {same}")
    print(
        f"\n{len(per_seed)} seeds, {args.prompts} prompts, cap {args.cap} judge calls, "
        f"tau checkpoints every {args.step} calls"
    )
    out: dict = {"settings": vars(args), "per_seed": per_seed}
    for rater in ("m-elo", "am-elo"):
        print(f" ratings by {rater}:")
        out[rater] = {}
        for name in designs:
            v = np.array([r[name][rater]["calls_to_0.9"] for r in per_seed])
            cens = sum(r[name][rater]["censored"] for r in per_seed)
            fails = sum(r[name][rater]["failed_fits"] for r in per_seed)
            se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0
            print(
                f"  {name:12s} judge calls to tau >= 0.9: {v.mean():.0f} ± {se:.0f} "
                f"(censored at the cap or its last battle: {cens}; failed fits: {fails})"
            )
            out[rater][name] = {
                "mean": float(v.mean()),
                "se": float(se),
                "censored": int(cens),
                "failed_fits": int(fails),
            }
        for other in ("round-robin", "arena-hard"):
            d = [
                r[other][rater]["calls_to_0.9"] - r["information"][rater]["calls_to_0.9"]
                for r in per_seed
            ]
            print("  " + summary(f"saving of the information design against {other} (calls)", d))
            out[rater][f"saving_vs_{other}"] = paired_difference(d)
    print(" judge weighting, am-ELO against m-ELO on the same judgements:")
    for name in designs:
        d = [r[name]["m-elo"]["calls_to_0.9"] - r[name]["am-elo"]["calls_to_0.9"] for r in per_seed]
        print("  " + summary(f"{name}: calls saved by am-ELO", d))
        out[f"am_elo_saving_{name}"] = paired_difference(d)
    from stablearena.judging.endpoints.demo import DEMO_JUDGES

    keen = max(DEMO_JUDGES, key=lambda j: (j.kind == "honest", j.accuracy))
    out["bound"] = {}
    for label, judges in (("every judge alike", None), (f"all to {keen.name}", (keen,))):
        best, even = bounds(asymptotics(judges), 4 * args.cap)
        print(
            f"  truth-known bound, battles judged by {label} (expected pairwise 0.95 = tau 0.9, "
            "Bradley-Terry, normal approx.): "
            + (f"best allocation {best:.0f} judge calls" if best else "not reached")
            + (f"; even allocation over all pairs {even:.0f}" if even else "")
        )
        out["bound"][label] = {"best_calls": best, "even_calls": even}
    shares = {
        j.name: float(
            np.mean([r["information"].get("judges", {}).get(j.name, 0) for r in per_seed])
        )
        for j in DEMO_JUDGES
    }
    print(
        "  judge calls of design (a) by judge, mean share over seeds: "
        + ", ".join(f"{k} {v:.1%}" for k, v in shares.items())
    )
    out["information_judge_shares"] = shares
    for s in am_steps:
        for name in designs:
            k = per_seed[0][name]["steps"].index(s) if s in per_seed[0][name]["steps"] else None
            if k is None or any(s not in r[name]["steps"] for r in per_seed):
                continue
            am = np.array([r[name]["am-elo"]["curve"][k] for r in per_seed])
            me = np.array([r[name]["m-elo"]["curve"][k] for r in per_seed])
            good = ~np.isnan(am)
            line = f"  {s:5d} calls, {name:12s}: m-ELO tau {me.mean():.3f}"
            if good.sum():
                line += f", am-ELO {np.nanmean(am):.3f}; " + summary(
                    "am-ELO − m-ELO", list(am[good] - me[good]), 3
                )
            if (~good).sum():
                line += f"; am-ELO failed on {int((~good).sum())} seed(s)"
            print(line)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
