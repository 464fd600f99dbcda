"""The page's modes and what LMArena's visitors use (issue 42 item 3) in headless Chromium at
390 and 1280 px, against a ``serve`` process and the demo server process, measured by element
geometry (tests/test_arena_layout_browser.py's GEOMETRY: nothing covers the composer, the votes,
the tabs or the copy buttons): side-by-side with two models picked by name (named from the
start, the vote told it is not on the board), a copy button (read back from Chromium's
clipboard, permission granted over CDP), a share link and its read-only page, direct chat with
follow-ups (one column, no votes), the sign-in link, and the dark theme of
``prefers-color-scheme: dark`` (emulated over CDP) with readable contrast."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from arena_process import page_server
from chromium import wait_loaded
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import Select, WebDriverWait
from test_arena_browser import wait_for
from test_arena_layout_browser import GEOMETRY

from stablearena.judging.endpoints.demo_server import DemoServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TABS = ["tab-battle", "tab-named", "tab-chat"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-modes-browser")
    with DemoServer(seed=0) as demo:
        with page_server(
            tmp,
            demo.base_url,
            ("demo-ace", "demo-fair", "demo-wild"),
            0.0,
            "[arena]\nmin_records = 0\n\n",
        ) as server:
            yield server


def send(browser, text: str) -> None:
    box = browser.find_element("id", "prompt")
    box.send_keys(text)
    browser.execute_script("document.getElementById('send').scrollIntoView({block: 'center'})")
    browser.find_element("id", "send").click()


def click(browser, element_id: str) -> None:
    el = browser.find_element("id", element_id)
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
    el.click()


def fits(got: dict) -> None:
    assert got["covered"] == [] and got["overlaps"] == [], got
    assert got["scroll"][0] <= got["scroll"][1], got  # no sideways scrolling


def luminance(rgb: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", rgb)[:3])
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(fg: str, bg: str) -> float:
    """The WCAG contrast ratio of two CSS rgb() colours."""
    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


COLOURS = """
const c = e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor];
return {body: c(document.body), side: [getComputedStyle(document.getElementById('answer-a')).color,
        getComputedStyle(document.getElementById('side-a')).backgroundColor],
        send: c(document.getElementById('send')), box: c(document.getElementById('prompt')),
        status: [getComputedStyle(document.getElementById('status')).color,
                 getComputedStyle(document.body).backgroundColor]};
