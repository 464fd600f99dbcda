"""Optional parts of stablearena and the extra that installs each (``pip install
'stablearena[serve]'``): the library and the command line — ranking, intervals, plots, reports,
``auto`` — need none; the live arena (``stablearena serve``, ``auto --db``, the
:mod:`stablearena.service` package) needs its web framework and database layers. A command
that needs a missing extra says which one to install (:func:`require`)."""

from __future__ import annotations

import importlib.util

from .errors import InputError

__all__ = ["EXTRAS", "MissingExtra", "missing", "require"]

#: Extra → the modules it brings (import names), checked by :func:`require`.
EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("fastapi", "sqlalchemy", "alembic", "prometheus_client", "fastapi_offline"),
    "postgres": ("psycopg",),
}


class MissingExtra(InputError, ImportError):
    """A feature needs an extra that is not installed; the message names it."""


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` (:data:`EXTRAS`) that cannot be imported here."""

    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError, AttributeError):  # e.g. sys.modules[name] is None
            return True

    return [m for m in EXTRAS[extra] if absent(m)]


def require(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtra` when ``extra`` is not installed: ``feature`` (e.g.
    "stablearena serve") needs it."""
    gone = missing(extra)
    if gone:
        raise MissingExtra(
            f"{feature} needs stablearena's '{extra}' extra ({', '.join(gone)} not installed): "
            f"pip install 'stablearena[{extra}]'"
        )
