"""Threads: BLAS/LAPACK on one thread inside the small dense solves of the fitters, and the
service's own threads named for the operating system.

The solvers factor m×m matrices (m = number of models, a few hundred) many times. On a busy
2-core machine a multi-threaded OpenBLAS spends far longer synchronising its threads than
computing (measured: an m-ELO fit on 1M battles took 0.1–2.4 s with 2 BLAS threads under load,
23–25 ms with one). The limit is set with ``threadpoolctl`` around each fit and restored after.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

__all__ = ["name_this_thread", "single_threaded_blas", "stop_watching", "watch"]


def _controller() -> Any:
    # The BLAS libraries are those loaded so far: NumPy's always, SciPy's once scipy.linalg has
    # been imported (the Bradley–Terry solver uses NumPy's alone and does not import SciPy,
    # which would cost 0.3 s at start-up), so the controller is rebuilt when SciPy arrives.
    return _controller_for("scipy.linalg" in sys.modules)


@lru_cache(maxsize=2)
def _controller_for(scipy_loaded: bool) -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Context manager: BLAS limited to one thread inside, restored on exit (≈ 40 µs)."""
    with _controller().limit(limits=1, user_api="blas"):
        yield


@lru_cache(maxsize=1)
def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None)


def name_this_thread(name: str) -> None:
    """Linux: name the calling OS thread ``name`` (its first 15 bytes), as ``top -H``,
    ``ps -L`` and ``/proc/<pid>/task/<tid>/comm`` show it — so that the CPU of a ``serve``
    process can be told apart by thread (serving, vote writer, refitter, dashboard:
    bench/bench_hosts.py). Elsewhere, or where ``prctl`` is missing, nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        _libc().prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        return


def watch(
    name: str,
    tick: Callable[[], None],
    stop: threading.Event,
    wake: threading.Event,
    every: float,
    failed: Callable[[Exception], None],
) -> None:
    """The body of a service's watcher thread named ``name``: ``tick()`` every ``every``
    seconds, or at once when the event ``wake`` is set, until the event ``stop`` is; an
    exception of ``tick`` goes to ``failed`` and the watching goes on (a failed fit, drawing
    or lost database connection must not end it)."""
    name_this_thread(name)
    while not stop.is_set():
        try:
            tick()
        except Exception as exc:  # noqa: BLE001 - reported by failed(); the loop survives
            failed(exc)
        wake.wait(every)
        wake.clear()


def stop_watching(
    stop: threading.Event, wake: threading.Event, thread: threading.Thread, timeout: float
) -> None:
    """End the watcher ``thread`` running :func:`watch` with ``stop`` and ``wake``: ``stop``
    set, ``wake`` set so that it does not sleep out its wait, then joined for at most
    ``timeout`` seconds."""
    stop.set()
    wake.set()
    thread.join(timeout=timeout)
