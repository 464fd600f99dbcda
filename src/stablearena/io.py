"""Readers for the battle-log formats arenas publish (SPEC §2).

:func:`read_battles` accepts a path (CSV, JSON Lines, Parquet, JSON) or a pandas DataFrame and
returns validated :class:`~stablearena.battles.Battles`, or :class:`~stablearena.battles.PairCounts`
for a leaderbot pair-count object ``{"models", "X", "Y"}``.

Columns are detected by name (first match wins, case-insensitive):

========== ==========================================================================
role       accepted names
========== ==========================================================================
model_a    model_a, left, model_left, modela, model_1
model_b    model_b, right, model_right, modelb, model_2
winner     winner, outcome, result, label, vote
annotator  judge, worker, annotator, annotator_id, judge_id, rater, user, user_id
prompt     prompt, prompt_id, question_id, question
timestamp  tstamp, timestamp, time
weight     weight, weights
========== ==========================================================================

or given explicitly with ``columns={"model_a": "...", ...}``. CSV files are parsed with Arrow's
multi-threaded reader and names are dictionary-encoded in Arrow, so reading costs little more
than the parse itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .battles import (
    UNKNOWN_ANNOTATOR,
    Battles,
    PairCounts,
    _row_hint,
    codes_from_labels,
    parse_outcomes,
)
from .errors import InputError

__all__ = [
    "COLUMN_ALIASES",
    "UNKNOWN_ANNOTATOR",
    "FORMATS",
    "read_battles",
    "detect_format",
    "extra_columns",
]

COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "model_a": ("model_a", "left", "model_left", "modela", "model_1"),
    "model_b": ("model_b", "right", "model_right", "modelb", "model_2"),
    "winner": ("winner", "outcome", "result", "label", "vote"),
    "annotator": (
        "judge",
        "worker",
        "annotator",
        "annotator_id",
        "judge_id",
        "rater",
        "user",
        "user_id",
    ),
    "prompt": ("prompt", "prompt_id", "question_id", "question"),
    "timestamp": ("tstamp", "timestamp", "time"),
    "weight": ("weight", "weights"),
}
_REQUIRED = ("model_a", "model_b", "winner")

FORMATS = ("csv", "jsonl", "parquet", "json")
_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
}


def detect_format(path: Path) -> str:
    """The format implied by the file name (``.gz``/``.bz2``/``.zst`` suffixes are looked through)."""
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in (".gz", ".bz2", ".zst", ".zstd", ".lz4"):
        suffixes.pop()
    if suffixes and suffixes[-1] in _EXTENSIONS:
        return _EXTENSIONS[suffixes[-1]]
    raise InputError(
        f"{path}: cannot tell the format from the extension {''.join(path.suffixes) or '(none)'}; "
        f"use one of {', '.join(sorted(_EXTENSIONS))} or pass the format explicitly ({', '.join(FORMATS)})."
    )


def _resolve_columns(
    names: list[str], columns: Mapping[str, str] | None, source: str
) -> dict[str, str]:
    """Map roles → actual column names."""
    given = dict(columns or {})
    unknown_roles = sorted(set(given) - set(COLUMN_ALIASES))
    if unknown_roles:
        raise InputError(
            f"unknown column role(s) {unknown_roles}; roles are {', '.join(COLUMN_ALIASES)}."
        )
    lower = {n.lower(): n for n in names}
    out: dict[str, str] = {}
    for role, aliases in COLUMN_ALIASES.items():
        if role in given:
            if given[role] not in names:
                raise InputError(
                    f"{source}: column {given[role]!r} (given for {role}) does not exist; "
                    f"the columns are: {', '.join(names)}."
                )
            out[role] = given[role]
            continue
        for alias in aliases:
            if alias in lower and lower[alias] not in out.values():
                out[role] = lower[alias]
                break
    missing = [r for r in _REQUIRED if r not in out]
    if missing:
        raise InputError(
            f"{source}: no column for {', '.join(missing)}. The columns are: {', '.join(names) or '(none)'}. "
            f"Name them explicitly (e.g. --col model_a=NAME, or columns={{'model_a': 'NAME'}}); "
            f"recognised names for model_a: {', '.join(COLUMN_ALIASES['model_a'])}; model_b: "
            f"{', '.join(COLUMN_ALIASES['model_b'])}; winner: {', '.join(COLUMN_ALIASES['winner'])}."
        )
    return out


def _encode_arrow(
    col: pa.ChunkedArray | pa.Array, what: str, source: str, missing: str | None = None
) -> tuple[np.ndarray, list[str]]:
    """Dictionary-encode a column of names: (codes into the names, sorted unique names).

    The work on strings is done once per distinct value (on the dictionary), not once per row:
    surrounding blanks are trimmed and empty or missing names are an error naming the rows —
    unless ``missing`` is given, which then names them (annotators: ``"unknown"``).
    """
    if isinstance(col, pa.ChunkedArray):
        if pa.types.is_dictionary(col.type):
            col = (
                pa.chunked_array(col.chunks, col.type).unify_dictionaries()
                if col.num_chunks > 1
                else col
            )
        col = col.combine_chunks()
    if pa.types.is_dictionary(col.type) and not (
        pa.types.is_string(col.type.value_type) or pa.types.is_large_string(col.type.value_type)
    ):
        col = col.cast(col.type.value_type)
    if not pa.types.is_dictionary(col.type):
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            col = pc.cast(col, pa.string())
        col = pc.dictionary_encode(col)
    values = [str(v).strip() for v in col.dictionary.to_pylist()]
    indices = col.indices
    if col.null_count:
        if missing is None:
            bad = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
            raise InputError(f"{_row_hint(bad, source)}: the {what} name is empty or missing.")
        indices = pc.fill_null(indices, len(values))
        values.append(missing)
    if missing is not None:
        values = [v if v else missing for v in values]
    trimmed = np.asarray(values, dtype=object)
    names, remap = np.unique(trimmed, return_inverse=True)
    codes = remap.astype(np.int32)[indices.to_numpy(zero_copy_only=False)]
    if len(names) and names[0] == "":
        bad = np.flatnonzero(codes == 0)
        raise InputError(f"{_row_hint(bad, source)}: the {what} name is empty or missing.")
    return codes, [str(n) for n in names]


def _outcomes_arrow(col: pa.ChunkedArray | pa.Array, source: str) -> np.ndarray:
    if isinstance(col, pa.ChunkedArray):
        if pa.types.is_dictionary(col.type) and col.num_chunks > 1:
            col = col.unify_dictionaries()
        col = col.combine_chunks()
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        return parse_outcomes(pd.Series(col.to_numpy(zero_copy_only=False)), source)
    if pa.types.is_boolean(col.type):
        return parse_outcomes(pd.Series(col.to_numpy(zero_copy_only=False)), source)
    if pc.any(pc.is_null(col)).as_py():
        bad = np.flatnonzero(pc.is_null(col).to_numpy(zero_copy_only=False))
        raise InputError(f"{_row_hint(bad, source)}: the outcome is empty.")
    if pa.types.is_dictionary(col.type):
        enc = col
    else:
        enc = pc.dictionary_encode(pc.cast(col, pa.string()))
    labels = enc.dictionary.to_pylist()
    return codes_from_labels(labels, enc.indices.to_numpy(zero_copy_only=False), source)


def _numeric(col: pa.ChunkedArray, role: str, source: str) -> np.ndarray:
    try:
        if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
            arr = (
                pc.cast(col, pa.timestamp("us"))
                .to_numpy(zero_copy_only=False)
                .astype("datetime64[us]")
            )
            return arr.astype(np.int64) / 1e6
        x = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise InputError(f"{source}: the {role} column must be numeric.") from None
    bad = np.flatnonzero(~np.isfinite(x))
    if len(bad):
        raise InputError(
            f"{_row_hint(bad, source)}: the {role} value is missing or not a finite number."
        )
    return x


def _battles_from_table(
    table: pa.Table,
    columns: Mapping[str, str] | None,
    source: str,
    extra: Sequence[str] | str | None = None,
) -> Battles:
    roles = _resolve_columns(table.column_names, columns, source)
    if table.num_rows == 0:
        raise InputError(f"{source}: the battle log is empty (no data rows).")
    a_codes, a_names = _encode_arrow(table[roles["model_a"]], "model", source)
    b_codes, b_names = _encode_arrow(table[roles["model_b"]], "model", source)
    names = sorted(set(a_names) | set(b_names))
    lookup = np.asarray(names, dtype=object)
    a_map = np.searchsorted(lookup, np.asarray(a_names, dtype=object)).astype(np.int32)
    b_map = np.searchsorted(lookup, np.asarray(b_names, dtype=object)).astype(np.int32)
    outcome = _outcomes_arrow(table[roles["winner"]], source)
    wanted_extra = extra
    extra: dict[str, Any] = {}
    for role in ("annotator", "prompt"):
        if role in roles:
            codes, dictionary = _encode_arrow(
                table[roles[role]], role, source, UNKNOWN_ANNOTATOR if role == "annotator" else None
            )
            order = np.argsort(
                np.asarray([str(d) for d in dictionary], dtype=object), kind="stable"
            )
            rank = np.empty(len(order), dtype=np.int32)
            rank[order] = np.arange(len(order), dtype=np.int32)
            extra[role] = rank[codes]
            extra[role + "s"] = tuple(str(dictionary[k]) for k in order)
    if "timestamp" in roles:
        extra["timestamp"] = _numeric(table[roles["timestamp"]], "timestamp", source)
    if "weight" in roles:
        extra["weight"] = _numeric(table[roles["weight"]], "weight", source)
    if wanted_extra is not None:
        extra["extra"] = extra_columns(table, wanted_extra, source, exclude=set(roles.values()))
    return Battles(
        models=tuple(str(n) for n in names),
        model_a=a_map[a_codes],
        model_b=b_map[b_codes],
        outcome=outcome,
        source=source,
        **extra,
    )


def _pair_counts_from_json(obj: Mapping[str, Any], source: str) -> PairCounts:
    try:
        models = list(obj["models"])
        x = np.asarray(obj["X"], dtype=np.int64)
        y = np.asarray(obj["Y"], dtype=float)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f"{source}: a leaderbot pair-count object needs models, X and Y ({exc})."
        ) from None
    if len(x) == 0:
        raise InputError(f"{source}: the pair-count object has no pairs.")
    return PairCounts.from_arrays(models, x, y, source=source)


def _read_json(
    path: Path, columns: Mapping[str, str] | None, extra: Sequence[str] | str | None = None
) -> Battles | PairCounts:
    source = str(path)
    try:
        with _open_text(path) as fh:
            obj = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        hint = (
            " It looks like JSON Lines; rename it .jsonl or pass the format jsonl."
            if "Extra data" in str(exc)
            else ""
        )
        raise InputError(f"{source}: not valid JSON ({exc}).{hint}") from None
    if isinstance(obj, dict) and {"models", "X", "Y"} <= set(obj):
        return _pair_counts_from_json(obj, source)
    if isinstance(obj, dict) and all(isinstance(v, (list, dict)) for v in obj.values()) and obj:
        try:
            frame = pd.DataFrame(obj)
        except ValueError as exc:
            raise InputError(
                f"{source}: a JSON object of columns must have equal lengths ({exc})."
            ) from None
        return read_battles(frame, columns=columns, source=source, extra=extra)
    if isinstance(obj, list):
        if not obj:
            raise InputError(f"{source}: the battle log is empty (an empty JSON list).")
        if not all(isinstance(r, dict) for r in obj):
            raise InputError(f"{source}: a JSON battle log must be a list of records (objects).")
        return read_battles(
            pd.DataFrame.from_records(obj), columns=columns, source=source, extra=extra
        )
    raise InputError(
        f"{source}: JSON must be a list of battle records (FastChat clean_battle) or a leaderbot "
        "pair-count object with keys models, X, Y."
    )


def _open_text(path: Path):  # noqa: ANN202
    import gzip

    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _looks_binary(path: Path) -> bool:
    import gzip

    opener = gzip.open if path.suffix.lower() == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return True
    return b"\x00" in head or head.startswith(b"PAR1")


def _csv_header(path: Path, delimiter: str) -> list[str]:
    import csv

    with _open_text(path) as fh:
        try:
            first = next(csv.reader(fh, delimiter=delimiter))
        except StopIteration:
            return []
        except (csv.Error, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: not a readable CSV file ({exc}).") from None
    return [c.lstrip("\ufeff") for c in first]


def _read_csv(
    path: Path,
    columns: Mapping[str, str] | None,
    src: str,
    extra: Sequence[str] | str | None = None,
) -> Battles:
    """Arrow's multi-threaded CSV reader, only the needed columns, names dictionary-encoded while parsing."""
    from pyarrow import csv as pacsv

    suffixes = [x.lower() for x in path.suffixes]
    delimiter = "\t" if ".tsv" in suffixes else ","
    header = _csv_header(path, delimiter)
    roles = _resolve_columns(header, columns, src)
    wanted = list(dict.fromkeys([*roles.values(), *_extra_top_columns(header, extra, src)]))
    dict_type = pa.dictionary(pa.int32(), pa.string())
    types = {
        roles[r]: dict_type
        for r in ("model_a", "model_b", "winner", "annotator", "prompt")
        if r in roles
    }
    try:
        table = pacsv.read_csv(
            path,
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(include_columns=wanted, column_types=types),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise InputError(f"{src}: not a readable CSV file ({exc}).") from None
    return _battles_from_table(table, roles, src, extra)


def read_battles(
    data: str | Path | pd.DataFrame,
    *,
    columns: Mapping[str, str] | None = None,
    fmt: str | None = None,
    source: str | None = None,
    extra: Sequence[str] | str | None = None,
) -> Battles | PairCounts:
    """Read a battle log (or a leaderbot pair-count JSON) into :class:`Battles` / :class:`PairCounts`.

    Args:
        data: a path or a pandas DataFrame.
        columns: explicit role → column-name mapping (roles as in the module docstring).
        fmt: ``csv``, ``jsonl``, ``parquet`` or ``json``; default from the extension.
        source: name used in messages (default the path).
        extra: other columns to keep in :attr:`Battles.extra` (for category filters and
            covariates, see :func:`extra_columns`): names, nested fields as ``parent.child``, or
            ``"*"`` for every column.
    """
    if isinstance(data, pd.DataFrame):
        src = source or "<DataFrame>"
        names = [str(c) for c in data.columns]
        roles = _resolve_columns(names, columns, src)
        if len(data) == 0:
            raise InputError(f"{src}: the battle log is empty (no rows).")
        frame = data.rename(columns={c: str(c) for c in data.columns})[
            list(dict.fromkeys([*roles.values(), *_extra_top_columns(names, extra, src)]))
        ]
        try:
            table = pa.Table.from_pandas(frame, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            table = pa.Table.from_pandas(
                frame.astype(object).astype(str).where(frame.notna(), None), preserve_index=False
            )
        return _battles_from_table(table, roles, src, extra)
    path = Path(data)
    src = source or str(path)
    if not path.exists():
        raise InputError(f"{src}: no such file.")
    if path.is_dir():
        raise InputError(f"{src}: is a directory; give a battle-log file.")
    kind = fmt.lower() if fmt else detect_format(path)
    if kind not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    if path.stat().st_size == 0:
        raise InputError(f"{src}: the file is empty.")
    if kind in ("csv", "jsonl", "json") and _looks_binary(path):
        raise InputError(
            f"{src}: the file is binary, not {kind.upper()} as its name says"
            + (
                " (it looks like Parquet; rename it .parquet or pass the format parquet)."
                if kind != "parquet"
                else "."
            )
        )
    if kind == "csv":
        return _read_csv(path, columns, src, extra)
    if kind == "jsonl":
        from pyarrow import json as pajson

        try:
            table = pajson.read_json(path)
        except pa.ArrowInvalid as exc:
            raise InputError(
                f"{src}: not valid JSON Lines ({exc}). A single JSON document needs the .json extension."
            ) from None
        return _battles_from_table(table, columns, src, extra)
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(
                f"{src}: not a valid Parquet file ({exc}). Is it CSV or JSON with the wrong extension?"
            ) from None
        return _battles_from_table(table, columns, src, extra)
    return _read_json(path, columns, extra)


# ---------------------------------------------------------------------------- extra columns
def _extra_top_columns(
    names: Sequence[str], extra: Sequence[str] | str | None, source: str
) -> list[str]:
    """The top-level columns that hold the ``extra`` names (a nested ``parent.child`` name lives
    in the column ``parent``); an unknown name is an error listing the columns."""
    if extra is None:
        return []
    if isinstance(extra, str) and extra == "*":
        return list(names)
    wanted = [extra] if isinstance(extra, str) else list(extra)
    out = []
    for name in wanted:
        if name in names:
            out.append(name)
            continue
        parents = [c for c in names if name.startswith(c + ".")]
        if not parents:
            raise InputError(
                f"{source}: no column {name!r}. The columns are: {', '.join(names) or '(none)'} "
                "(nested fields are named parent.child)."
            )
        out.append(max(parents, key=len))
    return out


def _leaves(name: str, col: pa.ChunkedArray | pa.Array) -> Iterator[tuple[str, Any]]:
    """``(name, column)`` of every non-struct field of ``col``, nested names joined by dots."""
    if pa.types.is_struct(col.type):
        for k in range(col.type.num_fields):
            yield from _leaves(f"{name}.{col.type.field(k).name}", pc.struct_field(col, [k]))
    else:
        yield name, col


def _to_numpy(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Numbers as ``float64`` (missing → NaN); anything else as an object array of Python values."""
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    return np.asarray(col.to_pylist() + [None], dtype=object)[:-1]


def extra_columns(
    table: pa.Table, wanted: Sequence[str] | str, source: str, exclude: set[str] | None = None
) -> dict[str, np.ndarray]:
    """Per-battle arrays of the ``wanted`` columns of ``table``.

    Struct columns (e.g. LMArena's ``conv_metadata``) are flattened into ``parent.child`` leaves;
    naming a struct keeps all its leaves. ``"*"`` keeps every column not in ``exclude`` (the
    columns already read as roles). Numbers become ``float64`` (missing → NaN), everything else
    an object array (strings, booleans, lists of conversation turns, ``None`` when missing).
    """
    names = table.column_names
    every = isinstance(wanted, str) and wanted == "*"
    tops = _extra_top_columns(names, wanted, source)
    requested = None if every else ([wanted] if isinstance(wanted, str) else list(wanted))
    out: dict[str, np.ndarray] = {}
    for top in dict.fromkeys(tops):
        if every and exclude and top in exclude:
            continue
        leaves = dict(_leaves(top, table[top]))
        for r in requested or ():
            if r.startswith(top + ".") and not any(
                leaf == r or leaf.startswith(r + ".") for leaf in leaves
            ):
                raise InputError(
                    f"{source}: column {top!r} has no field {r[len(top) + 1 :]!r}; its fields are "
                    f"{', '.join(leaf[len(top) + 1 :] for leaf in leaves)}."
                )
        for leaf, col in leaves.items():
            if requested is None or any(
                r == top or leaf == r or leaf.startswith(r + ".") for r in requested
            ):
                out[leaf] = _to_numpy(col)
    return out
