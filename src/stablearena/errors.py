"""Exceptions and warnings raised by stablearena.

Every error the library raises on purpose derives from :class:`StableArenaError`, so a caller
can catch one class; the message always says what was wrong and what to do about it.
"""

from __future__ import annotations


class StableArenaError(Exception):
    """Base class of every error stablearena raises on purpose."""


class InputError(StableArenaError, ValueError):
    """The battle log, a column, a label or an option is not what it must be."""


class TooFewRecords(InputError):
    """No annotator has the ``min_records`` comparisons that am-ELO's screening asks before it
    fits an annotator (the Stable Arena's δ). ``min_records`` is δ, ``most`` the largest number
    of records any annotator has."""

    def __init__(self, message: str, min_records: float, most: float):
        super().__init__(message)
        self.min_records = min_records
        self.most = most

    def __reduce__(self):  # noqa: ANN204 - picklable (e.g. raised in a fit process)
        return (type(self), (str(self), self.min_records, self.most))


class DisconnectedGraphError(StableArenaError):
    """The comparison graph has more than one component, so ratings cannot be compared.

    ``components`` holds the model names of each component, largest first.
    """

    def __init__(self, message: str, components: list[list[str]]):
        super().__init__(message)
        self.components = components

    def __reduce__(self):  # noqa: ANN204 - picklable (e.g. raised in a worker process)
        return (type(self), (str(self), self.components))


class ConvergenceError(StableArenaError):
    """A solver did not reach its tolerance within its iteration budget."""


class StableArenaWarning(UserWarning):
    """A result is valid but needs the user's attention (e.g. a prior was used)."""
