"""Several API worker processes on one listening socket: ``stablearena serve --workers N``.

One Python process answers requests on one core at most (the interpreter lock). With
``--workers N`` the ``serve`` process binds the socket, migrates the database once, and starts N
worker processes (``python -m stablearena.service.worker``) that inherit the socket and accept
connections from it, each a complete arena worker (:func:`stablearena.service.app.create_app`)
with its own caches, group-commit writer and refitter thread, all on the one database — the
same design as several ``serve`` processes on one PostgreSQL database, and the same rules:

- every vote is durable before its answer and idempotent (the database decides, whichever
  worker gets the request); battles and votes may go to different workers;
- "not a pair this annotator has judged while another remains" holds across workers: a worker
  stores a battle only if the database has no vote of the annotator on that pair (checked in
  the transaction that stores it), and otherwise learns the pair and draws again;
- one refit at a time (SQLite: a lock file; PostgreSQL: an advisory lock); every worker
  installs the newest published fit within ``poll_seconds``;
- one rate limit per key: the workers share their token buckets (a table in shared memory,
  :class:`~stablearena.service.security.SharedRateLimiter`);
- on SQLite the workers' writers take turns through a lock file (a blocking ``flock``, woken
  at once when the other commits) instead of SQLite's sleeping busy handler.

The parent only supervises: it forwards SIGTERM / SIGINT to the workers and waits for them,
and restarts a worker that dies (a worker that exits within a few seconds of its start ends
the server instead). On Linux each worker is killed with its parent (``PR_SET_PDEATHSIG``), so
a crash of ``serve`` (even SIGKILL) never leaves workers serving behind it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from .._lifetime import exit_with_parent, say_stopping

__all__ = ["run_workers", "main"]

#: Environment variable carrying the settings (JSON) from ``serve`` to its workers.
SETTINGS_ENV = "STABLEARENA_WORKER_SETTINGS"
#: A worker that exits sooner than this after its start is a start-up failure (no restart).
_MIN_UPTIME = 5.0


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (no orphan worker keeps the port)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


def _spawn(settings_json: str, sock: socket.socket, index: int, limits_fd: int) -> subprocess.Popen:
    fd = sock.fileno()
    env = {**os.environ, SETTINGS_ENV: settings_json}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stablearena.service.worker",
            "--fd",
            str(fd),
            "--index",
            str(index),
            "--parent",
            str(os.getpid()),
            "--limits-fd",
            str(limits_fd),
        ],
        pass_fds=(fd, limits_fd),
        env=env,
    )


def run_workers(settings: Any, sock: socket.socket, workers: int) -> int:
    """Serve ``sock`` with ``workers`` worker processes until SIGTERM / SIGINT; returns the
    exit code (0 after a signal, 1 when a worker fails at start)."""
    from .security import shared_buckets_fd

    settings_json = settings.model_dump_json()
    limits_fd = shared_buckets_fd()  # one rate-limit table for all the workers
    procs: dict[int, tuple[subprocess.Popen, float]] = {}
    stopping = {"signal": 0}

    def stop(signum: int, _frame: Any) -> None:
        if not stopping["signal"]:
            name = signal.Signals(signum).name
            say_stopping(name)
        stopping["signal"] = signum

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    code = 0
    try:
        for k in range(workers):
            procs[k] = (_spawn(settings_json, sock, k, limits_fd), time.monotonic())
        while not stopping["signal"]:
            time.sleep(0.05)
            for k, (proc, started) in list(procs.items()):
                if proc.poll() is None or stopping["signal"]:
                    continue
                if time.monotonic() - started < _MIN_UPTIME:
                    print(
                        f"stablearena serve: worker {k} exited with {proc.returncode} at start; "
                        "stopping",
                        file=sys.stderr,
                        flush=True,
                    )
                    stopping["signal"] = -1
                    code = 1
                    break
                print(
                    f"stablearena serve: worker {k} exited with {proc.returncode}; restarting it",
                    file=sys.stderr,
                    flush=True,
                )
                procs[k] = (_spawn(settings_json, sock, k, limits_fd), time.monotonic())
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc, _ in procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for s, handler in old.items():
            signal.signal(s, handler)
        os.close(limits_fd)
    return code


def main(argv: list[str] | None = None) -> None:
    """Entry point of one worker: ``python -m stablearena.service.worker --fd FD --index K
    --parent PID`` with the settings in the environment (started by :func:`run_workers`)."""
    import argparse

    ap = argparse.ArgumentParser(description="One API worker of 'stablearena serve --workers N'.")
    ap.add_argument("--fd", type=int, required=True, help="the inherited listening socket")
    ap.add_argument("--index", type=int, required=True, help="this worker's number (0, 1, …)")
    ap.add_argument("--parent", type=int, default=0, help="the serve process (exit with it)")
    ap.add_argument(
        "--limits-fd", type=int, default=-1, help="the workers' shared rate-limit table"
    )
    args = ap.parse_args(argv)
    _die_with_parent()  # Linux: at once
    if args.parent:  # the parent died before the prctl, or another system: within a second
        exit_with_parent(args.parent)
    from .app import create_app, serve_app
    from .settings import Settings

    settings = Settings.model_validate(json.loads(os.environ[SETTINGS_ENV]))
    sock = socket.socket(fileno=args.fd)
    limits = args.limits_fd if args.limits_fd >= 0 else None
    serve_app(
        create_app(settings, worker=args.index, limits_fd=limits), settings, sock, announce=False
    )
    import gc

    gc.freeze()  # no last full collection of the worker's heap at exit (about 1.4 s when idle)


if __name__ == "__main__":
    main()
