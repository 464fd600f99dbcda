"""Arena-Hard-Auto's boards: ours against its own ``show_result.py`` on the same files.

A simulated benchmark of known truth (``stablearena.judging.arena_hard.simulate_run``: a judge that
likes long answers) is written in Arena-Hard-Auto's layout; our plain and style-controlled
boards are computed, and, when a checkout of Arena-Hard-Auto and a Python that can run it
(torch, pandas, tqdm) are given, its ``show_result.py`` is run on the same files (plain, and
``-f length markdown``) and the two tables printed side by side with the benchmark metrics of
each against the truth; then v2.0's creative_writing with its baseline judged against itself
(its table prints the baseline twice; ours gives the measured row beside the board's 50).
Without them the script prints ours only and says so.

    python bench/bench_arena_hard.py --repo ARENA_HARD_CHECKOUT --python VENV/bin/python

Nothing of Arena-Hard-Auto is kept in this repository: the checkout and its environment are
the user's.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from stablearena.judging.arena_hard import (
    BaselineBoard,
    baseline_board,
    board_metrics,
    read_run,
    simulate_run,
    write_run,
)
from stablearena.raters.base import ELO_SCALE

RATINGS = [1000, 1100, 1050, 950, 1200, 1000, 900, 1150]
LENGTHS = [500, 500, 1500, 500, 300, 900, 500, 500]
#: show_result.py takes the baseline from its own settings: category hard_prompt's baseline.
BASELINE = "o3-mini-2025-01-31"
BENCH = "arena-hard-v2.0"
JUDGE = "sim-judge"

_ROW = re.compile(r"^\s*\d+\s+(\S+)\s+(-?[\d.]+)\s+\(-(-?[\d.]+) / \+(-?[\d.]+)\)\s*$")


def their_rows(
    python: str, repo: Path, data: Path, style: bool, category: str = "hard_prompt"
) -> list[tuple[str, float, float, float]]:
    """Run show_result.py in a scratch copy (it reads data/<bench> under its working directory)
    and parse its table: (model, score, lower, upper) in percent, a row a line as printed."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copy(repo / "show_result.py", work)
        shutil.copytree(repo / "utils", work / "utils")
        shutil.copytree(data, work / "data" / BENCH)
        cmd = [python, "show_result.py", "-b", BENCH, "-j", JUDGE, "-c", category]
        if style:
            cmd += ["-f", "length", "markdown"]
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise SystemExit(f"show_result.py failed:\n{done.stderr[-2000:]}")
    out = []
    for line in done.stdout.splitlines():
        m = _ROW.match(line)
        if m:
            s, lo, hi = (float(x) for x in m.groups()[1:])
            out.append((m.group(1), s, s - lo, s + hi))
    return out


def their_board(
    python: str, repo: Path, data: Path, style: bool
) -> dict[str, tuple[float, float, float]]:
    """show_result.py's table of category hard_prompt: model → (score, lower, upper)."""
    return {m: (s, lo, hi) for m, s, lo, hi in their_rows(python, repo, data, style)}


