"""Readers for the battle-log formats arenas publish (docs/methods/data.md).

:func:`read_battles` accepts a path (CSV, TSV, JSON Lines, Parquet, JSON — also compressed with
gzip, bzip2, xz, zstd or lz4), a directory or glob of such files read as one log, ``"-"`` for
standard input, or a pandas DataFrame, and returns validated :class:`~stablearena.data.battles.Battles`
(or :class:`~stablearena.data.battles.PairCounts` for a leaderbot pair-count object
``{"models", "X", "Y"}``). :func:`read_counts` reads the same inputs straight into pair counts,
batch by batch, so that its memory does not grow with the number of battles (logs bigger than
memory).

Columns are detected by name (first match wins, case-insensitive):

========== ==========================================================================
role       accepted names
========== ==========================================================================
model_a    model_a, left, model_left, modela, model_1
model_b    model_b, right, model_right, modelb, model_2
winner     winner, outcome, result, label, vote — or the one-hot layout of the public
           LMSYS preference data: winner_model_a, winner_model_b, winner_tie (0/1 each;
           exactly one 1 per row; optionally winner_tie (bothbad) / winner_both_bad)
annotator  judge, worker, annotator, annotator_id, judge_id, rater, user, user_id
prompt     prompt, prompt_id, question_id, question
timestamp  tstamp, timestamp, time
weight     weight, weights
anony      anony
========== ==========================================================================

``anony`` is FastChat's flag of an anonymous vote: a row with ``anony`` false (the models'
names were shown, or an answer named a model) is left out, as FastChat's leaderboard does,
unless ``keep_non_anony=True`` (``stablearena rank --keep-non-anony``); true, 1 or an empty
value is an anonymous vote.

or given explicitly with ``columns={"model_a": "...", ...}``. CSV files are parsed with Arrow's
multi-threaded reader and names are dictionary-encoded in Arrow, so reading costs little more
than the parse itself.

What a file is comes from its extension, checked against its content (magic bytes): a Parquet
file named ``.csv``, a gzip file without ``.gz``, a ZIP archive, an Excel workbook, random bytes
or UTF-16 text are each reported as what they are. Standard input and files without a known
extension are recognised from their content. Every problem is an
:class:`~stablearena.errors.InputError` naming the file, the row, the field and the value.
"""

from __future__ import annotations

import glob as _glob
import json
import os
import re
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..choices import INPUT_FORMATS
from ..errors import InputError, StableArenaWarning
from .battles import (
    UNKNOWN_ANNOTATOR,
    WEIGHT_RANGE,
    Battles,
    Outcome,
    PairCounts,
    _row_hint,
    check_weights,
    codes_from_labels,
    count_rows,
    parse_outcomes,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "csv_safe",
    "csv_text",
    "COLUMN_ALIASES",
    "ONE_HOT_COLUMNS",
    "UNKNOWN_ANNOTATOR",
    "FORMATS",
    "read_battles",
    "read_counts",
    "detect_format",
    "sniff",
    "should_stream",
    "STREAM_THRESHOLD",
    "extra_columns",
    "anony_mask",
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
    "anony": ("anony",),
}
#: One-hot outcome columns (LMSYS preference data) → the outcome each stands for.
ONE_HOT_COLUMNS: dict[str, Outcome] = {
    "winner_model_a": Outcome.A,
    "winner_model_b": Outcome.B,
    "winner_tie": Outcome.TIE,
    "winner_tie (bothbad)": Outcome.TIE_BOTH_BAD,
    "winner_both_bad": Outcome.TIE_BOTH_BAD,
}
_ONE_HOT_ROLE = "winner_onehot"
_REQUIRED = ("model_a", "model_b", "winner")

FORMATS = INPUT_FORMATS
_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
}
#: Extensions that say nothing about the content: the content decides.
_GENERIC_EXTENSIONS = ("", ".txt", ".dat", ".data", ".log", ".out")
#: Compression suffix → codec.
_COMPRESSION_SUFFIXES = {
    ".gz": "gzip",
    ".gzip": "gzip",
    ".bz2": "bz2",
    ".xz": "xz",
    ".zst": "zstd",
    ".zstd": "zstd",
    ".lz4": "lz4",
}
_CODEC_NAMES = {"gzip": "gzip", "bz2": "bzip2", "xz": "xz", "zstd": "zstd", "lz4": "lz4"}
#: A single file larger than this is counted batch by batch by :func:`should_stream` callers.
STREAM_THRESHOLD: int = 1 << 30
#: Rows per batch when streaming.
BATCH_ROWS: int = 1 << 20

# ---------------------------------------------------------------------------- what a file is
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"PAR1", "parquet"),
    (b"ARROW1", "arrow"),
    (b"SQLite format 3\x00", "sqlite"),
    (b"%PDF", "pdf"),
    (b"\x89PNG", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF8", "gif"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole2"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"\x80\x04\x95", "pickle"),
    (b"\x80\x05\x95", "pickle"),
    (b"\x93NUMPY", "npy"),
    (b"\x89HDF", "hdf5"),
    (b"\xef\xbb\xbf", "text"),  # UTF-8 byte-order mark
    (b"\xff\xfe", "utf16"),
    (b"\xfe\xff", "utf16"),
)
#: What each kind is, for messages.
KIND_NAMES = {
    "gzip": "gzip-compressed data",
    "bz2": "bzip2-compressed data",
    "xz": "xz-compressed data",
    "zstd": "zstd-compressed data",
    "lz4": "lz4-compressed data",
    "parquet": "a Parquet file",
    "arrow": "an Arrow IPC (Feather) file",
    "sqlite": "an SQLite database",
    "pdf": "a PDF document",
    "png": "a PNG image",
    "jpeg": "a JPEG image",
    "gif": "a GIF image",
    "ole2": "an old-style Microsoft Office file (e.g. Excel .xls)",
    "zip": "a ZIP archive",
    "xlsx": "an Excel workbook (.xlsx, a ZIP archive)",
    "pickle": "a Python pickle",
    "npy": "a NumPy array file",
    "hdf5": "an HDF5 file",
    "utf16": "UTF-16 text",
    "binary": "binary data (not text)",
    "empty": "empty",
    "json": "JSON text",
    "jsonl": "JSON Lines text",
    "csv": "CSV text",
    "text": "text",
}


def sniff(head: bytes) -> str:
    """What the first bytes of a file say it is: a compression codec, ``parquet``, another
    known binary format (``zip``, ``xlsx``, ``sqlite``, ``pdf``, …), ``utf16``, ``binary``,
    ``empty``, or for text ``json`` (starts with ``[``/``{``), ``jsonl`` (several lines that each
    start with ``{``) or ``csv``."""
    if not head.strip():
        return "empty"
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            if kind == "zip" and (b"[Content_Types].xml" in head or b"xl/" in head):
                return "xlsx"
            if kind != "text":
                return kind
            head = head[len(magic) :]
            if not head.strip():
                return "empty"
            break
    sample = head[:65536]
    if b"\x00" in sample:
        return "binary"
    try:
        text = sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(sample) - 4:  # not merely a character cut at the end of the sample
            bad = sample[exc.start : exc.start + 64]
            printable = sum(32 <= c < 127 or c in (9, 10, 13) for c in bad)
            if printable < len(bad) // 2:
                return "binary"
            return "csv"  # text in another encoding: the CSV reader names the row
        text = sample[: exc.start].decode("utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        return "json"
    if stripped.startswith("{"):
        lines = [ln for ln in stripped.splitlines() if ln.strip()]
        if len(lines) > 1 and all(ln.lstrip().startswith("{") for ln in lines[:3]):
            try:
                json.loads(lines[0])
                return "jsonl"
            except ValueError:
                return "json"
        return "json"
    return "csv"


def _compression_of(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return _COMPRESSION_SUFFIXES.get(suffix)


def detect_format(path: Path) -> str:
    """The format implied by the file name (compression suffixes are looked through)."""
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in _COMPRESSION_SUFFIXES:
        suffixes.pop()
    if suffixes and suffixes[-1] in _EXTENSIONS:
        return _EXTENSIONS[suffixes[-1]]
    raise InputError(
        f"{path}: cannot tell the format from the extension {''.join(path.suffixes) or '(none)'}; "
        f"use one of {', '.join(sorted(_EXTENSIONS))} or pass the format explicitly "
        f"(--input-format {'|'.join(FORMATS)})."
    )


def _kind_from_name(path: Path) -> tuple[str | None, str | None]:
    """(format from the extension or None when the extension says nothing, compression)."""
    compression = _compression_of(path)
    inner = path.with_suffix("") if compression else path
    suffix = inner.suffix.lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix], compression
    if suffix in _GENERIC_EXTENSIONS or len(suffix) > 12 or " " in suffix:
        return None, compression
    return "?", compression


# ---------------------------------------------------------------------------- sources
@dataclass(frozen=True)
class _Source:
    """One input resolved: what to read and how.

    ``path`` is a file, or None for standard input (then ``data`` holds its bytes);
    ``fmt`` csv/tsv/jsonl/parquet/json; ``compression`` a codec name or None."""

    name: str
    path: Path | None
    fmt: str
    compression: str | None
    delimiter: str = ","
    data: bytes | None = None

    def stream(self) -> Any:
        """A (decompressing) pyarrow input stream over the whole content."""
        if self.data is not None:
            raw: Any = pa.BufferReader(self.data)
        else:
            raw = pa.OSFile(str(self.path), "rb")
        if self.compression == "xz":
            import lzma

            return pa.PythonFile(lzma.open(raw), mode="r")
        if self.compression:
            return pa.CompressedInputStream(raw, self.compression)
        return raw

    def read_bytes(self) -> bytes:
        with self.stream() as s:
            return s.read()

    def random_access(self) -> Any:
        """A seekable source (Parquet needs one): the path, or the (decompressed) bytes."""
        if self.path is not None and not self.compression:
            return str(self.path)
        try:
            return pa.BufferReader(self.read_bytes())
        except Exception as exc:  # noqa: BLE001 - every codec raises its own kind
            raise _corrupt(self, exc) from None


def _head(path: Path, n: int = 65536) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except PermissionError:
        raise InputError(f"{path}: permission denied (cannot read the file).") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror or exc}).") from None


