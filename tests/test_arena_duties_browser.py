"""A public arena's duties on the /arena page (issue 31, item 4), in headless Chromium
(tests/chromium.py) against a ``serve`` process and the demo server process: the terms of use
accepted before the first battle, a moderated prompt refused before any model call (the demo
server saw no chat request), and a battle's category from the classifier endpoint, shown on the
category board."""

from __future__ import annotations

import time

import httpx
import pytest
from arena_process import page_server
from chromium import errors, wait_loaded
from test_arena_browser import state, wait_for

from stablearena.judging.endpoints.demo_server import DemoServer

# a serve process, the demo server and Chromium: ~20 s on the shared test machine, so out of the
# default run (the in-process tests of tests/test_arena_duties.py cover each case there); run
# with: python -m pytest -m slow tests/test_arena_duties_browser.py
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]

TERMS = "Be kind. Prompts and votes are published under CC-BY 4.0."


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-duties")
    with DemoServer(seed=0) as demo:
        config = (
            "[arena]\nmin_records = 0\n\n"
            f'[moderation]\nendpoint = {{ base_url = "{demo.base_url}" }}\n\n'
            f'[terms]\ntext = "{TERMS}"\n\n'
            "[category_classifier]\n"
            f'endpoint = {{ base_url = "{demo.base_url}", model = "demo-classifier" }}\n\n'
        )
        with page_server(tmp, demo.base_url, ("demo-ace", "demo-wild"), 0.01, config) as server:
            yield server, demo


def chat_requests(demo: DemoServer) -> int:
    models = ("demo-ace+", "demo-wild+")
    return sum(v["requests"] for k, v in demo.stats().items() if k.startswith(models))


def body(driver, key: str) -> str | None:
    return driver.execute_script(f"return document.body.dataset.{key} || null")


def until(test, timeout: float = 30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = test()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_terms_then_a_moderated_prompt_then_a_classified_battle(served, browser):
    server, demo = served
    admin = {"Authorization": f"Bearer {server.admin_key}"}
    browser.set_window_size(1280, 900)
    browser.get(server.url + "/arena")
    wait_loaded(browser)
    until(lambda: body(browser, "ready"))
    # 1. the terms: shown, Send disabled until they are accepted; the acceptance is stored
    assert body(browser, "terms") == "pending"
    assert browser.find_element("id", "terms-text").text == TERMS
    assert browser.find_element("id", "send").get_attribute("disabled") is not None
    browser.find_element("id", "accept-terms").click()
    until(lambda: body(browser, "terms") == "accepted")
    assert not browser.find_element("id", "terms").is_displayed()
    got = httpx.get(server.url + "/v1/admin/duties", headers=admin).json()
    assert got["terms"]["accepted"] == 1
    # 2. a prompt the moderation endpoint flags: refused with the message, no model called
    before = chat_requests(demo)
    browser.find_element("id", "prompt").send_keys("Tell me something forbidden.")
    browser.find_element("id", "send").click()
    until(lambda: body(browser, "state") == "refused")
    s = state(browser)
    assert "refused by the arena's moderation" in s["status"] and s["a"] == s["b"] == ""
    assert chat_requests(demo) == before == 0
    assert demo.stats()["moderations:omni-moderation-latest"]["requests"] == 1
    got = httpx.get(server.url + "/v1/admin/duties", headers=admin).json()["moderation"]
    assert got["refused"] == 1 and got["by_source"] == {"endpoint": 1}
    # 3. a clean prompt: both answer; the classifier's tag becomes the battle's category
    prompt = browser.find_element("id", "prompt")
    prompt.clear()
    prompt.send_keys("Write a Python function that reverses a list.")
    browser.find_element("id", "send").click()
    s = wait_for(browser, lambda s: s["state"] in ("complete", "failed"))
    assert s["state"] == "complete" and s["a"] and s["b"], s
    assert chat_requests(demo) == 2
    browser.find_element("css selector", 'button.vote[data-outcome="model_a"]').click()
    wait_for(browser, lambda s: s["state"] == "voted")

    def boards():
        r = httpx.get(server.url + "/v1/leaderboard?by=category&method=bt")
        return r.status_code == 200 and r.json().get("boards")

    assert set(until(boards)) == {"coding"}
    held = httpx.get(server.url + "/v1/admin/held", headers=admin).json()["battles"]
    assert [b["category"] for b in held] == ["coding"]
    # the one failed load is the refusal itself (422 of /arena/battles); no script error
    assert [e for e in errors(browser) if "/arena/battles - " not in e or "422" not in e] == []
