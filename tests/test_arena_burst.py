"""A crowd at once (issue 42 item 5): under a burst of page battles every visitor is told where
they stand — queued for a model's free call slot, with its place and an estimate — or refused
cleanly (503 ``busy`` with ``Retry-After``), and nothing acknowledged is lost.

Against a real ``stablearena serve`` process and a real demo model server process streaming
slowly; the checks read the order and content of the stream's lines, never the clock
(bench/bench_burst.py measures the times)."""

from __future__ import annotations

import asyncio
import io

import httpx
import pandas as pd
import pytest
from arena_process import BURST_LIMITS, page_burst, page_server

from stablearena.judging.endpoints.client import Slots
from stablearena.judging.endpoints.demo_server import DemoServer

MODELS = ("demo-ace", "demo-wild")


# ---------------------------------------------------------------------------------- the line
def test_slots_serve_first_come_first_and_tell_each_waiter_its_place():
    async def run() -> tuple[list, list, Slots]:
        slots, told, order = Slots(2), [], []

        async def call(k: int, hold: asyncio.Event) -> None:
            since = await slots.acquire(lambda place, k=k: told.append((k, place)))
            order.append(k)
            await hold.wait()
            slots.release(since)

        holds = [asyncio.Event() for _ in range(5)]
        tasks = [asyncio.ensure_future(call(k, holds[k])) for k in range(5)]
        await asyncio.sleep(0)
        assert (slots.active, slots.waiting) == (2, 3)
        tasks[3].cancel()  # one leaves the line: the one behind it moves up
        await asyncio.sleep(0)
        for k in (0, 1, 2, 4):
            holds[k].set()
            await asyncio.sleep(0)
        await asyncio.gather(*tasks, return_exceptions=True)
        return told, order, slots

    told, order, slots = asyncio.run(run())
    assert order == [0, 1, 2, 4]
    assert [t for t in told if t[0] == 0] == []  # a call that got its slot at once is told nothing
    assert [p for k, p in told if k == 2] == [1, 0]
    assert [p for k, p in told if k == 3] == [2]
    assert [p for k, p in told if k == 4] == [3, 2, 1, 0]
    assert (slots.active, slots.waiting, len(slots.held)) == (0, 0, 4)


def test_wait_estimate_is_the_line_at_the_mean_hold_time():
    slots = Slots(4)
    assert slots.wait_estimate(-1, 60.0) == 0.0  # a free slot
    assert slots.wait_estimate(0, 60.0) == 15.0  # first in line, nothing measured: the prior
    slots.held.extend([2.0, 6.0])
    assert slots.wait_estimate(7, 60.0) == 8 * 4.0 / 4


# ---------------------------------------------------------------------------------- a burst
def _side_events(events: list, side: str) -> list[dict]:
    return [e for _, e in events if e.get("side") == side]


@pytest.fixture(scope="module")
def burst(tmp_path_factory):
    """40 page battles at once: two models of 2 call slots each, 4 s answers and
    max_queue_wait = 20 s (a cold worker: one round of slots may wait, the rest is refused)."""
    tmp = tmp_path_factory.mktemp("burst")
    config = BURST_LIMITS + "max_queue_wait = 20\n\n"
    with (
        DemoServer(seed=0) as demo,
        page_server(tmp, demo.base_url, MODELS, 0.1, config, "max_concurrency = 2\n") as server,
    ):
        got = asyncio.run(page_burst(server.url, 40))
        after = asyncio.run(page_burst(server.url, 1))  # once the burst has drained
        admin = {"Authorization": f"Bearer {server.admin_key}"}
        raw = httpx.get(server.url + "/v1/export", headers=admin, timeout=60).content
        yield got, after, pd.read_json(io.BytesIO(raw), lines=True, dtype=False), demo.stats()


