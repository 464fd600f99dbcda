"""Liveness and metrics: ``GET /healthz`` (the state of the arena) and ``GET /metrics``
(Prometheus)."""

from __future__ import annotations

import asyncio
import contextlib
import os

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .. import store
from ..deps import arena

__all__ = ["router"]

router = APIRouter()


@router.get("/healthz", summary="Liveness and the state of the arena")
async def healthz(request: Request) -> JSONResponse:
    """200 when the database answers and takes writes; 503 (``status`` "degraded") when it
    does not answer or the last write failed — with the reason (``database_error``) — until a
    write succeeds again (while a failure is reported, each call tries a small write); 503
    (``status`` "draining") from SIGTERM until the host stops, when ``drain_seconds`` > 0 (a
    load balancer that checks ``/healthz`` takes the host out before it stops listening)."""
    st = arena(request)
    fit = st.fit
    ok = await asyncio.to_thread(store.ping, st.engine)
    writer = st.writer
    if writer.failure is not None:
        with contextlib.suppress(Exception):  # still failing: the writer keeps the reason
            await asyncio.wait_for(writer.submit_async(store.probe_write), 10)
    failure = writer.failure
    database = "unreachable" if not ok else "unwritable" if failure else "ok"
    draining = bool(getattr(request.app.state, "draining", False))
    healthy = database == "ok" and not draining
    body = {
        "status": "draining" if draining else "ok" if database == "ok" else "degraded",
        "database": database,
        "database_error": failure,
        "database_failed_at": writer.failed_at if failure else None,
        "db": request.app.state.settings.redacted_db(),
        "models": len(st.models),
        "votes": st.votes_seen,
        "fit_as_of_vote": fit.as_of_vote if fit else None,
        "fitted_at": fit.fitted_at if fit else None,
        "strategy": st.strategy_name,
        "refit_error": request.app.state.refitter.last_error,
        # a fit that failed the checks (stablearena.analysis.fitcheck) was held back: the board is stale
        "board": "stale" if st.fit_alert else ("ok" if fit else "none"),
        "fit_alert": st.fit_alert,
        "refit_waiting": st.refit_waiting,
        "worker": request.app.state.worker,
        "pid": os.getpid(),
        "live_counts": st.counts.stats(),
    }
    return JSONResponse(body, status_code=200 if healthy else 503)


@router.get("/metrics", summary="Prometheus metrics")
async def metrics(request: Request) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