def _decompressed_head(src: _Source, n: int = 65536) -> bytes:
    """The first bytes after decompression (errors reported as corrupt data)."""
    try:
        with src.stream() as s:
            return s.read(n)
    except Exception as exc:  # noqa: BLE001 - every codec raises its own kind
        raise _corrupt(src, exc) from None


def _corrupt(src: _Source, exc: BaseException) -> InputError:
    codec = _CODEC_NAMES.get(src.compression or "", src.compression or "")
    detail = str(exc).strip() or type(exc).__name__
    return InputError(
        f"{src.name}: the {codec} data are corrupt or truncated ({detail}); the file may not "
        "have been downloaded or written completely — fetch it again or decompress it to check."
    )


def _parquet_error(src: _Source, exc: BaseException) -> InputError:
    return InputError(
        f"{src.name}: not a valid Parquet file ({' '.join(str(exc).split())}); it may be "
        "truncated or corrupt."
    )


def _wrong_kind(name: str, kind: str, wanted: str | None) -> InputError:
    what = KIND_NAMES.get(kind, kind)
    advice = {
        "parquet": "rename it .parquet or pass --input-format parquet",
        "zip": "unzip it and give the battle log inside",
        "xlsx": "export the sheet as CSV",
        "ole2": "export the sheet as CSV",
        "utf16": "save it as UTF-8",
        "arrow": "convert it to Parquet or CSV",
        "sqlite": "export the table as CSV or Parquet",
    }.get(kind, "give a CSV, JSON Lines, Parquet or JSON battle log")
    if wanted:
        lead = "the file is UTF-16 text" if kind == "utf16" else f"the file is binary: it is {what}"
        return InputError(
            f"{name}: {lead}, not {wanted.upper()} as its name or --input-format says; {advice}."
        )
    return InputError(f"{name}: the file is {what}, not a battle log; {advice}.")


def _resolve_source(path: Path, fmt: str | None, data: bytes | None = None) -> _Source:
    """Work out what ``path`` (or standard input's ``data``) is: format and compression, from
    the extension and ``fmt`` checked against the content."""
    name = "<stdin>" if data is not None else str(path)
    if fmt is not None and fmt.lower() not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    named, compression = (None, None) if data is not None else _kind_from_name(path)
    head = data[:65536] if data is not None else _head(path)
    kind = sniff(head)
    if kind == "empty":
        raise InputError(f"{name}: the file is empty.")
    if kind in _COMPRESSION_SUFFIXES.values() or kind in ("gzip", "bz2", "xz", "zstd", "lz4"):
        if compression is not None and compression != kind:
            raise InputError(
                f"{name}: the content is {KIND_NAMES[kind]}, not {_CODEC_NAMES[compression]} as "
                "the extension says; rename the file."
            )
        compression = kind
        probe = _Source(name, path if data is None else None, "?", compression, data=data)
        head = _decompressed_head(probe)
        kind = sniff(head)
        if kind == "empty":
            raise InputError(f"{name}: the file is empty after decompression.")
    elif compression is not None:
        raise InputError(
            f"{name}: the name says {_CODEC_NAMES[compression]}-compressed, but the content is "
            f"{KIND_NAMES.get(kind, kind)}; rename the file."
        )
    wanted = fmt.lower() if fmt else (named if named not in (None, "?") else None)
    if named == "?" and fmt is None:
        if kind in ("json", "jsonl", "csv", "parquet"):
            raise InputError(
                f"{name}: cannot tell the format from the extension {''.join(path.suffixes)} (the "
                f"content looks like {KIND_NAMES[kind]}); rename the file (.csv, .tsv, .jsonl, "
                f".parquet, .json) or pass the format explicitly (--input-format "
                f"{'|'.join(FORMATS)})."
            )
        raise _wrong_kind(name, kind, None)
    text_kinds = ("json", "jsonl", "csv")
    if kind not in (*text_kinds, "parquet"):
        raise _wrong_kind(name, kind, wanted)
    if wanted is None:
        chosen = kind
    elif wanted == "parquet":
        if kind != "parquet":
            raise InputError(
                f"{name}: not a valid Parquet file: it is {KIND_NAMES[kind]} (no Parquet magic "
                f"bytes); rename it .{kind} or pass --input-format {kind}."
            )
        chosen = "parquet"
    else:
        if kind == "parquet":
            raise _wrong_kind(name, kind, wanted)
        chosen = wanted
    delimiter = ","
    if chosen == "csv":
        inner = path.with_suffix("") if (data is None and _compression_of(path)) else path
        first = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0]
        if data is None and inner.suffix.lower() == ".tsv":
            delimiter = "\t"
        elif b"," not in first:  # a header without commas: the separator it does use
            counts = {d: first.count(d.encode()) for d in ("\t", ";", "|")}
            best = max(counts, key=lambda d: counts[d])
            if counts[best]:
                delimiter = best
    return _Source(name, path if data is None else None, chosen, compression, delimiter, data)


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def _battle_files(directory: Path) -> list[Path]:
    """Battle-log files under ``directory``, recursively, in sorted order of their paths (the
    order online Elo replays them in); names starting with '.' or '_' are skipped, as Spark and
    Arrow datasets write them for metadata."""
    files: list[Path] = []
    unknown: list[Path] = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        for n in sorted(names):
            if n.startswith((".", "_")):
                continue
            p = Path(root) / n
            fmt, _ = _kind_from_name(p)
            (files if fmt in ("csv", "jsonl", "parquet", "json") else unknown).append(p)
    if unknown:
        shown = ", ".join(str(p.relative_to(directory)) for p in unknown[:5])
        raise InputError(
            f"{directory}: holds files that are not battle logs by their extension ({shown}"
            f"{' …' if len(unknown) > 5 else ''}); move them out, or give a glob that selects the "
            f"logs (e.g. '{directory}/*.parquet')."
        )
    if not files:
        raise InputError(f"{directory}: the directory holds no battle-log files.")
    return sorted(files, key=lambda p: p.relative_to(directory).parts)


def _input_paths(path: str | Path) -> tuple[list[Path], str]:
    """The files ``path`` stands for (a file, a directory, or a glob) and a label for messages."""
    text = os.fspath(path)
    p = Path(text)
    if p.is_dir():
        return _battle_files(p), text
    if p.exists():
        return [p], text
    if _is_glob(text):
        matches = sorted(Path(m) for m in _glob.glob(text, recursive=True))
        files = [m for m in matches if m.is_file() and not m.name.startswith((".", "_"))]
        if not files:
            raise InputError(f"{text}: no files match this pattern.")
        return files, text
    if p.is_symlink():
        raise InputError(f"{text}: a broken symbolic link (its target does not exist).")
    from .datasets.registry import DATASETS

    raise InputError(
        f"{text}: no such file. Built-in data sets (by name on the command line, "
        f"stablearena.data.datasets.load(NAME) in Python): {', '.join(DATASETS)}."
    )