def test_a_queued_side_is_told_its_place_before_its_answer_starts(burst):
    got, after, _, stats = burst
    served = [r for r in got if r["status"] == 200]
    queued = 0
    for r in served:
        assert "battle_id" in r["events"][0][1]  # the first line, then the sides
        for side in "ab":
            mine = _side_events(r["events"], side)
            first = next(k for k, e in enumerate(mine) if "delta" in e)
            states = [e for e in mine[:first] if "state" in e]
            assert all("state" not in e for e in mine[first:])  # no state once answering
            if not states:
                continue
            queued += 1
            places = [e["position"] for e in states if e["state"] == "queued"]
            assert places and all(p >= 1 for p in places)
            assert places == sorted(places, reverse=True)  # moving up, never back
            assert states[0]["state"] == "queued" and states[-1] == {
                "side": side,
                "state": "answering",
            }
            for e in states[:-1]:
                assert e["text"].startswith("Queued: ") and f"model {side.upper()}'s" in e["text"]
                assert isinstance(e["wait"], int) and e["wait"] >= 0
                assert not any(m in e["text"] for m in MODELS)  # the battle stays anonymous
        assert r["events"][-1][1]["done"] and r["events"][-1][1]["status"] == "complete"
    # the slots were full: some sides waited, and no model had more calls at once than slots
    assert queued >= 2
    assert all(v["in_flight_max"] == 2 for k, v in stats.items() if k.startswith(MODELS))
    # after the burst: a free slot at once, no state line
    assert after[0]["status"] == 200 and not any("state" in e for _, e in after[0]["events"])


def test_a_battle_beyond_the_bounded_wait_is_refused_cleanly(burst):
    got, _, _, _ = burst
    refused = [r for r in got if r["status"] != 200]
    assert refused  # 40 battles on 2 × 2 slots of ~4 s calls estimated at 20 s: most refused
    for r in refused:
        assert r["status"] == 503 and r["error"]["code"] == "busy"
        assert "models are busy" in r["error"]["message"]
        assert "try again in about" in r["error"]["message"]
        assert int(r["headers"]["Retry-After"]) >= 5
        assert r["battle_id"] is None


def test_nothing_acknowledged_is_lost(burst):
    got, after, export, _ = burst
    acked = {r["battle_id"] for r in [*got, *after] if r["vote"] == 200}
    assert acked and all(r["vote"] == 200 for r in [*got, *after] if r["battle_id"])
    ids = set(export[[c for c in export.columns if c in ("battle_id", "question_id")][0]])
    assert acked <= ids
    assert len(export) == len(acked)  # and a refused battle left no vote


# ---------------------------------------------------------------------------------- the page
def test_the_page_shows_a_queued_side_its_place_until_its_answer_starts(tmp_path, browser):
    """One slot per model, held by a battle started first: the page's battle shows "Queued: 1st
    in line …" in both answer panes (and nothing else there), then the answers replace it."""
    import threading
    import time

    from chromium import errors, wait_loaded
    from test_arena_browser import wait_for

    with (
        DemoServer(seed=0) as demo,
        page_server(
            tmp_path, demo.base_url, MODELS, 0.3, BURST_LIMITS, "max_concurrency = 1\n"
        ) as server,
    ):
        first: list = []
        holder = threading.Thread(
            target=lambda: first.extend(asyncio.run(page_burst(server.url, 1)))
        )
        holder.start()

        def in_flight() -> int:
            return sum(v["in_flight"] for k, v in demo.stats().items() if k.startswith(MODELS))

        while in_flight() < 2:  # until the first battle holds both models' slots
            time.sleep(0.02)
        browser.set_window_size(1280, 900)
        browser.get(server.url + "/arena")
        wait_loaded(browser)
        browser.find_element("id", "prompt").send_keys("What is 17*23?")
        browser.find_element("id", "send").click()
        queued = wait_for(browser, lambda s: "Queued:" in s["a"] and "Queued:" in s["b"])
        for side in "ab":
            assert queued[side].startswith("Queued: 1st in line for model " + side.upper())
            assert "demo-" not in queued[side]
        done = wait_for(browser, lambda s: s["state"] == "complete")
        assert "Queued:" not in done["a"] + done["b"] and done["a"] and done["b"]
        holder.join()
        assert first[0]["vote"] == 200
        assert not errors(browser)
