"""Shared pieces of the command line (see :mod:`stablearena.cli` for the rules every command
module follows): the Typer ``app``, the option definitions, :func:`load_data`, :func:`emit` and
:func:`main`."""

import contextlib
import functools
import inspect
import json
import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .. import choices
from ..atomic import STDOUT, atomic_write, check_output_path
from ..errors import InputError, StableArenaError, StableArenaWarning

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console
    from rich.table import Table

    from ..data.battles import Battles, PairCounts

__all__ = [
    "app",
    "experiment_app",
    "main",
    "load_data",
    "emit",
    "Loaded",
    "console",
    "err_console",
    "check_outputs",
    "one_of",
    "require_module",
    "fit_progress",
    "OUTPUT_PARAMS",
]

#: Command parameters that name files the command writes; checked before the command runs.
OUTPUT_PARAMS: tuple[str, ...] = ("output", "plot", "report")


class _LazyConsole:
    """A Rich console created on first use (importing Rich costs time at start-up)."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def _get(self) -> "Console":
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._get(), name)

    # dunder methods are not found through __getattr__: Rich's live displays enter the console
    def __enter__(self) -> "Console":
        return self._get().__enter__()

    def __exit__(self, *exc: Any) -> None:
        self._get().__exit__(*exc)


console: "Console" = _LazyConsole(stderr=False)  # type: ignore[assignment]
err_console: "Console" = _LazyConsole(stderr=True)  # type: ignore[assignment]
_STATE = {"debug": bool(os.environ.get("STABLEARENA_DEBUG"))}


# ---------------------------------------------------------------------------- output checks
def _paths_in(value: Any) -> list[Path]:
    if isinstance(value, Path):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, Path)]
    return []


def check_outputs(params: dict[str, Any]) -> None:
    """Check a command's output paths before it does any work.

    Outputs are the parameters named in :data:`OUTPUT_PARAMS` that hold a path; inputs are the
    command's other path parameters. Each output must be writable (its directory exists and
    accepts a new file), not a directory, not an input (nor inside an input directory or matched
    by an input glob), and the outputs must differ from each other."""
    outputs = [(k, p) for k in OUTPUT_PARAMS for p in _paths_in(params.get(k))]
    inputs = [p for k, v in params.items() if k not in OUTPUT_PARAMS for p in _paths_in(v)]
    seen: dict[str, str] = {}
    for name, path in outputs:
        check_output_path(path, inputs)
        key = os.path.abspath(path) if str(path) != STDOUT else STDOUT
        if key in seen and key != STDOUT:
            raise InputError(
                f"--{seen[key]} and --{name} both name {path}; give them different files."
            )
        seen[key] = name


def _checked(func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a command so that :func:`check_outputs` runs on its parameters first."""

    @functools.wraps(func)
    def command(**params: Any) -> Any:
        check_outputs(params)
        return func(**params)

    return command


class _App(typer.Typer):
    """A Typer app whose commands check their output paths before running (see
    :func:`check_outputs`); otherwise Typer itself."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
        register = super().command(*args, **kwargs)

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            register(_checked(func))
            return func

        return decorator


def _install_fast_coercion() -> None:
    """Convert plain option values (str, int, float, Path and lists of them) without pydantic.

    Typer 0.2x coerces every parameter value — defaults included — through a pydantic
    ``TypeAdapter`` built per parameter: importing pydantic and building some thirty adapters
    costs 0.3–0.6 s per ``stablearena rank``, more than the rest of the start-up. For the plain
    annotations our commands use, this builds a direct converter instead (same results; errors
    are one-line usage errors); any other annotation, or a parameter with Typer's own checks
    (ranges, path checks, a custom parser), keeps Typer's coercion. Typer versions without this
    machinery are left alone."""
    try:
        from typer import core as typer_core
        from typer._coercion import RuntimeParam
    except ImportError:  # pragma: no cover - an older Typer coerces through click, fast
        return
    original = getattr(typer_core, "build_runtime_param", None)
    if original is None or getattr(original, "_stablearena_fast", False):  # pragma: no cover
        return
    import typing
    from dataclasses import dataclass as _dataclass

    def to_int(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(value)
        if isinstance(value, int):
            return value
        return int(str(value).strip())

    def to_float(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(value)
        return float(value)

    def to_bool(value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "t", "yes", "y", "on"):
            return True
        if text in ("0", "false", "f", "no", "n", "off"):
            return False
        raise ValueError(value)

    converters: dict[Any, tuple[Callable[[Any], Any], str]] = {
        bool: (to_bool, "true/false value"),
        str: (str, "text"),
        int: (to_int, "integer"),
        float: (to_float, "number"),
        Path: (Path, "path"),
    }

    @_dataclass(frozen=True)
    class _Direct(RuntimeParam):
        convert: Any = None
        what: str = ""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                if isinstance(value, (list, tuple)):
                    return [self.convert(v) for v in value]
                return self.convert(value)
            except (TypeError, ValueError):
                raise typer.BadParameter(
                    f"{value!r} is not a valid {self.what}.", ctx=ctx, param=param
                ) from None

    def plain(info: Any, target: Any) -> bool:
        checks = (
            info.parser is not None
            or getattr(info, "click_type", None) is not None
            or info.min is not None
            or info.max is not None
        )
        if target is Path:
            checks = checks or bool(
                info.exists
                or info.writable
                or not info.readable
                or not info.file_okay
                or not info.dir_okay
                or info.resolve_path
                or info.allow_dash
                or info.path_type is not None
            )
        return not checks

    def build(descriptor: Any) -> Any:
        annotation = descriptor.annotation
        target = annotation
        if typing.get_origin(annotation) is list and len(typing.get_args(annotation)) == 1:
            target = typing.get_args(annotation)[0]
        info = descriptor.parameter_info
        if descriptor.file_annotation is None and target in converters and plain(info, target):
            convert, what = converters[target]
            return _Direct(parameter_info=info, annotation=annotation, convert=convert, what=what)
        return original(descriptor)

    build._stablearena_fast = True  # type: ignore[attr-defined]
    typer_core.build_runtime_param = build


_install_fast_coercion()


def _install_readable_metavars() -> None:
    """Show option values in ``--help`` as click does — ``TEXT``, ``INTEGER``, ``FLOAT``,
    ``FILE`` — instead of Typer 0.2x's ``<str>``, ``<int>``, ``<list[Path]>``; an argument shows
    its name alone (``PATH``). An option with its own ``metavar`` keeps it, and any other type
    (choices, dates, ranges) keeps Typer's label. Typer versions without this machinery are left
    alone (they show click's names already)."""
    try:
        from typer.core import TyperArgument, _TyperParameter
    except ImportError:  # pragma: no cover - an older Typer shows click's names
        return
    original = getattr(_TyperParameter, "display_type", None)
    if original is None or getattr(original, "_stablearena_readable", False):  # pragma: no cover
        return
    import typing

    names: dict[Any, str] = {
        str: "TEXT",
        int: "INTEGER",
        float: "FLOAT",
        bool: "BOOLEAN",
        Path: "FILE",
    }

    def display_type(self: Any, ctx: Any) -> str:
        descriptor = self.type_descriptor
        annotation = descriptor.annotation
        if typing.get_origin(annotation) is list and len(typing.get_args(annotation)) == 1:
            annotation = typing.get_args(annotation)[0]  # a repeatable option: one value each
        if descriptor.is_choice or annotation not in names:
            return str(original(self, ctx))
        return names[annotation]

    display_type._stablearena_readable = True  # type: ignore[attr-defined]
    _TyperParameter.display_type = display_type  # type: ignore[method-assign]
    TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign,assignment]


