"""Safe output files: checked before the work, replaced atomically after it (standard library only).

Every file stablearena writes (tables, JSON, CSV, figures, reports) goes through this module:

* :func:`check_output_path` runs *before* any work: the destination must be a writable file in
  an existing, writable directory, must not be a directory, and must not be one of the inputs
  (nor inside an input directory or matched by an input glob).
* :func:`atomic_open` / :func:`atomic_write` / :func:`atomic_path` write a temporary file in the
  destination's directory, flush and ``fsync`` it, then ``os.replace`` it onto the destination and
  ``fsync`` the directory. A reader — or a crash, or ``kill -9`` at any moment — sees either the
  complete old file or the complete new one, never a partial or empty file. The temporary file
  is anonymous while it is written (Linux ``O_TMPFILE``) where the file system supports it, so a
  killed writer leaves nothing behind; elsewhere it is a hidden ``.NAME.XXXX.tmp`` sibling that
  is removed on any error. The new file gets the old file's permission bits (or the umask's).
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from .errors import InputError

__all__ = ["check_output_path", "atomic_open", "atomic_write", "atomic_path", "STDOUT"]

#: An output path meaning standard output.
STDOUT = "-"


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def _same_or_inside(target: Path, source: str | os.PathLike[str]) -> str | None:
    """Why ``target`` must not be written when ``source`` is an input (None when it may)."""
    text = os.fspath(source)
    if text == STDOUT:
        return None
    src = Path(text)
    if src.exists():
        if src.is_dir():
            try:
                target.resolve().relative_to(src.resolve())
            except ValueError:
                return None
            return f"it is inside the input directory {src}"
        try:
            if target.exists() and os.path.samefile(target, src):
                return f"it is the input file {src}"
        except OSError:
            pass
        return f"it is the input file {src}" if target.resolve() == src.resolve() else None
    if _is_glob(text):
        matches = {Path(p).resolve() for p in glob.glob(text, recursive=True)}
        if target.resolve() in matches or Path(target).match(text):
            return f"it matches the input pattern {text}"
    return None


def check_output_path(
    path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str] | None] = ()
) -> None:
    """Raise :class:`InputError` unless ``path`` can be written and is none of ``inputs``.

    Run it before the work, so that a typo in ``--output`` costs nothing. ``-`` (standard
    output) is always accepted. The check creates and removes a temporary file in the
    destination directory: permission bits alone do not tell (root ignores them; a read-only
    mount does not show in them).
    """
    text = os.fspath(path)
    if text == STDOUT:
        return
    target = Path(text)
    if not text.strip():
        raise InputError("the output path is empty; give a file name (or '-' for the terminal).")
    for source in inputs:
        if source is None:
            continue
        reason = _same_or_inside(target, source)
        if reason:
            raise InputError(
                f"refusing to write {target}: {reason}; choose another output file "
                "(writing there would destroy or mix into the data being read)."
            )
    if target.is_dir():
        raise InputError(f"cannot write {target}: it is a directory; give a file name inside it.")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.exists():
        raise InputError(f"cannot write {target}: the directory {parent} does not exist.")
    if not parent.is_dir():
        raise InputError(f"cannot write {target}: {parent} is not a directory.")
    if target.exists() and not os.access(target, os.W_OK):
        raise InputError(f"cannot write {target}: the file is read-only (permission denied).")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".check")
    except OSError as exc:
        raise InputError(
            f"cannot write {target}: the directory {parent} is not writable ({exc.strerror})."
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _default_mode(target: Path) -> int:
    """Permission bits for the new file: the old file's, else 0o666 minus the umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        pass
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform lets a directory be opened
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


#: Whether unnamed temporary files can be given a name (``O_TMPFILE`` + ``linkat``); learnt on
#: first use (some sandboxes and file systems refuse one or the other).
_ANONYMOUS = {"works": hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")}


def _anonymous_fd(directory: Path) -> int | None:
    """An unnamed file in ``directory`` (Linux O_TMPFILE), or None where unsupported."""
    if not _ANONYMOUS["works"]:
        return None
    try:
        return os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o600)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
            _ANONYMOUS["works"] = False
            return None
        raise


def _named_temp(target: Path) -> tuple[int, Path]:
    directory = target.parent if str(target.parent) else Path(".")
    fd, name = tempfile.mkstemp(
        dir=directory, prefix=f".{target.name}.", suffix=".tmp" + target.suffix
    )
    return fd, Path(name)


def _publish_anonymous(fd: int, target: Path, mode: int) -> None:
    """Give the unnamed file ``fd`` a temporary name beside ``target`` and rename it onto
    ``target``; where the system refuses the link, copy it into a named temporary file."""
    directory = target.parent if str(target.parent) else Path(".")
    name = directory / f".{target.name}.{os.urandom(6).hex()}.tmp"
    try:
        os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)
    except OSError as exc:
        if exc.errno not in (
            errno.EXDEV,
            errno.ENOENT,
            errno.EPERM,
            errno.EINVAL,
            errno.EOPNOTSUPP,
        ):
            raise
        _ANONYMOUS["works"] = False
        out, name = _named_temp(target)
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            with open(f"/proc/self/fd/{fd}", "rb") as src, os.fdopen(out, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name)
            raise
    _rename_into_place(name, target, mode)


def _rename_into_place(tmp: Path, target: Path, mode: int) -> None:
    """Give ``tmp`` the permission bits ``mode`` and rename it onto ``target`` (removed on
    failure, so that nothing is left behind)."""
    try:
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    encoding: str | None = "utf-8",
    newline: str | None = None,
) -> Iterator[IO[Any]]:
    """Open ``path`` for writing such that it is replaced only when the ``with`` block succeeds.

    ``mode`` is ``"w"`` (text) or ``"wb"`` (bytes). On an exception the destination is left as
    it was and the temporary file is removed.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes only ('w' or 'wb'), not {mode!r}")
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    file_mode = _default_mode(target)
    kwargs: dict[str, Any] = {} if mode == "wb" else {"encoding": encoding, "newline": newline}
    fd = _anonymous_fd(directory)
    if fd is not None:
        try:
            with os.fdopen(fd, mode, closefd=False, **kwargs) as fh:
                yield fh
                fh.flush()
                os.fsync(fd)
            _publish_anonymous(fd, target, file_mode)
        finally:
            os.close(fd)
    else:
        with atomic_path(target) as tmp, open(tmp, mode, **kwargs) as fh:
            yield fh
    _fsync_dir(directory)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` for writers that want a file name (e.g. matplotlib's
    ``savefig``); it keeps the destination's suffix so that such writers infer the format.
    When the ``with`` block succeeds the file is fsynced and renamed onto ``path``; on an
    exception it is removed and ``path`` is left as it was."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    file_mode = _default_mode(target)
    fd, tmp = _named_temp(target)
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _rename_into_place(tmp, target, file_mode)
    _fsync_dir(directory)


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically (see :func:`atomic_open`)."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)
