"""``stablearena plot`` (one figure to PNG/SVG/PDF) and ``stablearena report`` (one HTML file).

Both take the data, method and interval options of ``rank`` (the same definitions and the same
fitting code, :func:`stablearena.cli.rank.fit_from_options`); the figures are
:mod:`stablearena.figures.plots`' and the report :mod:`stablearena.figures.report`'s. Heavy libraries
(matplotlib, NumPy, the raters) are imported inside the commands so that ``stablearena --help``
stays fast.
"""

import shlex
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InputError, StableArenaWarning
from .common import (
    DATA_OPTIONS,
    PathArg,
    app,
    err_console,
    interval_options,
    payload_options,
    with_options,
)
from .rank import (
    FIT_OPTIONS,
    MethodOpt,
    fit_from_options,
)

#: The figure kinds of ``plot --kind`` (stablearena.figures.plots.KINDS, listed here without importing
#: matplotlib).
PLOT_KINDS = ("leaderboard", "winrate", "battles", "annotators", "ties", "map")


def _fit(options: dict[str, Any]) -> tuple[Any, Any, list[str]]:
    """Fit as ``rank`` does, keeping the warnings raised on the way (they are shown as usual and
    also returned, for the report's notes)."""
    from .boards import fit_board, uses_boards

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StableArenaWarning)
        loaded, fitted = fit_board(options) if uses_boards(options) else fit_from_options(options)
    notes = []
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        if issubclass(w.category, StableArenaWarning):
            notes.append(str(w.message))
    return loaded, fitted, notes


def _command_line(ctx: typer.Context) -> str:
    """The command as the user could retype it: the command name and every option given on the
    command line (defaults left out), from the context's record of where each value came from."""
    words = ["stablearena", ctx.info_name or ""]
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)  # type: ignore[arg-type]
        if source is None or source.name != "COMMANDLINE" or param.name == "ctx":
            continue
        value = ctx.params[param.name]  # type: ignore[index]
        if param.param_type_name == "argument":
            words.append(str(value))
            continue
        flag = max(param.opts, key=len)
        if isinstance(value, bool):
            if value:
                words.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                words += [flag, str(v)]
        else:
            words += [flag, str(value)]
    return shlex.join(words)


@app.command()
@with_options(DATA_OPTIONS, FIT_OPTIONS, ci="fisher")
def plot(
    path: PathArg = None,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            "-k",
            help="Figure: leaderboard, winrate, battles, annotators, ties or map.",
        ),
    ] = "leaderboard",
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Figure file; the format follows .png, .svg or .pdf."),
    ] = Path("leaderboard.png"),
    dpi: Annotated[float, typer.Option("--dpi", help="Pixels per inch of a PNG.")] = 150,
    method: MethodOpt = "m-elo",
    **options: Any,
) -> None:
    """Draw one figure of a fitted battle log (takes rank's data, method and interval options).

    Kinds: leaderboard (ratings with intervals, tiers, rank intervals), winrate (predicted and
    observed win-rate matrices), battles (pair coverage), annotators (am-ELO abilities, flagged
    annotators with the reason), ties (outcomes against the rating gap), map (MDS of a
    covariance model's dissimilarity, or a cluster tree). --style / --covariate draw the
    style-controlled board (predicted win rates at equal style); --where a subset.
    """
    from ..figures import plots

    if kind not in PLOT_KINDS:
        raise InputError(f"--kind must be one of {', '.join(PLOT_KINDS)}, not {kind!r}.")
    plots.check_output(output, dpi)
    options = {"path": path, "method": method, **options}
    loaded, fitted, _ = _fit(options)

    from ..analysis.leaderboard import intervals_for
    from ..figures.report import screen_annotators, win_probability_for

    iv = wp = annotators = None
    # intervals feed the leaderboard's bars, the win-rate dots and the cluster tree (the map of
    # a covariance model is its dissimilarity alone)
    uses_intervals = kind in ("leaderboard", "winrate") or (
        kind == "map" and getattr(fitted, "k_cov", None) is None
    )
    if options["ci"] != "none" and uses_intervals:
        iv = intervals_for(
            fitted, loaded.data, **interval_options(options), progress=sys.stderr.isatty()
        )
        if kind == "winrate":
            try:
                wp = win_probability_for(fitted, iv)
            except InputError as exc:
                err_console.print(
                    f"[yellow]note:[/yellow] no interval dots: {exc}", highlight=False
                )
    if kind == "annotators":
        annotators, notes = screen_annotators(fitted, loaded.data)
        if annotators is None:
            raise InputError(
                f"{loaded.label}: the annotators figure needs annotator ids in the data "
                "(an 'annotator' column, e.g. --col annotator=judge), and at least two annotators."
            )
        for n in notes:
            err_console.print(f"[yellow]note:[/yellow] {n}", highlight=False)
    fig = plots.figure(
        kind,
        fitted,
        intervals=iv,
        win_probability=wp,
        data=loaded.data,
        annotators=annotators,
        source=loaded.label,
    )
    plots.save_figure(fig, output, dpi=dpi)
    err_console.print(f"wrote {output}")


@app.command()
@with_options(DATA_OPTIONS, FIT_OPTIONS, ci="fisher")
def report(
    ctx: typer.Context,
    path: PathArg = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path(
        "report.html"
    ),
    method: MethodOpt = "m-elo",
    **options: Any,
) -> None:
    """Write a self-contained HTML report (takes rank's data, method and interval options).

    The report holds a data summary, the leaderboard table (rating, interval, rank interval,
    tier, battles) beside the interval chart, the win-rate, coverage, tie and map figures as
    inline SVG, the annotator screening (flagged annotators with reasons) when the log names
    annotators, and every note and warning. It needs no network access to be viewed.
    With --style (or --covariate) the board is style-controlled: the report adds the style
    coefficients γ with their intervals and each model's rank without style control. --where
    keeps a subset of the battles.
    """
    command = _command_line(ctx)
    options = {"path": path, "method": method, **options}
    loaded, fitted, notes = _fit(options)

    from ..figures.report import build_report

    result = build_report(
        fitted,
        loaded.data,
        **payload_options(loaded, options),
        notes=notes,
        command=command,
    )
    out = result.write(output)
    size = out.stat().st_size
    err_console.print(
        f"wrote {out} ({size / 1e6:.2f} MB: {len(result.payload['models'])} models, "
        f"{len(result.figures)} figures)"
    )
