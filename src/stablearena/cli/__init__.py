"""The ``stablearena`` command line: a thin layer over the library.

Shared pieces every command uses live here: the Typer ``app`` and the ``experiment`` sub-app,
:func:`load_data` (read + filter a battle log, or the built-in example), :func:`emit` (table /
JSON / CSV output to the terminal or a file) and the error handling of :func:`main` (one line and
a non-zero exit code for bad input; a traceback only with ``--debug``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from ..battles import Battles, PairCounts
from ..errors import InputError, StableArenaError, StableArenaWarning

__all__ = ["app", "experiment_app", "main", "load_data", "emit", "Loaded", "console", "err_console"]

app = typer.Typer(
    name="stablearena",
    help="Exact, robust and honest leaderboards from LLM arena battle logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
experiment_app = typer.Typer(help="Run the papers' experiment protocols.", no_args_is_help=True)
app.add_typer(experiment_app, name="experiment")

console = Console()
err_console = Console(stderr=True)
_STATE = {"debug": bool(os.environ.get("STABLEARENA_DEBUG"))}


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks on errors.")] = False,
) -> None:
    if debug:
        _STATE["debug"] = True


# ---------------------------------------------------------------------------- shared options
PathArg = Annotated[
    Path | None,
    typer.Argument(
        help="Battle log (CSV, JSONL, Parquet, JSON); or 'example' (the built-in simulated arena, the "
        "default) or 'chatbot-arena-2024' (the pair counts shipped with leaderbot)."
    ),
]
FormatOpt = Annotated[
    str, typer.Option("--format", "-f", help="Output format: table, json or csv.")
]
OutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write the output to this file.")
]
BothBadOpt = Annotated[
    str,
    typer.Option("--both-bad", help="'tie' counts both-bad votes as ties; 'drop' removes them."),
]
ExcludeOpt = Annotated[
    list[str] | None,
    typer.Option("--exclude", help="Leave out a model (repeat, or comma-separate)."),
]
MinBattlesOpt = Annotated[
    int, typer.Option("--min-battles", help="Leave out models with fewer battles.")
]
ColOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--col",
        help="Column mapping ROLE=NAME (roles: model_a, model_b, winner, annotator, prompt, timestamp, weight).",
    ),
]
InputFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--input-format",
        help="Input format when the extension does not say: csv, jsonl, parquet, json.",
    ),
]


@dataclass(frozen=True)
class Loaded:
    """What :func:`load_data` read: the data, a label for output, and whether it is simulated."""

    data: Battles | PairCounts
    label: str
    simulated: bool


def _parse_columns(col: Sequence[str] | None) -> dict[str, str] | None:
    if not col:
        return None
    out = {}
    for item in col:
        role, sep, name = item.partition("=")
        if not sep or not role or not name:
            raise InputError(f"--col {item!r} must look like ROLE=NAME, e.g. --col model_a=left.")
        out[role.strip()] = name.strip()
    return out


def split_list(values: Sequence[str] | None) -> list[str]:
    """Flatten repeated and comma-separated option values."""
    return [v.strip() for item in values or () for v in item.split(",") if v.strip()]


def load_data(
    path: Path | None,
    *,
    col: Sequence[str] | None = None,
    input_format: str | None = None,
    both_bad: str = "tie",
    exclude: Sequence[str] | None = None,
    min_battles: int = 0,
    extra: Sequence[str] | str | None = None,
) -> Loaded:
    """Read ``path`` (or the built-in example when ``None``) and apply the standard filters.

    ``extra``: other columns of the log to keep (``read_battles(extra=...)``)."""
    from ..io import read_battles

    if both_bad not in ("tie", "drop"):
        raise InputError(f"--both-bad must be 'tie' or 'drop', not {both_bad!r}.")
    if min_battles < 0:
        raise InputError("--min-battles must be non-negative.")
    if path is None or (str(path) == "example" and not path.exists()):
        from ..datasets import EXAMPLE_SOURCE, example_arena

        data: Battles | PairCounts = example_arena().battles
        label, simulated = EXAMPLE_SOURCE, True
    elif str(path) == "chatbot-arena-2024" and not path.exists():
        from ..datasets import chatbot_arena_2024

        data = chatbot_arena_2024()
        label, simulated = "Chatbot Arena 2024-08-14 pair counts (leaderbot)", False
    else:
        data = read_battles(path, columns=_parse_columns(col), fmt=input_format, extra=extra)
        label, simulated = str(path), False
    data = data.filter(
        exclude_models=split_list(exclude), min_battles=min_battles, both_bad=both_bad
    )  # type: ignore[arg-type]
    return Loaded(data, label, simulated)


def _clean(x: Any) -> Any:
    """JSON-safe values: NumPy scalars to Python, and never NaN/inf (those are bugs upstream)."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_clean(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        raise StableArenaError(f"internal error: a non-finite number ({x}) reached the output")
    return x


