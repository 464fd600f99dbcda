"""``stablearena serve --demo`` in headless Chromium, as a new visitor meets it: a question asked
at 1280 and at 390 px is answered in Markdown by two of the eight demo models (a code block, a
list or a formula rendered, never refused), the vote reveals their names, and the page fits the
width. With STABLEARENA_DOCS_SCREENSHOTS=docs the two screenshots of the README are written
(``docs/arena-demo-1280.png``, ``docs/arena-demo-390.png``)."""

from __future__ import annotations

import pytest
from arena_process import ServerProcess
from chromium import errors, wait_loaded
from test_arena_browser import save_docs, wait_for
from test_arena_modes_browser import send

from stablearena.judging.endpoints.demo import DEMO_MODELS

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PROMPTS = {
    1280: "How do I reverse a string in Python?",
    390: "What is 17*23?",
}


@pytest.fixture(scope="module")
def demo_served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve-demo")
    server = ServerProcess(
        f"sqlite:///{tmp / 'arena.db'}", "--demo", "--set", "demo_pace=0.01", cwd=tmp
    ).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("width", [1280, 390])
def test_serve_demo_answers_a_visitor_in_markdown(demo_served, browser, tmp_path, width):
    browser.delete_all_cookies()
    browser.set_window_size(width, 900)
    try:
        browser.get(demo_served.url + "/arena")
        wait_loaded(browser)
        send(browser, PROMPTS[width])
        done = wait_for(browser, lambda s: s["state"] == "complete")
        assert done["a"].strip() and done["b"].strip(), done
        rendered = browser.execute_script(
            "return ['a', 'b'].map(s => document.querySelectorAll("
            "`#answer-${s} pre, #answer-${s} li, #answer-${s} .katex, #answer-${s} math,"
            " #answer-${s} code`).length)"
        )
        assert all(n > 0 for n in rendered), rendered  # Markdown, rendered on both sides
        refused = ("I can't", "I cannot", "I'm sorry")
        assert not any(done[s].lstrip().startswith(refused) for s in "ab"), done
        browser.execute_script("document.querySelector('button.vote').scrollIntoView()")
        browser.find_elements("css selector", "button.vote")[0].click()  # A is better
        voted = wait_for(browser, lambda s: s["state"] == "voted")
        names = [voted["nameA"].lstrip("· ").strip(), voted["nameB"].lstrip("· ").strip()]
        demo_names = {m.name for m in DEMO_MODELS}
        assert all(n in demo_names for n in names) and names[0] != names[1], voted
        wide = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
        assert wide[0] <= wide[1], wide  # no sideways scrolling
        browser.execute_script("window.scrollTo(0, 0)")
        save_docs(browser, tmp_path / "demo.png", f"arena-demo-{width}.png", width)
        # nothing the battle does not have: no image box on a battle without an image (its
        # [hidden] was overridden by the box's display: flex, and showed a broken image)
        shown = browser.execute_script(
            "return document.getElementById('battle-image').getClientRects().length"
        )
        assert shown == 0
        assert errors(browser) == []
    finally:
        browser.delete_all_cookies()
        browser.set_window_size(1280, 900)