_install_readable_metavars()

_APP_SETTINGS: dict[str, Any] = {
    "name": "stablearena",
    "help": "Exact, robust and honest leaderboards from LLM arena battle logs.",
    "no_args_is_help": True,
    "add_completion": False,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
}
app = _App(**_APP_SETTINGS)
experiment_app = _App(
    help="Run the papers' experiment protocols.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(experiment_app, name="experiment")


@app.callback()
def _root(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show full tracebacks and Python warnings on errors.")
    ] = False,
) -> None:
    if debug:
        _STATE["debug"] = True


# ---------------------------------------------------------------------------- option checks
def _metavar(values: Sequence[str]) -> str:
    return "[" + "|".join(values) + "]"


def one_of(
    *values: str, flag: str | None = None, optional: bool = True, unknown: bool = False
) -> Callable[[Any], Any]:
    """A Typer callback accepting one of ``values`` (``None`` too when ``optional``); the
    message reads "FLAG must be one of …, not 'x'." (or "unknown FLAG 'x'; choose one of …")."""

    def check(value: Any) -> Any:
        if value is None and optional:
            return value
        if value not in values:
            if unknown:
                raise typer.BadParameter(
                    f"unknown {flag} {value!r}; choose one of {', '.join(values)}."
                )
            raise typer.BadParameter(
                f"{flag or 'the value'} must be one of {', '.join(values)}, not {value!r}."
            )
        return value

    return check


def _number_check(test: Callable[[float], bool], wanted: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, float) and not math.isfinite(value):
            raise typer.BadParameter(
                f"must be a finite number{' ' + wanted if wanted else ''}, not {value}."
            )
        if not test(value):
            raise typer.BadParameter(f"must be {wanted}, not {value}.")
        return value

    return check


#: Callbacks checking numeric options while parsing (NaN and ±inf are refused by each).
finite = _number_check(lambda v: True, "")
non_negative = _number_check(lambda v: v >= 0, "≥ 0")
positive = _number_check(lambda v: v > 0, "> 0")
probability = _number_check(lambda v: 0 < v < 1, "strictly between 0 and 1")
at_least_one = _number_check(lambda v: v >= 1, "≥ 1")
at_least_two = _number_check(lambda v: v >= 2, "≥ 2")


def count(low: int, high: int) -> Callable[[Any], Any]:
    """A Typer callback accepting whole numbers from ``low`` to ``high`` (sizes of simulations,
    rounds, repeats: the upper bound keeps a typo from asking for a run that cannot finish or fit
    in memory)."""

    def check(value: Any) -> Any:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(
                f"must be a whole number from {low:,} to {high:,}, not {value}."
            )
        return value

    return check


def seed_option(help: str, metavar: str | None = "SEED") -> Any:
    """The ``--seed`` option: a ``typer.Option`` checked by :func:`seed_check`."""
    return typer.Option("--seed", help=help, metavar=metavar, callback=seed_check)


def choice_option(flag: str, values: Sequence[str], help: str, *short: str) -> Any:
    """A ``typer.Option`` (``flag``, then the ``short`` ones) taking one of ``values``: they
    are its metavar (``[a|b|c]``) and :func:`one_of` checks the value."""
    return typer.Option(
        flag, *short, help=help, metavar=_metavar(values), callback=one_of(*values, flag=flag)
    )


