"""The API's documentation pages, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served with
their scripts and styles from this server — no CDN, so they work offline and under a
Content-Security-Policy that allows only this origin.

FastAPI's own pages load Swagger UI and ReDoc from a CDN and start Swagger UI with an inline
script; here the assets are the files the ``fastapi-offline`` package ships (Swagger UI 5,
Apache-2.0; ReDoc, MIT) and the start-up script is a file of this package
(``templates/docs.js``)."""

from __future__ import annotations

import html
from functools import lru_cache
from importlib import resources
from importlib.util import find_spec
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from ..errors import ApiError

__all__ = ["router", "ASSETS", "DOCS_CSP"]

router = APIRouter()

#: The files under ``/docs/static/``: name → media type.
ASSETS: dict[str, str] = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
    "docs.js": "text/javascript; charset=utf-8",
}
#: Scripts and styles of this origin only (Swagger UI and ReDoc set inline styles; ReDoc runs
#: a worker from a blob).
DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="icon" type="image/png" href="{static}/favicon.png">
{head}
</head>
<body>
{body}
</body>
</html>
"""


@lru_cache(maxsize=1)
def _asset_dir() -> Path:
    spec = find_spec("fastapi_offline")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - a dependency
        raise RuntimeError("the fastapi-offline package (the /docs assets) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


#: The two pages: title suffix, what goes in <head>, what goes in <body>.
_SWAGGER = (
    "Swagger UI",
    '<link rel="stylesheet" type="text/css" href="{static}/swagger-ui.css">',
    '<div id="swagger-ui" data-openapi="{openapi}"></div>\n'
    '<script src="{static}/swagger-ui-bundle.js"></script>\n'
    '<script src="{static}/docs.js"></script>',
)
_REDOC = (
    "ReDoc",
    "",
    '<redoc spec-url="{openapi}"></redoc>\n<script src="{static}/redoc.standalone.js"></script>',
)


def _page(request: Request, page: tuple[str, str, str]) -> HTMLResponse:
    what, head, body = page
    root = request.scope.get("root_path", "")
    static = root + "/docs/static"
    text = _PAGE.format(
        title=html.escape(f"{request.app.title} - {what}"),
        static=static,
        head=head.format(static=static),
        body=body.format(static=static, openapi=html.escape(root + request.app.openapi_url)),
    )
    return HTMLResponse(
        text,
        headers={
            "Content-Security-Policy": DOCS_CSP,
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache",
        },
    )


@router.get("/docs", include_in_schema=False)
async def swagger_ui(request: Request) -> HTMLResponse:
    return _page(request, _SWAGGER)


@router.get("/redoc", include_in_schema=False)
async def redoc(request: Request) -> HTMLResponse:
    return _page(request, _REDOC)


@router.get("/docs/static/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    media = ASSETS.get(name)
    if media is None:
        raise ApiError(404, "not_found", f"no file {name!r} under /docs/static", "path")
    headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
    if name == "docs.js":
        text = resources.files("stablearena.service").joinpath("templates/docs.js").read_text()
        return Response(text, media_type=media, headers=headers)
    return FileResponse(_asset_dir() / name, media_type=media, headers=headers)
