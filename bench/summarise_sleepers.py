"""The guide's sleeper tables from the runs of bench/run_sleepers.sh (docs/guides/rigging.md,
"Sleepers", "Young accounts"): one markdown row per run (its ``--output`` JSON), the bounded defence against
m-ELO — votes (warm-up included) mean ± SE and median, censored seeds, the per-seed ratio to
m-ELO's votes mean ± SE and median, and the account-days (active days of the accounts used).

    python bench/summarise_sleepers.py [DIR]   (default runs/sleepers)
"""

from __future__ import annotations

import glob
import json
import os
import sys

from stablearena.choices import TRUST_RAMP_DAYS


def fmt(v, se=None, cens=0):
    if v is None:
        return "—"
    text = f"{v:,.0f}" + (f" ± {se:,.0f}" if se is not None else "")
    return ("≥ " if cens else "") + text


def main() -> None:
    root = sys.argv[1] if len(sys.argv) > 1 else "runs/sleepers"
    print(
        "| rule | target | family | age | warm-up | n | m-ELO votes +1 / +3 / +10 (median) | "
        "votes +1 / +3 / +10 (median; censored) | ×m-ELO mean ± SE (median) +1 / +3 / +10 | "
        "account-days +10 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")

    def order(f):  # by target, family, then the rule
        p = json.load(open(f))
        r = p["summary"][0]
        return ({"top": 0, "middle": 1, "bottom": 2}[r["target"]], r["family"], f)

    for f in sorted(glob.glob(f"{root}/*.json"), key=order):
        p = json.load(open(f))
        bases = {(r["family"], r["target"]): r for r in p["summary"] if r["defence"] == "m-elo"}
        rule = "old" if p.get("days") == "age" else "new"
        if rule == "new":
            extra = [
                f"record {p['record_days']:g} d",
                f"δ {p['min_records']}" if p.get("min_records", 50) != 50 else "",
                "no vote ramp" if p.get("ramp_votes") == 0 else "",
            ]
            rule = ", ".join(["new", *[e for e in extra if e]])
            share = p.get("young_share")
            young_out = os.path.basename(f).startswith("new-yo-")  # run after young-out
            if share and not young_out:
                rule += f", young share {share:g} only"
            if rule == "new, record 365 d":
                rule = "new, record 365 d (before young accounts left the ability fit)"
            if young_out and rule.startswith("new, record 365 d"):
                rule = "**new default** (young out, share " + f"{share:g})"
                if p.get("precision", 1.5) != 1.5:
                    rule += f", costs to {p['precision']:g}"
        if p.get("ramp_days") is not None and p["ramp_days"] != TRUST_RAMP_DAYS:
            rule += f", day ramp {p['ramp_days']:g}"
        budgets = {r.get("max_votes") for r in p.get("runs", ())}
        if budgets and min(budgets) > 10_000:  # a larger budget than 25 % of the honest votes
            rule += f", budget {min(budgets):,}"
        mode = p.get("warmup_mode", "board") if p.get("warmup") else ""
        for r in p["summary"]:
            if r["defence"] == "m-elo":
                continue
            base = bases[(r["family"], r["target"])]
            levels = (1, 3, 10)
            melo = " / ".join(
                f"{fmt(base[f'votes_{L}'], None, base[f'censored_{L}'])} "
                f"({fmt(base[f'votes_{L}_median'])})"
                for L in levels
            )
            votes = " / ".join(
                f"{fmt(r[f'votes_{L}'], r[f'votes_{L}_se'], r[f'censored_{L}'])} "
                f"({fmt(r[f'votes_{L}_median'])}"
                + (f"; {r[f'censored_{L}']}" if r[f"censored_{L}"] else "")
                + ")"
                for L in levels
            )
            ratio = " / ".join(
                (
                    f"{'≥ ' if r[f'censored_{L}'] else ''}×{r[f'ratio_{L}']:.2f} ± "
                    f"{r[f'ratio_{L}_se']:.2f} ({r[f'ratio_{L}_median']:.2f})"
                )
                if r[f"ratio_{L}"] is not None
                else "—"
                for L in levels
            )
            ad = r.get("account_days_10")
            print(
                f"| {rule} | {r['target']} | {r['family']} | {p['attack_age']:g} d | "
                f"{p.get('warmup', 0)} {mode} | {r['seeds']} | {melo} | {votes} | {ratio} | "
                f"{'—' if ad is None else f'{ad:,.0f}'} |"
            )


if __name__ == "__main__":
    main()
