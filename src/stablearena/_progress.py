"""Progress reports from long computations to whoever is listening (the command line).

A fitter calls :func:`report` with a short text ("lbfgs+newton iteration 37, |g|/n 3.1e-06")
at each iteration; it costs one context-variable look-up when nobody listens. The command line
listens with :func:`reporting` and shows the latest text beside a spinner on a terminal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["report", "reporting"]

_LISTENER: ContextVar[Callable[[str], None] | None] = ContextVar("_LISTENER", default=None)


def report(text: str) -> None:
    """Pass ``text`` to the current listener, if any."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(text)


@contextlib.contextmanager
def reporting(listener: Callable[[str], None]) -> Iterator[None]:
    """Within the block, :func:`report` calls ``listener``."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)