def _read_stdin() -> bytes:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError("'-' reads standard input, but there is none.")
    if sys.stdin.isatty():
        raise InputError(
            "'-' reads the battle log from standard input, which is a terminal; pipe a file in "
            "(e.g. `cat votes.csv | stablearena rank -`)."
        )
    data = stream.read()
    if not data:
        raise InputError("<stdin>: standard input is empty.")
    return data


def should_stream(path: str | Path) -> bool:
    """Whether :func:`read_counts` should stream ``path`` rather than read it into memory: a
    directory or glob of files, or a single file over :data:`STREAM_THRESHOLD` bytes."""
    text = os.fspath(path)
    if text == "-":
        return False
    p = Path(text)
    if p.is_dir():
        return True
    if p.exists():
        try:
            return p.stat().st_size > STREAM_THRESHOLD
        except OSError:
            return False
    return _is_glob(text)


# ---------------------------------------------------------------------------- columns
def _resolve_columns(
    names: list[str], columns: Mapping[str, str] | None, source: str
) -> dict[str, Any]:
    """Map roles → actual column names (``winner_onehot`` → the one-hot columns by outcome)."""
    given = dict(columns or {})
    unknown_roles = sorted(set(given) - set(COLUMN_ALIASES))
    if unknown_roles:
        raise InputError(
            f"unknown column role(s) {unknown_roles}; roles are {', '.join(COLUMN_ALIASES)}."
        )
    lower: dict[str, str] = {}
    for n in names:
        lower.setdefault(n.lower(), n)
    out: dict[str, Any] = {}
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
    if "winner" not in out:
        onehot = {lower[c]: code for c, code in ONE_HOT_COLUMNS.items() if c in lower}
        if {Outcome.A, Outcome.B} <= set(onehot.values()):
            out[_ONE_HOT_ROLE] = onehot
    missing = [
        r for r in _REQUIRED if r not in out and not (r == "winner" and _ONE_HOT_ROLE in out)
    ]
    if missing:
        raise InputError(
            f"{source}: no column for {', '.join(missing)}. The columns are: {', '.join(names) or '(none)'}. "
            f"Name them explicitly (e.g. --col model_a=NAME, or columns={{'model_a': 'NAME'}}); "
            f"recognised names for model_a: {', '.join(COLUMN_ALIASES['model_a'])}; model_b: "
            f"{', '.join(COLUMN_ALIASES['model_b'])}; winner: {', '.join(COLUMN_ALIASES['winner'])} "
            "or one-hot winner_model_a, winner_model_b, winner_tie."
        )
    used = _used_columns(out)
    dups = sorted({c for c in used if names.count(c) > 1})
    if dups:
        raise InputError(
            f"{source}: column {dups[0]!r} appears {names.count(dups[0])} times in the header; "
            "rename the duplicates so that each column has its own name."
        )
    return out


def _used_columns(roles: Mapping[str, Any]) -> list[str]:
    cols: list[str] = []
    for role, col in roles.items():
        cols.extend(col if role == _ONE_HOT_ROLE else [col])
    return list(dict.fromkeys(cols))


