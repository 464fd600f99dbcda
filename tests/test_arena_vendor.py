"""The arena page's vendored browser libraries (src/stablearena/service/static/vendor/): every
file the page loads is served by the arena itself, gzip-compressed and cached for a year (the
version is in the path), each library with its licence, and all of them are in the wheel."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_service import settings_for

from stablearena.judging.endpoints.config import load_toml
from stablearena.service.app import create_app

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "src" / "stablearena" / "service"
VENDOR = SERVICE / "static" / "vendor"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    db = tmp_path_factory.mktemp("vendor") / "arena.db"
    with TestClient(create_app(settings_for(f"sqlite:///{db}"))) as tc:
        yield tc


def loaded_by_the_page(page: str) -> list[str]:
    """The vendored files the page and its script name (scripts, imports, lazy loads)."""
    script = (SERVICE / "templates" / "arena.js").read_text()
    names = re.findall(r'src="/arena/vendor/([^"]+)"', page)
    names += re.findall(r'from "/arena/vendor/([^"]+)"', script)
    names += [
        "katex-0.16.47/katex.min.js"
        if "katex-0.16.47/katex.min.js" in script
        else pytest.fail("arena.js no longer names KaTeX")
    ]
    langs = set(re.findall(r'"(\w+)"', script.split("var LANGS = ", 1)[1].split("};", 1)[0]))
    names += [f"highlight.js-11.12.0/languages/{lang}.min.js" for lang in langs]
    return names


def test_the_page_loads_only_vendored_files_it_serves(client):
    page = client.get("/arena")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "unsafe" not in csp.split("style-src")[0]
    names = loaded_by_the_page(page.text)
    assert len(names) >= 18
    for name in names:
        r = client.get(f"/arena/vendor/{name}", headers={"Accept-Encoding": "gzip"})
        assert r.status_code == 200, name
        assert r.headers["content-type"].startswith("text/javascript")
        assert r.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert r.headers["content-encoding"] == "gzip"
        assert r.content == (VENDOR / name).read_bytes()  # TestClient decompresses
        raw = client.get(f"/arena/vendor/{name}", headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in raw.headers and raw.content == r.content
    script = client.get("/arena/arena.js", headers={"Accept-Encoding": "gzip"})
    assert script.headers["content-encoding"] == "gzip"
    assert script.content == (SERVICE / "templates" / "arena.js").read_bytes()
    for lib in {n.split("/", 1)[0] for n in names}:
        assert client.get(f"/arena/vendor/{lib}/LICENSE").status_code == 200, lib


@pytest.mark.parametrize(
    "path", ["nothing.js", "..%2Farena.js", "..%2F..%2Fapp.py", "dompurify-3.5.0/", "README.md"]
)
def test_anything_else_under_vendor_is_not_found(client, path):
    r = client.get(f"/arena/vendor/{path}")
    assert r.status_code == 404
    assert "no vendored file" in r.json()["error"]["message"]


def test_every_vendored_file_is_in_the_wheel():
    data = load_toml(ROOT / "pyproject.toml")
    globs = data["tool"]["setuptools"]["package-data"]["stablearena.service"]
    files = [p.relative_to(SERVICE).as_posix() for p in VENDOR.rglob("*") if p.is_file()]
    assert len(files) >= 20
    missing = [f for f in files if not any(fnmatch.fnmatchcase(f, g) for g in globs)]
    assert missing == []
    for lib in [p for p in VENDOR.iterdir() if p.is_dir()]:
        assert (lib / "LICENSE").is_file(), lib
