"""What a public arena's duties add before a prompt reaches the models and before the answers
stream (docs/guides/live-arena-security.md, "A public arena's duties"; docs/guides/arena-page.md,
"Categories from a classifier"):

1. the demo server's ``/v1/moderations`` (a process on loopback) called through
   :class:`stablearena.service.duties.Moderator` — the arena's own path — for ``--prompts``
   prompts of about 300 characters: median and 90th percentile;
2. a local rule list of ``--words`` words (one expression) on a 2,000-character prompt: time
   per check;
3. time from a battle's request to its first answer piece, ``--battles`` battles one after
   another on an in-process arena (FastAPI's TestClient) whose two models are the demo server's,
   interleaved: no duties; a ``[category_classifier]`` that takes ~1 s to answer
   (``demo-classifier+slow=0.5``); the demo ``[moderation]`` endpoint. Medians.

    python bench/bench_duties.py [--prompts 200] [--words 100] [--battles 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time


async def run(base_url: str, prompts: int, words: int) -> dict[str, float]:
    from stablearena.service.arena_settings import Moderation
    from stablearena.service.duties import Moderator

    m = Moderator(Moderation(endpoint={"base_url": base_url}))
    times = []
    for k in range(prompts):
        t0 = time.perf_counter()
        v = await m.check(f"What is {k}+1? " * 20)
        times.append(time.perf_counter() - t0)
        assert not v.refused, v
    await m.aclose()
    times.sort()
    rules = Moderator(Moderation(words=[f"word{k}" for k in range(words)]))
    text = "Explain the history of the Roman empire in detail. " * 40
    n = 1000
    t0 = time.perf_counter()
    for _ in range(n):
        await rules.check(text)
    return {
        "endpoint_median_ms": 1000 * statistics.median(times),
        "endpoint_p90_ms": 1000 * times[int(0.9 * len(times))],
        "rules_us": 1e6 * (time.perf_counter() - t0) / n,
    }


def first_piece(base_url: str, battles: int, tmp: str) -> dict[str, float]:
    """Median seconds from a battle's request to its first answer piece, per configuration."""
    import json
    import re
    import warnings

    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

    from stablearena.service.app import create_app
    from stablearena.service.settings import Settings

    duties = {
        "none": {},
        "classifier": {
            "category_classifier": {
                "endpoint": {"base_url": base_url, "model": "demo-classifier+slow=0.5"}
            }
        },
        "moderation": {"moderation": {"endpoint": {"base_url": base_url}}},
    }
    clients, times = {}, {k: [] for k in duties}
    try:
        for name, extra in duties.items():
            s = Settings(
                db=f"sqlite:///{tmp}/{name}.db",
                fit_in_process=False,
                arena={"min_records": 0},
                arena_page={
                    "visitor_open": 1000,
                    "address_open": 1000,
                    "visitor_battles_per_hour": 1e6,
                    "address_battles_per_hour": 1e6,
                },
                models=[
                    {"name": m, "base_url": base_url, "model": m} for m in ("demo-ace", "demo-wild")
                ],
                **extra,
            )
            tc = TestClient(create_app(s))
            tc.__enter__()
            page = tc.get("/arena").text
            csrf = re.search(r'csrf-token" content="(\w+)"', page).group(1)
            clients[name] = (tc, csrf)
        for k in range(battles + 1):  # the first of each: warm-up, not counted
            for name, (tc, csrf) in clients.items():
                t0 = time.perf_counter()
                first = None
                with tc.stream(
                    "POST",
                    "/arena/battles",
                    json={"prompt": f"Write a Python function for {k}*3"},
                    headers={"X-CSRF-Token": csrf},
                ) as r:
                    for line in r.iter_lines():
                        if first is None and '"delta"' in line:
                            first = time.perf_counter() - t0
                        if line and json.loads(line).get("done"):
                            assert json.loads(line)["status"] == "complete", line
                if first is None:
                    raise SystemExit(f"{name}: no answer piece (HTTP {r.status_code})")
                if k:
                    times[name].append(first)
    finally:
        for tc, _ in clients.values():
            tc.__exit__(None, None, None)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=200)
    p.add_argument("--words", type=int, default=100)
    p.add_argument("--battles", type=int, default=20)
    args = p.parse_args()
    import tempfile

    from stablearena.judging.endpoints.demo_server import DemoServer

    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    with DemoServer() as demo:
        got = asyncio.run(run(demo.base_url, args.prompts, args.words))
        with tempfile.TemporaryDirectory() as tmp:
            ttfp = first_piece(demo.base_url, args.battles, tmp)
    print(
        f"moderation endpoint (demo, loopback): median {got['endpoint_median_ms']:.2f} ms, "
        f"p90 {got['endpoint_p90_ms']:.2f} ms over {args.prompts} prompts; "
        f"{args.words} word rules on a 2,000-character prompt: {got['rules_us']:.0f} us "
        f"(load average {load})"
    )
    print(
        "first answer piece, median of "
        f"{args.battles} battles: " + ", ".join(f"{k} {1000 * v:.1f} ms" for k, v in ttfp.items())
    )


if __name__ == "__main__":
    main()
