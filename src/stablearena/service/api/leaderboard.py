"""The public reads: the leaderboard (the ``stablearena rank --format json`` contract) and the
models."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from ...raters.uncertainty import CI_METHODS
from ..deps import arena
from ..errors import ApiError
from ..live_boards import live_boards

__all__ = ["router", "METHODS"]

#: The methods ``/v1/leaderboard?method=`` accepts (am-elo is the published fit).
METHODS = ("am-elo", "m-elo", "bt", "rao-kupper", "davidson")

router = APIRouter()


@router.get("/v1/models", summary="The arena's models and their state")
async def list_models(request: Request) -> dict[str, Any]:
    return {"models": arena(request).model_list()}


@router.get(
    "/v1/leaderboard", summary="The leaderboard (the `stablearena rank --format json` contract)"
)
async def leaderboard(
    request: Request,
    method: Annotated[
        str, Query(description="am-elo (published), m-elo, bt, rao-kupper, davidson")
    ] = "am-elo",
    ci: Annotated[str, Query(description="none, fisher, sandwich or bootstrap")] = "none",
    level: Annotated[float, Query(gt=0.5, lt=1.0)] = 0.95,
    style: Annotated[bool, Query(description="style control (held battles)")] = False,
    where: Annotated[list[str] | None, Query(description="COLUMN=VALUE, repeatable")] = None,
    by: Annotated[str | None, Query(description="one board per value of COLUMN")] = None,
    anony: Annotated[
        Literal["only", "all"],
        Query(
            description="only: anonymous votes (the default board); all: also the votes of "
            "battles whose answer named a model"
        ),
    ] = "only",
) -> Response:
    if method not in METHODS:
        raise ApiError(
            422,
            "invalid_input",
            f"method must be one of {', '.join(METHODS)}, not {method!r}",
            "method",
        )
    if ci not in ("none", *CI_METHODS):
        raise ApiError(
            422,
            "invalid_input",
            f"ci must be none or one of {', '.join(CI_METHODS)}, not {ci!r}",
            "ci",
        )
    st = arena(request)
    if style or where or by or anony == "all":  # boards of the export (live_boards.py)
        return JSONResponse(
            await asyncio.to_thread(
                live_boards,
                st.engine,
                method,
                style=style,
                where_items=where or [],
                by=by,
                ci=ci,
                level=level,
                keep_non_anony=anony == "all",
                config=st.config,
            )
        )
    if method == "am-elo" and ci == "none":
        return Response(st.published_json(), media_type="application/json")
    return JSONResponse(await asyncio.to_thread(st.leaderboard, method, ci, level))
