"""``stablearena arena-hard``: an Arena-Hard-Auto run's score tables and benchmark metrics."""

from pathlib import Path
from typing import Annotated, Any

import typer

from .common import app, console, count_option, emit, err_console, records_table, seed_option


@app.command("arena-hard")
def arena_hard(
    directory: Annotated[
        Path,
        typer.Argument(
            help="Arena-Hard-Auto's data/<bench_name> directory (question.jsonl, "
            "model_answer/, model_judgment/<judge>/), or one written by `auto --arena-hard-dir`.",
            show_default=False,
        ),
    ],
    judge: Annotated[
        list[str] | None,
        typer.Option(
            "--judge",
            "-j",
            help="Judges to use (the judge named in the judgments, model_judgment/JUDGE/); default all.",
            metavar="JUDGE",
        ),
    ] = None,
    category: Annotated[
        str | None,
        typer.Option(
            "--category",
            "-c",
            help="Only this category's judgments (v2: hard_prompt, creative_writing, … each "
            "with its baseline).",
            metavar="CATEGORY",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="The baseline model (needed for v0.1 judgments only)."),
    ] = None,
    weight: Annotated[
        int, count_option("--weight", "Games a strong verdict (>>) counts for.", 1, 100, None)
    ] = 3,
    rounds: Annotated[int, count_option("--rounds", "Bootstrap rounds.", 2, 100_000, None)] = 100,
    reference: Annotated[
        Path | None,
        typer.Option(
            "--reference",
            help="A reference (human) board, CSV with model, score, lower, upper (or "
            "rating_q025, rating_q975): adds agreement with CI, Brier, Spearman and Kendall.",
        ),
    ] = None,
    convention: Annotated[
        str,
        typer.Option(
            "--convention",
            help="Style-controlled board: ours (win probability at equal style) or arena-hard "
            "(its show_result.py: at the games' mean style difference, its length and markdown "
            "density features).",
            metavar="[ours|arena-hard]",
        ),
    ] = "ours",
    style: Annotated[
        bool,
        typer.Option(
            "--style/--no-style",
            help="Also the style-controlled board (needs every judged answer in model_answer/).",
        ),
    ] = True,
    seed: Annotated[int, seed_option("Bootstrap seed.", None)] = 0,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write everything as JSON to this file.")
    ] = None,
) -> None:
    """Arena-Hard-Auto's score tables of a run (each model's score against the baseline, 90%
    bootstrap interval; plain and style-controlled) beside our am-ELO board of the same
    judgments, with the benchmark metrics (separability; with --reference, agreement with
    CI, pair-rank Brier, Spearman, Kendall)."""
    from ..errors import InputError
    from ..judging.arena_hard import read_board, read_run

    if convention not in ("ours", "arena-hard"):
        raise InputError(f"--convention must be ours or arena-hard, not {convention!r}")
    from ..judging.arena_hard import self_judged_row

    run = read_run(directory, baseline=baseline)
    ref = read_board(reference) if reference is not None else None
    battles, skipped = run.battles(weight=weight, judges=judge, style=style, category=category)
    payload = arena_hard_payload(
        battles,
        skipped,
        baseline,
        rounds=rounds,
        seed=seed,
        reference=ref,
        convention=convention,
    )
    own = self_judged_row(
        [j for j in run.chosen(judge, category) if j.baseline == payload["baseline"]],
        weight=weight,
        rounds=rounds,
        seed=seed,
    )
    if own is not None:
        payload["baseline_judged_against_itself"] = own
    if output is not None:
        emit(payload, "json", output)
    print_arena_hard(payload)


