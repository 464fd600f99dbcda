"""The /arena page fits (issue 42 item 2), in headless Chromium against a ``serve`` process and
the demo server process, measured by element geometry: at 390 and 1280 px, after a complete
turn, nothing covers the composer (the prompt box, Send) or the vote buttons — each element is
the one under its own centre once scrolled into view, and no two of their boxes overlap — the
box is empty after each send, and the page does not scroll sideways."""

from __future__ import annotations

import pytest
from arena_process import page_server
from chromium import wait_loaded
from test_arena_browser import wait_for

from stablearena.judging.endpoints.demo_server import DemoServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GEOMETRY = """
const ids = ['prompt', 'send', ...(arguments[0] || [])];
// the elements shown (a mode hides some: direct chat has no votes); `checked` names them
const els = [...ids.map(i => document.getElementById(i)),
             ...document.querySelectorAll('button.vote')].filter(e => e.getClientRects().length);
const out = {covered: [], overlaps: [], value: document.getElementById('prompt').value,
             scroll: [document.documentElement.scrollWidth, window.innerWidth],
             checked: els.map(e => e.id || e.dataset.outcome)};
for (const e of els) {
  e.scrollIntoView({block: 'center'});
  const r = e.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  if (!(hit === e || e.contains(hit))) {
    out.covered.push([e.id || e.dataset.outcome, hit ? (hit.id || hit.className || hit.tagName) : null]);
  }
}
window.scrollTo(0, 0);
const boxes = els.map(e => [e.id || e.dataset.outcome, e.getBoundingClientRect()]);
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const [n, a] = boxes[i], [m, b] = boxes[j];
  if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) {
    out.overlaps.push([n, m]);
  }
}
return out;
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-layout")
    with DemoServer(seed=0) as demo:
        with page_server(
            tmp, demo.base_url, ("demo-ace", "demo-wild"), 0.0, "[arena]\nmin_records = 0\n\n"
        ) as server:
            yield server


@pytest.mark.parametrize("width", [390, 1280])
def test_nothing_covers_the_composer_or_the_votes(served, browser, width):
    browser.set_window_size(width, 800)
    try:
        browser.get(served.url + "/arena")
        wait_loaded(browser)
        prompt = browser.find_element("id", "prompt")
        prompt.send_keys("Explain how to reverse a string in Python")
        browser.find_element("id", "send").click()
        wait_for(browser, lambda s: s["state"] == "complete")
        got = browser.execute_script(GEOMETRY)
        assert len(got["checked"]) == 6, got  # the box, Send and the four votes
        assert got["value"] == "", got  # the box is cleared after the first send
        assert got["covered"] == [], got
        assert got["overlaps"] == [], got
        assert got["scroll"][0] <= got["scroll"][1], got
        # a follow-up: sent, the box cleared again, and still nothing covered
        browser.find_element("id", "prompt").send_keys("And what is 17 + 23?")
        browser.execute_script("document.getElementById('send').scrollIntoView({block: 'center'})")
        browser.find_element("id", "send").click()
        wait_for(browser, lambda s: s["state"] == "complete")
        got = browser.execute_script(GEOMETRY)
        assert got["value"] == "" and got["covered"] == [] and got["overlaps"] == [], got
    finally:
        browser.set_window_size(1280, 900)