def _format_cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"
    return str(v)


def records_table(
    records: list[dict[str, Any]], title: str | None = None, caption: str | None = None
) -> Table:
    """A Rich table of homogeneous records (nested values are left out)."""
    keys = [
        k for k in (records[0] if records else {}) if not isinstance(records[0][k], (dict, list))
    ]
    table = Table(title=title, caption=caption, header_style="bold")
    for k in keys:
        table.add_column(k, justify="right" if isinstance(records[0][k], (int, float)) else "left")
    for r in records:
        table.add_row(*(_format_cell(r.get(k, "")) for k in keys))
    return table


def emit(
    payload: dict[str, Any],
    fmt: str,
    output: Path | None,
    *,
    records_key: str = "models",
    table: Callable[[dict[str, Any]], Any] | None = None,
) -> None:
    """Print ``payload`` as JSON, as CSV (the ``records_key`` list), or as a Rich table."""
    fmt = fmt.lower()
    if fmt not in ("table", "json", "csv"):
        raise InputError(f"--format must be table, json or csv, not {fmt!r}.")
    clean = _clean(payload)
    if fmt == "json":
        text = json.dumps(clean, indent=2) + "\n"
    elif fmt == "csv":
        text = pd.DataFrame(clean.get(records_key, [])).to_csv(index=False)
    else:
        renderable = table(clean) if table else records_table(clean.get(records_key, []))
        if output is None:
            console.print(renderable)
            return
        file_console = Console(record=True, width=160, file=open(os.devnull, "w"))  # noqa: SIM115
        file_console.print(renderable)
        text = file_console.export_text()
    if output is None:
        sys.stdout.write(text)
    else:
        try:
            output.write_text(text)
        except OSError as exc:
            raise InputError(f"cannot write {output}: {exc.strerror}.") from None
        err_console.print(f"wrote {output}")


def _show_warning(
    message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    if issubclass(category, StableArenaWarning):
        err_console.print(f"[yellow]warning:[/yellow] {message}", highlight=False)
    else:
        err_console.print(f"warning: {category.__name__}: {message}", highlight=False)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``stablearena`` command.

    Usage errors (unknown option, missing argument) are reported by Typer itself with the usage
    line and exit code 2; errors in the input or options exit with code 2 and one line; a bug
    exits with code 3 and one line. ``--debug`` shows the traceback instead.
    """
    warnings.showwarning = _show_warning
    try:
        app(args=list(argv) if argv is not None else None, prog_name="stablearena")
    except SystemExit as exc:  # Typer's standalone mode ends every run with SystemExit
        if exc.code not in (0, None):
            raise
        return
    except StableArenaError as exc:
        if _STATE["debug"]:
            raise
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # a bug: say so in one line unless debugging
        if _STATE["debug"]:
            raise
        err_console.print(
            f"[red]internal error:[/red] {type(exc).__name__}: {exc} "
            "(rerun with --debug for the traceback, and please report it)",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(3)


# command modules register themselves on import (keep at the end)
from . import am_elo, compare, coverage, plot, rank, selection, serve  # noqa: E402,F401
