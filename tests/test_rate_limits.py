"""Per-key rate limits: the in-memory token bucket and the table the workers of
``serve --workers N`` share (:class:`~stablearena.service.security.SharedRateLimiter`), so that
a key's limit does not grow with the number of workers."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

import httpx
import pytest
from arena_process import ServerProcess
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena.client import ArenaClient
from stablearena.service.security import RateLimiter, SharedRateLimiter, shared_buckets_fd

posix = pytest.mark.skipif(sys.platform == "win32", reason="record locks and fd passing: POSIX")


@posix
@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(0.1, 50.0),
    burst=st.integers(1, 8),
    steps=st.lists(st.tuples(st.integers(0, 3), st.floats(0.0, 2.0)), min_size=1, max_size=60),
)
def test_the_shared_table_answers_as_the_in_memory_buckets(rate, burst, steps):
    """One process: the shared table gives the same waits as :class:`RateLimiter`, key by key,
    for any sequence of requests and clock steps."""
    fd = shared_buckets_fd()
    try:
        shared, plain = SharedRateLimiter(rate, burst, fd), RateLimiter(rate, burst)
        now = 1000.0
        for slot, dt in steps:
            now += dt
            assert shared.take(f"k{slot}", now, slot=slot) == pytest.approx(
                plain.take(f"k{slot}", now, slot=slot), abs=1e-9
            )
    finally:
        os.close(fd)


def _take_many(fd: int, slot: int, n: int, out: mp.Queue) -> None:
    lim = SharedRateLimiter(1e-6, 10, fd)  # a token per ~12 days: only the burst passes
    out.put(sum(lim.take("k", slot=slot) == 0.0 for _ in range(n)))


@posix
@pytest.mark.parametrize("slot", [3, 200_000])  # the second is past the first 1 MB: grown
def test_processes_sharing_the_table_share_one_burst(slot):
    """Four processes take 25 requests each of one key: 10 (the burst) pass in all, not 40."""
    fd = shared_buckets_fd()
    try:
        ctx = mp.get_context("fork")
        out = ctx.Queue()
        procs = [ctx.Process(target=_take_many, args=(fd, slot, 25, out)) for _ in range(4)]
        for p in procs:
            p.start()
        passed = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert sum(passed) == 10, passed
        # another key keeps its own bucket
        assert SharedRateLimiter(1e-6, 10, fd).take("other", slot=slot + 1) == 0.0
    finally:
        os.close(fd)


@posix
def test_a_key_has_one_limit_across_the_workers_of_serve(tmp_path):
    """``serve --workers 2`` with a burst of 6 and a negligible rate: requests of one key sent
    alternately through a connection to each worker pass 6 times in all (with a limiter per
    worker, 12 would pass). (The admin key's five calls fit in its own burst.)"""
    db = f"sqlite:///{tmp_path / 'limits.db'}"
    server = ServerProcess(
        db, "--workers", "2", "--set", "rate_limit=0.0001", "--set", "rate_burst=6", cwd=tmp_path
    ).start()
    try:
        admin = ArenaClient(server.url, server.admin_key)
        for name in ("a", "b", "c"):
            admin.add_model(name)
        key = admin.create_annotator("ann")
        warm = admin.create_annotator("warm-up")
        admin.close()
        by_worker: dict[int, httpx.Client] = {}
        spare = []
        for _ in range(200):  # keep-alive connections until one is on each worker
            c = httpx.Client(base_url=server.url, timeout=30)
            w = c.get("/healthz").json()["worker"]
            if w in by_worker:
                spare.append(c)
            else:
                by_worker[w] = c
            if len(by_worker) == 2:
                break
        assert set(by_worker) == {0, 1}
        for c in by_worker.values():  # each worker serves (a worker still loading answers 503)
            for _ in range(200):
                r = c.post("/v1/battles", json={}, headers={"Authorization": f"Bearer {warm}"})
                if r.status_code == 200:
                    break
                assert r.status_code == 503, r.text  # not 429: the warm-up key has 6 tries
                time.sleep(0.05)
        codes = []
        for k in range(16):
            c = by_worker[k % 2]
            r = c.post("/v1/battles", json={}, headers={"Authorization": f"Bearer {key}"})
            codes.append(r.status_code)
            assert c.get("/healthz").json()["worker"] == k % 2  # still that worker
        assert codes.count(200) == 6 and codes.count(429) == 10, codes
        assert codes[:6] == [200] * 6
        for c in [*by_worker.values(), *spare]:
            c.close()
    finally:
        server.stop()