def count_option(flag: str, help: str, low: int, high: int, metavar: str | None = "N") -> Any:
    """A ``typer.Option`` taking a whole number from ``low`` to ``high`` (:func:`count`)."""
    return typer.Option(flag, help=help, metavar=metavar, callback=count(low, high))


def seed_check(value: Any) -> Any:
    """Seeds are integers 0 ≤ seed < 2**63 (NumPy's generators refuse negative seeds)."""
    if value is not None and not 0 <= value < 2**63:
        raise typer.BadParameter(f"must be an integer from 0 to 2**63 - 1, not {value}.")
    return value


# ---------------------------------------------------------------------------- shared options
PathArg = Annotated[
    Path | None,
    typer.Argument(
        help="Battle log: a CSV, TSV, JSON Lines, Parquet or JSON file (also .gz, .bz2, .xz, "
        ".zst), a directory or glob of such files read as one log, or '-' for standard input; "
        "or a built-in data set: 'example' (simulated, the default), 'llmfao' or "
        "'chatbot-arena-2024' (see 'stablearena datasets').",
        metavar="PATH",
    ),
]
FormatOpt = Annotated[
    str,
    choice_option("--format", choices.OUTPUT_FORMATS, "Output format.", "-f"),
]
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the output to this file instead of the terminal (replaced atomically; "
        "checked before any work; never one of the inputs).",
        metavar="FILE",
    ),
]
BothBadOpt = Annotated[
    str,
    choice_option(
        "--both-bad", choices.BOTH_BAD, "'tie' counts both-bad votes as ties; 'drop' removes them."
    ),
]
ExcludeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude", help="Leave out a model (repeat, or comma-separate).", metavar="MODEL"
    ),
]
MinBattlesOpt = Annotated[
    int,
    typer.Option(
        "--min-battles",
        help="Leave out models with fewer battles (repeatedly, until every model left has "
        "this many).",
        metavar="N",
        callback=non_negative,
    ),
]
ColOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--col",
        help="Column mapping ROLE=NAME (roles: model_a, model_b, winner, annotator, prompt, "
        "timestamp, weight, anony; propensity with rank --ipw).",
        metavar="ROLE=NAME",
    ),
]
KeepNonAnonyOpt = Annotated[
    bool,
    typer.Option(
        "--keep-non-anony",
        help="Keep the battles whose anony column is false (the models' names were shown, or "
        "an answer named a model); by default they are left out, as on FastChat's leaderboard.",
    ),
]
InputFormatOpt = Annotated[
    str | None,
    choice_option(
        "--input-format",
        choices.INPUT_FORMATS,
        "Input format when the extension does not say (default: from the extension, "
        "else from the content).",
    ),
]

#: A block of command parameters given once and shared: (name, ``Annotated`` type, default).
OptionBlock = tuple[tuple[str, Any, Any], ...]

#: The data options every command that reads a battle log takes, in their --help order; their
#: names are :func:`load_data`'s keywords, so ``load_data(path, **data_options(options))``.
DATA_OPTIONS: OptionBlock = (
    ("both_bad", BothBadOpt, "tie"),
    ("exclude", ExcludeOpt, None),
    ("min_battles", MinBattlesOpt, 0),
    ("col", ColOpt, None),
    ("input_format", InputFormatOpt, None),
    ("keep_non_anony", KeepNonAnonyOpt, False),
)


def data_options(options: dict[str, Any]) -> dict[str, Any]:
    """The values of :data:`DATA_OPTIONS` among a command's parameters."""
    return {name: options[name] for name, _, _ in DATA_OPTIONS}


def interval_options(options: dict[str, Any]) -> dict[str, Any]:
    """The interval options (``--ci``, ``--level``, ``--rounds``, ``--cluster``, ``--seed``)
    among a command's parameters, as :func:`stablearena.analysis.leaderboard.intervals_for` and the
    payload builders take them."""
    return {name: options[name] for name in ("ci", "level", "rounds", "cluster", "seed")}


def payload_options(loaded: "Loaded", options: dict[str, Any]) -> dict[str, Any]:
    """The keywords that ``rank``, ``plot`` and ``report`` give the payload builders
    (:func:`stablearena.analysis.leaderboard.leaderboard_payload`, :func:`stablearena.figures.report.build_report`)
    alike: where the data came from, the interval options, and a progress bar on a terminal."""
    return {
        "source": loaded.label,
        "simulated": loaded.simulated,
        "progress": sys.stderr.isatty(),
        **interval_options(options),
    }


