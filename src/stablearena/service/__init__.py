"""The live arena: ``stablearena serve``.

am-ELO's Stable Arena loop (Algorithm 3) and "Fewer Battles" pair selection running as an HTTP
service, laid out like the FastAPI project template (docs/architecture.md):

- :mod:`.app`        ``create_app(settings)``, the application factory and its lifespan;
- :mod:`.api`        the routes, one ``APIRouter`` per area (battles and votes, leaderboard,
  health, admin, dashboard): they only parse, authorise and call;
- :mod:`.hot`        the plain-ASGI front that answers the hot routes without FastAPI's
  request machinery (same functions as the routes);
- :mod:`.deps`       authentication and shared dependencies; :mod:`.schemas` request models;
  :mod:`.errors` the refusals;
- :mod:`.settings`   one typed settings object (TOML file, command-line overrides) and the
  arena's configuration (stored in the database so that every worker agrees);
- :mod:`.store`      every table (one SQLAlchemy metadata), every SQL statement, the
  migrations and the group-committing writer;
- :mod:`.state`      what a worker keeps in memory — models, keys, the information tracker, the
  latest fit — all caches rebuilt from the database; it serves battles by the library's
  serving rule (:mod:`stablearena.design.serving_draw`);
- :mod:`.refitter`   the background refitter (a thread) and :mod:`.refit` the fit it runs in a
  separate process; :mod:`.dashboard` the dashboard's watcher and :mod:`.render` the render
  process; :mod:`.worker` the ``--workers N`` supervisor;
- :mod:`.security`   keys (hashed, compared in constant time), roles, rate limits, body limits.

The durable state is the vote log plus the pair counts per (pair, annotator, outcome), updated
in the same transaction as each vote; everything else can be rebuilt from them.

Layer 9. May import: every library layer (the foundation up to :mod:`stablearena.figures`);
not :mod:`stablearena.cli`. Its stack (FastAPI, SQLAlchemy, Alembic, uvicorn) is the
``stablearena[serve]`` extra. :mod:`.client` is the Python client of a running arena (httpx only).
"""

from __future__ import annotations

from ..extras import require as _require

_require("serve", "the live arena (stablearena.service)")

__all__ = ["create_app", "Settings", "ArenaConfig", "load_settings"]


def __getattr__(name: str):  # noqa: ANN202 - lazy: importing the package stays cheap
    if name == "create_app":
        from .app import create_app

        return create_app
    if name in ("Settings", "ArenaConfig", "load_settings"):
        from . import settings

        return getattr(settings, name)
    raise AttributeError(name)