"""


@pytest.mark.parametrize("width", [390, 1280])
def test_side_by_side_copy_share_chat_theme_and_sign_in(served, browser, width):
    url = served.url
    browser.delete_all_cookies()
    browser.set_window_size(width, 800)
    try:
        browser.get(url + "/arena")
        wait_loaded(browser)
        fits(browser.execute_script(GEOMETRY, TABS))  # the tabs fit, uncovered
        rights = browser.execute_script(
            "return [window.innerWidth, ...arguments[0].map(i =>"
            " document.getElementById(i).getBoundingClientRect().right)]",
            TABS,
        )
        assert max(rights[1:]) <= rights[0], rights  # every tab whole on the screen

        # --- side by side, two models picked by name: named from the start
        click(browser, "tab-named")
        assert browser.execute_script("return document.body.dataset.mode") == "named"
        Select(browser.find_element("id", "pick-a")).select_by_visible_text("demo-wild")
        Select(browser.find_element("id", "pick-b")).select_by_visible_text("demo-ace")
        send(browser, "What is 6*7?")
        done = wait_for(browser, lambda s: s["state"] == "complete")
        assert (done["nameA"], done["nameB"]) == ("· demo-wild", "· demo-ace")
        assert "will not count on the leaderboard" in done["status"]
        got = browser.execute_script(GEOMETRY, [*TABS, "copy-a", "copy-b"])
        assert len(got["checked"]) == 11 and got["value"] == "", got
        fits(got)
        browser.find_elements("css selector", "button.vote")[1].click()  # B is better
        voted = wait_for(browser, lambda s: s["state"] == "voted")
        assert "will not count: not on the board: you picked the models" in voted["status"]

        # --- copy: the answer's Markdown source, read back from the clipboard
        browser.execute_cdp_cmd(
            "Browser.grantPermissions",
            {"origin": url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
        )
        source = browser.execute_script(
            "return document.getElementById('answer-a').textContent"
        )  # rendered text, for a sanity check below
        click(browser, "copy-a")
        copied = browser.execute_async_script(
            "const done = arguments[0];"
            "const wait = () => document.body.dataset.copied ? navigator.clipboard.readText()"
            ".then(done, e => done('ERR ' + e)) : setTimeout(wait, 30); wait();"
        )

        # --- share: a link after the vote, to a read-only view
        click(browser, "share")
        link = browser.find_element("id", "share-link")
        for _ in range(200):
            if link.get_attribute("href").startswith(url + "/share/"):
                break
            time.sleep(0.03)
        href = link.get_attribute("href")
        assert re.fullmatch(re.escape(url) + r"/share/[A-Za-z0-9_-]{32}", href), href
        shared = httpx.get(href + ".json").json()
        assert copied == shared["turns"][0]["a"]  # the Markdown source, not the rendered text
        assert "$" in copied and copied != source  # its math as written, not as rendered
        assert (shared["model_a"], shared["model_b"], shared["outcome"]) == (
            "demo-wild",
            "demo-ace",
            "model_b",
        )
        browser.get(href)
        wait_loaded(browser)
        view = browser.execute_script(
            "return [document.getElementById('verdict').textContent, document.cookie,"
            " document.documentElement.scrollWidth, window.innerWidth, document.scripts.length]"
        )
        assert "Model B was better" in view[0] and "demo-wild" in view[0], view
        assert view[1] == "" and view[2] <= view[3] and view[4] == 0, view

        # --- direct chat: one model, one column, no votes, follow-ups
        browser.get(url + "/arena")
        wait_loaded(browser)
        click(browser, "tab-chat")
        Select(browser.find_element("id", "pick-a")).select_by_visible_text("demo-fair")
        send(browser, "What is 3+4?")
        wait_for(browser, lambda s: s["state"] == "complete")
        send(browser, "And what is 17 + 23?")
        two = wait_for(
            browser,
            lambda s: (
                s["state"] == "complete"
                and browser.execute_script("return document.body.dataset.turn") == "2"
            ),
        )
        assert two["nameA"] == "· demo-fair" and two["battle"] is None
        got = browser.execute_script(GEOMETRY, [*TABS, "copy-a"])
        assert got["checked"] == ["prompt", "send", *TABS, "copy-a"], got  # no votes, no side B
        assert got["value"] == ""
        fits(got)
        shown = browser.execute_script(
            "return [document.getElementById('side-b').getClientRects().length,"
            " document.querySelectorAll('.turn').length,"
            " [...document.querySelectorAll('.turn .side')].filter(e => e.getClientRects().length).length,"
            " document.getElementById('answer-a').getBoundingClientRect().width / window.innerWidth]"
        )
        assert shown[:3] == [0, 1, 1] and shown[3] > 0.7, shown  # one column, the full width
        assert browser.find_element("id", "again").text == "New chat"

        # --- the dark theme follows the system; contrast stays readable (WCAG AA: 4.5)
        light = browser.execute_script(COLOURS)
        browser.execute_cdp_cmd(
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
        dark = browser.execute_script(COLOURS)
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        assert luminance(dark["body"][1]) < 0.05 < 0.8 < luminance(light["body"][1]), (light, dark)
        for colours in (light, dark):
            for key, (fg, bg) in colours.items():
                assert contrast(fg, bg) >= 4.5, (key, fg, bg, colours is dark)
        assert all(light[k] != dark[k] for k in light), (light, dark)

        # --- sign in: findable from the page; then the page names the account
        name = f"reader-{width}"
        made = httpx.post(
            url + "/v1/admin/annotators",
            json={"name": name, "role": "annotator"},
            headers={"Authorization": f"Bearer {served.admin_key}"},
        )
        assert made.status_code == 201, made.text
        browser.execute_script("window.scrollTo(0, 0)")
        signin = browser.find_element("id", "signin-link")
        top = signin.rect["y"]
        assert signin.is_displayed() and 0 <= top < 200, signin.rect  # in the header
        signin.click()
        inside = browser.execute_script(
            "const r = document.getElementById('signin').getBoundingClientRect();"
            " return [r.top, r.bottom, window.innerHeight]"
        )
        assert 0 <= inside[0] < inside[2], inside  # the form is brought into view
        box = browser.find_element("css selector", "#signin input[name=key]")
        box.send_keys(made.json()["key"])
        submit = browser.find_element("css selector", "#signin button[type=submit]")
        submit.click()
        # the old page may still say readyState "complete" before the sign-in's page replaces
        # it: wait for the form to leave (an event, not a time), then for the new page
        WebDriverWait(browser, 60).until(staleness_of(submit))
        wait_loaded(browser)
        header = browser.find_element("tag name", "header").text
        assert f"signed in as {name}" in header and "Sign in" not in header, header
        assert not browser.find_elements("id", "signin")
        # --- sign out: in the header, whole on the screen; afterwards a new visitor
        out = browser.find_element("css selector", "#signout button")
        box = out.rect
        assert out.is_displayed() and box["x"] >= 0 and box["x"] + box["width"] <= width, box
        out.click()
        WebDriverWait(browser, 60).until(staleness_of(out))
        wait_loaded(browser)
        header = browser.find_element("tag name", "header").text
        assert "voting as" in header and "Sign in" in header and name not in header, header
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
        browser.delete_all_cookies()
        browser.set_window_size(1280, 900)
