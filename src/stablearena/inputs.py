"""Reading files that come from outside: run directories, journals, config files (standard
library only; docs/guides/models-and-judges.md, "Limits on the files read").

Every reader of such a file goes through this module, so that each refuses the same things
the same way, with an :class:`~stablearena.errors.InputError` naming the file (and line):

* only a regular file is read: a FIFO, a device (``/dev/zero``, also through a symbolic link),
  a socket or a directory is refused before anything is read from it — the file is checked
  with ``os.stat`` before it is opened, opened without blocking (``O_NONBLOCK``: opening a
  FIFO never waits for a writer) and checked again on the open descriptor;
* a file is read up to :data:`MAX_FILE_BYTES` bytes and a JSON line up to
  :data:`MAX_LINE_BYTES` (the environment variables ``STABLEARENA_MAX_FILE_BYTES`` and
  ``STABLEARENA_MAX_LINE_BYTES`` raise them);
* a JSON value is nested at most :data:`MAX_DEPTH` levels (Arena-Hard-Auto's records nest
  five); ``NaN`` and ``Infinity`` are not numbers JSON allows.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import InputError

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "MAX_DEPTH",
    "FILE_LIMIT_ENV",
    "LINE_LIMIT_ENV",
    "file_limit",
    "line_limit",
    "read_input_bytes",
    "read_input_text",
    "check_depth",
    "load_json_line",
    "jsonl_records",
]

#: Largest file read (1 GiB): an Arena-Hard-Auto run's biggest files, the judgments of one
#: model with the judges' whole replies, are tens of megabytes.
MAX_FILE_BYTES = 1 << 30
#: Longest JSON line (64 MiB): one answer, judgment or journal record.
MAX_LINE_BYTES = 1 << 26
#: Deepest nesting of a JSON (or YAML, TOML) value: records of the formats read nest at most
#: six levels; 64 leaves room and keeps every reader far from Python's recursion limit.
MAX_DEPTH = 64
#: The environment variables that raise the limits (a number of bytes).
FILE_LIMIT_ENV = "STABLEARENA_MAX_FILE_BYTES"
LINE_LIMIT_ENV = "STABLEARENA_MAX_LINE_BYTES"


def _limit(env: str, default: int) -> int:
    raw = os.environ.get(env)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"{env}={raw!r}: must be a whole number of bytes >= 1.")
    return value


def file_limit() -> int:
    """The largest file read, in bytes: ``STABLEARENA_MAX_FILE_BYTES`` or
    :data:`MAX_FILE_BYTES`."""
    return _limit(FILE_LIMIT_ENV, MAX_FILE_BYTES)


def line_limit() -> int:
    """The longest JSON line read, in bytes: ``STABLEARENA_MAX_LINE_BYTES`` or
    :data:`MAX_LINE_BYTES`."""
    return _limit(LINE_LIMIT_ENV, MAX_LINE_BYTES)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refuse(path: Path, what: str, mode: int) -> InputError:
    link = ""
    if path.is_symlink():
        link = f" (a symbolic link to {os.path.realpath(path)})"
    return InputError(
        f"{path}: the {what} file is {_kind(mode)}{link}, not a regular file; only regular "
        "files are read (copy the data into a file)."
    )


def _too_big(path: Path, what: str, size: int | None, limit: int) -> InputError:
    had = f"{size} bytes" if size is not None else "more"
    return InputError(
        f"{path}: the {what} file is larger than the limit of {limit} bytes ({had}); set "
        f"{FILE_LIMIT_ENV} to a larger number of bytes to read it."
    )


def read_input_bytes(path: str | Path, what: str) -> bytes:
    """The bytes of the regular file ``path`` (``what`` names it in messages: "answer",
    "journal"…). A missing or unreadable file, a FIFO, a device, a socket or a directory, and
    a file larger than :func:`file_limit` are an :class:`InputError`."""
    path = Path(path)
    limit = file_limit()
    try:
        st = os.stat(path)  # follows links: a link to /dev/zero is a device
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} file ({exc.strerror or exc}).") from None
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, what, st.st_mode)
    if st.st_size > limit:
        raise _too_big(path, what, st.st_size, limit)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} file ({exc.strerror or exc}).") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())  # what was opened: the path may have changed since
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, what, st.st_mode)
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise InputError(
                f"{path}: cannot read the {what} file ({exc.strerror or exc})."
            ) from None
    if len(data) > limit:
        raise _too_big(path, what, None, limit)
    return data


def read_input_text(path: str | Path, what: str) -> str:
    """:func:`read_input_bytes` decoded as UTF-8 (a leading byte-order mark dropped); a byte
    that is not UTF-8 is an :class:`InputError` naming its offset."""
    raw = read_input_bytes(path, what)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: the {what} file is not UTF-8 text (byte {exc.start}: "
            f"{raw[exc.start : exc.start + 1]!r}); save it as UTF-8."
        ) from None


def _too_deep(where: str, limit: int) -> InputError:
    return InputError(
        f"{where}: the value is nested deeper than {limit} levels; no record of this file's "
        "format nests so deep (a damaged or hostile file)."
    )


def check_depth(value: Any, where: str, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`InputError` naming ``where`` when ``value`` (lists, tuples and dicts) nests
    deeper than ``limit`` levels. Iterative; a container met twice (YAML aliases) is walked
    once."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen: set[int] = set()
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        if depth > limit:
            raise _too_deep(where, limit)
        stack.extend((c, depth + 1) for c in children)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def load_json_line(line: bytes, where: str, what: str) -> Any:
    """One JSON value of a line (``where``: its file and line), within :func:`line_limit`
    bytes and :data:`MAX_DEPTH` levels, without ``NaN``/``Infinity``. Anything else is an
    :class:`InputError` naming ``where``."""
    limit = line_limit()
    if len(line) > limit:
        raise InputError(
            f"{where}: the line is {len(line)} bytes, more than the limit of {limit} for one "
            f"{what} record; set {LINE_LIMIT_ENV} to a larger number of bytes to read it."
        )
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{where}: not UTF-8 text (byte {exc.start} of the line: "
            f"{line[exc.start : exc.start + 1]!r}); save the file as UTF-8."
        ) from None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise _too_deep(where, MAX_DEPTH) from None
    except ValueError as exc:  # JSONDecodeError and NaN, Infinity
        raise InputError(f"{where}: not a JSON {what} record ({exc}).") from None
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH:  # else it cannot nest deeper
        check_depth(value, where)
    return value


def jsonl_records(path: str | Path, what: str) -> Iterator[tuple[str, dict[str, Any], str]]:
    """The records of a JSON Lines file, one JSON object a line (blank lines skipped): for
    each, ``(where, record, line)`` — ``where`` is ``"PATH, line K"`` for messages, ``line``
    the line's text as read (so that a record can be written back byte for byte). The file
    is read by :func:`read_input_bytes` and each line by :func:`load_json_line`; a line that
    is not a JSON object is an :class:`InputError`."""
    path = Path(path)
    raw = read_input_bytes(path, what)
    for k, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        where = f"{path}, line {k}"
        rec = load_json_line(line, where, what)
        if not isinstance(rec, dict):
            raise InputError(f"{where}: a {what} record must be a JSON object.")
        yield where, rec, line.decode("utf-8").rstrip("\r")  # decoded once already: UTF-8
