"""The public leaderboard page ``GET /leaderboard`` (HTML, no script): the published fit (the board rule)
with 95% intervals, one tab per prompt category (the boards of ``/v1/leaderboard?by=category``)
and a toggle to the style-controlled board (``/v1/leaderboard?style=true``).

Every worker of every host serves it from the boards stored for a published fit
(:mod:`..public_boards`: fitted once, by one worker, for all hosts) and renders each page once
per stored fit and toggle, so a request never fits (``?board=`` and ``?style=`` only pick a
cached page) and every host shows the same boards. The rank shown is the arena's upper-bound rank (``displayed_rank``: 1 + the number of
models whose interval lies entirely above), as on LMArena; docs/guides/arena-page.md.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from ..deps import arena
from ..errors import ApiError
from ..public_boards import ALL, Boards, PublicBoards
from ..render import environment, version_text
from .dashboard import _html

__all__ = ["router", "RANK_MEANING"]

router = APIRouter()

#: What the rank column means, written on every page that shows it.
RANK_MEANING = (
    "Rank (UB) = 1 + the number of models whose 95% interval lies entirely above this "
    "model's: models whose intervals overlap share a rank (LMArena's upper-bound rank)."
)
#: The page reloads itself this often (a meta refresh: the page has no script); each reload is
#: a cached page until the next published fit.
REFRESH_SECONDS = 60
_lock = threading.Lock()


def _pages(boards: Boards, style: bool) -> dict[str, str]:
    """Every tab's page for one published fit's stored boards (rendered once per fit and
    toggle by each worker: a template, no fit)."""
    tabs = boards.boards["style" if style else "plain"]
    cats = [b for b in tabs if b != ALL]
    return {
        b: _render(boards, payload, note, cats, b, style) for b, (payload, note) in tabs.items()
    }


def _render(
    fit: Boards | None,
    payload: dict[str, Any] | None,
    note: str,
    cats: list[str],
    board: str,
    style: bool,
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
    board: Annotated[str, Query(max_length=200, description="all or a category")] = ALL,
    style: Annotated[bool, Query(description="the style-controlled board")] = False,
) -> Response:
    """The public leaderboard (HTML): rank (UB), model, score, 95% interval, votes."""
    st = arena(request)
    try:
        st.published()
    except ApiError as e:
        return _html(request, text=_render(None, None, e.message, [], ALL, style))
    app = request.app
    boards: PublicBoards = app.state.public_boards
    boards.touch()
    drawn = boards.current
    if drawn is None:  # none loaded yet: the newest stored, else they are being drawn
        drawn = await asyncio.to_thread(boards.first)
        if drawn is None:
            note = "The board is being drawn; this page reloads itself."
            return _html(request, text=_render(None, None, note, [], ALL, style))
    key = (drawn.id, style)
    pages = getattr(app.state, "leaderboard_pages", {}).get(key)
    if pages is None:
        pages = await asyncio.to_thread(_cached, app, drawn, style)
    text = pages.get(board)
    if text is None:
        return _html(
            request,
            text=_render(
                drawn, None, f"No board {board!r}: pick a tab above.", list(pages), board, style
            ).replace("<title>", "<title>Not found — ", 1),
            status=404,
        )
    return _html(request, text=text)


def _cached(app: Any, drawn: Boards, style: bool) -> dict[str, str]:
    """The pages of (stored boards, style), rendered by one thread while others wait."""
    with _lock:
        cache = getattr(app.state, "leaderboard_pages", {})
        pages = cache.get((drawn.id, style))
        if pages is None:
            pages = _pages(drawn, style)
            cache = {k: v for k, v in cache.items() if k[0] == drawn.id}
            cache[(drawn.id, style)] = pages
            app.state.leaderboard_pages = cache
        return pages