def with_options(
    *blocks: OptionBlock, last: OptionBlock = (), **defaults: Any
) -> Callable[[Callable[..., Any]], Any]:
    """Give a command the parameters of ``blocks`` (in order) through its ``**options``.

    Typer reads a command's parameters from its signature; this decorator writes that signature:
    the command's own parameters before ``*``, then the blocks' parameters, then its own
    keyword-only ones, then those of ``last`` — the order of --help. ``defaults`` overrides a
    block parameter's default (e.g. ``ci="fisher"``). Typer calls commands with keywords only, so
    every parameter becomes keyword-only; the blocks' values arrive in ``options``."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        kw = inspect.Parameter.KEYWORD_ONLY

        def shared(*blocks: OptionBlock) -> list[inspect.Parameter]:
            return [
                inspect.Parameter(name, kw, annotation=kind, default=defaults.get(name, default))
                for block in blocks
                for name, kind, default in block
            ]

        own = [p for p in inspect.signature(func).parameters.values() if p.kind != p.VAR_KEYWORD]
        first_kw = next((i for i, p in enumerate(own) if p.kind == kw), len(own))
        params = own[:first_kw] + shared(*blocks) + own[first_kw:] + shared(last)
        func.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p.replace(kind=kw) for p in params]
        )
        return func

    return decorate


@dataclass(frozen=True)
class Loaded:
    """What :func:`load_data` read: the data, a label for output, whether it is simulated, and
    the models the filters left out (``dropped``: name → reason)."""

    data: "Battles | PairCounts"
    label: str
    simulated: bool
    dropped: dict[str, str] = field(default_factory=dict)


#: The --col role of the column holding each battle's draw probability (read by --ipw only).
IPW_ROLE = "propensity"


def _parse_columns(col: Sequence[str] | None) -> dict[str, str] | None:
    if not col:
        return None
    out: dict[str, str] = {}
    for item in col:
        role, sep, name = item.partition("=")
        role, name = role.strip(), name.strip()
        if not sep or not role or not name:
            raise InputError(f"--col {item!r} must look like ROLE=NAME, e.g. --col model_a=left.")
        if role in out and out[role] != name:
            raise InputError(f"--col gives two columns for {role}: {out[role]!r} and {name!r}.")
        out[role] = name
    return out


def split_list(values: Sequence[str] | None) -> list[str]:
    """Flatten repeated and comma-separated option values."""
    return [v.strip() for item in values or () for v in item.split(",") if v.strip()]


def builtin_name(path: Path | None) -> str | None:
    """The built-in data set ``path`` names (``None`` → ``example``), or ``None`` for a path:
    an existing file or directory of the same name wins (``stablearena datasets`` lists them)."""
    if path is None:
        return "example"
    from ..data.datasets import DATASETS

    text = str(path)
    return text if text in DATASETS and not path.exists() else None


def load_data(
    path: Path | None,
    *,
    col: Sequence[str] | None = None,
    input_format: str | None = None,
    both_bad: str = "tie",
    exclude: Sequence[str] | None = None,
    min_battles: int = 0,
    counts_only: bool = False,
    by_annotator: bool = False,
    extra: Sequence[str] | str | None = None,
    keep_non_anony: bool = False,
    ipw: bool = False,
) -> Loaded:
    """Read ``path`` (or the built-in example when ``None``) and apply the standard filters.

    ``extra``: other columns of the log to keep (``read_battles(extra=...)``).
    ``keep_non_anony``: keep the rows whose ``anony`` column is false (left out by default).
    ``ipw``: weight each battle by its inverse propensity (:meth:`Battles.with_ipw`, sampling
    weights) read from the column ``propensity`` or the one ``--col propensity=NAME`` names —
    before the filters, so that they see the weighted battles.

    ``counts_only``: the caller needs only pair counts (per annotator when ``by_annotator``), so
    a directory, a glob or a large file is streamed batch by batch
    (:func:`stablearena.data.io.read_counts`: memory does not grow with the number of battles)."""
    if both_bad not in choices.BOTH_BAD:
        raise InputError(f"--both-bad must be 'tie' or 'drop', not {both_bad!r}.")
    if min_battles < 0:
        raise InputError("--min-battles must be non-negative.")
    columns = _parse_columns(col)
    propensity = (columns or {}).pop(IPW_ROLE, None)
    if propensity is not None and not ipw:
        raise InputError(
            f"--col {IPW_ROLE}={propensity} names the draw probabilities that --ipw weights by; "
            "add --ipw (or drop the mapping)."
        )
    if ipw:
        propensity = propensity or IPW_ROLE
        counts_only = False  # the weights are per battle
        if extra != "*":
            extra = list(dict.fromkeys([*(extra or []), propensity]))
    if columns:
        from ..data.io import COLUMN_ALIASES

        unknown = sorted(set(columns) - set(COLUMN_ALIASES))
        if unknown:
            raise InputError(
                f"unknown column role(s) {unknown} in --col; roles are {', '.join(COLUMN_ALIASES)}."
            )
    name = builtin_name(path)
    if name is not None and (columns or input_format):
        raise InputError(
            "--col and --input-format describe a battle-log file; the built-in data need neither."
        )
    if name == "example":
        from ..data.datasets import EXAMPLE_SOURCE, example_arena

        data: Battles | PairCounts = example_arena().battles  # noqa: F821
        label, simulated = EXAMPLE_SOURCE, True
    else:
        from ..data.io import read_battles, read_counts, should_stream

        if name is not None:  # a bundled real data set: its file, under the data set's label
            from ..data import datasets

            path, label = datasets.path(name), datasets.info(name).label
        else:
            label = "<stdin>" if str(path) == "-" else str(path)
        if counts_only and extra is None and should_stream(path):
            data = read_counts(
                path,
                columns=columns,
                fmt=input_format,
                by_annotator=by_annotator,
                keep_non_anony=keep_non_anony,
            )
        else:
            try:
                data = read_battles(
                    path,
                    columns=columns,
                    fmt=input_format,
                    extra=extra,
                    keep_non_anony=keep_non_anony,
                )
            except InputError as exc:
                if not (ipw and f"no column {propensity!r}" in str(exc)):
                    raise
                raise InputError(
                    f"{exc} --ipw weights each battle by 1/propensity, its draw probability, read "
                    "from that column (the live arena's export has it); name another column "
                    "with --col propensity=NAME."
                ) from None
        simulated = False
    if ipw:
        from ..data import battles as _battles  # (the names are the annotations' here)

        if isinstance(data, _battles.PairCounts):
            raise InputError(
                f"{label}: pair counts carry no per-battle propensities; --ipw needs the battle "
                "log (e.g. the live arena's export)."
            )
        data = data.with_ipw(column=propensity)
    before = list(data.models)
    excluded = split_list(exclude)
    data = data.filter(exclude_models=excluded, min_battles=min_battles, both_bad=both_bad)  # type: ignore[arg-type]
    kept = set(data.models)
    dropped: dict[str, str] = {}
    for name in before:
        if name in kept:
            continue
        if name in excluded:
            dropped[name] = "--exclude"
        elif min_battles > 0:
            dropped[name] = f"fewer than {min_battles} battles (--min-battles)"
        else:
            dropped[name] = "no battles left (--both-bad drop)"
    return Loaded(data, label, simulated, dropped)


# ---------------------------------------------------------------------------- output
class _NonFinite(Exception):
    """A NaN or inf reached the output: a bug upstream (reported as an internal error)."""


def _clean(x: Any) -> Any:
    """JSON-safe values: NumPy scalars to Python, and never NaN/inf (those are bugs upstream)."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "tolist") and not isinstance(x, (str, bytes)):  # NumPy arrays and scalars
        x = x.tolist()
        if isinstance(x, list):
            return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        raise _NonFinite(f"a non-finite number ({x}) reached the output")
    return x


