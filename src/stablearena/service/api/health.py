"""Liveness and metrics: ``GET /healthz`` (the state of the arena) and ``GET /metrics``
(Prometheus)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from .. import store
from ..deps import arena

__all__ = ["router"]

router = APIRouter()


@router.get("/healthz", summary="Liveness and the state of the arena")
async def healthz(request: Request) -> dict[str, Any]:
    st = arena(request)
    fit = st.fit
    ok = await asyncio.to_thread(store.ping, st.engine)
    return {
        "status": "ok" if ok else "degraded",
        "database": "ok" if ok else "unreachable",
        "db": request.app.state.settings.redacted_db(),
        "models": len(st.models),
        "votes": st.votes_seen,
        "fit_as_of_vote": fit.as_of_vote if fit else None,
        "fitted_at": fit.fitted_at if fit else None,
        "strategy": st.strategy_name,
        "refit_error": request.app.state.refitter.last_error,
        "refit_waiting": st.refit_waiting,
        "worker": request.app.state.worker,
        "pid": os.getpid(),
    }


@router.get("/metrics", summary="Prometheus metrics")
async def metrics(request: Request) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
