"""Progress reports from long computations to whoever is listening (the command line).

A fitter calls :func:`report` with a short text ("lbfgs+newton iteration 37, |g|/n 3.1e-06")
at each iteration; it costs one context-variable look-up when nobody listens. The command line
listens with :func:`reporting` and shows the latest text beside a spinner on a terminal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rich.progress import Progress

__all__ = ["report", "reporting", "counting_bar"]

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


def counting_bar(
    label: str, *, enabled: bool = True, elapsed: bool = False, transient: bool = True
) -> Progress:
    """A Rich progress bar on stderr counting finished steps: ``label`` (a Rich format string;
    ``{task.description}`` is the task's), the bar, done/total and the time remaining (the time
    elapsed when ``elapsed``). Shown only when ``enabled``; cleared at the end when
    ``transient``. Rich is imported here, when a bar is asked for."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn() if elapsed else TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=transient,
        disable=not enabled,
    )