def _format_cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"
    return "" if v is None else str(v)


def _widest_word(text: str) -> int:
    """Cells of the widest word of ``text`` as Rich wraps it: at spaces, with a line's leading
    spaces kept with its first word."""
    from rich.cells import cell_len

    widest = 0
    for line in text.splitlines():
        words = line.split()
        if words:
            widest = max(widest, cell_len(line[: line.index(words[0]) + len(words[0])]))
            widest = max(widest, *(cell_len(w) for w in words))
    return widest


def _header_pieces(word: str) -> list[str]:
    """A header word cut after each underscore (``battles_so_far`` → ``battles_``, ``so_``,
    ``far``): where a header may wrap besides spaces."""
    return re.findall(r"[^_]*_+|[^_]+", word)


def _wrap_header(header: str, width: int) -> str:
    """``header`` on lines of at most ``width`` cells, broken at spaces and after underscores
    (a piece wider than ``width`` stays whole; Rich folds it)."""
    from rich.cells import cell_len

    lines: list[str] = []
    for word in header.split():
        for k, piece in enumerate(_header_pieces(word)):
            glue = "" if k else " "
            if lines and cell_len(lines[-1] + glue + piece) <= width:
                lines[-1] += glue + piece
            else:
                lines.append(piece)
    return "\n".join(lines)


