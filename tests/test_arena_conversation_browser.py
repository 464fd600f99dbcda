"""A conversation on the /arena page in headless Chromium (tests/chromium.py) against a
``stablearena serve`` process and the demo server process (issue 31, item 2): three turns whose
upstream requests carry 1, 3 and 5 messages (2, 4, 6 for the model with a system prompt), the
earlier turns kept on the page (section#turn-N), regenerate (the old answers kept in the
record), a vote after turn 3 counted once, then a new battle stopped while it streams (never
votable, not counted). With STABLEARENA_DOCS_SCREENSHOTS=docs the screenshots of the three-turn
battle at 1280 and 390 px are written to docs/arena-conversation-1280.png and -390.png."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from arena_process import ServerProcess
from chromium import errors, wait_loaded
from test_arena_browser import save_docs

from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.service import store

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]

ACE, WILD = "demo-ace+count+slow=0.06", "demo-wild+count+slow=0.06"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arena-conversation")
    with DemoServer(seed=0) as demo:
        toml = tmp / "arena.toml"
        toml.write_text(
            "[arena]\nmin_records = 0\nrefit_votes = 1\nrefit_seconds = 0.5\n\n"
            "[arena_page]\nmax_regenerations = 1\n\n"
            f'[[models]]\nname = "demo-ace"\nbase_url = "{demo.base_url}"\nmodel = "{ACE}"\n\n'
            f'[[models]]\nname = "demo-wild"\nbase_url = "{demo.base_url}"\nmodel = "{WILD}"\n'
            'system_prompt = "Answer briefly."\n'
        )
        server = ServerProcess(f"sqlite:///{tmp / 'arena.db'}", "--config", str(toml), cwd=tmp)
        server.start()
        try:
            yield server, demo, tmp / "arena.db"
        finally:
            server.stop()


def page(driver) -> dict:
    return driver.execute_script(
        """
        const b = document.body.dataset;
        return {state: b.state || null, turn: b.turn || null, attempt: b.attempt || null,
                battle: b.battle || null,
                a: document.getElementById('answer-a').textContent,
                b: document.getElementById('answer-b').textContent,
                turns: [...document.querySelectorAll('#turns section.turn')].map(
                  t => [t.id, t.querySelector('.asked').textContent]),
                stop: !document.getElementById('stop').hidden,
                regenerate: !document.getElementById('regenerate').hidden,
                votes: [...document.querySelectorAll('button.vote')].map(b => b.disabled),
                status: document.getElementById('status').textContent};
        """
    )


def until(driver, test, timeout: float = 60.0) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = page(driver)
        if test(s):
            return s
        time.sleep(0.03)
    raise AssertionError(f"timed out; page {page(driver)}")


def whole_page(driver, width: int) -> None:
    """The window as tall as the page at ``width`` (a screenshot of the whole conversation)."""
    driver.set_window_size(width, 900)
    time.sleep(0.2)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, height + 140)  # the window's frame
    time.sleep(0.3)


def click(driver, element_id: str) -> None:
    """Click a control as a person would: scrolled into the middle of the window first."""
    el = driver.find_element("id", element_id)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
    el.click()


def ask(driver, text: str) -> None:
    box = driver.find_element("id", "prompt")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    box.clear()
    box.send_keys(text)
    click(driver, "send")


def db_read(path, fn):
    eng = store.make_engine(f"sqlite:///{path}")
    try:
        with eng.connect() as conn:
            return fn(conn)
    finally:
        eng.dispose()


def test_a_three_turn_conversation_regenerate_vote_and_stop(served, browser, tmp_path):
    server, demo, db = served
    t0 = time.monotonic()
    browser.set_window_size(1280, 900)
    browser.get(server.url + "/arena")
    wait_loaded(browser)
    prompts = ["What is 17*23?", "And 18*23?", "Say it in words."]
    for k, text in enumerate(prompts, 1):
        ask(browser, text)
        s = until(browser, lambda s, k=k: s["turn"] == str(k) and s["state"] == "complete")
        assert not any(s["votes"]) and s["regenerate"] and not s["stop"]
        assert [t[1] for t in s["turns"]] == prompts[: k - 1]  # the earlier turns stay shown
    assert [t[0] for t in s["turns"]] == ["turn-1", "turn-2"]
    stats = demo.stats()
    assert stats[ACE]["messages"] == [1, 3, 5]
    assert stats[WILD]["messages"] == [2, 4, 6]  # its system prompt first
    assert {s["a"][:21], s["b"][:21]} == {"I received 5 messages", "I received 6 messages"}
    whole_page(browser, 1280)
    save_docs(browser, tmp_path / "c1280.png", "arena-conversation-1280.png", 1280)
    whole_page(browser, 390)
    widths = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert widths[0] <= widths[1]  # no sideways scrolling at 390 px
    save_docs(browser, tmp_path / "c390.png", "arena-conversation-390.png", 390)
    browser.set_window_size(1280, 900)
    # regenerate turn 3: re-sampled with the same 5 (6) messages; the old answers kept
    battle = s["battle"]
    click(browser, "regenerate")
    s = until(browser, lambda s: s["attempt"] == "2" and s["state"] == "complete")
    assert s["turn"] == "3" and len(s["turns"]) == 2
    assert demo.stats()[ACE]["messages"] == [1, 3, 5, 5]
    conv = db_read(db, lambda c: store.held.conversation(c, battle, history=True))
    assert conv["turns"] == 3 and [r["turn"] for r in conv["replaced"]] == [3]
    # a second regeneration is past the limit: the page says which limit, the battle stays
    click(browser, "regenerate")
    s = until(browser, lambda s: "max_regenerations = 1" in s["status"])
    assert s["state"] == "complete" and not any(s["votes"]) and s["attempt"] == "2"
    # a vote after turn 3 (key 1): counted once, the names shown, no more turns
    browser.find_element("tag name", "body").send_keys("1")
    s = until(browser, lambda s: s["state"] == "voted")
    assert browser.find_element("id", "send").get_attribute("disabled") is not None
    votes = db_read(
        db,
        lambda c: c.execute(
            sa.select(sa.func.count())
            .select_from(store.votes)
            .where(store.votes.c.battle_id == battle)
        ).scalar(),
    )
    assert votes == 1
    # a new battle, stopped while it streams: both calls cancelled, never votable
    click(browser, "again")
    ask(browser, "Tell me about the sea.")
    s = until(browser, lambda s: s["stop"] and s["battle"] and s["battle"] != battle and s["a"])
    click(browser, "stop")
    s = until(browser, lambda s: s["state"] == "stopped")
    assert all(s["votes"]) and not s["regenerate"] and "not counted" in s["status"]
    stopped = s["battle"]
    deadline = time.time() + 5
    while time.time() < deadline and (
        demo.stats()[ACE]["in_flight"] or demo.stats()[WILD]["in_flight"]
    ):
        time.sleep(0.02)
    assert demo.stats()[ACE]["in_flight"] == 0 and demo.stats()[WILD]["in_flight"] == 0
    status = db_read(db, lambda c: store.held.held_status(c, stopped))
    assert status == "stopped"
    browser.find_element("tag name", "body").send_keys("2")  # no vote on a stopped battle
    time.sleep(0.3)
    assert page(browser)["state"] == "stopped"
    total = db_read(
        db, lambda c: c.execute(sa.select(sa.func.count()).select_from(store.votes)).scalar()
    )
    assert total == 1
    assert not [e for e in errors(browser) if "(Unprocessable Entity)" not in e]  # the limit: 422
    print(f"conversation browser test: {time.monotonic() - t0:.1f} s")
