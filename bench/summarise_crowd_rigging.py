"""Summarise bench/run_crowd_rigging.sh: per cell (crowd, lane) and family × target, the crowd
rule's cost over m-ELO's at +1/+3/+10 places (the median over seeds of the paired ratio, warm-up
included; '≥' where some seeds hit the budget), the accounts and account-days it needed at +3,
and whether any fit failed to converge or the board's scale left 10 % of the honest board's.

    python bench/summarise_crowd_rigging.py [runs/crowd_rigging] [--markdown]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/crowd_rigging")
    medians: list[float] = []
    below = []
    checks = {"fits": 0, "unconverged": 0, "scale": 0.0}
    for f in sorted(root.glob("*.json")):
        d = json.loads(f.read_text())
        print(f"## {f.stem}  (seeds {len(d['seeds'])})")
        for r in d["summary"]:
            if r["defence"] != "crowd":
                continue
            cells = []
            for lv in (1, 3, 10):
                med = r.get(f"ratio_{lv}_median")
                cen = "≥" if r.get(f"censored_{lv}") else ""
                cells.append("—" if med is None else f"{cen}{med:.2f}")
                if med is not None:
                    medians.append(med)
                    if med < 1:
                        below.append((f.stem, r["family"], r["target"], lv, med))
            runs = [
                x
                for x in d["runs"]
                if x["defence"] == "crowd"
                and x["family"] == r["family"]
                and x["target"] == r["target"]
            ]
            got = [x["accounts_3"] for x in runs if x.get("accounts_3")]
            acc = float(np.mean(got)) if got else None
            days = r.get("account_days_3")
            checks["fits"] += sum(x.get("rule_fits", 0) for x in runs)
            checks["unconverged"] += sum(x.get("rule_unconverged", 0) for x in runs)
            checks["scale"] = max([checks["scale"], *(x.get("rule_scale_dev", 0.0) for x in runs)])
            for lv in (1, 3, 10):
                got_s = [x[f"rule_scale_dev_{lv}"] for x in runs if x.get(f"rule_scale_dev_{lv}")]
                checks[f"at{lv}"] = max([checks.get(f"at{lv}", 0.0), *got_s])
            print(
                f"{r['family']:<18} {r['target']:<7} ×m-ELO +1/+3/+10: {' / '.join(cells):<22}"
                f" accounts@+3 {'—' if acc is None else f'{acc:.1f}'}"
                f"  account-days@+3 {'—' if days is None else f'{days:.0f}'}"
            )
    if medians:
        m = np.array(medians)
        print(
            f"\nall cells: median of the medians ×{np.median(m):.2f}; "
            f"≥ 3× in {np.mean(m >= 3):.0%}, ≥ 1× in {np.mean(m >= 1):.0%} of {len(m)}"
        )
    for b in below:
        print("below 1×:", *b)
    print(
        f"board rule fits: {checks['fits']}, unconverged {checks['unconverged']}; the largest "
        f"change of the board's spread (over m-ELO's on the same votes) from the honest arena's: {checks['scale']:.1%} over "
        "every attack size tried (up to the budget); at the cost of +1/+3/+10: "
        + " / ".join(f"{checks.get(f'at{lv}', 0.0):.1%}" for lv in (1, 3, 10))
    )


def markdown(root: Path) -> str:
    """One row per (crowd, lane): the crowd rule's cost over m-ELO's (median over the cells of
    the per-cell median ratio; the smallest cell), the share of cells at ≥ 3× and ≥ 1×, the
    attacker's accounts and account-days at +3 (mean over cells), and the board rule's spread
    change over m-ELO's at the +10 cost (median, largest)."""
    rows = [
        "| crowd | attack | ×m-ELO +1 / +3 / +10 (median; smallest) | cells ≥ 3× | cells ≥ 1× "
        "| accounts, account-days at +3 | spread change at +10 (median; largest) |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in sorted(root.glob("*.json")):
        d = json.loads(f.read_text())
        crowd, lane = f.stem.split("-", 1)
        cells = [r for r in d["summary"] if r["defence"] == "crowd"]
        runs = [x for x in d["runs"] if x["defence"] == "crowd"]
        per = []
        allm = []
        for lv in (1, 3, 10):
            m = [r[f"ratio_{lv}_median"] for r in cells if r.get(f"ratio_{lv}_median") is not None]
            allm += m
            per.append(f"{np.median(m):.2f}; {min(m):.2f}" if m else "—")
        acc = [x["accounts_3"] for x in runs if x.get("accounts_3")]
        days = [x["account_days_3"] for x in runs if x.get("account_days_3")]
        dev = [x["rule_scale_dev_10"] for x in runs if x.get("rule_scale_dev_10") is not None]
        a = np.array(allm)
        rows.append(
            f"| {crowd} | {lane} | {' / '.join(per)} | {np.mean(a >= 3):.0%} | {np.mean(a >= 1):.0%} "
            f"| {np.mean(acc):.1f}, {np.mean(days):.0f} | "
            + (f"{np.median(dev):.1%}; {max(dev):.1%} |" if dev else "— |")
        )
    return "\n".join(rows)


if __name__ == "__main__":
    if "--markdown" in sys.argv:
        sys.argv.remove("--markdown")
        print(markdown(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/crowd_rigging")))
    else:
        main()
