"""Worker processes that end with the process that started them.

The live arena fits in a spawned process and draws the dashboard in another; the bootstrap,
the coverage and the selection experiments run their work in process pools. A parent killed
with SIGKILL (a crash, an OOM kill, ``kill -9``, a closed terminal's hang-up escalated) runs no
clean-up, and on its own a child of ``concurrent.futures.ProcessPoolExecutor`` outlives it:
each server crash used to leave a fit process and a render process behind (120–280 MB each,
some still drawing), and a killed ``rank --ci bootstrap`` left its two workers computing.
Every such child runs :func:`exit_with_parent` first: it exits at once if the parent is already
gone, and a daemon thread checks once a second that its parent is still the one that started it
(a dead parent's children are re-parented, so ``os.getppid()`` changes) and ends the process
when it is not.

Polling the parent id works on every POSIX system and does not depend on which thread of the
server started the child (Linux's ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the
child ends, and the executors start their processes from whichever thread first submits).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

__all__ = ["exit_with_parent", "say_stopping", "stop_pool", "WATCH_SECONDS"]

#: how often a child checks that the server is still its parent
WATCH_SECONDS = 1.0


def exit_with_parent(parent: int, interval: float = WATCH_SECONDS) -> None:
    """Initialiser of a worker process: end this process (``os._exit``, no clean-up: its work
    belongs to a parent that no longer exists) as soon as ``parent`` is no longer its parent
    process."""
    if os.getppid() != parent:
        os._exit(0)

    def watch() -> None:
        while True:
            time.sleep(interval)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def stop_pool(executor: Any, grace: float = 1.0) -> None:
    """Shut ``executor`` down without waiting for its work: pending work is cancelled and the
    processes of a ``ProcessPoolExecutor`` are terminated (SIGTERM, SIGKILL after ``grace``
    seconds). Otherwise interpreter exit joins them, and a worker still importing or fitting
    held a stopping server for 5–30 s. Their work is lost, which is what stopping means (a
    fit process only reads the database)."""
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in processes:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)


def say_stopping(signal_name: str) -> None:
    """Print that the server is stopping, from a signal handler: one ``os.write`` to standard
    output (a ``print`` there could land inside another print's buffered write)."""
    with contextlib.suppress(OSError):
        os.write(1, f"stablearena serve: {signal_name} received, stopping\n".encode())
