"""The public leaderboard page ``/leaderboard`` in headless Chromium (tests/chromium.py) against
a ``serve`` process and the demo server process: the board of the arena's held battles with
Rank (UB) and its meaning, category tabs that switch, the style toggle, the link from ``/arena``
and back; legible at 390 px (no sideways scrolling). With STABLEARENA_DOCS_SCREENSHOTS=docs the
screenshots docs/leaderboard-page-1280.png and -390.png are written."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from arena_process import page_server
from chromium import errors, wait_loaded
from test_arena_browser import save_docs
from test_arena_conversation_browser import whole_page

from stablearena.judging.endpoints.demo import demo_prompts
from stablearena.judging.endpoints.demo_server import DemoServer

# a serve process, the demo server, 30 page battles and Chromium: out of the default run (the
# in-process tests/test_leaderboard_page.py covers the page's content); run with
# python -m pytest -m slow tests/test_leaderboard_page_browser.py
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]

MODELS = ("demo-ace", "demo-solid", "demo-wild", "demo-fair")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-board")
    with DemoServer(seed=0) as demo:
        config = (
            "seed = 0\npoll_seconds = 0.05\nrate_limit = 1000000\nrate_burst = 1000000\n"
            "[arena]\nmin_records = 0\n\n"
            "[arena_page]\nvisitor_open = 1000\nvisitor_battles_per_hour = 1e6\n"
            "address_battles_per_hour = 1e6\naddress_open = 1000\n\n"
        )
        with page_server(tmp, demo.base_url, MODELS, 0.0, config) as server:
            yield server


def _battles(url: str, n: int) -> None:
    """``n`` battles voted through the page's routes (a person's votes; the browser part
    below is about the leaderboard page)."""
    import re

    with httpx.Client(timeout=60) as page:
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.get(url + "/arena").text)
        head = {"X-CSRF-Token": csrf.group(1), "Origin": url}
        for k, p in enumerate(demo_prompts(n, seed=1)):
            r = page.post(url + "/arena/battles", json={"prompt": p["prompt"]}, headers=head)
            assert r.status_code == 200, r.text
            bid = json.loads(r.text.splitlines()[0])["battle_id"]
            outcome = ("model_a", "model_b", "tie")[k % 3]
            v = page.post(
                f"{url}/arena/battles/{bid}/vote", json={"outcome": outcome}, headers=head
            )
            assert v.status_code == 200, v.text


def test_the_public_leaderboard_page(served, browser, tmp_path):
    url = served.url
    _battles(url, 30)
    deadline = time.time() + 90
    while time.time() < deadline and 'id="lb-table"' not in httpx.get(url + "/leaderboard").text:
        time.sleep(0.3)
    browser.set_window_size(1280, 900)
    browser.get(url + "/arena")
    wait_loaded(browser)
    browser.find_element("id", "leaderboard-link").click()
    wait_loaded(browser)
    assert browser.current_url.endswith("/leaderboard")
    rows = browser.find_elements("css selector", "#lb-table tbody tr")
    assert len(rows) == len(MODELS)
    assert "Rank (UB)" in browser.find_element("id", "lb-table").text
    meaning = browser.find_element("id", "lb-rank-meaning").text
    assert "1 + the number of models whose 95% interval lies entirely above" in meaning
    tabs = [
        a.get_attribute("data-tab") for a in browser.find_elements("css selector", "#lb-tabs a")
    ]
    assert tabs[0] == "all" and len(tabs) >= 2, tabs
    whole_page(browser, 1280)
    save_docs(browser, tmp_path / "b1280.png", "leaderboard-page-1280.png", 1280)
    whole_page(browser, 390)
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert widths[0] <= widths[1], widths  # no sideways scrolling at 390 px
    save_docs(browser, tmp_path / "b390.png", "leaderboard-page-390.png", 390)
    browser.set_window_size(1280, 900)
    # a category tab switches the board
    browser.find_element("css selector", f'#lb-tabs a[data-tab="{tabs[1]}"]').click()
    wait_loaded(browser)
    current = browser.find_element("css selector", '#lb-tabs a[aria-current="page"]')
    assert current.get_attribute("data-tab") == tabs[1]
    # the style toggle, and back to the arena
    browser.find_element("id", "lb-style").click()
    wait_loaded(browser)
    assert "style=true" in browser.current_url
    assert "style-controlled" in browser.find_element("tag name", "body").text
    browser.find_element("id", "lb-arena").click()
    wait_loaded(browser)
    assert browser.current_url.endswith("/arena")
    assert errors(browser) == []
