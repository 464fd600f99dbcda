"""Output files: checked before the work, written atomically, never a partial or empty file."""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from procs import HAVE_PROC, alive, children

from stablearena import atomic
from stablearena.atomic import atomic_open, atomic_path, atomic_write, check_output_path
from stablearena.errors import InputError

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


# ---------------------------------------------------------------------------- the writer
@pytest.mark.parametrize("anonymous", [True, False], ids=["O_TMPFILE", "named-temp"])
def test_atomic_write_replaces_and_leaves_no_temporary_file(tmp_path, monkeypatch, anonymous):
    monkeypatch.setitem(atomic._ANONYMOUS, "works", anonymous and atomic._ANONYMOUS["works"])
    target = tmp_path / "board.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    atomic_write(target, '{"new": 1}\n')
    assert target.read_text() == '{"new": 1}\n'
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)  # the old file's permissions kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json"]
    atomic_write(tmp_path / "raw.bin", b"\x00\x01")
    assert (tmp_path / "raw.bin").read_bytes() == b"\x00\x01"


@pytest.mark.parametrize("anonymous", [True, False], ids=["O_TMPFILE", "named-temp"])
def test_failed_write_leaves_the_old_file(tmp_path, monkeypatch, anonymous):
    monkeypatch.setitem(atomic._ANONYMOUS, "works", anonymous and atomic._ANONYMOUS["works"])
    target = tmp_path / "board.csv"
    target.write_text("the old, valid content\n")
    with pytest.raises(RuntimeError), atomic_open(target) as fh:
        fh.write("half of the new")
        raise RuntimeError("killed halfway")
    assert target.read_text() == "the old, valid content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.csv"]


def test_atomic_path_keeps_the_suffix_for_writers_that_infer_the_format(tmp_path):
    target = tmp_path / "figure.png"
    with atomic_path(target) as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path and tmp != target
        tmp.write_bytes(b"\x89PNG fake")
    assert target.read_bytes() == b"\x89PNG fake"
    with pytest.raises(ValueError), atomic_path(target) as tmp:
        tmp.write_bytes(b"partial")
        raise ValueError
    assert target.read_bytes() == b"\x89PNG fake"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure.png"]


def test_link_refused_falls_back_to_a_copy(tmp_path, monkeypatch):
    """Some sandboxes refuse linkat on /proc/self/fd: the writer copies instead."""
    if not atomic._ANONYMOUS["works"]:
        pytest.skip("O_TMPFILE is not available here")

    def refuse(*args, **kwargs):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(atomic.os, "link", refuse)
    monkeypatch.setitem(atomic._ANONYMOUS, "works", True)
    target = tmp_path / "out.txt"
    atomic_write(target, "copied\n")
    assert target.read_text() == "copied\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


# ---------------------------------------------------------------------------- early checks
def test_check_output_path_refuses_bad_destinations(tmp_path):
    data = tmp_path / "votes.csv"
    data.write_text("model_a,model_b,winner\n")
    with pytest.raises(InputError, match="it is the input file"):
        check_output_path(data, [data])
    with pytest.raises(InputError, match="it is the input file"):
        check_output_path(tmp_path / "." / "votes.csv", [str(data)])
    link = tmp_path / "link.csv"
    link.symlink_to(data)
    with pytest.raises(InputError, match="it is the input file"):
        check_output_path(link, [data])
    with pytest.raises(InputError, match="inside the input directory"):
        check_output_path(tmp_path / "board.json", [tmp_path])
    with pytest.raises(InputError, match="matches the input pattern"):
        check_output_path(tmp_path / "board.csv", [str(tmp_path / "*.csv")])
    with pytest.raises(InputError, match="is a directory"):
        check_output_path(tmp_path, [])
    with pytest.raises(InputError, match="does not exist"):
        check_output_path(tmp_path / "no" / "such" / "dir.json", [])
    with pytest.raises(InputError, match="is not a directory"):
        check_output_path(data / "x.json", [])
    check_output_path(tmp_path / "fine.json", [data])
    check_output_path("-", [data])


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
def test_check_output_path_read_only(tmp_path):  # pragma: no cover - runs as non-root only
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    with pytest.raises(InputError, match="not writable"):
        check_output_path(ro / "x.json", [])