class RecordsTable:
    """A Rich renderable for a table of records that fits the terminal without cutting a cell.

    When the table fits as it is, it draws itself as Rich's default :class:`rich.table.Table`
    would (heavy-head box, one space of padding, title and caption centred, bold header) but in
    one pass over the cells: Rich's own table measures and wraps every cell and takes about
    0.13 s for a 200-model leaderboard, most of a fast ``rank``.

    When it is wider than the console (see docs/guides/terminal-output.md):

    1. it is drawn with the lighter box of Rich's ``SIMPLE_HEAD`` (two characters fewer per
       column);
    2. if it is still too wide, the columns whose cells have spaces (headers such as
       ``shown rank``, free text such as a reason) wrap at the spaces, and headers also after
       an underscore (``battles_so_far``); a word — a number, a name, an interval — is never
       broken nor cut with "…";
    3. if even then it is too wide, it is split into parts stacked one under the other,
       each repeating the ``keys`` leading columns (rank and model, say) with as many of the
       other columns as fit, and a note says how wide a terminal shows it in one
       (``COLUMNS=…``) and that ``--format csv`` / ``json`` give every column.

    ``compact``: the lighter box of Rich's ``SIMPLE_HEAD`` with collapsed padding, for tables
    with many narrow numeric columns."""

    def __init__(
        self,
        headers: list[str],
        right: list[bool],
        rows: list[list[str]],
        title: str | None,
        caption: str | None,
        *,
        keys: int = 1,
        compact: bool = False,
    ) -> None:
        self.headers, self.right, self.rows = headers, right, rows
        self.title, self.caption = title, caption
        self.keys = max(0, min(keys, len(headers)))
        self.compact = compact

    def rich_table(
        self,
        columns: Sequence[int] | None = None,
        widths: Sequence[int] | None = None,
        *,
        title: bool = True,
        caption: bool = True,
        compact: bool | None = None,
    ) -> "Table":
        """The table as a :class:`rich.table.Table`: all columns at their natural widths, or
        the ``columns`` (indices) at fixed ``widths`` (cells wrap at spaces, and only a word
        wider than its column — wider than the terminal — is folded, never cut)."""
        from rich import box
        from rich.cells import cell_len
        from rich.table import Table
        from rich.text import Text

        style: dict[str, Any] = (
            {"box": box.SIMPLE_HEAD, "pad_edge": False, "collapse_padding": True}
            if (self.compact if compact is None else compact)
            else {}
        )
        table = Table(
            title=Text(self.title) if self.title and title else None,
            caption=Text(self.caption) if self.caption and caption else None,
            header_style="bold",
            **style,
        )
        picked = range(len(self.headers)) if columns is None else columns
        for k, j in enumerate(picked):
            header = self.headers[j]
            if widths is not None and header.isprintable() and cell_len(header) > widths[k]:
                header = _wrap_header(header, widths[k])
            table.add_column(
                Text(header),
                justify="right" if self.right[j] else "left",
                width=None if widths is None else widths[k],
                overflow="fold",
            )
        for row in self.rows:
            table.add_row(*(Text(row[j]) for j in picked))
        return table

    def _plain(self, max_width: int) -> list[int] | None:
        """The column widths of the plain drawing, or None where Rich's could differ."""
        from rich.cells import cell_len

        cells = [self.headers, *self.rows]
        if (
            self.compact
            or not self.headers
            or not all(c.isprintable() and c == c.strip() for row in cells for c in row)
        ):
            return None  # Rich wraps and strips such cells in its own way
        widths = [max(cell_len(row[j]) for row in cells) for j in range(len(self.headers))]
        if sum(widths) + 3 * len(widths) + 1 > max_width:
            return None
        return widths

    @staticmethod
    def _overhead(n: int, compact: bool) -> int:
        """Columns taken by borders and padding in a table of ``n`` columns."""
        from rich.console import Console

        if not compact:
            return 3 * n + 1
        probe = RecordsTable([""] * n, [False] * n, [], None, None, compact=True)
        table = probe.rich_table(range(n), [0] * n)
        with open(os.devnull, "w") as devnull:
            return Console(file=devnull, width=10_000).measure(table).maximum

    def layout(self, max_width: int) -> tuple[bool, list[tuple[list[int], list[int]]]]:
        """How the table is drawn at ``max_width`` columns: whether with the compact box, and
        its parts as (column indices, widths); one part when the table fits, with its wrapping
        columns narrowed if need be."""
        n = len(self.headers)
        natural, least = self._widths()
        compact = self.compact
        overhead = [self._overhead(k, compact) for k in range(n + 1)]

        def fitted(columns: list[int]) -> list[int]:
            widths = [natural[j] for j in columns]
            excess = sum(widths) + overhead[len(columns)] - max_width
            while excess > 0:  # narrow the widest column that can wrap, one cell at a time
                slack = [k for k, j in enumerate(columns) if widths[k] > least[j]]
                if not slack:  # a word wider than the terminal: fold the widest column
                    slack = [k for k in range(len(columns)) if widths[k] > 1]
                    if not slack:
                        break
                k = max(slack, key=lambda i: widths[i])
                widths[k] -= 1
                excess -= 1
            return widths

        def fits(columns: list[int]) -> bool:
            return sum(least[j] for j in columns) + overhead[len(columns)] <= max_width

        everything = list(range(n))
        if not compact and sum(natural) + overhead[n] > max_width:
            compact = True
            overhead = [self._overhead(k, compact) for k in range(n + 1)]
        if fits(everything):
            return compact, [(everything, fitted(everything))]
        keys = list(range(self.keys))
        parts: list[list[int]] = []
        for j in range(self.keys, n):
            if parts and fits([*parts[-1], j]):
                parts[-1].append(j)
            else:
                parts.append([*keys, j])
        return compact, [(columns, fitted(columns)) for columns in parts or [everything]]

    def _widths(self) -> tuple[list[int], list[int]]:
        """Each column's natural width (its longest line) and least width (its widest word; the
        longest line for the ``keys`` columns, which never wrap)."""
        from rich.cells import cell_len

        cells = [self.headers, *self.rows]
        natural = [
            max((cell_len(line) for row in cells for line in row[j].splitlines()), default=0)
            for j in range(len(self.headers))
        ]
        least = [
            natural[j]
            if j < self.keys
            else max(
                max(_widest_word(row[j]) for row in self.rows) if self.rows else 0,
                max(
                    (cell_len(p) for w in self.headers[j].split() for p in _header_pieces(w)),
                    default=0,
                )
                if self.headers[j].isprintable()
                else _widest_word(self.headers[j]),
            )
            for j in range(len(self.headers))
        ]
        return natural, least

    def one_table_width(self) -> int:
        """The narrowest terminal that shows the table in one part (with the compact box)."""
        return sum(self._widths()[1]) + self._overhead(len(self.headers), True)

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.cells import cell_len
        from rich.segment import Segment
        from rich.style import Style
        from rich.text import Text

        widths = self._plain(options.max_width)
        if widths is None:
            if not self.headers:
                yield self.rich_table()
                return
            compact, parts = self.layout(options.max_width)
            if len(parts) == 1:
                yield self.rich_table(*parts[0], compact=compact)
                return
            # several parts: the title and the caption span the terminal, not one part
            if self.title:
                yield Text(self.title, justify="center")
            for columns, part_widths in parts:
                yield self.rich_table(
                    columns, part_widths, title=False, caption=False, compact=compact
                )
            if self.caption:
                yield Text(self.caption, justify="center")
            if len(parts) > 1:
                yield Text(
                    f"note: the table is shown in {len(parts)} parts to fit {options.max_width} "
                    f"columns; COLUMNS={self.one_table_width()} (a wider terminal) shows it in "
                    "one, and --format csv or --format json give every column."
                )
            return
        total = sum(widths) + 3 * len(widths) + 1

        def line(left: str, fill: str, mid: str, right: str) -> str:
            return left + mid.join(fill * (w + 2) for w in widths) + right

        def row(cells: list[str], bar: str) -> list[Any]:
            parts: list[Any] = [Segment(bar)]
            for c, w, r in zip(cells, widths, self.right, strict=True):
                pad = " " * (w - cell_len(c))
                parts += [Segment(" " + (pad + c if r else c + pad) + " "), Segment(bar)]
            return parts

        width_options = options.update(width=total, highlight=False)
        if self.title:
            title = Text(self.title, justify="center")
            yield from console.render(title, width_options)
        yield Segment(line("┏", "━", "┳", "┓"))
        yield Segment.line()
        bold = Style(bold=True)
        head = row(self.headers, "┃")
        for k in range(1, len(head), 2):
            head[k] = Segment(head[k].text, bold)
        yield from head
        yield Segment.line()
        yield Segment(line("┡", "━", "╇", "┩"))
        yield Segment.line()
        for cells in self.rows:
            yield from row(cells, "│")
            yield Segment.line()
        yield Segment(line("└", "─", "┴", "┘"))
        yield Segment.line()
        if self.caption:
            caption = Text(self.caption, justify="center")
            yield from console.render(caption, width_options)


