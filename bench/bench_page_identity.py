"""The /arena page's per-request identity costs: the identity check of a cookie (a keyed
annotator's and a visitor's), the registry revision read that each page vote's write
transaction adds (a revoked key refused on every worker), and a take from the page's token
buckets — in memory (one process) and in the table the workers of ``serve --workers N`` share
(by the identity's number, and by address: a hash into an 8-way set).

Usage::

    python bench/bench_page_identity.py            # best of 5 repeats of 200,000 calls (CPU time)
    python bench/bench_page_identity.py --calls 20000

Run it with ``PYTHONPATH`` set to another checkout's ``src`` to compare (a check or a table that
checkout does not have is reported as such).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import timeit


def best(fn, calls: int) -> float:  # noqa: ANN001
    """CPU seconds of this process per call, the best of 5 repeats (CPU time, not wall time:
    on a machine shared with other jobs the figure does not count the time spent waiting)."""
    return min(timeit.repeat(fn, number=calls, repeat=5, timer=time.process_time)) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200_000, help="calls per repeat")
    args = ap.parse_args()

    from fastapi.testclient import TestClient

    from stablearena.service import security
    from stablearena.service.app import create_app
    from stablearena.service.settings import Settings
    from stablearena.service.store.votes import _hot, cursor

    out: dict[str, float | str] = {"load": open("/proc/loadavg").read().split()[0]}
    with tempfile.TemporaryDirectory() as d:
        s = Settings(db=f"sqlite:///{d}/a.db", fit_in_process=False, seed=0)
        with TestClient(create_app(s)) as tc:
            h = {"Authorization": f"Bearer {tc.app.state.admin_key}"}
            key = tc.post("/v1/admin/annotators", json={"name": "ann"}, headers=h).json()["key"]
            tc.post("/arena/login", data={"key": key}, follow_redirects=False)
            keyed = tc.cookies.get("sa_arena")
            tc.cookies.clear()
            tc.get("/arena")
            visitor = tc.cookies.get("sa_arena")
            v = tc.app.state.visitors
            check = getattr(v, "visit", None) or v.who
            for name, c in (("keyed", keyed), ("visitor", visitor)):
                assert check(c) is not None
                out[f"identity_check_{name}_us"] = best(lambda c=c: check(c), args.calls) * 1e6
            with tc.app.state.engine.begin() as conn:
                cur, sql = cursor(conn), _hot(conn, "revision")
                n = max(1, args.calls // 10)
                t = best(lambda: (cur.execute(sql), cur.fetchone()), n)
                out["revision_read_sqlite_us"] = t * 1e6
    lim = security.RateLimiter(1.0, 1e9)
    out["bucket_in_memory_us"] = best(lambda: lim.take("ip:10.0.0.1"), args.calls) * 1e6
    fd = security.shared_buckets_fd()
    try:
        for table, kw, label in (
            ("page_battles", {"slot": 7}, "bucket_shared_identity_us"),
            ("page_addresses", {}, "bucket_shared_address_us"),
        ):
            if table not in getattr(security, "TABLES", ()):
                out[label] = "no such table"
                continue
            sl = security.SharedRateLimiter(1.0, 1e9, fd, table)
            out[label] = best(lambda sl=sl, kw=kw: sl.take("ip:10.0.0.1", **kw), args.calls) * 1e6
    finally:
        os.close(fd)
    print(json.dumps({k: round(x, 2) if isinstance(x, float) else x for k, x in out.items()}))


if __name__ == "__main__":
    main()
