"""The live arena (SPEC §9; issue 10): ``stablearena serve``.

am-ELO's Stable Arena loop (Algorithm 3) and "Fewer Battles" pair selection running as an HTTP
service. Layout:

- :mod:`.settings`  one typed settings object (TOML file, command-line overrides) and the arena's
  configuration (stored in the database so that every worker agrees);
- :mod:`.store`     tables, migrations (Alembic, under ``migrations/``), the group-committing
  writer and every query;
- :mod:`.state`     what a worker keeps in memory — models, keys, the information tracker, the
  latest fit — all caches rebuilt from the database, and the background refitter;
- :mod:`.security`  keys (hashed, compared in constant time), roles, rate limits, body limits;
- :mod:`.app`       the FastAPI application factory: routes only parse, authorise and call.

The durable state is the vote log plus the pair counts per (pair, annotator, outcome), updated
in the same transaction as each vote; everything else can be rebuilt from them.
"""

from __future__ import annotations

__all__ = ["create_app", "Settings", "ArenaConfig", "load_settings"]


def __getattr__(name: str):  # noqa: ANN202 - lazy: importing the package stays cheap
    if name == "create_app":
        from .app import create_app

        return create_app
    if name in ("Settings", "ArenaConfig", "load_settings"):
        from . import settings

        return getattr(settings, name)
    raise AttributeError(name)
