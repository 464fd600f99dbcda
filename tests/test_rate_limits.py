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

from stablearena.service.client import ArenaClient
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


@posix
@settings(max_examples=60, deadline=None)
@given(
    rate=st.floats(0.1, 50.0),
    burst=st.integers(1, 8),
    steps=st.lists(
        st.tuples(st.sampled_from(["10.0.0.1", "::1", "é", "", "x" * 300]), st.floats(0.0, 2.0)),
        min_size=1,
        max_size=60,
    ),
)
def test_the_shared_table_of_addresses_answers_as_the_in_memory_buckets(rate, burst, steps):
    """Buckets found by name (a client address, no slot) in the shared table give the same
    waits as :class:`RateLimiter` (a few addresses: each keeps its bucket of its set), and the
    page's tables do not touch the keys' table in the same file."""
    fd = shared_buckets_fd()
    try:
        shared = SharedRateLimiter(rate, burst, fd, "page_addresses")
        keys = SharedRateLimiter(rate, burst, fd, "keys")
        plain = RateLimiter(rate, burst)
        now = 1000.0
        for name, dt in steps:
            now += dt
            assert shared.take(name, now) == pytest.approx(plain.take(name, now), abs=1e-9)
        assert keys.take("k", now, slot=0) == 0.0  # a fresh bucket: nothing taken from it
    finally:
        os.close(fd)


def test_a_full_set_of_addresses_forgets_the_longest_quiet():
    """More addresses in one set than it has buckets: a new address takes a free bucket, else a
    refilled one, else the one quiet longest (which starts again with a full bucket)."""
    from stablearena.service.security import ADDRESS_WAYS

    fd = shared_buckets_fd()
    try:
        lim = SharedRateLimiter(1e-6, 1, fd, "page_new")
        # names that fall in one set, found by trying
        import hashlib

        from stablearena.service.security import ADDRESS_SETS

        def set_of(name: str) -> int:
            d = hashlib.blake2b(name.encode(), digest_size=8).digest()
            return ((int.from_bytes(d, "little") | 1) >> 1) % ADDRESS_SETS

        same = [f"10.0.{k // 256}.{k % 256}" for k in range(200_000)]
        target = set_of(same[0])
        same = [n for n in same if set_of(n) == target][: ADDRESS_WAYS + 1]
        assert len(same) == ADDRESS_WAYS + 1
        for t, name in enumerate(same[:ADDRESS_WAYS]):
            assert lim.take(name, 100.0 + t) == 0.0  # each its own bucket (burst 1)
        for t, name in enumerate(same[:ADDRESS_WAYS]):
            assert lim.take(name, 200.0 + t) > 0  # each remembered: empty
        assert lim.take(same[-1], 300.0) == 0.0  # a ninth: takes the quietest (same[0])
        assert lim.take(same[1], 301.0) > 0  # the others are still remembered
        assert lim.take(same[0], 302.0) == 0.0  # the forgotten one starts again
    finally:
        os.close(fd)


def _take_many(fd: int, slot: int | None, n: int, out: mp.Queue) -> None:
    table = "keys" if slot is not None else "page_addresses"
    lim = SharedRateLimiter(1e-6, 10, fd, table)  # a token per ~12 days: only the burst passes
    out.put(sum(lim.take("192.0.2.7", slot=slot) == 0.0 for _ in range(n)))


@posix
# the second is past the first 1 MB: grown; None: a bucket found by the address
@pytest.mark.parametrize("slot", [3, 200_000, None])
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
        other = SharedRateLimiter(1e-6, 10, fd, "keys" if slot is not None else "page_addresses")
        assert other.take("other", slot=None if slot is None else slot + 1) == 0.0
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
