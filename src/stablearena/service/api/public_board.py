"""The public leaderboard page ``GET /leaderboard`` (HTML, no script): the published fit (the board rule)
with 95% intervals, one tab per prompt category (the boards of ``/v1/leaderboard?by=category``)
and a toggle to the style-controlled board (``/v1/leaderboard?style=true``).

Every worker serves it from the published fit: a board is computed once per (fit, tab, toggle)
and its page kept, so a request never fits (``?board=`` and ``?style=`` only pick a cached
page). The rank shown is the arena's upper-bound rank (``displayed_rank``: 1 + the number of
models whose interval lies entirely above), as on LMArena; docs/guides/arena-page.md.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from ...errors import StableArenaError
from ..deps import arena
from ..errors import ApiError
from ..live_boards import live_boards
from ..render import environment, version_text
from .dashboard import _html

__all__ = ["router", "RANK_MEANING"]

router = APIRouter()

#: What the rank column means, written on every page that shows it.
RANK_MEANING = (
    "Rank (UB) = 1 + the number of models whose 95% interval lies entirely above this "
    "model's: models whose intervals overlap share a rank (LMArena's upper-bound rank)."
)
_ALL = "all"
#: The page reloads itself this often (a meta refresh: the page has no script); each reload is
#: a cached page until the next published fit.
REFRESH_SECONDS = 60
_lock = threading.Lock()


def _boards(st: Any, style: bool) -> dict[str, tuple[dict[str, Any] | None, str]]:
    """Every tab's board: ``{"all" or category: (payload or None, note when not fitted)}``."""
    out: dict[str, tuple[dict[str, Any] | None, str]] = {}
    try:
        if style:
            out[_ALL] = (
                live_boards(
                    st.engine,
                    "am-elo",
                    style=True,
                    where_items=[],
                    by=None,
                    ci="fisher",
                    config=st.config,
                ),
                "",
            )
        else:
            out[_ALL] = (st.leaderboard("am-elo", "fisher", 0.95), "")
    except (StableArenaError, ApiError, ValueError) as e:
        out[_ALL] = (None, f"This board could not be fitted: {getattr(e, 'message', e)}")

    def by_category(styled: bool) -> tuple[dict[Any, Any], str]:
        try:
            got = live_boards(
                st.engine,
                "am-elo",
                style=styled,
                where_items=[],
                by="category",
                ci="fisher",
                config=st.config,
            )["boards"]
            return got, ""
        except (StableArenaError, ApiError, KeyError, ValueError) as e:
            return {}, f"This board could not be fitted: {getattr(e, 'message', e)}"

    by_cat, why = by_category(style)
    for value, payload in sorted(by_cat.items(), key=lambda kv: str(kv[0])):
        out[str(value)] = (payload, "")
    if style:  # every category tab of the raw board stays, fitted under style control or not
        for value in by_category(False)[0]:
            out.setdefault(
                str(value),
                (None, why or "Too few of this category's battles for a style-controlled board."),
            )
    return out


def _pages(st: Any, fit: Any, style: bool) -> dict[str, str]:
    """Every tab's page for one published fit (drawn once per fit and toggle)."""
    boards = _boards(st, style)
    cats = [b for b in boards if b != _ALL]
    return {b: _render(fit, payload, note, cats, b, style) for b, (payload, note) in boards.items()}


def _render(
    fit: Any, payload: dict[str, Any] | None, note: str, cats: list[str], board: str, style: bool
) -> str:
    models = []
    if payload:
        models = sorted(
            payload["models"], key=lambda e: (e.get("displayed_rank", e["rank"]), -e["rating"])
        )
    return (
        environment()
        .get_template("leaderboard_page.html.j2")
        .render(
            version=version_text(),
            script=None,
            refresh_seconds=REFRESH_SECONDS,
            models=models,
            payload=payload,
            note=note,
            cats=cats,
            board=board,
            style=style,
            rank_meaning=RANK_MEANING,
            fit_id=fit.id if fit else None,
            as_of_vote=fit.as_of_vote if fit else 0,
            updated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(fit.fitted_at))
            if fit
            else "not yet",
        )
    )


@router.get("/leaderboard", include_in_schema=False)
async def leaderboard_page(
    request: Request,
    board: Annotated[str, Query(max_length=200, description="all or a category")] = _ALL,
    style: Annotated[bool, Query(description="the style-controlled board")] = False,
) -> Response:
    """The public leaderboard (HTML): rank (UB), model, score, 95% interval, votes."""
    st = arena(request)
    try:
        fit = st.published()
    except ApiError as e:
        return _html(request, text=_render(None, None, e.message, [], _ALL, style))
    app = request.app
    key = (fit.id, style)
    pages = getattr(app.state, "leaderboard_pages", {}).get(key)
    if pages is None:
        pages = await asyncio.to_thread(_cached, app, st, fit, style)
    text = pages.get(board)
    if text is None:
        return _html(
            request,
            text=_render(
                fit, None, f"No board {board!r}: pick a tab above.", list(pages), board, style
            ).replace("<title>", "<title>Not found — ", 1),
            status=404,
        )
    return _html(request, text=text)


def _cached(app: Any, st: Any, fit: Any, style: bool) -> dict[str, str]:
    """The pages of (fit, style), drawn by one thread while others wait for them."""
    with _lock:
        cache = getattr(app.state, "leaderboard_pages", {})
        pages = cache.get((fit.id, style))
        if pages is None:
            pages = _pages(st, fit, style)
            cache = {k: v for k, v in cache.items() if k[0] == fit.id}
            cache[(fit.id, style)] = pages
            app.state.leaderboard_pages = cache
        return pages