def test_unwritable_directory_found_before_the_work(tmp_path, monkeypatch, cli):
    """The destination is checked before anything is read: a failing temp-file probe stops the
    command at once (as a read-only mount or a full disk would)."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Read-only file system")

    from stablearena.cli import rank

    read: list[object] = []
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.setattr(rank, "fit_from_options", lambda *a, **k: read.append(a))
    code, out, err = cli("rank", "--output", str(tmp_path / "board.json"))
    assert code == 2 and "not writable" in err and "Read-only" in err
    assert out == "" and read == []  # the log was never read


def test_output_equal_to_input_is_refused_and_input_untouched(tmp_path, cli):
    data = tmp_path / "votes.csv"
    content = "model_a,model_b,winner\na,b,model_a\nb,a,model_a\nb,a,model_b\n"
    data.write_text(content)
    code, _, err = cli("rank", str(data), "-o", str(data))
    assert code == 2 and "refusing to write" in err and "input file" in err
    assert data.read_text() == content
    code, _, err = cli("rank", str(tmp_path), "-o", str(tmp_path / "board.csv"))
    assert code == 2 and "inside the input directory" in err


def test_output_is_a_directory(tmp_path, cli):
    code, _, err = cli("rank", "-o", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_output_dash_is_standard_output(cli):
    code, out, _ = cli("rank", "-f", "json", "-o", "-")
    assert code == 0 and json.loads(out)["n_models"] == 12


# ------------------------------------------------------- devices, FIFOs, links (issue 32)
# Renaming a temporary file onto a device node replaces the node (as root even /dev/null): the
# writer writes through devices and FIFOs and replaces a link's target. The device nodes here are
# made in tmp_path (os.mknod, as root), never the machine's own.
needs_mknod = pytest.mark.skipif(os.geteuid() != 0, reason="os.mknod of a device needs root")


def _device(path: Path, minor: int) -> Path:
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))  # 1,3 = null; 1,7 = full
    return path


@needs_mknod
def test_output_onto_a_null_device_writes_through_it(tmp_path, cli):
    null = _device(tmp_path / "null", 3)
    code, _, err = cli("rank", "-f", "json", "-o", null)
    assert code == 0, err
    assert stat.S_ISCHR(null.stat().st_mode) and null.stat().st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no temporary file left


@needs_mknod
def test_output_onto_a_full_device_is_an_error(tmp_path, cli):
    full = _device(tmp_path / "full", 7)
    code, _, err = cli("rank", "-f", "json", "-o", full)
    assert code == 2 and "No space left on device" in err and str(full) in err
    assert stat.S_ISCHR(full.stat().st_mode) and full.stat().st_rdev == os.makedev(1, 7)
    with pytest.raises(InputError, match="No space left"):
        atomic_write(full, b"x" * 10)


def test_output_onto_a_fifo_reaches_its_reader(tmp_path, cli):
    fifo = tmp_path / "board.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    done = threading.Event()

    def read() -> None:  # non-blocking open: the test cannot hang when nothing is written
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        deadline = time.monotonic() + 30
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([fd], [], [], 0.1)
                chunk = os.read(fd, 1 << 16) if ready else b""
                got.append(chunk)
                if not chunk and done.is_set():
                    return
        finally:
            os.close(fd)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.05)
    code, _, err = cli("rank", "-f", "json", "-o", fifo)
    done.set()
    reader.join(35)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still a FIFO, not a regular file
    assert json.loads(b"".join(got))["n_models"] == 12


def test_output_onto_a_symlink_replaces_its_target(tmp_path, cli):
    real = tmp_path / "boards" / "board.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    code, _, err = cli("rank", "-f", "json", "-o", link)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(real)  # the link stays a link
    assert json.loads(real.read_text())["n_models"] == 12
    assert sorted(p.name for p in real.parent.iterdir()) == ["board.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boards", "latest.json"]


def test_output_through_a_proc_fd_link_is_the_descriptor(tmp_path):
    """``-o /dev/stdout`` (here a link to /proc/self/fd/1 in tmp_path, never /dev/stdout itself)
    writes into the pipe the caller reads, and the link is left alone."""
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    run = subprocess.run(
        [sys.executable, "-m", "stablearena", "rank", "-f", "json", "-o", str(link)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["n_models"] == 12
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"


def test_output_through_a_proc_fd_link_appends_to_a_redirected_file(tmp_path):
    """``-o /dev/stdout >> log`` (the link in tmp_path): the output goes after what the file
    holds, neither truncating it nor replacing it."""
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    log = tmp_path / "log.txt"
    log.write_text("first line\n")
    with open(log, "a") as out:
        run = subprocess.run(
            [sys.executable, "-m", "stablearena", "rank", "-f", "json", "-o", str(link)],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
            timeout=120,
        )
    assert run.returncode == 0, run.stderr
    head, _, rest = log.read_text().partition("\n")
    assert head == "first line" and json.loads(rest)["n_models"] == 12
    assert link.is_symlink()


def test_atomic_path_gives_a_device_as_it_is(tmp_path):
    fifo = tmp_path / "fig.fifo"
    os.mkfifo(fifo)
    with atomic_path(fifo) as where:
        assert where == fifo
    with pytest.raises(InputError, match="is a directory"), atomic_path(tmp_path):
        pass


# ---------------------------------------------------------------------------- kill -9
_SLOW_WRITER = """
import sys, time
from stablearena.atomic import atomic_open
with atomic_open(sys.argv[1]) as fh:
    fh.write("partial new content\\n" * 1000)
    fh.flush()
    print("writing", flush=True)
    time.sleep(60)
    fh.write("end\\n")
