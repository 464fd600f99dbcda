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

What the destination is decides how it is written (:func:`output_target`, one rule for every
writer): a regular file (or a new name) is replaced atomically as above; a symbolic link stays a
link and the file it points to is replaced atomically; a device, a FIFO or a socket (``/dev/null``,
``/dev/stdout``, a named pipe, a terminal) is written through directly, since renaming a file onto
it would replace the device node itself; a write error there (``/dev/full``: no space left on the
device) is an :class:`InputError` naming the path. A directory is an :class:`InputError`.
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

__all__ = [
    "check_output_path",
    "output_target",
    "atomic_open",
    "atomic_write",
    "atomic_path",
    "STDOUT",
]

#: An output path meaning standard output.
STDOUT = "-"


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def output_target(path: str | os.PathLike[str]) -> tuple[Path, bool]:
    """Where writing ``path`` goes and whether it is written through directly.

    Returns ``(target, direct)``: ``direct`` is True for a device, a FIFO or a socket (written
    in place through ``path``; no temporary file, no rename: renaming onto ``/dev/null`` would
    replace the device node), and for a link that leads through ``/proc`` (``/dev/stdout``,
    ``/dev/fd/N``: whatever the descriptor is, a terminal, a pipe or a file the shell opened).
    Otherwise ``target`` is the file to replace atomically: ``path`` itself, or, when ``path`` is
    a symbolic link, the file the link points to (the link stays a link). Raises
    :class:`InputError` for a directory."""
    given = Path(path)
    try:
        st = os.stat(given)  # follows links
    except (FileNotFoundError, NotADirectoryError):
        st = None  # a new file (or a parent that is not a directory: said by the caller)
    except OSError as exc:
        raise InputError(f"cannot write {given}: {exc.strerror or exc}.") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(f"cannot write {given}: it is a directory; give a file name inside it.")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return given, True
    if given.is_symlink():
        if _through_proc(given):
            return given, True  # /dev/stdout onto a file the shell opened (maybe for >>)
        return Path(os.path.realpath(given)), False
    return given, False


def _through_proc(link: Path) -> bool:
    """Whether the chain of links from ``link`` passes through ``/proc`` (``/dev/stdout`` →
    ``/proc/self/fd/1``): then the destination is an open descriptor, whatever it points to."""
    current = link.absolute()
    for _ in range(40):  # the kernel's limit on links followed
        if str(current).startswith("/proc/"):
            return True
        if not current.is_symlink():
            return False
        current = Path(os.path.normpath(current.parent / os.readlink(current)))
    return False


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
    shown = target
    target, direct = output_target(target)
    if direct:
        if not os.access(target, os.W_OK):
            raise InputError(f"cannot write {shown}: permission denied.")
        return
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.exists():
        raise InputError(f"cannot write {shown}: the directory {parent} does not exist.")
    if not parent.is_dir():
        raise InputError(f"cannot write {shown}: {parent} is not a directory.")
    if target.exists() and not os.access(target, os.W_OK):
        raise InputError(f"cannot write {shown}: the file is read-only (permission denied).")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".check")
    except OSError as exc:
        raise InputError(
            f"cannot write {shown}: the directory {parent} is not writable ({exc.strerror})."
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


def _write_error(path: str | os.PathLike[str], exc: OSError) -> InputError:
    return InputError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}.")


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
    it was and the temporary file is removed. A device, FIFO or socket is written through
    directly, a symbolic link's target is replaced (:func:`output_target`); a failed write
    (e.g. no space left on the device) raises :class:`InputError` naming ``path``.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes only ('w' or 'wb'), not {mode!r}")
    target, direct = output_target(path)
    kwargs: dict[str, Any] = {} if mode == "wb" else {"encoding": encoding, "newline": newline}
    if direct:
        try:
            # appending: through /dev/stdout onto a file the shell opened (``>`` or ``>>``) the
            # output goes after what is there instead of truncating it; the same on a device
            with open(target, mode.replace("w", "a"), **kwargs) as fh:
                yield fh
                fh.flush()
        except OSError as exc:
            raise _write_error(path, exc) from None
        return
    directory = target.parent if str(target.parent) else Path(".")
    file_mode = _default_mode(target)
    try:
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
            with _atomic_file(target) as tmp, open(tmp, mode, **kwargs) as fh:
                yield fh
    except OSError as exc:
        raise _write_error(path, exc) from None
    _fsync_dir(directory)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` for writers that want a file name (e.g. matplotlib's
    ``savefig``); it keeps the destination's suffix so that such writers infer the format.
    When the ``with`` block succeeds the file is fsynced and renamed onto ``path``; on an
    exception it is removed and ``path`` is left as it was. A device, FIFO or socket is given
    as it is (written through directly), a symbolic link's target is replaced
    (:func:`output_target`); write errors raise :class:`InputError` naming ``path``."""
    target, direct = output_target(path)
    try:
        if direct:
            yield target
        else:
            with _atomic_file(target) as tmp:
                yield tmp
    except OSError as exc:
        raise _write_error(path, exc) from None


@contextlib.contextmanager
def _atomic_file(target: Path) -> Iterator[Path]:
    """A named temporary file beside the regular file ``target``, renamed onto it when the
    ``with`` block succeeds (removed on an exception)."""
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