def records_table(
    records: list[dict[str, Any]],
    title: str | None = None,
    caption: str | None = None,
    *,
    keys: int | None = None,
) -> RecordsTable:
    """A table of homogeneous records for the terminal (nested values are left out; text is
    shown as is, never read as Rich markup): :class:`RecordsTable`. ``keys``: the leading
    columns repeated in each part when the table is split to fit (default: up to the first
    text column, e.g. rank and model)."""
    keys_ = [
        k for k in (records[0] if records else {}) if not isinstance(records[0][k], (dict, list))
    ]
    right = [isinstance(records[0][k], (int, float)) for k in keys_]
    rows = [[_format_cell(r.get(k, "")) for k in keys_] for r in records]
    if keys is None:
        first_text = next((j for j, r in enumerate(right) if not r), 0)
        keys = first_text + 1 if first_text < 3 else 1
    return RecordsTable(keys_, right, rows, title, caption, keys=keys)


def _csv_text(records: list[dict[str, Any]]) -> str:
    """CSV of homogeneous records (columns in first-seen order; nested values as JSON), written
    by :func:`~stablearena.data.io.csv_text` (formulas neutralised, line breaks quoted)."""
    from ..data.io import csv_text

    keys = list(dict.fromkeys(k for r in records for k in r))
    return csv_text(
        keys,
        (
            [json.dumps(v) if isinstance(v, (dict, list)) else v for v in (r.get(k) for k in keys)]
            for r in records
        ),
    )


def emit(
    payload: dict[str, Any],
    fmt: str,
    output: Path | None,
    *,
    records_key: str = "models",
    table: Callable[[dict[str, Any]], Any] | None = None,
    footer: Sequence[str] = (),
) -> None:
    """Print ``payload`` as JSON, as CSV (the ``records_key`` list), or as a Rich table, to the
    terminal or (atomically) to ``output``. ``footer``: lines printed after a table (notes,
    models left out) — JSON carries them in the payload itself."""
    fmt = fmt.lower()
    if fmt not in choices.OUTPUT_FORMATS:
        raise InputError(f"--format must be table, json or csv, not {fmt!r}.")
    clean = _clean(payload)
    if fmt == "json":
        text = json.dumps(clean, indent=2, ensure_ascii=False) + "\n"
    elif fmt == "csv":
        text = _csv_text(clean.get(records_key, []))
    else:
        from rich.console import Console
        from rich.text import Text

        renderable = table(clean) if table else records_table(clean.get(records_key, []))
        lines = [Text(line) for line in footer]
        if output is None or str(output) == STDOUT:
            console.print(renderable)
            for line in lines:
                console.print(line)
            return
        with open(os.devnull, "w") as devnull:
            file_console = Console(record=True, width=160, file=devnull)
            file_console.print(renderable)
            for line in lines:
                file_console.print(line)
            text = file_console.export_text()
    if output is None or str(output) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        try:
            atomic_write(output, text)
        except OSError as exc:
            raise InputError(f"cannot write {output}: {exc.strerror or exc}.") from None
        _print_err(f"wrote {output}")


def notes_footer(notes: Sequence[str], dropped: dict[str, str] | None = None) -> list[str]:
    """Lines shown under a table: the result's notes and the models the filters left out."""
    out = [f"note: {n}" for n in notes]
    if dropped:
        by_reason: dict[str, list[str]] = {}
        for name, reason in dropped.items():
            by_reason.setdefault(reason, []).append(name)
        for reason, names in by_reason.items():
            shown = ", ".join(names[:20]) + (f" … ({len(names)} in all)" if len(names) > 20 else "")
            out.append(f"left out ({reason}): {shown}")
    return out


@contextlib.contextmanager
def fit_progress(what: str) -> Iterator[None]:
    """Show a spinner with ``what``, the fitter's latest progress report and the elapsed time
    on standard error while the block runs — on a terminal only (logs stay clean)."""
    if not sys.stderr.isatty():
        yield
        return
    import time

    from .._progress import reporting

    start = time.monotonic()
    status = err_console.status(what)

    def update(text: str) -> None:
        status.update(f"{what}: {text} ({time.monotonic() - start:.0f} s)")

    with status, reporting(update):
        yield


