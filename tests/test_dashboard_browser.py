"""The live dashboard as a person sees it: a real ``stablearena serve`` process, Debian's headless
Chromium (tests/chromium.py), votes through the Python client.

``/`` shows one table row per model and the figures, logs no console error and requests nothing
but the server on 127.0.0.1; after votes make the arena publish a newer fit, the table on the
open page changes by itself (no reload); ``/admin`` asks for the admin key in a form, keeps the
session in a cookie the page's scripts cannot read, and shows the annotators' screening,
the coverage and the health. Screenshots go to the test's tmp dir, and small copies to
``$STABLEARENA_DOCS_SCREENSHOTS`` when it is set (the README's, made with
``STABLEARENA_DOCS_SCREENSHOTS=docs python -m pytest tests/test_dashboard_browser.py``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from arena_process import ServerProcess
from chromium import WIDTH, errors, requested, screenshot, wait_loaded

from stablearena.service.client import ArenaClient
from stablearena.service.render import PUBLIC_FIGURES

MODELS = (
    "gpt-4o",
    "claude-3-opus",
    "gemini-1.5-pro",
    "llama-3-70b",
    "mistral-large",
    "qwen2-72b",
    "command-r-plus",
    "phi-3-medium",
)
TRUTH = dict(zip(MODELS, np.linspace(1.6, -1.6, len(MODELS)), strict=True))
ANNOTATORS = [f"annotator-{k:02d}" for k in range(8)]
FLIPPER = "annotator-00"
HEIGHT = 800


class Arena:
    """A served arena and its annotators' clients."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.url = server.url
        self.admin = ArenaClient(server.url, server.admin_key, timeout=120)
        for m in MODELS:
            self.admin.add_model(m)
        self.clients = [
            ArenaClient(server.url, self.admin.create_annotator(n), timeout=120) for n in ANNOTATORS
        ]
        self.rng = np.random.default_rng(0)
        self.t = 0

    def vote(self, n: int) -> None:
        for _ in range(n):
            k = self.t % len(self.clients)
            self.t += 1
            (b,) = self.clients[k].next_battles()
            p = 1 / (1 + np.exp(-(TRUTH[b["model_a"]] - TRUTH[b["model_b"]])))
            out = "model_a" if self.rng.random() < p else "model_b"
            if ANNOTATORS[k] == FLIPPER:
                out = "model_b" if out == "model_a" else "model_a"
            self.clients[k].vote(b["battle_id"], out)

    def wait_drawn(self, timeout: float = 120.0) -> dict:
        """Until the dashboard serves the published fit (polling as an open page does)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = httpx.get(self.url + "/dashboard/poll", timeout=30).json()
            if s["view"] and s["published"] and s["view"]["fit_id"] == s["published"]["fit_id"]:
                return s
            time.sleep(0.3)
        raise AssertionError(f"the dashboard did not draw the published fit: {s}")


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("served")
    server = ServerProcess(
        f"sqlite:///{tmp / 'arena.db'}",
        "--set",
        "arena.min_records=10",
        "--set",
        "arena.policy=exclude",
        "--set",
        "arena.refit_votes=40",
        "--set",
        "arena.refit_seconds=1000",
        "--set",
        "poll_seconds=0.2",
        "--set",
        "dashboard_share=1.0",
        cwd=tmp,
    ).start()
    try:
        a = Arena(server)
        a.vote(320)
        a.admin.refit()
        httpx.get(a.url + "/")  # someone watches: the fits are drawn from now on
        a.wait_drawn()
        yield a
    finally:
        server.stop()


def open_page(driver, url: str) -> None:
    driver.get_log("browser")
    driver.get_log("performance")
    driver.set_window_size(WIDTH, HEIGHT)
    driver.get(url)
    wait_loaded(driver)


def page_state(driver) -> dict:
    return driver.execute_script(
        """
        const rows = [...document.querySelectorAll('table.leaderboard tbody tr')];
        const figs = [...document.querySelectorAll('#live figure')].map(f => {
          const r = f.querySelector('svg').getBoundingClientRect();
          return {key: f.dataset.figure, w: r.width, h: r.height,
                  texts: f.querySelectorAll('svg text').length};
        });
        const main = document.querySelector('#live main');
        return {rows: rows.length,
                models: rows.map(r => r.dataset.model),
                battles: rows.map(r => r.lastElementChild.textContent.trim()),
                figures: figs, asOfVote: main ? main.dataset.asOfVote : null,
                status: (document.getElementById('live-status') || {}).textContent,
                marker: window.__marker || null, cookie: document.cookie};
        """
    )


def only_local(driver, url: str) -> list[str]:
    """Every request made since the last call; all must go to the arena on 127.0.0.1 or be data:
    URLs (the browser's own pages are not counted: chromium.requested)."""
    urls = requested(driver)
    assert url.startswith("http://127.0.0.1:")
    assert urls and all(u.startswith((url + "/", "data:")) for u in urls), urls
    return urls


def docs_copy(driver, tmp_path: Path, name: str, *, scroll_to: str | None = None) -> None:
    """A small screenshot for the README when STABLEARENA_DOCS_SCREENSHOTS names a folder
    (``scroll_to``: the id of the section at the top)."""
    out = os.environ.get("STABLEARENA_DOCS_SCREENSHOTS")
    if not out:
        return
    from PIL import Image

    if scroll_to:
        driver.execute_script(f"document.getElementById('{scroll_to}').scrollIntoView()")
        driver.execute_script("window.scrollBy(0, -40)")  # below the sticky navigation
    path = tmp_path / f"docs-{name}"
    screenshot(driver, path)
    img = Image.open(path).convert("RGB")
    img = img.resize((960, round(img.height * 960 / img.width)), Image.LANCZOS)
    img.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(Path(out) / name, optimize=True)
    driver.execute_script("window.scrollTo(0, 0)")


def test_leaderboard_page_shows_the_fit_and_changes_by_itself_after_votes(arena, browser, tmp_path):
    open_page(browser, arena.url + "/")
    before = page_state(browser)
    assert before["rows"] == len(MODELS)
    assert sorted(before["models"]) == sorted(MODELS)
    assert [f["key"] for f in before["figures"]] == list(PUBLIC_FIGURES)
    for f in before["figures"]:
        assert f["w"] > 250 and f["h"] > 150, f  # drawn at a size one can read
        assert f["texts"] > 10, f  # labels are text
    published = arena.admin.leaderboard()
    assert before["asOfVote"] == str(published["as_of_vote"])
    assert before["models"] == [m["model"] for m in published["models"]]
    assert errors(browser) == []
    only_local(browser, arena.url)
    screenshot(browser, tmp_path / "dashboard.png")
    docs_copy(browser, tmp_path, "dashboard.png", scroll_to="leaderboard")

    # votes through the API until the arena publishes a newer fit; the open page follows
    browser.execute_script("window.__marker = 'not reloaded'")
    old = int(before["asOfVote"])
    while arena.admin.leaderboard()["as_of_vote"] <= old + 40:
        arena.vote(20)
    newer = arena.admin.leaderboard()["as_of_vote"]
    deadline = time.time() + 120
    after = page_state(browser)
    while time.time() < deadline and (after["asOfVote"] is None or int(after["asOfVote"]) < newer):
        time.sleep(0.5)
        after = page_state(browser)
    assert int(after["asOfVote"]) >= newer, after["status"]
    assert after["marker"] == "not reloaded"  # changed in place, not reloaded
    assert after["rows"] == len(MODELS)
    assert after["battles"] != before["battles"]  # the table itself changed
    assert f"as of vote {int(after['asOfVote']):,}" in after["status"]
    assert [f["key"] for f in after["figures"]] == list(PUBLIC_FIGURES)
    assert errors(browser) == []
    only_local(browser, arena.url)
    screenshot(browser, tmp_path / "dashboard-after.png", full=True)


def test_admin_view_behind_a_login(arena, browser, tmp_path):
    from selenium.webdriver.common.by import By

    open_page(browser, arena.url + "/admin")
    assert browser.current_url == arena.url + "/admin/login"
    key_field = browser.find_element(By.ID, "key")
    assert key_field.get_attribute("type") == "password"
    key_field.send_keys(arena.server.admin_key)
    browser.find_element(By.CSS_SELECTOR, "form.login button").click()
    # the login page's readyState is "complete" until the browser leaves it: wait for the
    # navigation the form starts (up to 10 s), then for the new page
    for _ in range(200):
        if browser.current_url != arena.url + "/admin/login":
            break
        time.sleep(0.05)
    wait_loaded(browser)
    assert browser.current_url == arena.url + "/admin"
    cookies = {c["name"]: c for c in browser.get_cookies()}
    session = cookies["stablearena_admin"]
    assert session["httpOnly"] and session["sameSite"] == "Strict" and session["path"] == "/admin"
    state = page_state(browser)
    assert "stablearena_admin" not in state["cookie"]  # scripts cannot read it
    info = browser.execute_script(
        """
        const rows = [...document.querySelectorAll('table.annotators tbody tr')];
        return {annotators: rows.map(r => [r.dataset.annotator, r.dataset.status,
                                           r.querySelector('td.reason').textContent]),
                figures: [...document.querySelectorAll('#live figure')].map(f => f.dataset.figure),
                cards: Object.fromEntries([...document.querySelectorAll('#health .card')].map(
                    c => [c.querySelector('.label').textContent,
                          c.querySelector('.value').textContent]))};
        """
    )
    rows = {a: (s, r) for a, s, r in info["annotators"]}
    assert set(rows) == set(ANNOTATORS)
    assert rows[FLIPPER][0] == "excluded" and "excluded" in rows[FLIPPER][1]
    assert all(rows[a][0] == "included" for a in ANNOTATORS if a != FLIPPER)
    assert info["figures"] == ["annotators", "battles"]
    votes = arena.admin.health()["votes"]
    assert info["cards"]["votes"] == f"{votes:,}"
    assert {"battles served", "staleness", "last refit", "models"} <= set(info["cards"])
    assert errors(browser) == []
    urls = only_local(browser, arena.url)
    assert not any(arena.server.admin_key in u for u in urls)  # the key never in a URL
    screenshot(browser, tmp_path / "admin.png")
    docs_copy(browser, tmp_path, "dashboard-admin.png")
    # the health refreshes itself while the page is open
    arena.vote(10)
    deadline = time.time() + 30
    while time.time() < deadline:
        shown = browser.execute_script(
            "return document.querySelector('#health .card .value').textContent"
        )
        if shown == f"{votes + 10:,}":
            break
        time.sleep(0.5)
    assert shown == f"{votes + 10:,}"
    # log out: back to the form, and the admin view is closed again
    browser.find_element(By.CSS_SELECTOR, ".sa-header form button").click()
    wait_loaded(browser)
    assert browser.current_url == arena.url + "/admin/login"
    open_page(browser, arena.url + "/admin")
    assert browser.current_url == arena.url + "/admin/login"
    assert errors(browser) == []


def test_the_dashboard_fits_a_phone_without_sideways_scrolling(arena, browser):
    """Issue 42: at 390 px the dashboard scrolled sideways (a 506 px table); its wide tables now
    scroll inside their own box, the page does not."""
    browser.set_window_size(390, HEIGHT)
    try:
        browser.get(arena.url + "/")
        wait_loaded(browser)
        widths = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth,"
            " Math.max(...[...document.querySelectorAll('table')].map(t => t.scrollWidth))]"
        )
        assert widths[0] <= widths[1], widths
    finally:
        browser.set_window_size(WIDTH, HEIGHT)