"""


def test_sigkill_during_the_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "board.csv"
    old = "rank,model,rating\n1,a,1010.0\n2,b,990.0\n"
    target.write_text(old)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_WRITER, str(target)],
        stdout=subprocess.PIPE,
        env=_env(),
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert target.read_text() == old
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["board.csv"]


@pytest.mark.slow
def test_sigkill_at_random_moments_of_rank_output(tmp_path):
    """kill -9 the CLI at many moments while it writes --output: the destination always holds
    either the old file or a complete new one (valid JSON), never a partial or empty file."""
    import numpy as np

    target = tmp_path / "board.json"
    target.write_text('{"old": true}\n')
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(25):
        proc = subprocess.Popen(
            [sys.executable, "-m", "stablearena", "rank", "-f", "json", "-o", str(target)],
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(float(rng.uniform(0.2, 2.5)))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        text = target.read_text()
        payload = json.loads(text)  # never partial: always parses
        outcomes.add("old" if payload == {"old": True} else "new")
        if payload != {"old": True}:
            assert payload["n_models"] == 12
            target.write_text('{"old": true}\n')
    assert outcomes  # both outcomes are fine; neither may be partial


@pytest.mark.skipif(not HAVE_PROC, reason="reads /proc (Linux)")
def test_sigkill_of_a_bootstrap_leaves_no_worker_computing(tmp_path):
    """kill -9 of `rank --ci bootstrap` while its two workers run: they end with it (each checks
    once a second that its parent is alive) instead of computing on as orphans."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "stablearena", "rank", "--ci", "bootstrap", "--rounds", "200000"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    workers: set[int] = set()
    while time.time() < deadline and len(workers) < 2:
        time.sleep(0.1)
        workers = children(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert len(workers) >= 2, "the bootstrap did not start its workers"
    deadline = time.time() + 15
    while time.time() < deadline and any(alive(p) for p in workers):
        time.sleep(0.1)
    assert not [p for p in workers if alive(p)]
