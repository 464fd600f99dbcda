"""What the ``[moderation]`` step adds before a prompt reaches the models
(docs/guides/live-arena-security.md, "A public arena's duties"):

1. the demo server's ``/v1/moderations`` (a process on loopback) called through
   :class:`stablearena.service.duties.Moderator` — the arena's own path — for ``--prompts``
   prompts of about 300 characters: median and 90th percentile;
2. a local rule list of ``--words`` words (one expression) on a 2,000-character prompt: time
   per check.

    python bench/bench_moderation.py [--prompts 200] [--words 100]
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=200)
    p.add_argument("--words", type=int, default=100)
    args = p.parse_args()
    from stablearena.endpoints.demo_server import DemoServer

    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    with DemoServer() as demo:
        got = asyncio.run(run(demo.base_url, args.prompts, args.words))
    print(
        f"moderation endpoint (demo, loopback): median {got['endpoint_median_ms']:.2f} ms, "
        f"p90 {got['endpoint_p90_ms']:.2f} ms over {args.prompts} prompts; "
        f"{args.words} word rules on a 2,000-character prompt: {got['rules_us']:.0f} us "
        f"(load average {load})"
    )


if __name__ == "__main__":
    main()
