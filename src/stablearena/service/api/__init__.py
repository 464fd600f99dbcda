"""The live arena's HTTP routes, one :class:`fastapi.APIRouter` per area. Routes only parse,
authorise and call :mod:`stablearena.service.state` and :mod:`stablearena.service.store`.

- :mod:`.battles`      ``POST /v1/battles``, ``POST /v1/battles/{id}/vote`` (annotators);
- :mod:`.leaderboard`  ``GET /v1/leaderboard``, ``GET /v1/models`` (public);
- :mod:`.health`       ``GET /healthz``, ``GET /metrics``;
- :mod:`.admin`        ``/v1/admin/…``, ``/v1/annotators``, ``/v1/export`` (admin key);
- :mod:`.dashboard`    ``/``, ``/dashboard/…``, ``/admin…`` (HTML pages);
- :mod:`.public_board` ``/leaderboard`` (the public leaderboard page);
- :mod:`.docs`         ``/docs`` (Swagger UI) and ``/redoc``, their assets served from here.

A new route goes into the module of its area (or a new module listed in :data:`ROUTERS`).
"""

from __future__ import annotations

from fastapi import APIRouter

from . import admin, arena, battles, dashboard, docs, health, leaderboard, public_board

__all__ = ["ROUTERS"]

#: Every router of the application, in the order they are included.
ROUTERS: tuple[APIRouter, ...] = (
    # first: FastAPI tries the routes in order, and the page's battles and votes are most of
    # the traffic that reaches it (the API's battles and votes are answered before it, by
    # stablearena.service.hot); last, their requests were matched against every route
    # before them (about 0.5 ms of CPU per request)
    arena.router,  # the held battles and the /arena page
    dashboard.router,
    health.router,
    leaderboard.router,
    public_board.router,
    battles.router,
    admin.router,
    docs.router,
)
