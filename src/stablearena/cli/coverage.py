"""``stablearena experiment coverage``: do nominal 95% intervals cover the truth?"""

import sys
from typing import Annotated, Any

import typer

from .common import (
    FormatOpt,
    OutputOpt,
    count_option,
    emit,
    experiment_app,
    finite,
    non_negative,
    probability,
    records_table,
    seed_option,
    split_list,
)


@experiment_app.command("coverage")
def experiment_coverage(
    arenas: Annotated[
        int,
        count_option("--arenas", "Number of simulated arenas.", 1, 1_000_000),
    ] = 200,
    models: Annotated[
        int,
        count_option("--models", "Models per arena.", 2, 100_000),
    ] = 30,
    battles: Annotated[
        int,
        count_option("--battles", "Battles per arena.", 1, 1_000_000_000),
    ] = 5000,
    method: Annotated[
        str,
        typer.Option(
            "--method", "-m", help="Rating method fitted to each arena.", metavar="METHOD"
        ),
    ] = "m-elo",
    ci: Annotated[
        str,
        typer.Option(
            "--ci",
            help="Interval methods, comma-separated.",
            metavar="[fisher,sandwich,bootstrap]",
        ),
    ] = "fisher,sandwich,bootstrap",
    rounds: Annotated[
        int,
        count_option("--rounds", "Bootstrap rounds per arena.", 2, 1_000_000),
    ] = 1000,
    level: Annotated[
        float,
        typer.Option(
            "--level", help="Nominal confidence level.", metavar="LEVEL", callback=probability
        ),
    ] = 0.95,
    spread: Annotated[
        float,
        typer.Option(
            "--spread",
            help="Standard deviation of the true ratings (Elo).",
            metavar="ELO",
            callback=non_negative,
        ),
    ] = 200.0,
    annotators: Annotated[
        int,
        count_option(
            "--annotators",
            "Annotators with known abilities (0 = one average judge); use with --method am-elo.",
            0,
            1_000_000,
        ),
    ] = 0,
    ability_spread: Annotated[
        float,
        typer.Option(
            "--ability-spread",
            help="Abilities are uniform on [1 − s, 1 + s], rescaled to mean 1.",
            metavar="S",
            callback=finite,
        ),
    ] = 0.5,
    seed: Annotated[
        int,
        seed_option("Seed of the arenas and bootstraps."),
    ] = 0,
    workers: Annotated[
        int | None,
        count_option("--workers", "Processes (default: every CPU).", 1, 1024),
    ] = None,
    fmt: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Coverage of interval methods on arenas simulated from the rater's own model.

    Each arena: true ratings ~ N(1000, spread²), uniformly random pairs, Bradley–Terry outcomes
    without ties (annotator k: P = σ(θ_k C (R_i − R_j)), abilities θ known). For every method the
    fraction of nominal intervals that cover the true rating (mean-zero normalisation) and the
    true difference R_i − R_j, with a standard error over arenas.
    """
    from ..simulation.experiments.coverage import CoverageConfig, run_coverage

    config = CoverageConfig(
        arenas=arenas,
        n_models=models,
        n_battles=battles,
        rater=method,
        methods=tuple(split_list([ci])),
        rounds=rounds,
        level=level,
        spread=spread,
        annotators=annotators,
        ability_spread=ability_spread,
        seed=seed,
    )
    summary = run_coverage(config, workers=workers, progress=sys.stderr.isatty())

    def table(p: dict[str, Any]) -> Any:
        c = p["config"]
        title = (
            f"Coverage of nominal {p['nominal']:.0%} intervals — {c['rater']}, {c['arenas']} arenas "
            f"× {c['n_models']} models × {c['n_battles']:,} battles"
        )
        caption = (
            f"simulated from the model itself; annotators: {c['annotators'] or 'one average judge'}; "
            f"bootstrap {c['rounds']} rounds; {p['seconds']:.1f} s on {p['workers']} process(es)"
        )
        return records_table(p["results"], title=title, caption=caption)

    emit(summary, fmt, output, records_key="results", table=table)