def self_judged(args: argparse.Namespace) -> None:
    """v2.0's creative_writing with its baseline among the models judged: the baseline's
    games against itself. show_result.py prints the baseline twice (its measured row, then
    50); ours puts it at 50 on the board and gives the measured row beside it."""
    from dataclasses import replace

    from stablearena.judging.arena_hard import CATEGORIES, self_judged_row

    base = CATEGORIES["creative_writing"].baseline
    names = [base] + [f"model_{k}" for k in range(1, 4)]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / BENCH
        run = simulate_run(RATINGS[:4], args.questions, judge=JUDGE, names=names,
                           category="creative_writing", seed=args.seed)  # fmt: skip
        twin = simulate_run([1000, 1000], args.questions, judge=JUDGE, names=[base, "twin"],
                            category="creative_writing", seed=args.seed + 1)  # fmt: skip
        own = [
            replace(j, model=base, record={**j.record, "model": base})
            for j in twin.judgments[JUDGE]
        ]
        run.judgments[JUDGE] = run.judgments[JUDGE] + own
        write_run(run, data)
        back = read_run(data)
        battles, _ = back.battles(category="creative_writing", style=False)
        ours = baseline_board(battles, base, seed=0)
        row = self_judged_row(back.chosen(category="creative_writing"))
        print(f"\n== creative_writing, {base} judged against itself ({len(own)} judgments) ==")
        for r in ours.records():
            print(f"ours  {r['model']:<24}{r['score']:6.1f} ({r['lower']:5.1f}, {r['upper']:5.1f})")
        assert row is not None
        print(f"ours  {row['model']:<24}{row['score']:6.1f} ({row['lower']:5.1f}, "
              f"{row['upper']:5.1f})  (measured, self_judged_row)")  # fmt: skip
        if args.repo and args.python:
            for m, s, lo, hi in their_rows(args.python, args.repo, data, False, "creative_writing"):
                print(f"theirs {m:<23}{s:6.1f} ({lo:5.1f}, {hi:5.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repo", type=Path, help="a checkout of lmarena/arena-hard-auto")
    ap.add_argument("--python", default=None, help="a Python with torch, pandas and tqdm")
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--length-bias", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    names = [BASELINE] + [f"model_{k}" for k in range(1, len(RATINGS))]
    truth = {
        n: (1 / (1 + np.exp(-ELO_SCALE * (r - RATINGS[0]))),) * 3
        for n, r in zip(names, RATINGS, strict=True)
    }
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / BENCH
        run = simulate_run(
            RATINGS,
            args.questions,
            lengths=LENGTHS,
            length_bias=args.length_bias,
            judge=JUDGE,
            names=names,
            category="hard_prompt",
            seed=args.seed,
        )
        write_run(run, data)
        battles, _ = read_run(data).battles()
        theirs_cache: dict[bool, dict] = {}
        for style, convention in ((False, "ours"), (True, "ours"), (True, "arena-hard")):
            t0 = time.perf_counter()
            ours: BaselineBoard = baseline_board(
                battles, BASELINE, style=style, convention=convention, seed=0
            )
            dt = time.perf_counter() - t0
            label = f"style-controlled, convention {convention}" if style else "plain"
            print(f"\n== {label} board ({len(battles)} games, ours {dt:.2f} s) ==")
            theirs = None
            if args.repo and args.python:
                if style not in theirs_cache:
                    t0 = time.perf_counter()
                    theirs_cache[style] = their_board(args.python, args.repo, data, style)
                    print(f"show_result.py: {time.perf_counter() - t0:.1f} s")
                theirs = theirs_cache[style]
            print(f"{'model':<22}{'truth':>7}  {'ours (90% interval)':>22}  {'show_result.py':>22}")
            for row in ours.records():
                m = row["model"]
                t = theirs.get(m) if theirs else None
                other = f"{t[0]:6.1f} ({t[1]:5.1f}, {t[2]:5.1f})" if t else "-"
                print(
                    f"{m:<22}{truth[m][0] * 100:7.1f}  {row['score']:6.1f} ({row['lower']:5.1f}, "
                    f"{row['upper']:5.1f})  {other:>22}"
                )
            met = board_metrics(ours, truth)
            print(
                "ours vs truth:", {k: round(v, 3) for k, v in met.items() if isinstance(v, float)}
            )
            if theirs:
                common = [m for m in ours.models if m in theirs]
                diff = [abs(theirs[m][0] - 100 * ours.score[ours.models.index(m)]) for m in common]
                print(
                    f"|ours - show_result.py| score: max {max(diff):.2f}, mean {np.mean(diff):.2f} points"
                )
    self_judged(args)
    if not (args.repo and args.python):
        print(
            "\n(no --repo/--python: Arena-Hard-Auto's own show_result.py not run)", file=sys.stderr
        )


if __name__ == "__main__":
    main()
