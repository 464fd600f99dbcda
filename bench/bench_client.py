"""CPU per streamed model call: the arena's client (:class:`stablearena.judging.endpoints.EndpointClient`,
aiohttp) against httpx reading the same stream the same way, and against aiohttp's own session
with nothing around it (the floor), on the local demo server.

Each round makes ``--calls`` streamed calls, ``--concurrency`` at a time, through each of the
three in turn (interleaved), and prints this process's CPU per call (user + system) and the
wall time. httpx keeps pools of at most 8 connections (one pool of ``--concurrency``
connections scans them all on every request start and end: httpcore), as the client did
before it moved to aiohttp.

    PYTHONPATH=src python bench/bench_client.py [--calls 600] [--concurrency 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import aiohttp
import httpx

from stablearena.judging.endpoints import EndpointClient, ModelEndpoint
from stablearena.judging.endpoints.client import SSEDecoder
from stablearena.judging.endpoints.demo_server import DemoServer

PROMPT = "What is 17*23?"


def _count(decoder: SSEDecoder, chunk: bytes) -> int:
    n = 0
    for data in decoder.feed(chunk):
        if data != b"[DONE]":
            json.loads(data)
            n += 1
    return n


async def with_httpx(url: str, calls: int, conc: int) -> int:
    limits = httpx.Limits(max_connections=8, max_keepalive_connections=8)
    pools = [httpx.AsyncClient(limits=limits) for _ in range(-(-conc // 8))]
    sem = asyncio.Semaphore(conc)
    body = {"model": "demo-ace", "stream": True, "messages": [{"role": "user", "content": PROMPT}]}

    async def one(i: int) -> int:
        async with sem, pools[i % len(pools)].stream("POST", url, json=body) as r:
            d = SSEDecoder()
            return sum([_count(d, c) async for c in r.aiter_bytes()])

    got = await asyncio.gather(*(one(i) for i in range(calls)))
    for p in pools:
        await p.aclose()
    return sum(got)


async def with_aiohttp(url: str, calls: int, conc: int) -> int:
    sem = asyncio.Semaphore(conc)
    body = {"model": "demo-ace", "stream": True, "messages": [{"role": "user", "content": PROMPT}]}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=conc)) as s:

        async def one(i: int) -> int:
            async with sem, s.post(url, json=body) as r:
                d = SSEDecoder()
                return sum([_count(d, c) async for c in r.content.iter_any()])

        return sum(await asyncio.gather(*(one(i) for i in range(calls))))


async def with_client(base_url: str, calls: int, conc: int) -> int:
    ep = ModelEndpoint(name="demo-ace", base_url=base_url, model="demo-ace", max_concurrency=conc)
    async with EndpointClient(ep) as c:
        got = await asyncio.gather(*(c.answer(PROMPT) for _ in range(calls)))
    assert all(r.ok for r in got), [r for r in got if not r.ok][:1]
    return sum(r.completion_tokens for r in got)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=600)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import uvloop

    with DemoServer(seed=0) as demo:
        url = demo.base_url + "/chat/completions"
        runs = {
            "stablearena EndpointClient (aiohttp)": lambda: with_client(
                demo.base_url, args.calls, args.concurrency
            ),
            "httpx, same stream reading": lambda: with_httpx(url, args.calls, args.concurrency),
            "aiohttp session alone (floor)": lambda: with_aiohttp(
                url, args.calls, args.concurrency
            ),
        }
        cpu: dict[str, list[float]] = {k: [] for k in runs}
        for k in range(args.rounds):
            for name, run in runs.items():
                t0, w0 = time.process_time(), time.perf_counter()
                pieces = uvloop.run(run())
                c = (time.process_time() - t0) / args.calls
                cpu[name].append(c)
                print(
                    f"round {k + 1} {name}: CPU per call {c * 1e3:.3f} ms, wall "
                    f"{time.perf_counter() - w0:.2f} s, {pieces} pieces"
                )
        ours = statistics.median(cpu["stablearena EndpointClient (aiohttp)"])
        for name, xs in cpu.items():
            print(
                f"median {name}: {statistics.median(xs) * 1e3:.3f} ms per call "
                f"({statistics.median(xs) / ours:.2f}x ours)"
            )


if __name__ == "__main__":
    main()
