"""``stablearena serve --demo``: the demo models answer on /arena and a vote is taken, with no
model configured by hand; the demo server goes away with serve."""

from __future__ import annotations

import json
import re
import time

import httpx
from arena_process import ServerProcess
from procs import HAVE_PROC, alive, children


def test_serve_demo_holds_a_battle(tmp_path):
    t0 = time.perf_counter()
    db = f"sqlite:///{tmp_path / 'demo.db'}"
    server = ServerProcess(db, "--demo", "--set", "demo_pace=0.01", cwd=tmp_path).start()
    try:
        kids = children(server.proc.pid) if HAVE_PROC else []
        with httpx.Client(base_url=server.url, timeout=60) as c:
            csrf = re.search(r'csrf-token" content="(\w+)"', c.get("/arena").text).group(1)
            p = c.get("/arena/prompt").json()
            assert re.match(r"p\d{4}$", p["id"])
            h = {"X-CSRF-Token": csrf, "Origin": server.url}
            r = c.post(
                "/arena/battles", json={"prompt": p["prompt"], "prompt_id": p["id"]}, headers=h
            )
            lines = [json.loads(x) for x in r.text.splitlines()]
            assert lines[-1]["status"] == "complete", lines[-1]
            first_vote = time.perf_counter() - t0
            v = c.post(
                f"/arena/battles/{lines[0]['battle_id']}/vote",
                json={"outcome": "model_a"},
                headers=h,
            )
            assert v.status_code == 200 and v.json()["model_a"].startswith("demo-")
            # the category comes from the demo classifier (arithmetic: math), not "other" for all
            want = "math" if re.search(r"\d\s*[-+*/]\s*\d", p["prompt"]) else "other"
            admin = {"Authorization": f"Bearer {server.admin_key}"}
            deadline = time.time() + 30
            while time.time() < deadline:
                held = c.get("/v1/admin/held", headers=admin).json()["battles"]
                if held[0]["category"] == want:
                    break
                time.sleep(0.1)
            assert held[0]["category"] == want, (p, held[0])
            got = c.get("/v1/admin/duties", headers=admin).json()["classifier"]
            assert got["asked"] == 1 and got["malformed"] == got["failed"] == 0
            names = {m["name"] for m in c.get("/v1/models").json()["models"]}
            assert len(names) == 8 and all(n.startswith("demo-") for n in names)
            # the demo models stream at serve's demo_pace: the demo server paused 0.01 s before
            # each word (3× after a paragraph), by its own count (the time: bench_arena_start)
            said = next(x for x in server.lines if x.startswith("demo models served by"))
            assert "(0.01 s a word)" in said
            base_url = re.search(r"(http://\S+/v1)", said).group(1)
            body = {
                "model": "demo-ace",
                "stream": True,
                "messages": [{"role": "user", "content": "Compare TCP and UDP"}],
            }
            before = httpx.get(base_url.removesuffix("/v1") + "/demo/stats").json()
            paused0 = before.get("demo-ace", {}).get("paused", 0.0)
            r = httpx.post(base_url + "/chat/completions", json=body, timeout=60)
            words = r.text.count('"content": "') - 1  # the first chunk carries the role only
            after = httpx.get(base_url.removesuffix("/v1") + "/demo/stats").json()
            assert words > 30 and after["demo-ace"]["paused"] - paused0 >= 0.01 * words - 1e-9
        print(f"serve --demo: first possible vote after {first_vote:.2f} s")
    finally:
        server.stop()
    if HAVE_PROC:
        deadline = time.time() + 10
        while time.time() < deadline and any(alive(k) for k in kids):
            time.sleep(0.1)
        assert not any(alive(k) for k in kids)  # the demo server went with serve


def test_an_answer_already_showing_is_written_at_most_once_a_frame(tmp_path):
    # demo models at 0.01 s a word: two answers bring ~200 pieces a second; after the first
    # piece (at once) they go out at most once every STREAM_FRAME (1/30 s) per stream, so the
    # stream arrives in far fewer HTTP chunks than it has lines (httpx's raw reads never merge
    # two chunks, and may split one: their count bounds the chunks from above)
    from stablearena.service.api.arena import STREAM_FRAME

    db = f"sqlite:///{tmp_path / 'demo.db'}"
    server = ServerProcess(db, "--demo", "--set", "demo_pace=0.01", cwd=tmp_path).start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            csrf = re.search(r'csrf-token" content="(\w+)"', c.get("/arena").text).group(1)
            h = {"X-CSRF-Token": csrf, "Origin": server.url}
            body = {"prompt": "Explain how to reverse a string in Python"}
            reads, raw = 0, b""
            t0 = time.perf_counter()
            with c.stream("POST", "/arena/battles", json=body, headers=h) as r:
                for part in r.iter_raw():
                    reads += 1
                    raw += part
            took = time.perf_counter() - t0
        lines = [json.loads(x) for x in raw.decode().splitlines() if x.strip()]
        deltas = sum("delta" in x for x in lines)
        assert lines[-1]["status"] == "complete" and deltas > 60, (deltas, lines[-1])
        assert reads <= deltas / 2, (reads, deltas)
        assert reads <= took / STREAM_FRAME + 10, (reads, took)  # + the lines sent at once
    finally:
        server.stop()
