"""One arena's view across three hosts (issue 44, item 6; docs/guides/several-hosts.md):

1. ``--annotators N``: new annotators behind three hosts. Each of N new keys takes ``--each``
   API battles (of the 15 pairs of six models), each battle drawn from the next host in turn
   and voted on through the one after it (straight to the hosts: the order that exposes a host
   whose view of the annotator's judged pairs lags); counts the battles refused with 503.
2. ``--votes V``: the public board at V stored votes. The hosts are stopped, V votes of
   ``--models`` models by ``--voters`` annotators (a ``--held`` share of them page battles with
   a prompt category and both answers' style counts) are written into PostgreSQL with COPY,
   the pair counts summed from them in SQL, and the hosts started again. Then, under a light
   load (``--load-api`` API threads through HAProxy), for the first fit and ``--fits`` more:
   how long after the fit's publication (its ``fitted_at``) its boards were stored (the one
   drawing, ``public_boards.seconds``) and every host's ``/leaderboard`` named it
   (time-to-agree), whether the three hosts' pages were then byte for byte the same; and the
   time of a ``/leaderboard`` request on each host while following the fits (the request that
   drew the first boards included) and, at the end, ``--renders`` requests each.

    nice -n 10 env PYTHONPATH=src:tests python bench/bench_hosts_view.py --annotators 75
    nice -n 10 env PYTHONPATH=src:tests python bench/bench_hosts_view.py --votes 1000000

Needs PostgreSQL and HAProxy (tests/hosts.py's cluster; root for the namespaces).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hosts import Cluster, Load, tmpdir  # noqa: E402

FIT = re.compile(r"\(fit (\d+), vote (\d+)\)")


def new_annotators(args: argparse.Namespace) -> dict[str, object]:
    settings = "[arena]\nrefit_seconds = 1\nrefit_votes = 50\n"
    with Cluster(tmpdir(), n=3, slow=0.0, settings=settings) as c:
        admin = {"Authorization": f"Bearer {c.admin_key}"}
        for m in ("extra-1", "extra-2", "extra-3"):  # six models: 15 pairs
            httpx.post(c.url + "/v1/admin/models", json={"name": m}, headers=admin, timeout=30)
        time.sleep(2)  # every host's registry has them (poll_seconds)
        refused: list[tuple[int, int, str]] = []
        served = [0]
        lock = threading.Lock()

        def annotator(k: int) -> None:
            r = httpx.post(
                c.url + "/v1/admin/annotators",
                json={"name": f"new-{uuid.uuid4().hex[:10]}", "role": "annotator"},
                headers=admin,
                timeout=30,
            )
            key = {"Authorization": f"Bearer {r.json()['key']}"}
            for b in range(args.each):
                host, voter = c.hosts[(k + b) % 3], c.hosts[(k + b + 1) % 3]
                got = httpx.post(host.url + "/v1/battles", json={}, headers=key, timeout=30)
                if got.status_code != 200:
                    with lock:
                        refused.append((k, b + 1, f"{got.status_code} {got.text[:120]}"))
                    continue
                bid = got.json()["battles"][0]["battle_id"]
                v = httpx.post(
                    voter.url + f"/v1/battles/{bid}/vote",
                    json={"outcome": "model_a"},
                    headers=key,
                    timeout=30,
                )
                with lock:
                    served[0] += 1
                    if v.status_code != 200:
                        refused.append((k, b + 1, f"vote {v.status_code} {v.text[:120]}"))

        threads = [
            threading.Thread(
                target=lambda j=j: [annotator(k) for k in range(j, args.annotators, 4)]
            )
            for j in range(4)
        ]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {
            "annotators": args.annotators,
            "battles_asked": args.annotators * args.each,
            "battles_served": served[0],
            "refused": len(refused),
            "refused_503": sum(1 for r in refused if r[2].startswith("503")),
            "examples": refused[:10],
            "seconds": round(time.monotonic() - t0, 1),
            "netns": c.netns,
        }


def fill(c: Cluster, args: argparse.Namespace) -> dict[str, float]:
    """``args.votes`` votes written with COPY (see the module docstring)."""
    import psycopg

    rng = np.random.default_rng(0)
    t0 = time.monotonic()
    assert c.pg is not None
    dsn = f"host=127.0.0.1 port={c.pg.port} user={c.pg.user} dbname=arena"
    now = time.time()
    with psycopg.connect(dsn, autocommit=False) as conn:
        cur = conn.cursor()
        cur.execute("SELECT id FROM models ORDER BY id")
        ids = [r[0] for r in cur.fetchall()]
        for k in range(len(ids), args.models):
            cur.execute(
                "INSERT INTO models (name, added_at) VALUES (%s, %s) RETURNING id",
                (f"bench-model-{k:03d}", now - 40 * 86400),
            )
            ids.append(cur.fetchone()[0])
        models = np.array(ids[: args.models])
        voters = []
        for k in range(args.voters):
            cur.execute(
                "INSERT INTO annotators (name, role, created_at) VALUES (%s, 'annotator', %s) "
                "RETURNING id",
                (f"bench-voter-{k:05d}", now - 40 * 86400),
            )
            voters.append(cur.fetchone()[0])
        voters_a = np.array(voters)
        strength = rng.normal(0, 1, len(models))
        n = args.votes
        a = rng.integers(0, len(models), n)
        b = (a + rng.integers(1, len(models), n)) % len(models)
        who = voters_a[rng.integers(0, len(voters_a), n)]
        p = 1 / (1 + np.exp(strength[b] - strength[a]))
        u = rng.random(n)
        outcome = np.where(u < 0.1, 2, np.where(u < 0.1 + 0.9 * p, 0, 1))
        at = now - 30 * 86400 * rng.random(n)
        at.sort()
        bids = [uuid.UUID(int=int(x)).hex for x in rng.integers(0, 2**63, n)]
        held = rng.random(n) < args.held
        cats = np.array(["math", "code", "writing", "other"])[rng.integers(0, 4, n)]
        step = 200_000
        for lo in range(0, n, step):
            hi = min(lo + step, n)
            with cur.copy(
                "COPY battles (id, annotator_id, model_a, model_b, strategy, served_at, "
                "expires_at, anony) FROM STDIN"
            ) as cp:
                for i in range(lo, hi):
                    cp.write_row(
                        (
                            bids[i],
                            int(who[i]),
                            int(models[a[i]]),
                            int(models[b[i]]),
                            "bench",
                            float(at[i]),
                            float(at[i]) + 3600,
                            True,
                        )
                    )
            with cur.copy(
                "COPY votes (battle_id, revision, outcome, annotator_id, model_a, model_b, "
                "created_at, first_at, superseded) FROM STDIN"
            ) as cp:
                for i in range(lo, hi):
                    cp.write_row(
                        (
                            bids[i],
                            0,
                            int(outcome[i]),
                            int(who[i]),
                            int(models[a[i]]),
                            int(models[b[i]]),
                            float(at[i]) + 5,
                            float(at[i]) + 5,
                            False,
                        )
                    )
            with cur.copy(
                "COPY held_battles (battle_id, prompt, category, status, served_at, "
                "completed_at) FROM STDIN"
            ) as cp:
                for i in np.flatnonzero(held[lo:hi]) + lo:
                    cp.write_row(
                        (
                            bids[i],
                            "a prompt",
                            str(cats[i]),
                            "complete",
                            float(at[i]),
                            float(at[i]) + 2,
                        )
                    )
            with cur.copy(
                "COPY battle_answers (battle_id, side, model_id, text, params, style_tokens, "
                "style_headers, style_lists, style_bold) FROM STDIN"
            ) as cp:
                for i in np.flatnonzero(held[lo:hi]) + lo:
                    for side, m in (("a", a[i]), ("b", b[i])):
                        cp.write_row(
                            (
                                bids[i],
                                side,
                                int(models[m]),
                                "an answer",
                                "{}",
                                int(rng.integers(20, 400)),
                                int(rng.integers(0, 4)),
                                int(rng.integers(0, 6)),
                                int(rng.integers(0, 5)),
                            )
                        )
        # the pair counts the hot path keeps, summed from the votes (i < j: wins are i's)
        cur.execute(
            """INSERT INTO pair_counts (i, j, annotator_id, wins, losses, ties, ties_both_bad)
            SELECT least(model_a, model_b), greatest(model_a, model_b), annotator_id,
              sum(CASE WHEN (outcome = 0 AND model_a < model_b)
                        OR (outcome = 1 AND model_b < model_a) THEN 1 ELSE 0 END),
              sum(CASE WHEN (outcome = 1 AND model_a < model_b)
                        OR (outcome = 0 AND model_b < model_a) THEN 1 ELSE 0 END),
              sum(CASE WHEN outcome = 2 THEN 1 ELSE 0 END),
              sum(CASE WHEN outcome = 3 THEN 1 ELSE 0 END)
            FROM votes WHERE NOT superseded GROUP BY 1, 2, 3
            ON CONFLICT (i, j, annotator_id) DO UPDATE SET
              wins = pair_counts.wins + excluded.wins,
              losses = pair_counts.losses + excluded.losses,
              ties = pair_counts.ties + excluded.ties,
              ties_both_bad = pair_counts.ties_both_bad + excluded.ties_both_bad"""
        )
        conn.commit()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        cells = conn.execute("SELECT count(*) FROM pair_counts").fetchone()[0]
    return {"fill_seconds": round(time.monotonic() - t0, 1), "cells": cells}


def board_at_votes(args: argparse.Namespace) -> dict[str, object]:
    settings = "[arena]\nrefit_seconds = 5\nrefit_votes = 2000\n"
    with Cluster(tmpdir(), n=3, slow=0.02, settings=settings) as c:
        for h in c.hosts:
            c.stop_host(h)
        out: dict[str, object] = {"votes": args.votes, **fill(c, args)}
        t0 = time.monotonic()
        threads = [threading.Thread(target=c.start_host, args=(h,)) for h in c.hosts]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out["hosts_start_seconds"] = round(time.monotonic() - t0, 1)
        for h in c.hosts:
            c.ready(h)
            c.wait_state(h.name, "UP", 60)
        load = Load(c.url, c.admin_key, page=0, api=args.load_api, api_rate=args.api_rate).start()
        seen: list[dict[str, object]] = []
        renders: dict[str, list[float]] = {h.name: [] for h in c.hosts}
        last = 0
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline and len(seen) < args.fits + 1:
            bodies = {}
            for h in c.hosts:
                t = time.perf_counter()
                r = httpx.get(h.url + "/leaderboard", timeout=600)
                renders[h.name].append(time.perf_counter() - t)
                m = FIT.search(r.text)
                bodies[h.name] = (int(m.group(1)) if m else 0, r.text)
            ids = {v[0] for v in bodies.values()}
            if len(ids) == 1 and (fid := ids.pop()) > last:
                agreed = time.time()
                row = c.sql(
                    # public_boards keeps the fit's time (its fits row may be gone: keep_fits)
                    "SELECT fitted_at, as_of_vote, drawn_at, seconds FROM public_boards "
                    "WHERE fit_id = %s",
                    fid,
                )[0]
                seen.append(
                    {
                        "fit": fid,
                        "as_of_vote": row[1],
                        "drawing_s": round(row[3], 2),
                        "stored_after_fit_s": round(row[2] - row[0], 2),
                        "all_hosts_after_fit_s": round(agreed - row[0], 2),
                        "identical": len({v[1] for v in bodies.values()}) == 1,
                    }
                )
                print(json.dumps(seen[-1]), flush=True)
                last = fid
            time.sleep(0.2)
        after: dict[str, list[float]] = {h.name: [] for h in c.hosts}
        for _ in range(args.renders):  # the stored board's page, once it is drawn
            for h in c.hosts:
                t = time.perf_counter()
                httpx.get(h.url + "/leaderboard?style=true", timeout=600)
                after[h.name].append(time.perf_counter() - t)
        load.stop()
        out["fits"] = seen
        out["render_ms_once_drawn"] = {
            k: {"median": round(1000 * statistics.median(v), 1), "max": round(1000 * max(v), 1)}
            for k, v in after.items()
        }
        out["render_ms"] = {
            k: {
                "median": round(1000 * statistics.median(v), 1),
                "max": round(1000 * max(v), 1),
                "n": len(v),
            }
            for k, v in renders.items()
            if v
        }
        out["load"] = {"api_votes": len(load.acked), "failed": len(load.failed)}
        out["netns"] = c.netns
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--annotators", type=int, default=0)
    ap.add_argument("--each", type=int, default=14, help="battles per new annotator (≤ 15)")
    ap.add_argument("--votes", type=int, default=0)
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--voters", type=int, default=500)
    ap.add_argument("--held", type=float, default=0.1)
    ap.add_argument("--fits", type=int, default=2, help="fits after the first to follow")
    ap.add_argument("--seconds", type=float, default=900)
    ap.add_argument("--load-api", type=int, default=1)
    ap.add_argument("--renders", type=int, default=20, help="page requests per host at the end")
    ap.add_argument("--api-rate", type=float, default=20.0)
    args = ap.parse_args()
    print(f"load before: {os.getloadavg()}", flush=True)
    if args.annotators:
        print(json.dumps({"new_annotators": new_annotators(args)}, default=str), flush=True)
    if args.votes:
        print(json.dumps({"board_at_votes": board_at_votes(args)}, default=str), flush=True)
    print(f"load after: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
