"""Honest accuracy of the trust rules on held-out battles (docs/guides/rigging.md, "Sleepers").

No attacker. Per arena and seed every vote is put in half A or half B at random (each count row's
wins, losses and ties split binomially; ``--split accounts``: every account with all its votes,
so that accounts keep their volumes); each rule is fitted on A and judged on B: Kendall τ of
its scores to m-ELO fitted on B (``[heldout]``; on the simulated arena also to the truth,
m-ELO on the full real counts: ``[truth]``) (am-ELO's scores live on a scale set by its abilities, so a
log-loss of B under them would compare scales, not orders). Printed per rule: τ (mean ± SE over
seeds) and the difference to m-ELO paired by seed
(:func:`stablearena.analysis.metrics.paired_difference`).

Rules: ``m-elo``; ``old`` — the default before sleepers (``am-elo+screen+influence+bounded``, cap
2, ramp 100 votes, age ramp 7 days on days since creation, no record rule, δ = 50); ``new δ=D`` —
the new default (day ramp 7 on *active* days, weight ≤ 1 before 30 active days) with am-ELO's
min_records δ = D (below δ votes an account is left out of the fit; from δ on, the vote ramp
weighs it n/100).

``crowd (default)``: the default rule since the crowd rule (:mod:`stablearena.crowd.rule`), as
``stablearena serve`` publishes it (``--model-votes``: also other per-model limits).

Arenas: ``llmfao`` — the bundled LLMFAO log (no timestamps: ages uniform on [0, 365] days and
active days drawn as in the simulator, :func:`stablearena.simulation.attacks.honest_active_days`, from the
annotators' real volumes); ``cba`` — the rigging experiment's honest arenas (Chatbot Arena 2024
counts at ``--fraction``, annotators of 20–200 votes, with their simulated ages and active days).

    python bench/bench_heldout.py [--seeds 10] [--arenas llmfao,cba] [--fraction 0.02]
        [--deltas 50,20,10] [--parts] [--split votes|accounts] [--record-days 30]
        [--young-shares 0.2,0.1] [--ramp-days 7] [--model-votes 5,20]

    python bench/bench_heldout.py --split accounts --arenas llmfao,casual,public,regulars --deltas 50
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np


def _safe(A, defence, counts, fits):
    """The rule's scores, or NaN for every model where it gives no board (the am-ELO rule on
    a crowd without an account of δ votes: TooFewRecords)."""
    from stablearena.errors import StableArenaError

    try:
        return A.defence_scores(defence, counts, fits, key=0)[0]
    except StableArenaError:
        return np.full(counts.n_models, np.nan)


def split_accounts(counts, rng):
    """(A, B): every account of ``counts`` put in one half with probability ½, with all its
    votes (its volume kept: a vote split halves every account's, and so moves accounts below
    δ that the arena has above it)."""
    side = rng.random(len(counts.annotators)) < 0.5
    rows = side[counts.annotator]
    return counts.take(rows), counts.take(~rows)


def split_counts(counts, rng):
    """(A, B): every vote of ``counts`` put in one half with probability ½."""
    from dataclasses import replace

    cols = {}
    for name in ("wins", "losses", "ties", "ties_both_bad"):
        v = np.round(np.asarray(getattr(counts, name), float)).astype(np.int64)
        a = rng.binomial(v, 0.5)
        cols[name] = (a.astype(float), (v - a).astype(float))
    half_a = replace(counts, **{k: v[0] for k, v in cols.items()})
    half_b = replace(counts, **{k: v[1] for k, v in cols.items()})
    return half_a, half_b


def arena(which: str, seed: int, fraction: float):
    """(counts by annotator, ages, active days, true scores or None) of arena ``which``."""
    from stablearena.data import datasets
    from stablearena.simulation import attacks as A

    if which == "llmfao":
        counts = datasets.load("llmfao").counts(by_annotator=True)
        names = counts.annotators
        vols = np.bincount(counts.annotator, counts.totals, len(names))
        ages = np.random.default_rng((seed, 1)).uniform(0, A.HONEST_MAX_AGE_DAYS, len(names))
        active = A.honest_active_days(vols, ages, np.random.default_rng((seed, 2)))
        truth = None
    else:
        crowd = (
            None if which == "cba" else which
        )  # a crowd model of stablearena.simulation.attacks.CROWDS
        ar = A.honest_arena(
            datasets.load("chatbot-arena-2024"), fraction=fraction, seed=seed, crowd=crowd
        )
        counts, names, ages, active = ar.counts, ar.counts.annotators, ar.ages, ar.active_days
        truth = ar.truth
    return (
        counts,
        dict(zip(names, map(float, ages), strict=True)),
        dict(zip(names, map(float, active), strict=True)),
        truth,
    )


def main() -> None:
    from stablearena.analysis.metrics import kendall_tau, paired_difference
    from stablearena.simulation import attacks as A

    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--arenas", default="llmfao,cba")
    ap.add_argument("--fraction", type=float, default=0.02)
    ap.add_argument("--deltas", default="50,20,10")
    ap.add_argument("--record-days", type=float, default=30.0, help="the new rule's record")
    ap.add_argument("--split", choices=("votes", "accounts"), default="votes")
    ap.add_argument(
        "--ramp-days",
        type=float,
        default=A.BOUNDED_RAMP_DAYS,
        help="the day ramp of the rules (default: the arena's)",
    )
    ap.add_argument(
        "--young-shares",
        default="",
        help="also the new rule at δ 50 with these young-share caps (e.g. 0.2,0.1)",
    )
    ap.add_argument("--parts", action="store_true", help="also the new rule's parts at δ 10")
    ap.add_argument(
        "--model-votes",
        default="",
        help="also the crowd rule with these per-model limits (e.g. 5,20; the default's is shown)",
    )
    args = ap.parse_args()
    deltas = [int(x) for x in args.deltas.split(",") if x]
    limits = [float(x) for x in args.model_votes.split(",") if x]
    shares = [float(x) for x in args.young_shares.split(",") if x]
    d = "am-elo+screen+influence+bounded"
    rec = args.record_days
    # the parts of the new rule one by one (δ 10): no day ramp, no vote ramp, neither
    parts = {
        "new δ=10, no day ramp": {"ramp_days": 0.0},
        "new δ=10, no vote ramp": {"ramp_votes": 0.0},
        "new δ=10, no ramps": {"ramp_days": 0.0, "ramp_votes": 0.0},
        "new δ=10, no ramps, no record": {"ramp_days": 0.0, "ramp_votes": 0.0, "record_days": 0},
    }
    for which in args.arenas.split(","):
        res: dict[str, dict[str, list[float]]] = {}
        t0 = time.perf_counter()
        for seed in range(args.seeds):
            counts, ages, active, truth = arena(which, seed, args.fraction)
            split = split_accounts if args.split == "accounts" else split_counts
            half_a, half_b = split(counts, np.random.default_rng((seed, 3)))
            refs = {"heldout": A.m_elo_scores(half_b)}
            if truth is not None:
                refs["truth"] = truth
            scores = {"m-elo": A.m_elo_scores(half_a)}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # the default rule (the crowd rule, stablearena.crowd.rule) as serve publishes it
                fits = A._Fits()
                fits.active_days = active
                scores["crowd (default)"] = A.defence_scores("crowd", half_a, fits)[0]
                for lim in limits:
                    fits.model_votes = lim
                    scores[f"crowd, model votes {lim:g}"] = A.defence_scores("crowd", half_a, fits)[
                        0
                    ]
                for delta in deltas:
                    fits = A._Fits(min_records=delta, ramp_days=args.ramp_days)
                    if delta == 50:
                        fits.ages, fits.active_days, fits.record_days = ages, None, 0.0
                        scores["old"] = _safe(A, d, half_a, fits)
                    fits.ages, fits.active_days, fits.record_days = None, active, rec
                    scores[f"new δ={delta}"] = _safe(A, d, half_a, fits)
                    for ys in shares if delta == 50 else ():
                        fits.young_share = ys
                        scores[f"new δ=50, young share {ys:g}"] = A.defence_scores(
                            d, half_a, fits, key=0
                        )[0]
                        fits.young_share = 0.0
                    if delta != 10 or not args.parts:
                        continue
                    for name, change in parts.items():
                        for k, v in change.items():
                            setattr(fits, k, v)
                        scores[name] = _safe(A, d, half_a, fits)
                        fits.ramp_days, fits.ramp_votes = args.ramp_days, A.BOUNDED_RAMP_VOTES
                        fits.record_days = rec
            for rule, x in scores.items():
                for ref_name, ref in refs.items():
                    ok = np.isfinite(x) & np.isfinite(ref)
                    tau = kendall_tau(x[ok], ref[ok]) if ok.sum() > 2 else math.nan
                    res.setdefault(f"{rule} [{ref_name}]", {"tau": []})["tau"].append(tau)
            print(
                which,
                seed,
                {k: round(v["tau"][-1], 4) for k, v in res.items()},
                f"{time.perf_counter() - t0:.0f} s",
                flush=True,
            )
        for rule, r in res.items():
            base = res[f"m-elo [{rule.rsplit('[', 1)[1]}"]
            tau = np.array(r["tau"])
            pt = paired_difference(tau - np.array(base["tau"]))
            se = tau.std(ddof=1) / math.sqrt(len(tau)) if len(tau) > 1 else 0.0
            print(
                f"{which} {rule}: tau {tau.mean():.4f} ± {se:.4f} "
                f"(− m-ELO {pt['mean_diff']:+.4f} ± {pt['se']:.4f}, paired)",
                flush=True,
            )


if __name__ == "__main__":
    main()