def _combine(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        if pa.types.is_dictionary(col.type) and col.num_chunks > 1:
            col = col.unify_dictionaries()
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


_NUMPY_TYPES = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.uint16(): np.uint16,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


def _numpy(arr: pa.Array) -> np.ndarray:
    """A NumPy view or copy of an Arrow array. Fixed-width numbers without nulls are read from
    the data buffer directly (``Array.to_numpy`` would import pandas, about 0.4 s at start-up);
    booleans are unpacked from their bit buffer; anything else goes through ``to_numpy``."""
    if isinstance(arr, pa.ChunkedArray):
        arr = _combine(arr)
    dtype = _NUMPY_TYPES.get(arr.type)
    if arr.null_count == 0 and len(arr):
        if dtype is not None:
            return np.frombuffer(
                arr.buffers()[1],
                dtype=dtype,
                count=len(arr),
                offset=arr.offset * np.dtype(dtype).itemsize,
            )
        if pa.types.is_boolean(arr.type):
            bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
            return np.unpackbits(bits, bitorder="little")[
                arr.offset : arr.offset + len(arr)
            ].astype(bool)
    if len(arr) == 0 and dtype is not None:
        return np.zeros(0, dtype=dtype)
    return arr.to_numpy(zero_copy_only=False)


def _null_rows(col: pa.Array) -> np.ndarray:
    return np.flatnonzero(_numpy(col.is_null()))


def _as_names(col: pa.Array, what: str, source: str) -> pa.Array:
    """A column of names as a dictionary array of strings (numbers become their text)."""
    t = col.type
    if pa.types.is_dictionary(t):
        vt = t.value_type
        if pa.types.is_string(vt) or pa.types.is_large_string(vt):
            return col
        col = col.cast(vt)
        t = vt
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return col.dictionary_encode()
    if pa.types.is_null(t):
        return pa.array([None] * len(col), pa.string()).dictionary_encode()
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        if pa.types.is_floating(t):
            x = _numpy(col).astype(float)
            bad = np.flatnonzero(np.isfinite(x) & (x != np.round(x)) | np.isinf(x))
            if len(bad):
                raise InputError(
                    f"{_row_hint(bad, source)}: the {what} name is the number {float(x[bad[0]])!r}; "
                    "names must be text (or whole-number ids)."
                )
            valid = ~np.isnan(x)
            ints = np.zeros(len(x), dtype=np.int64)
            ints[valid] = x[valid].astype(np.int64)
            col = pa.array(ints, mask=~valid)
        return col.cast(pa.string()).dictionary_encode()
    kind = (
        "lists"
        if pa.types.is_list(t) or pa.types.is_large_list(t)
        else "objects"
        if pa.types.is_struct(t) or pa.types.is_map(t)
        else "true/false values"
        if pa.types.is_boolean(t)
        else f"values of type {t}"
    )
    raise InputError(
        f"{source}: the {what} column holds {kind}, not names; point the role at a text column "
        "(--col ROLE=NAME)."
    )


def _encode_parts(
    col: pa.ChunkedArray | pa.Array, what: str, source: str, missing: str | None = None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Dictionary-encode a column of names: ``(indices, remap, names)`` with ``names`` the
    sorted unique names and ``remap[indices]`` each row's code into them (the caller gathers
    once, after composing ``remap`` with any other mapping of the names).

    The work on strings is done once per distinct value (on the dictionary), not once per row:
    surrounding blanks are trimmed and empty or missing names are an error naming the rows —
    unless ``missing`` is given, which then names them (annotators: ``"unknown"``).
    """
    col = _as_names(_combine(col), what, source)
    values = [str(v).strip() for v in col.dictionary.to_pylist()]
    indices = col.indices
    if col.null_count:
        if missing is None:
            raise InputError(
                f"{_row_hint(_null_rows(col), source)}: the {what} name is empty or missing."
            )
        indices = indices.fill_null(len(values))
        values.append(missing)
    if missing is not None:
        values = [v if v else missing for v in values]
    trimmed = np.asarray(values, dtype=object)
    names, remap = np.unique(trimmed, return_inverse=True)
    idx = _numpy(indices)
    if len(names) and names[0] == "":
        bad = np.flatnonzero(remap[idx] == 0)
        raise InputError(f"{_row_hint(bad, source)}: the {what} name is empty or missing.")
    return idx, remap.astype(np.int32), [str(n) for n in names]


def _encode_arrow(
    col: pa.ChunkedArray | pa.Array, what: str, source: str, missing: str | None = None
) -> tuple[np.ndarray, list[str]]:
    """Dictionary-encode a column of names: (codes into the names, sorted unique names); see
    :func:`_encode_parts`."""
    idx, remap, names = _encode_parts(col, what, source, missing)
    return remap[idx], names


def _outcomes_arrow(col: pa.ChunkedArray | pa.Array, source: str) -> np.ndarray:
    col = _combine(col)
    t = col.type
    if pa.types.is_dictionary(t) and not (
        pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)
    ):
        col = col.cast(t.value_type)
        t = col.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return parse_outcomes(_numpy(col), source)
    if col.null_count:
        raise InputError(f"{_row_hint(_null_rows(col), source)}: the outcome is empty.")
    if pa.types.is_dictionary(t):
        enc = col
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        enc = col.dictionary_encode()
    else:
        raise InputError(
            f"{source}: the outcome column holds {t}, not labels; use model_a/model_b/tie labels "
            "or the numeric score of model_a (1, 0, 0.5)."
        )
    labels = enc.dictionary.to_pylist()
    if "" in labels:  # an empty field of a CSV (read as "", not null: see _csv_options)
        bad = np.flatnonzero(_numpy(enc.indices) == labels.index(""))
        raise InputError(f"{_row_hint(bad, source)}: the outcome is empty.")
    return codes_from_labels(labels, _numpy(enc.indices), source)


def _one_hot_outcomes(table: pa.Table, spec: Mapping[str, Outcome], source: str) -> np.ndarray:
    """Outcome codes from one-hot columns: exactly one column is 1 (or true) in every row."""
    n = table.num_rows
    hits = np.zeros(n, dtype=np.int8)
    code = np.full(n, -1, dtype=np.int8)
    values: dict[str, np.ndarray] = {}
    for name, outcome in spec.items():
        col = _combine(table[name])
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        try:
            x = _numpy(col.cast(pa.float64())).astype(float)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise InputError(
                f"{source}: the one-hot column {name!r} must hold 0 or 1 in every row."
            ) from None
        bad = np.flatnonzero(~((x == 0) | (x == 1)))
        if len(bad):
            v = x[bad[0]]
            shown = "empty" if np.isnan(v) else repr(float(v))
            raise InputError(
                f"{_row_hint(bad, source)}: the one-hot column {name!r} is {shown}, not 0 or 1."
            )
        on = x == 1
        hits += on
        code[on] = outcome
        values[name] = x
    wrong = np.flatnonzero(hits != 1)
    if len(wrong):
        k = int(wrong[0])
        set_ = [c for c in spec if values[c][k] == 1]
        what = f"{' and '.join(set_)} are all 1" if set_ else "none of the one-hot columns is 1"
        raise InputError(
            f"{_row_hint(wrong, source)}: {what}; exactly one of {', '.join(spec)} must be 1."
        )
    return code


def _numeric(col: pa.ChunkedArray | pa.Array, role: str, source: str) -> np.ndarray:
    col = _combine(col)
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = col.type
    try:
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            arr = col.cast(pa.timestamp("us")).to_numpy(zero_copy_only=False)
            nat = np.isnat(arr)
            out = arr.astype("datetime64[us]").astype(np.int64) / 1e6
            out[nat] = np.nan
            x = out
        elif pa.types.is_boolean(t) or not (
            pa.types.is_integer(t)
            or pa.types.is_floating(t)
            or pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_decimal(t)
            or pa.types.is_null(t)
        ):
            raise pa.ArrowInvalid(str(t))
        else:
            x = _numpy(col.cast(pa.float64())).astype(float)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        rows, value = _first_non_number(col)
        where = _row_hint(np.array([rows]), source) if rows is not None else source
        shown = f" {value!r}" if rows is not None else f" (it holds {t})"
        raise InputError(
            f"{where}: the {role} column must be numeric; the value{shown} is not a number."
        ) from None
    bad = np.flatnonzero(~np.isfinite(x))
    if len(bad):
        raise InputError(
            f"{_row_hint(bad, source)}: the {role} value is missing or not a finite number."
        )
    return x


def _first_non_number(col: pa.Array) -> tuple[int | None, Any]:
    """Row and value of the first entry that does not read as a number (an error path)."""
    try:
        values = col.to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # pragma: no cover
        return None, None
    for k, v in enumerate(values):
        if v is None or isinstance(v, bool):
            if isinstance(v, bool):
                return k, v
            continue
        if isinstance(v, (int, float)):
            continue
        try:
            float(str(v))
        except ValueError:
            return k, v
    return None, None


def _battles_from_table(
    table: pa.Table,
    columns: Mapping[str, Any] | None,
    source: str,
    *,
    resolved: bool = False,
    extra: Sequence[str] | str | None = None,
    keep_non_anony: bool = False,
) -> Battles:
    roles = (
        dict(columns)  # type: ignore[arg-type]
        if resolved
        else _resolve_columns(table.column_names, columns, source)
    )
    if table.num_rows == 0:
        raise InputError(f"{source}: the battle log is empty (no data rows).")
    a_idx, a_remap, a_names = _encode_parts(table[roles["model_a"]], "model", source)
    b_idx, b_remap, b_names = _encode_parts(table[roles["model_b"]], "model", source)
    names = sorted(set(a_names) | set(b_names))
    lookup = np.asarray(names, dtype=object)
    # each side's dictionary → its sorted names → the shared table: composed on the
    # dictionaries, then one gather per row
    a_map = np.searchsorted(lookup, np.asarray(a_names, dtype=object)).astype(np.int32)[a_remap]
    b_map = np.searchsorted(lookup, np.asarray(b_names, dtype=object)).astype(np.int32)[b_remap]
    if _ONE_HOT_ROLE in roles:
        outcome = _one_hot_outcomes(table, roles[_ONE_HOT_ROLE], source)
    else:
        outcome = _outcomes_arrow(table[roles["winner"]], source)
    wanted_extra = extra
    extra: dict[str, Any] = {}
    for role in ("annotator", "prompt"):
        if role in roles:
            codes, dictionary = _encode_arrow(
                table[roles[role]], role, source, UNKNOWN_ANNOTATOR if role == "annotator" else None
            )
            extra[role] = codes
            extra[role + "s"] = tuple(dictionary)
    if "timestamp" in roles:
        extra["timestamp"] = _numeric(table[roles["timestamp"]], "timestamp", source)
    if "weight" in roles:
        extra["weight"] = _numeric(table[roles["weight"]], "weight", source)
    if wanted_extra is not None:
        extra["extra"] = extra_columns(
            table, wanted_extra, source, exclude=set(_used_columns(roles))
        )
    out = Battles(
        models=tuple(str(n) for n in names),
        # dictionary indices are in range: "clip" skips numpy's bounds check per row
        model_a=np.take(a_map, a_idx, mode="clip"),
        model_b=np.take(b_map, b_idx, mode="clip"),
        outcome=outcome,
        source=source,
        **extra,
    )
    if "anony" in roles and not keep_non_anony:
        keep = anony_mask(table[roles["anony"]], source)
        if not keep.all():
            if not keep.any():
                raise InputError(
                    f"{source}: every battle has anony = false (not anonymous), and those are "
                    "left out by default; keep them with --keep-non-anony "
                    "(keep_non_anony=True)."
                )
            out = out.take(keep).compact()
            _note_non_anony(source, int((~keep).sum()), len(keep))
    return out


def _note_non_anony(source: str, left_out: int, total: int) -> None:
    """Say (a :class:`StableArenaWarning`, shown by the CLI) how many rows ``anony`` false
    left out: never silently."""
    if left_out:
        warnings.warn(
            f"{source}: left out {left_out:,} of {total:,} battles with anony = false (not "
            "anonymous), as FastChat's leaderboard does; --keep-non-anony (keep_non_anony=True) "
            "keeps them.",
            StableArenaWarning,
            stacklevel=2,
        )


def anony_mask(col: pa.ChunkedArray | pa.Array, source: str) -> np.ndarray:
    """Which rows of an ``anony`` column are anonymous votes (FastChat's flag): true, 1 or
    empty are; false or 0 are not; anything else is an error naming the row."""
    col = _combine(col)
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if pa.types.is_boolean(col.type):
        return np.asarray(col.fill_null(True).to_numpy(zero_copy_only=False), dtype=bool)
    values = col.to_pylist()
    out = np.ones(len(values), dtype=bool)
    for k, v in enumerate(values):
        key = v.strip().lower() if isinstance(v, str) else v
        if key in (None, "", True, 1, "true", "1"):
            continue
        if key in (False, 0, "false", "0"):
            out[k] = False
            continue
        raise InputError(
            f"{_row_hint(np.array([k]), source)}: anony is {v!r}; it must be true or false "
            "(1 or 0)."
        )
    return out


# ---------------------------------------------------------------------------- JSON
def _json_error_hint(exc: Exception) -> str:
    if "Extra data" in str(exc):
        return " It looks like JSON Lines; rename it .jsonl or pass --input-format jsonl."
    return ""


def _load_json(raw: bytes, source: str) -> Any:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{source}: not UTF-8 text (byte {exc.start}: {raw[exc.start : exc.start + 1]!r}); "
            "save it as UTF-8."
        ) from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise InputError(
            f"{source}: the JSON is nested too deeply to be a battle log (a list of records or a "
            "pair-count object)."
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not valid JSON ({exc}).{_json_error_hint(exc)}") from None
    except _NonFiniteJson as exc:
        raise InputError(
            f"{source}: the JSON holds {exc.args[0]}, which is not a number; use finite numbers."
        ) from None


class _NonFiniteJson(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NonFiniteJson(name)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _pair_counts_from_json(obj: Mapping[str, Any], source: str) -> PairCounts:
    """A leaderbot pair-count object {"models": [names], "X": [[i, j], …], "Y": [[w, l, t(, bb)], …]}."""
    models = obj["models"]
    if not isinstance(models, list) or not models:
        raise InputError(f"{source}: 'models' must be a non-empty list of model names.")
    names: list[str] = []
    for k, name in enumerate(models):
        if isinstance(name, bool) or not isinstance(name, (str, int)):
            raise InputError(
                f"{source}: models[{k}] is {json.dumps(name)[:60]}, not a model name (text)."
            )
        text = str(name).strip()
        if not text:
            raise InputError(f"{source}: models[{k}] is an empty name; every model needs one.")
        names.append(text)
    seen: dict[str, int] = {}
    for k, name in enumerate(names):
        if name in seen:
            raise InputError(
                f"{source}: model {name!r} is listed twice (models[{seen[name]}] and models[{k}]); "
                "each model must appear once — merge its pairs under one index."
            )
        seen[name] = k
    x, y = obj["X"], obj["Y"]
    if not isinstance(x, list) or not isinstance(y, list):
        raise InputError(f"{source}: 'X' and 'Y' must be lists (of pairs and of counts).")
    if len(x) != len(y):
        raise InputError(f"{source}: 'X' has {len(x)} pairs but 'Y' has {len(y)} count rows.")
    if not x:
        raise InputError(f"{source}: the pair-count object has no pairs.")
    width = None
    for r, (pair, counts) in enumerate(zip(x, y, strict=True)):
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(_is_number(v) and float(v).is_integer() for v in pair)
        ):
            raise InputError(
                f"{source}: X[{r}] is {json.dumps(pair)[:60]}; each pair must be two whole-number "
                "model indices [i, j]."
            )
        if not isinstance(counts, list) or len(counts) not in (3, 4):
            raise InputError(
                f"{source}: Y[{r}] is {json.dumps(counts)[:60]}; each row must hold 3 or 4 counts "
                "[wins of i, wins of j, ties(, both-bad ties)]."
            )
        if width is None:
            width = len(counts)
        elif len(counts) != width:
            raise InputError(
                f"{source}: Y[{r}] has {len(counts)} counts but Y[0] has {width}; use one width."
            )
        for c in counts:
            if not _is_number(c) or not np.isfinite(c) or c < 0:
                raise InputError(
                    f"{source}: Y[{r}] holds {json.dumps(c)[:40]}; counts must be finite "
                    "non-negative numbers."
                )
    pairs = np.asarray(x, dtype=float).astype(np.int64)
    outcomes = np.asarray(y, dtype=float)
    return PairCounts.from_arrays(names, pairs, outcomes, source=source)


_SCALAR_TYPES = (str, int, float)


def _records_table(
    records: list[Any],
    columns: Mapping[str, str] | None,
    source: str,
    extra: Sequence[str] | str | None = None,
) -> tuple[pa.Table, dict[str, Any]]:
    """The needed columns of a list of JSON records as an Arrow table (types checked per value)."""
    for k, r in enumerate(records):
        if not isinstance(r, dict):
            raise InputError(
                f"{source}: record {k + 1} is {type(r).__name__} ({json.dumps(r)[:40]}); a JSON "
                "battle log must be a list of records (objects)."
            )
    keys = list(dict.fromkeys(key for r in records for key in r))
    roles = _resolve_columns([str(k) for k in keys], columns, source)
    arrays = {}
    for col in _used_columns(roles):
        values = [r.get(col) for r in records]
        arrays[col] = _column_from_values(values, col, source)
    for col in _extra_top_columns([str(k) for k in keys], extra, source):
        if col in arrays:
            continue
        values = [r.get(col) for r in records]
        try:  # other columns keep their JSON structure (objects become struct columns)
            arrays[col] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays[col] = pa.array([None if v is None else json.dumps(v) for v in values])
    return pa.table(arrays), roles


def _column_from_values(values: list[Any], col: str, source: str) -> pa.Array:
    kinds = set()
    for k, v in enumerate(values):
        if v is None:
            continue
        if isinstance(v, bool):
            kinds.add("bool")
        elif isinstance(v, (int, float)):
            kinds.add("number")
        elif isinstance(v, str):
            kinds.add("text")
        else:
            raise InputError(
                f"{_row_hint(np.array([k]), source)}: field {col!r} is {type(v).__name__} "
                f"({json.dumps(v)[:40]}), not text or a number."
            )
    if kinds == {"number"}:
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    if kinds == {"bool"}:
        return pa.array(values, pa.bool_())
    return pa.array([None if v is None else str(v) for v in values], pa.string())


def _from_json(
    raw: bytes,
    columns: Mapping[str, str] | None,
    source: str,
    extra: Sequence[str] | str | None = None,
    keep_non_anony: bool = False,
) -> Battles | PairCounts:
    obj = _load_json(raw, source)
    if isinstance(obj, dict) and {"models", "X", "Y"} <= set(obj):
        return _pair_counts_from_json(obj, source)
    if isinstance(obj, dict) and "models" in obj and {"X", "Y"} & set(obj):
        missing = sorted({"models", "X", "Y"} - set(obj))
        raise InputError(
            f"{source}: a leaderbot pair-count object needs models, X and Y; {', '.join(missing)} "
            "missing."
        )
    if isinstance(obj, dict) and obj and all(isinstance(v, list) for v in obj.values()):
        lengths = {len(v) for v in obj.values()}
        if len(lengths) != 1:
            raise InputError(
                f"{source}: a JSON object of columns must have equal lengths (found "
                f"{sorted(lengths)})."
            )
        n = lengths.pop()
        records = [{k: v[r] for k, v in obj.items()} for r in range(n)]
        if not records:
            raise InputError(f"{source}: the battle log is empty (the columns have no values).")
        table, roles = _records_table(records, columns, source, extra)
        return _battles_from_table(
            table, roles, source, resolved=True, extra=extra, keep_non_anony=keep_non_anony
        )
    if isinstance(obj, list):
        if not obj:
            raise InputError(f"{source}: the battle log is empty (an empty JSON list).")
        table, roles = _records_table(obj, columns, source, extra)
        return _battles_from_table(
            table, roles, source, resolved=True, extra=extra, keep_non_anony=keep_non_anony
        )
    raise InputError(
        f"{source}: JSON must be a list of battle records (FastChat clean_battle), an object of "
        "equal-length columns, or a leaderbot pair-count object with keys models, X, Y; found "
        f"{type(obj).__name__}."
    )


# ---------------------------------------------------------------------------- tables
def _csv_options(
    src: _Source,
    names: list[str],
    roles: Mapping[str, Any],
    newlines: bool,
    extra_tops: Sequence[str] = (),
    check_utf8: bool = True,
) -> Any:
    from pyarrow import csv as pacsv

    dict_type = pa.dictionary(pa.int32(), pa.string())
    types = {
        roles[r]: dict_type
        for r in ("model_a", "model_b", "winner", "annotator", "prompt")
        if r in roles
    }
    return (
        pacsv.ReadOptions(use_threads=True, block_size=1 << 22),
        pacsv.ParseOptions(delimiter=src.delimiter, newlines_in_values=newlines),
        pacsv.ConvertOptions(
            include_columns=list(dict.fromkeys([*_used_columns(roles), *extra_tops])),
            column_types=types,
            # a text field is never null: a model named NA, null, None, nan or N/A is a
            # name (Arrow's default null markers); an empty field is "" and is refused
            # (names) or read as missing (annotators) where the column is encoded
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            check_utf8=check_utf8,
        ),
    )


def _csv_header(src: _Source) -> list[str]:
    import csv
    import io

    head = (
        _decompressed_head(src, 1 << 20)
        if src.compression
        else (
            src.data[: 1 << 20] if src.data is not None else _head(src.path, 1 << 20)  # type: ignore[arg-type]
        )
    )
    text = head.decode("utf-8-sig", errors="replace")
    try:
        first = next(csv.reader(io.StringIO(text), delimiter=src.delimiter))
    except StopIteration:
        return []
    except csv.Error as exc:
        raise InputError(f"{src.name}: not a readable CSV file ({exc}).") from None
    return [c.strip() for c in first]


def _csv_error(src: _Source, exc: Exception) -> InputError:
    msg = " ".join(str(exc).split())
    if "invalid UTF8" in msg or "UTF8" in msg:
        return InputError(
            f"{src.name}: not UTF-8 text ({msg}); save the file as UTF-8 (e.g. `iconv -f "
            "latin1 -t utf-8`)."
        )
    return InputError(f"{src.name}: not a readable CSV file ({msg}).")


def _check_dictionaries_utf8(table: pa.Table) -> None:
    """Raise ``ArrowInvalid`` (as the CSV reader would) when a dictionary-encoded text column
    of ``table`` holds a value that is not valid UTF-8 (each chunk's dictionary is checked)."""
    for name, col in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_dictionary(col.type) and pa.types.is_string(col.type.value_type):
            for chunk in col.chunks:
                try:
                    chunk.dictionary.validate(full=True)
                except pa.ArrowInvalid:
                    for raw in chunk.dictionary.cast(pa.binary()).to_pylist():
                        try:
                            raw.decode("utf-8")
                        except UnicodeDecodeError:
                            shown = raw.decode("utf-8", errors="replace")
                            raise pa.ArrowInvalid(
                                f"column {name!r}: invalid UTF8 data in {shown!r}"
                            ) from None
                    raise


def _read_csv_table(
    src: _Source, columns: Mapping[str, str] | None, extra: Sequence[str] | str | None = None
) -> tuple[pa.Table, dict]:
    """Arrow's multi-threaded CSV reader, only the needed columns, names dictionary-encoded while
    parsing (values with quoted newlines are retried with the slower newline-aware parser)."""
    from pyarrow import csv as pacsv

    header = _csv_header(src)
    roles = _resolve_columns(header, columns, src.name)
    tops = _extra_top_columns(header, extra, src.name)
    # Every text column read is dictionary-encoded unless extra columns are asked for: then
    # UTF-8 is checked on the dictionaries (the distinct values) after the read instead of on
    # every row while parsing (about 10 ms of a 1M-row file's 100)
    lazy_utf8 = not tops
    last: Exception | None = None
    for newlines in (False, True):
        read, parse, convert = _csv_options(src, header, roles, newlines, tops, not lazy_utf8)
        try:
            with src.stream() as stream:
                table = pacsv.read_csv(
                    stream, read_options=read, parse_options=parse, convert_options=convert
                )
            if lazy_utf8:
                _check_dictionaries_utf8(table)
            return table, roles
        except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
            last = exc
            if "columns" not in str(exc):
                break
        except (OSError, EOFError, ValueError) as exc:
            if src.compression:
                raise _corrupt(src, exc) from None
            raise InputError(f"{src.name}: cannot read the file ({exc}).") from None
    assert last is not None
    raise _csv_error(src, last) from None


def _read_table(
    src: _Source, columns: Mapping[str, str] | None, extra: Sequence[str] | str | None = None
) -> tuple[pa.Table, dict]:
    if src.fmt == "csv":
        return _read_csv_table(src, columns, extra)
    if src.fmt == "jsonl":
        from pyarrow import json as pajson

        try:
            with src.stream() as stream:
                table = pajson.read_json(stream)
        except pa.ArrowInvalid as exc:
            raise InputError(
                f"{src.name}: not valid JSON Lines ({' '.join(str(exc).split())}). A single JSON "
                "document needs the .json extension; mixed types in one field (text in some "
                "records, numbers in others) must be made uniform."
            ) from None
        except (OSError, EOFError, ValueError) as exc:
            if src.compression:
                raise _corrupt(src, exc) from None
            raise InputError(f"{src.name}: cannot read the file ({exc}).") from None
        return table, _resolve_columns(table.column_names, columns, src.name)
    # parquet
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(src.random_access())
        names = pf.schema_arrow.names
        roles = _resolve_columns(names, columns, src.name)
        tops = _extra_top_columns(names, extra, src.name)
        table = pf.read(columns=list(dict.fromkeys([*_used_columns(roles), *tops])))
    except InputError:
        raise
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, EOFError, ValueError) as exc:
        raise _parquet_error(src, exc) from None
    return table, roles


def _read_source(
    src: _Source,
    columns: Mapping[str, str] | None,
    extra: Sequence[str] | str | None = None,
    keep_non_anony: bool = False,
) -> Battles | PairCounts:
    if src.fmt == "json":
        try:
            raw = src.read_bytes()
        except (OSError, EOFError, ValueError) as exc:
            if src.compression:
                raise _corrupt(src, exc) from None
            raise InputError(f"{src.name}: cannot read the file ({exc}).") from None
        return _from_json(raw, columns, src.name, extra, keep_non_anony)
    table, roles = _read_table(src, columns, extra)
    return _battles_from_table(
        table, roles, src.name, resolved=True, extra=extra, keep_non_anony=keep_non_anony
    )


def _from_dataframe(
    data: pd.DataFrame,
    columns: Mapping[str, str] | None,
    source: str | None,
    extra: Sequence[str] | str | None = None,
    keep_non_anony: bool = False,
) -> Battles:
    src = source or "<DataFrame>"
    names = [str(c) for c in data.columns]
    roles = _resolve_columns(names, columns, src)
    if len(data) == 0:
        raise InputError(f"{src}: the battle log is empty (no rows).")
    used = _used_columns(roles)
    keep = list(dict.fromkeys([*used, *_extra_top_columns(names, extra, src)]))
    frame = data.rename(columns={c: str(c) for c in data.columns})[keep]
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        table = pa.table(
            {
                c: _column_from_values(frame[c].tolist(), c, src)
                if c in used
                else pa.array(frame[c].astype(object).where(frame[c].notna(), None).tolist())
                for c in frame.columns
            }
        )
    return _battles_from_table(
        table, roles, src, resolved=True, extra=extra, keep_non_anony=keep_non_anony
    )


def _concat_battles(parts: Sequence[Battles], source: str) -> Battles:
    """One log from several (names merged; every part must have the same optional columns)."""
    first = parts[0]
    for p in parts[1:]:
        for attr in ("annotator", "prompt", "timestamp", "weight"):
            if (getattr(p, attr) is None) != (getattr(first, attr) is None):
                has, lacks = (p, first) if getattr(p, attr) is not None else (first, p)
                raise InputError(
                    f"{source}: {has.source} has a {attr} column but {lacks.source} does not; "
                    "give every file the same columns."
                )
    models = sorted(set().union(*(p.models for p in parts)))
    lookup = {m: k for k, m in enumerate(models)}

    def remap(codes: np.ndarray, names: Sequence[str], table: dict[str, int]) -> np.ndarray:
        return np.asarray([table[n] for n in names], dtype=np.int32)[codes]

    out: dict[str, Any] = {
        "model_a": np.concatenate([remap(p.model_a, p.models, lookup) for p in parts]),
        "model_b": np.concatenate([remap(p.model_b, p.models, lookup) for p in parts]),
        "outcome": np.concatenate([p.outcome for p in parts]),
    }
    for codes, names in (("annotator", "annotators"), ("prompt", "prompts")):
        if getattr(first, codes) is not None:
            all_names = sorted(set().union(*(getattr(p, names) for p in parts)))
            table = {n: k for k, n in enumerate(all_names)}
            out[codes] = np.concatenate(
                [remap(getattr(p, codes), getattr(p, names), table) for p in parts]
            )
            out[names] = tuple(all_names)
    for attr in ("timestamp", "weight"):
        if getattr(first, attr) is not None:
            out[attr] = np.concatenate([getattr(p, attr) for p in parts])
    return Battles(models=tuple(models), source=source, **out)


def read_battles(
    data: str | Path | pd.DataFrame,
    *,
    columns: Mapping[str, str] | None = None,
    fmt: str | None = None,
    source: str | None = None,
    extra: Sequence[str] | str | None = None,
    keep_non_anony: bool = False,
) -> Battles | PairCounts:
    """Read a battle log (or a leaderbot pair-count JSON) into :class:`Battles` / :class:`PairCounts`.

    Args:
        data: a path, a directory or glob of files (read as one log), ``"-"`` for standard input,
            or a pandas DataFrame.
        columns: explicit role → column-name mapping (roles as in the module docstring).
        fmt: ``csv``, ``jsonl``, ``parquet`` or ``json``; default from the extension, checked
            against the content (and from the content when the extension says nothing).
        source: name used in messages (default the path).
        extra: other columns to keep in :attr:`Battles.extra` (for category filters and
            covariates, see :func:`extra_columns`): names, nested fields as ``parent.child``, or
            ``"*"`` for every column.
        keep_non_anony: keep the rows whose ``anony`` column is false (left out by default,
            as FastChat's leaderboard leaves out votes that are not anonymous).
    """
    anon = keep_non_anony
    if not isinstance(data, (str, os.PathLike)):
        if type(data).__name__ == "DataFrame":
            return _from_dataframe(data, columns, source, extra, anon)
        raise InputError(f"read_battles takes a path or a DataFrame, not {type(data).__name__}.")
    if os.fspath(data) == "-":
        src = _resolve_source(Path("-"), fmt, _read_stdin())
        return _read_source(src if source is None else _renamed(src, source), columns, extra, anon)
    files, label = _input_paths(data)
    if len(files) == 1 and files[0] == Path(os.fspath(data)):
        src = _resolve_source(files[0], fmt)
        return _read_source(src if source is None else _renamed(src, source), columns, extra, anon)
    if extra is not None:
        raise InputError(
            f"{label}: extra columns (--where, --by, --style, --ipw's propensity) are read from "
            "one file; give a single battle-log file."
        )
    parts = []
    for f in files:
        part = _read_source(_resolve_source(f, fmt), columns, None, anon)
        if isinstance(part, PairCounts):
            raise InputError(
                f"{f}: a pair-count object cannot be combined with other files into one battle "
                "log; give it on its own."
            )
        parts.append(part)
    return _concat_battles(parts, source or label) if len(parts) > 1 else parts[0]


def _renamed(src: _Source, name: str) -> _Source:
    return _Source(name, src.path, src.fmt, src.compression, src.delimiter, src.data)


# ---------------------------------------------------------------------------- streaming counts
class _CountAccumulator:
    """Pair counts accumulated batch by batch: memory grows with the distinct (pair, annotator)
    cells, never with the number of battles.

    Names get global codes in order of appearance; each batch is counted with
    :func:`stablearena.data.battles.count_rows` over those codes and its rows are appended; the rows
    are merged (summed per cell) whenever they outgrow the merged table."""

    _SHIFT = 21  # bits per code in the merge key (up to 2,097,151 models and annotators)
    #: Appended rows are merged once they exceed this many (and 4× the merged table).
    MERGE_ROWS = 1 << 20

    def __init__(self, by_annotator: bool):
        self.by_annotator = by_annotator
        self.models: dict[str, int] = {}
        self.annotators: dict[str, int] = {}
        self.keys: list[np.ndarray] = []
        self.tables: list[np.ndarray] = []
        self.pending = 0
        self.merged = 0
        self.n_rows = 0
        self.min_weight = np.inf  # smallest and largest positive weight seen (all batches)
        self.max_weight = 0.0

    def codes(self, names: list[str], table: dict[str, int]) -> np.ndarray:
        for n in names:
            if n not in table:
                table[n] = len(table)
        if len(table) >= 1 << self._SHIFT:
            raise InputError(
                f"more than {(1 << self._SHIFT) - 1:,} distinct names; not a battle log this "
                "reader can count."
            )
        return np.asarray([table[n] for n in names], dtype=np.int64)

    def add(
        self,
        a: np.ndarray,
        b: np.ndarray,
        outcome: np.ndarray,
        weight: np.ndarray | None,
        ann: np.ndarray | None,
    ) -> None:
        m = len(self.models)
        n_ann = len(self.annotators) if ann is not None else 1
        if weight is not None and (weight > 0).any():
            self.min_weight = min(self.min_weight, float(weight[weight > 0].min()))
            self.max_weight = max(self.max_weight, float(weight.max()))
        i, j, an, table = count_rows(
            a, b, outcome, m, weight=weight, annotator=ann, n_annotators=n_ann
        )
        key = (i.astype(np.int64) << (2 * self._SHIFT)) | (j.astype(np.int64) << self._SHIFT)
        if an is not None:
            key |= an.astype(np.int64)
        self.keys.append(key)
        self.tables.append(table)
        self.pending += len(key)
        self.n_rows += len(a)
        if self.pending > max(4 * self.merged, self.MERGE_ROWS):
            self._merge()

    def _merge(self) -> None:
        if len(self.keys) <= 1:
            self.merged = sum(len(k) for k in self.keys)
            self.pending = 0
            return
        key = np.concatenate(self.keys)
        table = np.concatenate(self.tables)
        ukey, inv = np.unique(key, return_inverse=True)
        summed = np.zeros((len(ukey), 4))
        for c in range(4):
            summed[:, c] = np.bincount(inv, table[:, c], len(ukey))
        self.keys, self.tables = [ukey], [summed]
        self.merged, self.pending = len(ukey), 0

    def result(self, source: str) -> PairCounts:
        self._merge()
        if self.n_rows == 0 or not self.keys:
            raise InputError(f"{source}: the battle log is empty (no data rows).")
        key, table = self.keys[0], self.tables[0]
        if not np.all(np.isfinite(table)):
            raise InputError(
                f"{source}: the weights sum past the largest floating-point number; a weight "
                "counts its battle that many times (1 = one battle): rescale them (e.g. to mean 1)."
            )
        if self.max_weight > 0 and self.min_weight < self.max_weight / WEIGHT_RANGE:
            raise InputError(
                f"{source}: weights range from {self.min_weight!r} to {self.max_weight!r}, more "
                f"than {WEIGHT_RANGE:.0e} apart; the small ones are too small to count in double "
                "precision: set them to 0 or rescale them."
            )
        mask = (1 << self._SHIFT) - 1
        gi = (key >> (2 * self._SHIFT)) & mask
        gj = (key >> self._SHIFT) & mask
        ga = key & mask
        # recode names to sorted order (as the in-memory reader does); keep i < j
        names = sorted(self.models, key=lambda n: n)
        order = np.empty(len(self.models), dtype=np.int64)
        for new, name in enumerate(names):
            order[self.models[name]] = new
        i, j = order[gi], order[gj]
        swap = i > j
        i, j = np.where(swap, j, i), np.where(swap, i, j)
        table = table.copy()
        table[swap, 0], table[swap, 1] = table[swap, 1].copy(), table[swap, 0].copy()
        m = len(names)
        annotators = None
        ann_codes = None
        n_ann = 1
        if self.by_annotator:
            annotators = sorted(self.annotators)
            aorder = np.empty(len(self.annotators), dtype=np.int64)
            for new, name in enumerate(annotators):
                aorder[self.annotators[name]] = new
            ann_codes = aorder[ga]
            n_ann = len(annotators)
        final = (i * m + j) * n_ann + (ann_codes if ann_codes is not None else 0)
        ukey, inv = np.unique(final, return_inverse=True)
        summed = np.zeros((len(ukey), 4))
        for c in range(4):
            summed[:, c] = np.bincount(inv, table[:, c], len(ukey))
        pair = ukey // n_ann
        return PairCounts(
            models=tuple(names),
            i=(pair // m).astype(np.int32),
            j=(pair % m).astype(np.int32),
            wins=summed[:, 0],
            losses=summed[:, 1],
            ties=summed[:, 2],
            ties_both_bad=summed[:, 3],
            annotator=(ukey % n_ann).astype(np.int32) if self.by_annotator else None,
            annotators=tuple(annotators) if annotators is not None else None,
            source=source,
        )


class _RowOffset(str):
    """A source name that makes :func:`_row_hint` count rows from an offset (streaming)."""

    offset: int

    def __new__(cls, source: str, offset: int) -> _RowOffset:
        obj = super().__new__(cls, source)
        obj.offset = offset
        return obj


def _batches(
    src: _Source, columns: Mapping[str, str] | None
) -> tuple[dict[str, Any], Iterator[pa.RecordBatch]]:
    """The roles and a stream of record batches of the needed columns of one source."""
    if src.fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            where = src.random_access()
            pf = pq.ParquetFile(where)
            roles = _resolve_columns(pf.schema_arrow.names, columns, src.name)
            cols = _used_columns(roles)
            text_cols = [
                c
                for c in (roles.get(r) for r in ("model_a", "model_b", "winner", "annotator"))
                if c is not None and pa.types.is_string(pf.schema_arrow.field(c).type)
            ]
            if text_cols:  # names stay dictionary-encoded: each batch maps only its distinct names
                if not isinstance(where, str):
                    where.seek(0)
                pf = pq.ParquetFile(where, read_dictionary=text_cols)
        except InputError:
            raise
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, EOFError, ValueError) as exc:
            raise _parquet_error(src, exc) from None

        def parquet_batches() -> Iterator[pa.RecordBatch]:
            try:
                yield from pf.iter_batches(batch_size=BATCH_ROWS, columns=cols, use_threads=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, EOFError) as exc:
                raise _parquet_error(src, exc) from None

        return roles, parquet_batches()
    if src.fmt == "csv":
        from pyarrow import csv as pacsv

        header = _csv_header(src)
        roles = _resolve_columns(header, columns, src.name)

        def csv_batches() -> Iterator[pa.RecordBatch]:
            for newlines in (False, True):
                read, parse, convert = _csv_options(src, header, roles, newlines)
                yielded = False
                try:
                    with src.stream() as stream:
                        reader = pacsv.open_csv(
                            stream, read_options=read, parse_options=parse, convert_options=convert
                        )
                        for batch in reader:
                            yielded = True
                            yield batch
                    return
                except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
                    if yielded or "columns" not in str(exc) or newlines:
                        raise _csv_error(src, exc) from None
                except (OSError, EOFError, ValueError) as exc:
                    if src.compression:
                        raise _corrupt(src, exc) from None
                    raise InputError(f"{src.name}: cannot read the file ({exc}).") from None

        return roles, csv_batches()
    # jsonl: read per file (JSON Lines files are rarely large; each is counted and dropped)
    table, roles = _read_table(src, columns)
    return roles, iter(table.to_batches(max_chunksize=BATCH_ROWS))


_OPTIONAL_ROLES = ("annotator", "prompt", "timestamp", "weight")


def _count_source(
    src: _Source,
    columns: Mapping[str, str] | None,
    acc: _CountAccumulator,
    keep_non_anony: bool = False,
    left_out: list[int] | None = None,
) -> frozenset[str]:
    """Count one source into ``acc``; returns the optional roles it has."""
    if src.fmt == "json":
        data = _read_source(src, columns, None, keep_non_anony)
        _add_whole(data, acc)
        return frozenset(r for r in _OPTIONAL_ROLES if getattr(data, r, None) is not None)
    roles, batches = _batches(src, columns)
    offset = 0
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        name = _RowOffset(src.name, offset)
        table = pa.Table.from_batches([batch])
        a_codes, a_names = _encode_arrow(table[roles["model_a"]], "model", name)
        b_codes, b_names = _encode_arrow(table[roles["model_b"]], "model", name)
        ga = acc.codes(a_names, acc.models)[a_codes]
        gb = acc.codes(b_names, acc.models)[b_codes]
        same = np.flatnonzero(ga == gb)
        if len(same):
            raise InputError(
                f"{_row_hint(same, name)}: model {a_names[a_codes[same[0]]]!r} battles itself. "
                "Remove self-battles from the log."
            )
        if _ONE_HOT_ROLE in roles:
            outcome = _one_hot_outcomes(table, roles[_ONE_HOT_ROLE], name)
        else:
            outcome = _outcomes_arrow(table[roles["winner"]], name)
        weight = None
        if "weight" in roles:
            weight = _numeric(table[roles["weight"]], "weight", name)
            check_weights(weight, name)
        ann = None
        if acc.by_annotator and "annotator" in roles:
            codes, names = _encode_arrow(
                table[roles["annotator"]], "annotator", name, UNKNOWN_ANNOTATOR
            )
            ann = acc.codes(names, acc.annotators)[codes]
        elif acc.by_annotator:
            ann = acc.codes([UNKNOWN_ANNOTATOR], acc.annotators)[np.zeros(n, dtype=np.int64)]
        if "timestamp" in roles:
            _numeric(table[roles["timestamp"]], "timestamp", name)  # validated like in memory
        if "anony" in roles and not keep_non_anony:  # as read_battles: left out by default
            keep = anony_mask(table[roles["anony"]], name)
            if left_out is not None:
                left_out[0] += int((~keep).sum())
            ga, gb, outcome = ga[keep], gb[keep], outcome[keep]
            weight = None if weight is None else weight[keep]
            ann = None if ann is None else ann[keep]
        acc.add(ga, gb, outcome, weight, ann)
        offset += n
    if offset == 0:
        raise InputError(f"{src.name}: the battle log is empty (no data rows).")
    return frozenset(r for r in _OPTIONAL_ROLES if r in roles)


def _add_whole(data: Battles | PairCounts, acc: _CountAccumulator) -> None:
    """Add an in-memory log (a JSON file) to the accumulator."""
    if isinstance(data, PairCounts):
        raise InputError(
            f"{data.source}: a pair-count object cannot be combined with other files; give it on "
            "its own."
        )
    ga = acc.codes(list(data.models), acc.models)[data.model_a]
    gb = acc.codes(list(data.models), acc.models)[data.model_b]
    ann = None
    if acc.by_annotator:
        if data.annotator is not None:
            ann = acc.codes(list(data.annotators or ()), acc.annotators)[data.annotator]
        else:
            ann = acc.codes([UNKNOWN_ANNOTATOR], acc.annotators)[np.zeros(len(data), np.int64)]
    acc.add(ga, gb, data.outcome, data.weight, ann)


def read_counts(
    data: str | Path,
    *,
    columns: Mapping[str, str] | None = None,
    fmt: str | None = None,
    by_annotator: bool = False,
    source: str | None = None,
    keep_non_anony: bool = False,
) -> PairCounts:
    """Read a battle log straight into its pair counts, batch by batch.

    Same inputs as :func:`read_battles` (a file, a directory or glob of files read as one log,
    ``"-"``); Parquet files are read row group by row group with model names kept
    dictionary-encoded, CSV files with Arrow's streaming reader, and each batch of about a
    million battles is validated (with file and row in every message) and aggregated
    (:func:`stablearena.data.battles.count_rows`) before the next is read, so memory grows with the
    number of distinct (pair, annotator) cells, not with the number of battles. The result equals
    ``read_battles(data).counts(by_annotator=...)`` (models and annotators sorted by name).
    ``by_annotator``: per-annotator rows (battles without an annotator column are attributed to
    ``"unknown"``, as :class:`~stablearena.raters.AmElo` does). ``keep_non_anony``: as for
    :func:`read_battles`.
    """
    if os.fspath(data) == "-":
        srcs = [_resolve_source(Path("-"), fmt, _read_stdin())]
        label = "<stdin>"
    else:
        files, label = _input_paths(data)
        srcs = [_resolve_source(f, fmt) for f in files]
    label = source or label
    if len(srcs) == 1 and srcs[0].fmt == "json":
        whole = _read_source(srcs[0], columns, None, keep_non_anony)
        if isinstance(whole, PairCounts):
            return whole
    acc = _CountAccumulator(by_annotator)
    first: tuple[str, frozenset[str]] | None = None
    left_out, total = [0], 0
    for src in srcs:
        before = acc.n_rows
        has = _count_source(src, columns, acc, keep_non_anony, left_out)
        total += acc.n_rows - before
        if first is None:
            first = (src.name, has)
        elif has != first[1]:
            role = sorted(has ^ first[1])[0]
            with_it, without = (src.name, first[0]) if role in has else (first[0], src.name)
            raise InputError(
                f"{label}: {with_it} has a {role} column but {without} does not; give every file "
                "the same columns."
            )
    _note_non_anony(label, left_out[0], total + left_out[0])
    return acc.result(label)


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
    import pyarrow.compute as pc

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
        return col.cast(pa.float64()).to_numpy(zero_copy_only=False)
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


#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

#: Where a formula could start: the cell's first character and the one after every CR or LF
#: (a reader that ends the row at a line break inside the cell starts a new cell there).
_FORMULA_AT = re.compile(r"(?:^|(?<=[\r\n]))(?=[=+\-@\t\r])")

#: Characters that make a CSV field need quotes (RFC 4180 §2.6, with a bare CR as a break).
_CSV_QUOTE = re.compile(r'[,"\r\n]')


def csv_safe(value: Any) -> Any:
    """``value`` as a CSV cell that spreadsheets will not evaluate: in a string, a ``'`` is put
    before ``=``, ``+``, ``-``, ``@``, a tab or a carriage return at its start and after every
    CR or LF inside it (OWASP's recommendation against CSV injection,
    owasp.org/www-community/attacks/CSV_Injection, applied to each line a reader may split the
    cell into). Numbers — negative ones too — are left as numbers; other values unchanged."""
    if isinstance(value, str):
        return _FORMULA_AT.sub("'", value)
    return value


def csv_text(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> str:
    """The one CSV writer of everything the project emits (``--format csv``, ``/v1/export``):
    every cell through :func:`csv_safe`; ``None`` and NaN as empty cells; a field holding a
    comma, a double quote, a CR or an LF quoted with its quotes doubled (RFC 4180 §2.5–2.7) —
    the standard library's writer leaves a bare CR unquoted unless it ends its lines with one,
    and pandas' ``to_csv`` too, so a spreadsheet would end the row there; a row of one empty
    cell as ``""``; rows end with LF."""
    lines = [_csv_line(header)]
    lines.extend(_csv_line(row) for row in rows)
    return "".join(lines)


def _csv_line(cells: Sequence[Any]) -> str:
    """One CSV row of :func:`csv_text`, ending with LF."""
    out = []
    for value in cells:
        if value is None or (isinstance(value, float) and value != value):
            text = ""
        else:
            text = str(csv_safe(value))
        if _CSV_QUOTE.search(text):
            text = '"' + text.replace('"', '""') + '"'
        out.append(text)
    if out == [""]:  # one empty cell: quoted, or the row would read as a blank line
        out = ['""']
    return ",".join(out) + "\n"
