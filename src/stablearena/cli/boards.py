"""``stablearena rank --style/--covariate/--where/--by``: style-controlled and category boards.

Not a command of its own: :func:`rank_boards` is what ``rank`` calls when one of those options
is given. Only stdlib, typer and rich are imported at module level (CLI start-up time).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from ..choices import STYLE_METHODS, style_method
from ..errors import InputError, StableArenaError

__all__ = [
    "STYLE_METHODS",
    "style_method",
    "extra_columns_needed",
    "uses_boards",
    "load_board",
    "fit_board",
    "rank_boards",
    "uses_style",
]


def extra_columns_needed(
    style: bool,
    covariates: Sequence[str],
    text_columns: str | None,
    where_columns: Sequence[str],
    by: str | None,
) -> list[str] | str | None:
    """Which extra columns the reader must keep: every column for ``--style`` without named
    covariates (the style source is found by name), else the named ones."""
    if style and not covariates and text_columns is None:
        return "*"
    names: list[str] = list(where_columns)
    if by:
        names.append(by)
    for spec in covariates:
        names.extend(p for p in spec.split(":") if p)
    if text_columns:
        names.extend(p for p in text_columns.split(":") if p)
    return list(dict.fromkeys(names)) or None


def _text_pair(text_columns: str | None) -> tuple[str, str] | None:
    if text_columns is None:
        return None
    a, sep, b = text_columns.partition(":")
    if not sep or not a or not b:
        raise InputError(f"--text-columns {text_columns!r} must look like COLUMN_A:COLUMN_B.")
    return a, b


def _gamma_table(style: dict[str, Any]) -> Any:
    from .common import RecordsTable

    level = style["level"]
    headers = ["feature", "γ", "Fisher se", "Fisher interval", "sandwich se", "sandwich interval"]
    rows = [
        [
            f["feature"],
            f"{f['coef']:.4f}",
            f"{f['se_fisher']:.4f}",
            f"{f['ci_low_fisher']:.4f}–{f['ci_high_fisher']:.4f}",
            f"{f['se_sandwich']:.4f}",
            f"{f['ci_low_sandwich']:.4f}–{f['ci_high_sandwich']:.4f}",
        ]
        for f in style["features"]
    ]
    return RecordsTable(
        headers,
        [h != "feature" for h in headers],
        rows,
        f"style coefficients γ (penalty {style['penalty']}, λ = {style['reg']:g})",
        f"{style['scale']}; {level:.0%} intervals",
    )


def _board_renderable(p: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.text import Text

    from ..analysis.leaderboard import convergence_text, interval_caption, interval_records
    from .common import records_table

    if "error" in p:
        return Text(f"{p['source']}: no board — {p['error']}", style="red")
    title = f"{p['method']} leaderboard — {p['source']}"
    caption = (
        f"{p['n_models']} models, {p['n_battles']:,} battles, NLL/comparison {p['nll']:.7f}"
        + convergence_text(p.get("convergence", {}))
        + (" — SIMULATED data" if p["simulated"] else "")
        + (f"; {interval_caption(p['ci'])}" if "ci" in p else "")
        + (
            "; raw = the same method without style control, shift = raw rank − rank"
            if "style" in p
            else ""
        )
    )
    records = interval_records(p["models"]) if "ci" in p else p["models"]
    parts = [records_table(records, title=title, caption=caption)]
    if "style" in p:
        parts.append(_gamma_table(p["style"]))
    return Group(*parts)


def uses_boards(options: dict[str, Any]) -> bool:
    """Whether a command's options ask for the per-battle columns (style covariates, --where,
    --by) that :func:`load_board` reads."""
    return bool(
        options.get("style")
        or options.get("covariate")
        or options.get("text_columns")
        or options.get("where")
        or options.get("by")
    )


def uses_style(options: dict[str, Any]) -> bool:
    """Whether a command's options ask for style control (--style, --covariate or
    --text-columns)."""
    return bool(options.get("style") or options.get("covariate")) or (
        options.get("text_columns") is not None
    )


def load_board(options: dict[str, Any]) -> tuple[Any, Any, dict[str, list[str]]]:
    """Read the log of a command's ``options`` (``path``, ``col``, ``input_format``) keeping the
    columns the other options need, keep the battles of ``--where`` and attach the style
    covariates (``--style``/``--covariate``/``--text-columns``): returns what was read
    (:class:`~stablearena.cli.Loaded`), the battles and the parsed conditions."""
    from ..data.battles import PairCounts
    from ..data.categories import parse_where, where
    from ..data.style_features import add_covariates
    from .common import load_data

    covariates = options.get("covariate") or []
    text_columns = options.get("text_columns")
    conditions = parse_where(options.get("where") or [])
    use_style = uses_style(options)
    extra = extra_columns_needed(
        use_style, covariates, text_columns, list(conditions), options.get("by")
    )
    loaded = load_data(
        options["path"],
        col=options["col"],
        input_format=options["input_format"],
        extra=extra,
        keep_non_anony=options.get("keep_non_anony", False),
        ipw=options.get("ipw", False),
    )
    data = loaded.data
    if isinstance(data, PairCounts):
        raise InputError(
            f"{loaded.label}: pair counts carry no per-battle columns; --style, --covariate, "
            "--where and --by need a battle log."
        )
    if conditions:
        data = where(data, conditions)
    if use_style:
        data = add_covariates(data, list(covariates) or None, text_columns=_text_pair(text_columns))
    return loaded, data, conditions


def fit_board(options: dict[str, Any]) -> tuple[Any, Any]:
    """``plot`` and ``report`` with style control or ``--where``: the board read by
    :func:`load_board`, filtered (``--exclude``, ``--min-battles``, ``--both-bad``) and fitted
    with the method's style-controlled rater when covariates are asked for. Returns what was
    loaded (its ``data`` the fitted battles) and the fitted result."""
    from dataclasses import replace

    from .common import fit_progress, split_list
    from .rater_flags import build_rater, rater_options

    method = style_method(options["method"]) if uses_style(options) else options["method"]
    rater = build_rater(method, rater_options({**options, "method": method}))
    loaded, data, _ = load_board({**options, "by": None})
    fitted_on = data.filter(
        exclude_models=split_list(options["exclude"]),
        min_battles=options["min_battles"],
        both_bad=options["both_bad"],
    )
    label = loaded.label + (
        " [" + "; ".join(options["where"]) + "]" if options.get("where") else ""
    )
    loaded = replace(loaded, data=fitted_on, label=label)
    with fit_progress(f"fitting {method} on {loaded.label}"):
        return loaded, rater.fit(fitted_on)


def rank_boards(rater: Any, options: dict[str, Any]) -> None:
    """``rank`` with --style, --covariate, --text-columns, --where or --by (in the command's
    ``options``): read the log keeping the needed columns, filter (``--where``), attach
    covariates, split (``--by``), fit ``rater`` on each board and emit."""
    from ..analysis.leaderboard import leaderboard_payload
    from ..data.categories import split_by
    from .common import emit, payload_options, split_list

    by, fmt, output = options["by"], options["fmt"], options["output"]
    exclude = split_list(options["exclude"])
    loaded, data, conditions = load_board(options)
    boards = split_by(data, by) if by else {"": data}
    payloads: dict[str, dict[str, Any]] = {}
    for value, board in boards.items():
        label = loaded.label + (f" [{by}={value}]" if by else "")
        try:
            present = [m for m in exclude if m in board.models] if by else list(exclude)
            fitted_on = board.filter(
                exclude_models=present,
                min_battles=options["min_battles"],
                both_bad=options["both_bad"],
            )
            fitted = rater.fit(fitted_on)
            payload = leaderboard_payload(
                fitted,
                fitted_on,
                **{**payload_options(loaded, options), "source": label},
            )
        except StableArenaError as exc:
            if not by:
                raise
            warnings.warn(f"{label}: no board — {exc}", stacklevel=2)
            payload = {"source": label, "n_battles": len(board), "error": str(exc)}
        if conditions:
            payload["where"] = conditions
        if by:
            payload["by"] = {by: value}
        payloads[value] = payload
    if not by:
        emit(payloads[""], fmt, output, table=_board_renderable)
        return
    if fmt.lower() == "csv":
        rows = [
            {by: value, **entry} for value, p in payloads.items() for entry in p.get("models", [])
        ]
        emit({"models": rows}, fmt, output)
        return

    def table(all_boards: dict[str, Any]) -> Any:
        from rich.console import Group

        return Group(*(_board_renderable(p) for p in all_boards.values()))

    emit(payloads, fmt, output, table=table)