def arena_hard_payload(
    battles: Any,
    skipped: int,
    baseline: str | None,
    *,
    rounds: int = 100,
    seed: int = 0,
    reference: Any = None,
    ours: bool = True,
    convention: str = "ours",
) -> dict[str, Any]:
    """The boards and metrics of battles from Arena-Hard-Auto judgments (shared with ``auto
    --arena-hard-dir``)."""
    import numpy as np

    from ..errors import InputError
    from ..judging.arena_hard import baseline_board, board_metrics

    if baseline is None:
        bases = {
            m
            for m in battles.models
            if np.all(
                (battles.model_a == battles.models.index(m))
                | (battles.model_b == battles.models.index(m))
            )
        }
        if len(bases) != 1:
            raise InputError(
                "the judgments have no single baseline (v2 runs: one per category); give "
                "--category CATEGORY or --baseline MODEL."
            )
        baseline = bases.pop()
    out: dict[str, Any] = {
        "baseline": baseline,
        "battles": len(battles),
        "judgments_without_verdict": skipped,
    }
    boards = []
    notes = []
    styles = [False]
    if battles.covariates is not None and np.ptp(battles.covariates, axis=0).any():
        styles.append(True)
    elif battles.covariates is not None:
        notes.append("no style-controlled board: the answers do not differ in length or markdown")
    for style in styles:
        b = baseline_board(
            battles, baseline, style=style, convention=convention, rounds=rounds, seed=seed
        )
        boards.append(
            {
                "name": f"style-controlled ({convention})" if style else "plain",
                "features": list(b.features),
                "models": b.records(),
                "metrics": _clean(board_metrics(b, reference)),
            }
        )
    out["boards"] = boards
    out["notes"] = notes
    if ours:
        from ..judging.auto_arena import fit_judgements

        fitted, notes = fit_judgements(battles.compact(), "am-elo")
        d = fitted.to_dict()
        out["ours"] = {"method": d["method"], "models": d["models"], "notes": notes}
    return out


def export_arena_hard(
    arena: Any,
    prompts: Any,
    directory: Path,
    baseline: Any,
    reference: Any = None,
    *,
    categories: Any = None,
    category: str = "hard_prompt",
    parser: Any = None,
) -> dict[str, Any]:
    """``auto --arena-hard-dir``: write the run in Arena-Hard-Auto's layout (each prompt's
    category, ``category`` for those without; labels read by ``parser``), read it back, and
    its boards and metrics (our own board is ``auto``'s); with several categories, the board
    is of all the judgments against ``baseline``."""
    from ..judging.arena_hard import export_journal, read_run

    counts = export_journal(
        arena.journal.records(),
        prompts,
        directory,
        baseline=baseline,
        category=category,
        categories=categories,
        parser=parser,
    )
    battles, skipped = read_run(directory).battles()
    out = arena_hard_payload(battles, skipped, baseline, ours=False, reference=reference)
    out["written"] = {"directory": str(directory), **counts}
    err_console.print(
        f"Arena-Hard-Auto files written to {directory}: {counts['answers']} answers, "
        f"{counts['judgments']} judgments"
        + (
            f"; {counts['not_baseline']} judgements not against {baseline} have no place there"
            if counts["not_baseline"]
            else ""
        )
    )
    return out


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in d.items()}


def print_arena_hard(p: dict[str, Any]) -> None:
    for b in p["boards"]:
        extra = f"; style features {', '.join(b['features'])}" if b["features"] else ""
        console.print(
            records_table(
                b["models"],
                title=f"Arena-Hard-Auto {b['name']} board vs {p['baseline']} (%, 90% interval{extra})",
            )
        )
        console.print("  " + ", ".join(f"{k}: {v}" for k, v in b["metrics"].items() if v != []))
    if "ours" in p:
        o = p["ours"]
        console.print(
            records_table(o["models"], title=f"{o['method']} board of the same judgments")
        )
    own = p.get("baseline_judged_against_itself")
    if own:
        console.print(
            f"  {own['model']} judged against itself ({own['judgments']} judgments, as "
            f"show_result.py's second row of it): {own['score']} ({own['lower']}, "
            f"{own['upper']}); on its board it stands at 50 by definition"
        )
    for note in p.get("notes", []):
        err_console.print(f"note: {note}")
    if p.get("judgments_without_verdict"):
        err_console.print(
            f"note: {p['judgments_without_verdict']} judgment(s) left out: a game has no verdict"
        )
