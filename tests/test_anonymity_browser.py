"""The anonymity rule on the /arena page (issue 31, item 3), in headless Chromium
(tests/chromium.py) against a ``serve`` process and the demo server process: a battle with
``demo-selfnamed`` ("I am ChatGPT, … trained by OpenAI") voted on the page is stored and exported
with ``anony: false``, left off the default board, kept by ``?anony=all``, and counted for the
admin (the HTTP-level checks of every column are in tests/test_anonymity.py)."""

from __future__ import annotations

import io
import time

import httpx
import pandas as pd
import pytest
from arena_process import page_server
from chromium import errors, wait_loaded
from test_arena_browser import wait_for

from stablearena.judging.endpoints.demo_server import DemoServer

# a serve process, the demo server and Chromium: out of the default run; run with
# python -m pytest -m slow tests/test_anonymity_browser.py
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-anony")
    with DemoServer(seed=0) as demo:
        config = "seed = 0\npoll_seconds = 0.05\n[arena]\nmin_records = 0\n\n"
        models = ("demo-selfnamed", "demo-ace", "demo-wild")
        with page_server(tmp, demo.base_url, models, 0.0, config) as server:
            yield server


def test_a_self_naming_answer_makes_the_page_vote_non_anonymous(served, browser):
    server = served
    admin = {"Authorization": f"Bearer {server.admin_key}"}
    browser.set_window_size(1280, 900)
    browser.get(server.url + "/arena")
    wait_loaded(browser)
    named = anonymous = 0
    for k in range(6):  # until both kinds of battle were voted on
        if named and anonymous:
            break
        if k:
            browser.find_element("id", "again").click()
        browser.find_element("id", "prompt").send_keys(f"What is {k + 2}*7?")
        browser.find_element("id", "send").click()
        s = wait_for(browser, lambda s: s["state"] in ("complete", "failed"))
        assert s["state"] == "complete", s
        selfnamed = "ChatGPT" in s["a"] or "ChatGPT" in s["b"]
        browser.find_element("css selector", 'button.vote[data-outcome="model_a"]').click()
        done = wait_for(browser, lambda s: s["state"] == "voted")
        # the voter is told when the vote will not count, and why (issue 42)
        told = "will not count" in done["status"] and "named a model" in done["status"]
        assert told == selfnamed, done["status"]
        named += selfnamed
        anonymous += not selfnamed
    assert named and anonymous, (named, anonymous)
    raw = httpx.get(server.url + "/v1/export?texts=true", headers=admin, timeout=60).content
    df = pd.read_json(io.BytesIO(raw), lines=True, dtype=False)
    has = (df["model_a"] == "demo-selfnamed") | (df["model_b"] == "demo-selfnamed")
    assert (df["anony"] == ~has).all() and int(has.sum()) == named
    deadline = time.time() + 60
    while time.time() < deadline:
        board = httpx.get(server.url + "/v1/leaderboard?method=m-elo").json()
        if board.get("n_battles") == anonymous:
            break
        time.sleep(0.1)
    assert board["n_battles"] == anonymous
    assert "demo-selfnamed" not in {m["model"] for m in board["models"]}
    every = httpx.get(server.url + "/v1/leaderboard?method=m-elo&anony=all").json()
    assert every["n_battles"] == named + anonymous
    counts = httpx.get(server.url + "/v1/admin/anonymity", headers=admin).json()["models"]
    assert {c["model"]: c["votes_left_out"] for c in counts}["demo-selfnamed"] == named
    assert errors(browser) == []
