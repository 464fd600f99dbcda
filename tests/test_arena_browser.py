"""The /arena page in headless Chromium (tests/chromium.py): a person types a prompt, sees
both answers stream, cannot vote before both are complete, votes, sees the names and the public
leaderboard change. With STABLEARENA_DOCS_SCREENSHOTS=docs the screenshots at 1280 and 390 px
are written by tests/test_arena_markdown.py (a battle with Markdown answers)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
from arena_process import page_server
from chromium import errors, requested, wait_loaded

from stablearena.endpoints.demo_server import DemoServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-page")
    with DemoServer(seed=0) as demo:
        with page_server(
            tmp,
            demo.base_url,
            ("demo-ace", "demo-wild"),
            0.12,
            "[arena]\nmin_records = 0\nrefit_votes = 1\nrefit_seconds = 0.5\n\n"
            '[arena_page]\nprompts = "demo"\n\n',
        ) as server:
            yield server


def state(driver) -> dict:
    return driver.execute_script(
        """
        const v = [...document.querySelectorAll('button.vote')];
        return {a: document.getElementById('answer-a').textContent,
                b: document.getElementById('answer-b').textContent,
                nameA: document.getElementById('name-a').textContent,
                nameB: document.getElementById('name-b').textContent,
                disabled: v.map(b => b.disabled), state: document.body.dataset.state || null,
                battle: document.body.dataset.battle || null,
                status: document.getElementById('status').textContent};
        """
    )


def wait_for(driver, test, timeout: float = 60.0) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = state(driver)
        if test(s):
            return s
        time.sleep(0.03)
    raise AssertionError(f"timed out; page state {state(driver)}")


def board(url: str) -> dict:
    return httpx.get(url + "/v1/leaderboard").json()


def save_docs(driver, path: Path, name: str | None, width: int) -> None:
    """Screenshot to ``path`` (checked not blank); copied to the docs as ``name`` when asked."""
    from PIL import Image

    driver.save_screenshot(str(path))
    img = Image.open(path)
    assert img.width == width and len(set(img.convert("L").getdata())) > 20  # not blank
    out = os.environ.get("STABLEARENA_DOCS_SCREENSHOTS")
    if out and name:
        shutil.copy(path, Path(out) / name)


def test_a_person_votes_on_the_arena_page(served, browser, tmp_path):
    url = served.url
    before = board(url)
    browser.get_log("performance")
    browser.set_window_size(1280, 900)
    browser.get(url + "/arena")
    wait_loaded(browser)
    browser.find_element("id", "suggest").click()
    wait_for(browser, lambda s: True, 1)
    for _ in range(100):
        if browser.find_element("id", "prompt").get_attribute("value"):
            break
        time.sleep(0.05)
    prompt = browser.find_element("id", "prompt")
    prompt.clear()
    prompt.send_keys("What is 17*23?")
    browser.find_element("id", "send").click()
    # both answers stream in, a word at a time; the votes stay shut meanwhile
    mid = wait_for(browser, lambda s: s["a"] and s["b"] and s["state"] is None)
    assert all(mid["disabled"])
    browser.find_element("tag name", "body").send_keys("1")  # the shortcut does nothing yet
    r = browser.execute_script(
        """
        const t = document.querySelector('meta[name=csrf-token]').content;
        const r = await fetch('/arena/battles/' + document.body.dataset.battle + '/vote',
          {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRF-Token': t},
           body: JSON.stringify({outcome: 'model_a'})});
        return [r.status, document.body.dataset.state || null];
        """
    )
    if r[1] is None:  # still streaming: the server refuses the vote too
        assert r[0] == 409
    done = wait_for(browser, lambda s: s["state"] in ("complete", "voted"))
    assert len(done["a"]) > len(mid["a"]) or len(done["b"]) > len(mid["b"]) or r[1]
    if done["state"] == "complete":
        assert not any(done["disabled"])
        assert done["nameA"] == "" and done["nameB"] == ""
        save_docs(browser, tmp_path / "arena-1280.png", None, 1280)  # docs: test_arena_markdown
        browser.find_element("tag name", "body").send_keys("2")  # model B is better
    voted = wait_for(browser, lambda s: s["state"] == "voted")
    assert {voted["nameA"].strip("· "), voted["nameB"].strip("· ")} == {"demo-ace", "demo-wild"}
    assert not [e for e in errors(browser) if "(Conflict)" not in e]  # the early vote: 409
    urls = [
        u
        for u in requested(browser)
        # the browser's own pages (its new-tab page fetches chrome-untrusted://…) are not the page's
        if not u.startswith(("chrome://", "chrome-untrusted://", "data:"))
    ]
    assert urls and all(u.startswith(url + "/") for u in urls), urls
    # the public leaderboard changes (the refit takes the vote)
    deadline = time.time() + 60
    while time.time() < deadline and board(url) == before:
        time.sleep(0.2)
    assert board(url) != before


def test_phone_width_is_legible(served, browser, tmp_path):
    browser.set_window_size(390, 844)
    browser.get(served.url + "/arena")
    wait_loaded(browser)
    prompt = browser.find_element("id", "prompt")
    prompt.send_keys("What is the capital of France?")
    browser.find_element("id", "send").click()
    s = wait_for(browser, lambda s: s["state"] in ("complete", "failed"))
    assert s["state"] == "complete"
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth,"
        " document.getElementById('answer-a').getBoundingClientRect().width]"
    )
    assert widths[0] <= widths[1] and widths[2] > 250  # no sideways scrolling; one column
    save_docs(browser, tmp_path / "arena-390.png", None, 390)
    browser.set_window_size(1280, 900)


def test_a_visitor_abandons_the_battles_its_page_lost(browser, tmp_path):
    """A battle left without a vote on a page that was then reloaded (or cut by a host that
    died) holds the visitor's one open slot: the next Send is refused with the reason, an
    *Abandon them* button appears beside it, and once pressed the prompt can be sent again."""
    with (
        DemoServer(seed=0) as demo,
        page_server(
            tmp_path,
            demo.base_url,
            ("demo-ace", "demo-wild"),
            0.02,
            "[arena]\nmin_records = 0\n\n[arena_page]\nvisitor_open = 1\n\n",
        ) as server,
    ):
        browser.set_window_size(1280, 900)

        def send(text: str) -> None:
            prompt = browser.find_element("id", "prompt")
            prompt.clear()
            prompt.send_keys(text)
            browser.find_element("id", "send").click()

        browser.get(server.url + "/arena")
        wait_loaded(browser)
        assert not browser.find_element("id", "abandon").is_displayed()
        send("What is 2+2?")
        wait_for(browser, lambda s: s["state"] == "complete")
        browser.get(server.url + "/arena")  # the page no longer knows that battle
        wait_loaded(browser)
        send("What is 3*4?")
        refused = wait_for(browser, lambda s: "vote on them first" in s["status"])
        assert refused["battle"] is None
        button = browser.find_element("id", "abandon")
        assert button.is_displayed() and button.text == "Abandon them"
        button.click()
        wait_for(browser, lambda s: s["status"].startswith("Abandoned 1 battle "))
        assert not browser.find_element("id", "abandon").is_displayed()
        assert browser.find_element("id", "prompt").get_attribute("value") == "What is 3*4?"
        browser.find_element("id", "send").click()
        done = wait_for(browser, lambda s: s["state"] == "complete")
        assert done["battle"]
        held = httpx.get(
            server.url + "/v1/admin/held",
            headers={"Authorization": f"Bearer {server.admin_key}"},
        ).json()["battles"]
        assert sorted(b["status"] for b in held) == ["abandoned", "complete"]
