"""``/docs`` (Swagger UI) and ``/redoc`` work offline: every script, style and image they use
comes from the arena's own server, under a Content-Security-Policy that allows nothing else."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient
from test_service import settings_for

from stablearena.service.app import create_app


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    db = tmp_path_factory.mktemp("docs") / "arena.db"
    with TestClient(create_app(settings_for(f"sqlite:///{db}"))) as tc:
        yield tc


def _references(html: str) -> list[str]:
    return re.findall(r'(?:src|href|spec-url|data-openapi)="([^"]+)"', html)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_load_only_same_origin_urls_and_each_answers(client, page):
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "default-src 'none'" in csp
    assert "<script>" not in r.text  # no inline script: the CSP would refuse it
    refs = _references(r.text)
    assert refs and "/openapi.json" in refs
    for ref in refs:
        url = urlsplit(urljoin("http://testserver" + page, ref))
        assert url.netloc == "testserver", ref  # same origin: no CDN
        got = client.get(url.path)
        assert got.status_code == 200 and got.content, ref


def test_an_unknown_asset_is_a_json_404(client):
    r = client.get("/docs/static/nope.js")
    assert r.status_code == 404 and r.json()["error"]["field"] == "path"


def test_swagger_ui_renders_the_api_in_a_browser_without_leaving_the_server(tmp_path):
    """Headless Chromium opens /docs: Swagger UI draws the operations, nothing is requested
    from another host and the console has no error (a CSP refusal would be one)."""
    import time

    from arena_process import ServerProcess
    from chromium import errors, requested, start_browser, wait_loaded

    with ServerProcess(f"sqlite:///{tmp_path / 'arena.db'}", cwd=tmp_path) as server:
        driver = start_browser(tmp_path / "profile")
        try:
            driver.get(server.url + "/docs")
            wait_loaded(driver)
            deadline = time.time() + 30
            ops: list = []
            while time.time() < deadline and not ops:
                ops = driver.find_elements("css selector", ".opblock-summary-path")
                time.sleep(0.1)
            paths = {o.get_attribute("data-path") or o.text for o in ops}
            assert {"/v1/battles", "/v1/leaderboard"} <= {p.replace("\u200b", "") for p in paths}
            assert errors(driver) == []
            hosts = {urlsplit(u).netloc for u in requested(driver) if u.startswith("http")}
            assert hosts == {urlsplit(server.url).netloc}
        finally:
            driver.quit()
