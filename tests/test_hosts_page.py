"""The /arena page when the host streaming its battle dies (kill -9 mid-stream; several hosts:
docs/guides/several-hosts.md): the page ends the battle cleanly — it says the connection broke
and the battle is not counted, shows "new battle", and keeps the votes shut — instead of waiting
for ever on a stream that will not finish (tests/chromium.py)."""

from __future__ import annotations

import time

import pytest
from arena_process import page_server
from test_arena_browser import state, wait_for

from stablearena.judging.endpoints.demo_server import DemoServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.mark.slow  # a browser session and a server: ~7 s (the default run's budget is spent)
def test_page_ends_a_battle_whose_host_died(tmp_path, browser):
    with DemoServer(seed=0) as demo:
        with page_server(tmp_path, demo.base_url, ("demo-ace", "demo-wild"), 0.3) as server:
            browser.get(server.url + "/arena")
            wait_for(browser, lambda s: True, 5)
            prompt = browser.find_element("id", "prompt")
            prompt.send_keys("What is 17*23?")
            browser.find_element("id", "send").click()
            mid = wait_for(browser, lambda s: s["a"] and s["b"] and s["state"] is None)
            assert all(mid["disabled"])
            server.kill()  # the host dies mid-stream
            t0 = time.monotonic()
            end = wait_for(browser, lambda s: s["state"] is not None, 20)
            assert end["state"] == "failed", end
            assert "connection broke" in end["status"] and "not counted" in end["status"], end
            assert all(end["disabled"])
            again = browser.find_element("id", "again")
            assert again.is_displayed()
            print(f"\nthe page ended the cut battle {time.monotonic() - t0:.2f} s after the kill")
            assert state(browser)["battle"] == mid["battle"]
