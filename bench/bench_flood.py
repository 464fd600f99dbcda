"""The weight-0 flood (issue 34): does the published board keep its scale and order?

An honest arena at the rigging guide's scale (:func:`stablearena.simulation.attacks.honest_arena` on the
Chatbot Arena 2024 counts, ``--fraction 0.016``: about 27,000 honest votes; honest accounts'
ages uniform on [0, 365] days) plus brand-new accounts — age 0, so weight 0 under the age ramp
— casting ``--share`` (25 %) of the honest volume in battles served at the arena's pair
frequencies, in accounts of normal volumes (log-uniform 50–200 votes, so δ = 50 admits them).
Their votes (``--kind``): ``reverse`` — the model with the lower true score wins every battle;
``bottom`` — the arena's last model wins whenever it is in the battle, an honest vote
(the pair's outcome frequencies) otherwise. ``--flood-age``: the flood accounts' age in days
(0: weight 0; a little more — an account minutes old — is a tiny weight); ``--policy``: the
Stable Arena policy of both rules (``warn``, the live default before issue 34, or ``exclude``).

For each seed and rule the board is fitted with and without the flood, with the live arena's
defaults (δ 50, ε 0, warn; cap 2, ramp 100 votes, 7 days): ``before`` is the rule the live
arena ran before issue 34 (the Stable Arena step with every account in the ability fit, then
bounded influence); ``after`` is :func:`stablearena.crowd.board_rule.arena_fit` (accounts of weight 0
left out of the ability fit; influence screening acts). Printed per seed: the flood board's
spread over the board's without it (scale ratio), whether the order of all models is the same,
the largest rating change (Elo), whether both fits converged, and what
:func:`stablearena.analysis.fitcheck.board_problems` says of the flood board against the one without.

    nice -n 10 python bench/bench_flood.py [--seeds 10] [--fraction 0.016] [--share 0.25]
        [--kind reverse] [--rules before,after]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

ELO = 400 / np.log(10)


def flood_counts(arena, share: float, kind: str, seed: int):
    """The flood's votes as pair × account counts (accounts ``z00000``…)."""
    from stablearena.data.battles import PairCounts
    from stablearena.simulation import attacks as A

    rng = np.random.default_rng((seed, 34))
    n = int(round(share * arena.n_votes))
    rows = rng.choice(len(arena.pair_i), size=n, p=arena.serve)
    i, j = arena.pair_i[rows], arena.pair_j[rows]
    t = arena.truth
    if kind == "bottom":
        bottom = int(np.argmin(t))
        cum_p = np.cumsum(arena.outcome_p[rows], axis=1)
        honest = (rng.random(n)[:, None] > cum_p).sum(axis=1).clip(0, 2)
        outcome = np.where(i == bottom, 0, np.where(j == bottom, 1, honest))
    else:
        outcome = np.where(t[i] < t[j], 0, 1)  # the lower model wins
    vols = A.log_uniform_volumes(n, 50, 200, rng)
    acc = np.repeat(np.arange(len(vols)), vols)[:n]
    names = tuple(f"z{k:05d}" for k in range(int(acc.max()) + 1))
    m = len(arena.pair_i)
    src = PairCounts(
        models=arena.models,
        i=arena.pair_i.astype(np.int32),
        j=arena.pair_j.astype(np.int32),
        wins=np.zeros(m),
        losses=np.zeros(m),
        ties=np.zeros(m),
        ties_both_bad=np.zeros(m),
    )
    return A._counts_from_votes(src, rows, outcome, acc, names)


def board(rule_name: str, counts, ages, policy: str):
    """(scores, converged) of the published board under ``rule_name``."""
    from stablearena.crowd.board_rule import ArenaRule, arena_fit
    from stablearena.crowd.screening import StableArena
    from stablearena.crowd.trust import bounded_fit

    rule = ArenaRule(policy=policy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if rule_name == "after":
            got = arena_fit(counts, rule, ages=ages)
            return np.asarray(got.fitted.scores), got.converged
        # the live rule before issue 34 (service/refit.py run_fit at f2fec26)
        arena = StableArena(
            min_records=rule.min_records,
            ability_threshold=rule.ability_threshold,
            policy=rule.policy,
            reconsider=True,
        )
        step = arena.step(counts)
        fitted = bounded_fit(step.fitted, **rule.trust(ages))
        conv = bool(step.fitted.convergence.converged) and bool(fitted.convergence.converged)
        return np.asarray(fitted.scores), conv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--fraction", type=float, default=0.016)
    ap.add_argument("--share", type=float, default=0.25)
    ap.add_argument("--kind", choices=("reverse", "bottom"), default="reverse")
    ap.add_argument("--rules", default="before,after")
    ap.add_argument("--flood-age", type=float, default=0.0, help="days")
    ap.add_argument("--policy", choices=("warn", "exclude"), default=None)
    args = ap.parse_args()

    from stablearena.analysis.fitcheck import board_problems
    from stablearena.data import datasets
    from stablearena.simulation import attacks as A

    source = datasets.load("chatbot-arena-2024")
    rules = args.rules.split(",")
    from stablearena.crowd.board_rule import ArenaRule

    policy = args.policy or ArenaRule().policy
    print(
        f"# flood {args.kind}, {args.share:.0%} of the honest volume, fraction {args.fraction}, "
        f"flood accounts {args.flood_age:g} days old, policy {policy}"
    )
    print("rule   seed  honest  flood  ratio   order  max|Δ|Elo  conv  board_problems")
    summary: dict[str, list] = {r: [] for r in rules}
    for seed in range(args.seeds):
        arena = A.honest_arena(source, fraction=args.fraction, seed=seed)
        flood = flood_counts(arena, args.share, args.kind, seed)
        both = A.merge_counts(arena.counts, flood)
        ages = A._honest_ages(arena) | {name: args.flood_age for name in flood.annotators}
        for rule in rules:
            t0 = time.perf_counter()
            x0, c0 = board(rule, arena.counts, ages, policy)
            x1, c1 = board(rule, both, ages, policy)
            ratio = float(np.std(x1) / np.std(x0))
            same = bool(np.array_equal(np.argsort(-x0), np.argsort(-x1)))
            moved = float(np.max(np.abs((x1 - x1.mean()) - (x0 - x0.mean()))) * ELO)
            names = arena.models
            problems = board_problems(
                dict(zip(names, x1.tolist(), strict=True)),
                converged=c1,
                previous=dict(zip(names, x0.tolist(), strict=True)),
                votes=int(round(both.n_comparisons)),
                previous_votes=arena.n_votes,
            )
            summary[rule].append((ratio, same, c0 and c1))
            print(
                f"{rule:6s} {seed:4d} {arena.n_votes:7,d} {int(flood.n_comparisons):6,d} "
                f"{ratio:6.3f}  {str(same):5s}  {moved:9.2f}  {str(c0 and c1):5s} "
                f"{'; '.join(problems) or '-'}  ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    for rule, rows in summary.items():
        r = np.array([x[0] for x in rows])
        print(
            f"# {rule}: scale within 10% in {int(np.sum(np.abs(r - 1) <= 0.10))}/{len(r)} seeds "
            f"(ratio {r.min():.3f}–{r.max():.3f}), order kept in "
            f"{sum(x[1] for x in rows)}/{len(rows)}, converged in {sum(x[2] for x in rows)}/"
            f"{len(rows)}"
        )


if __name__ == "__main__":
    main()