def require_module(module: str, what: str, extra: str | None = None) -> None:
    """Raise :class:`InputError` before any work when the optional ``module`` that ``what``
    needs is not installed (the hint names the pip extra, e.g. ``stablearena[plot]``)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        hint = f"pip install 'stablearena[{extra}]'" if extra else f"pip install {module}"
        raise InputError(f"{what} needs {module}, which is not installed: {hint}.")


# ---------------------------------------------------------------------------- errors
def _print_err(text: str, prefix: str = "", style: str = "") -> None:
    """One line on stderr; ``text`` is printed literally (never read as Rich markup)."""
    from rich.text import Text

    line = Text()
    if prefix:
        line.append(prefix, style=style)
        line.append(" ")
    line.append(text)
    err_console.print(line, highlight=False, soft_wrap=True)


def _show_warning(
    message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    if issubclass(category, StableArenaWarning):
        _print_err(str(message), "warning:", "yellow")
    elif _STATE["debug"]:
        _print_err(f"{category.__name__}: {message} ({filename}:{lineno})", "warning:", "yellow")


def _click_exception_types() -> tuple[type, type, type]:
    """(ClickException, UsageError, Abort) of the click Typer uses (vendored or not)."""
    mro = typer.BadParameter.__mro__
    click_exc = next(c for c in mro if c.__name__ == "ClickException")
    usage = next(c for c in mro if c.__name__ == "UsageError")
    return click_exc, usage, typer.Abort


def _usage_line(exc: Any) -> str:
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    message = " ".join(str(exc.format_message()).split())
    return message + where


def _app_for(args: Sequence[str]) -> typer.Typer:
    """The app that runs ``args``: for ``stablearena NAME …`` a root app holding only the command
    (or group) NAME — Typer builds every registered command with all its options on each call,
    which costs more than the rest of a ``--help`` —, the whole app otherwise (the root help, a
    name it does not know)."""
    name = next((a for a in args if not a.startswith("-")), None)
    if name is None:
        return _listing_app()
    from typer.main import get_command_name

    for info in app.registered_commands:
        if (info.name or get_command_name(info.callback.__name__)) == name:  # type: ignore[union-attr]
            sub = _App(**_APP_SETTINGS)
            sub.registered_callback = app.registered_callback
            sub.registered_commands = [info]
            return sub
    for group in app.registered_groups:
        if group.name == name:
            sub = _App(**_APP_SETTINGS)
            sub.registered_callback = app.registered_callback
            sub.registered_groups = [group]
            return sub
    return app


def _listing_app() -> typer.Typer:
    """The root app for ``stablearena`` / ``stablearena --help``: each command stands in by its
    name and help alone (its options are not built — only the listing is shown)."""
    import inspect

    from typer.main import get_command_name
    from typer.models import CommandInfo

    def stand_in() -> None:  # pragma: no cover - never run: the root only lists commands
        raise RuntimeError("a listing stand-in was invoked")

    listing = _App(**_APP_SETTINGS)
    listing.registered_callback = app.registered_callback
    for info in app.registered_commands:
        listing.registered_commands.append(
            CommandInfo(
                name=info.name or get_command_name(info.callback.__name__),  # type: ignore[union-attr]
                callback=stand_in,
                help=info.help or inspect.getdoc(info.callback) or "",
                short_help=info.short_help,
                hidden=info.hidden,
            )
        )
    for group in app.registered_groups:
        sub = _App(help=group.typer_instance.info.help, rich_markup_mode=None)  # type: ignore[union-attr]
        sub.registered_commands.append(CommandInfo(name="-", callback=stand_in, hidden=True))
        listing.add_typer(sub, name=group.name, help=group.typer_instance.info.help)  # type: ignore[union-attr]
    return listing


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``stablearena`` command.

    Exit codes: 0 success; 2 bad input, a bad option value or a usage error (one line on
    stderr naming the problem and what to do); 1 an internal error (one line; a bug — please
    report it with the ``--debug`` traceback), an interruption, or standard output closed early.
    ``--debug`` shows tracebacks and Python warnings instead.
    """
    args = list(argv) if argv is not None else sys.argv[1:]
    for arg in args:  # --debug before the command name, so that even usage errors show it
        if arg == "--debug":
            _STATE["debug"] = True
        if not arg.startswith("-"):
            break
    warnings.showwarning = _show_warning
    click_exc, usage_error, abort = _click_exception_types()
    runner = _app_for(args)
    try:
        # each command shows each of its warnings once, also when called again in one process
        # (a fresh filter list resets Python's once-per-location registry)
        with warnings.catch_warnings():
            warnings.simplefilter("default", StableArenaWarning)
            code = runner(args=args, prog_name="stablearena", standalone_mode=False)
    except usage_error as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            runner(args=[*args, "--help"], prog_name="stablearena", standalone_mode=False)
            sys.exit(0)
        if _STATE["debug"]:
            raise
        _print_err(_usage_line(exc), "error:", "red")
        sys.exit(2)
    except click_exc as exc:
        if _STATE["debug"]:
            raise
        _print_err(_usage_line(exc), "error:", "red")
        sys.exit(2)
    except StableArenaError as exc:
        if _STATE["debug"]:
            raise
        _print_err(str(exc), "error:", "red")
        sys.exit(2)
    except (KeyboardInterrupt, abort):
        _print_err("interrupted", "error:", "red")
        sys.exit(1)
    except BrokenPipeError:
        # standard output was closed (e.g. `| head`): nothing more can be said there
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), sys.stdout.fileno())
        sys.exit(1)
    except MemoryError:
        if _STATE["debug"]:
            raise
        _print_err(
            "out of memory. For logs bigger than memory give a directory or glob of Parquet/CSV "
            "files, which are counted batch by batch, or reduce --rounds / --shuffles.",
            "error:",
            "red",
        )
        sys.exit(1)
    except Exception as exc:  # a bug: say so in one line unless debugging
        if _STATE["debug"]:
            raise
        _print_err(
            f"{type(exc).__name__}: {exc} (a bug in stablearena: rerun with --debug for the "
            "traceback, and please report it)",
            "internal error:",
            "red",
        )
        sys.exit(1)
    if isinstance(code, int) and code != 0:
        sys.exit(2 if code == 2 else 1)
