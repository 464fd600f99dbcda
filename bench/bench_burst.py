"""A crowd at once (issue 42 item 5): N page battles started in the same instant against a slow
local model server (the demo server, each word ``--slow`` seconds apart), through one ``serve``
worker with ``--concurrency`` call slots per model and ``arena_page.max_queue_wait``.

Each visitor is a new page identity that starts one battle, reads its stream to the end and
votes on a complete battle (tests/arena_process.py's ``page_burst``). Printed: the time to the
first sign of where the visitor stands — a refusal, a queued state, or the first answer piece —
max and p50 over all visitors; the counts of battles queued (a side told its place before its
answer), refused (503 busy), served (complete and voted), failed, and lost (an acknowledged vote
missing from the export); the served battles' time to the first answer piece; one battle started
``--late`` seconds after the burst, as the issue measured. The worker's CPU seconds and the load
(``os.getloadavg``) are printed too. Before the burst, ``--warm`` battles (default: one per
slot) are read to the end so that the models' call times are measured, as in an arena that has
been serving (``--warm 0``: a cold worker, which queues one round of slots per model).

    nice -n 10 python bench/bench_burst.py [--battles 300] [--concurrency 4] [--slow 0.1]
        [--max-queue-wait 30] [--late 2] [--warm N]

``--sweep 2,4,8,16`` measures instead, for each per-model concurrency, a burst of ``--battles``
that are all queued (``max_queue_wait`` a day): answers per second (two per battle, over the
time to the last answer's end), the time to the first answer piece p50 / p95 / max, and the
worker's CPU per battle.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from arena_process import BURST_LIMITS, page_burst, page_server  # noqa: E402

from stablearena.judging.endpoints.demo_server import DemoServer  # noqa: E402

MODELS = ("demo-ace", "demo-wild")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def first_sign(rec: dict) -> float:
    """Seconds to the first line that tells the visitor where they stand (not the battle id)."""
    for t, e in rec["events"]:
        if "refused" in e or "state" in e or "delta" in e or e.get("done"):
            return t
    return float("inf")


def first_piece(rec: dict) -> float:
    return next((t for t, e in rec["events"] if "delta" in e), float("nan"))


async def burst_and_late(url: str, n: int, late: float) -> tuple[list[dict], dict | None]:
    async def later() -> dict | None:
        if late < 0:
            return None
        await asyncio.sleep(late)
        return (await page_burst(url, 1))[0]

    got, one = await asyncio.gather(page_burst(url, n), later())
    return got, one


def summary(got: list[dict], export: pd.DataFrame, warm: list[dict]) -> dict:
    served = [r for r in got if r["status"] == 200]
    queued = sum(any("state" in e for _, e in r["events"]) for r in served)
    complete = [r for r in served if r["events"][-1][1].get("status") == "complete"]
    acked = {r["battle_id"] for r in got + warm if r["vote"] == 200}
    ids = set(export[[c for c in export.columns if c in ("battle_id", "question_id")][0]])
    lost = len(acked - ids) if len(export) else len(acked)
    return {
        "visitors": len(got),
        "first sign max s": max(first_sign(r) for r in got),
        "first sign p50 s": statistics.median(first_sign(r) for r in got),
        "queued": queued,
        "refused": sum(r["status"] == 503 and r["error"]["code"] == "busy" for r in got),
        "other refusals": sum(r["status"] not in (200, 503) for r in got),
        "served": len(complete),
        "voted (warm-up too)": len(acked),
        "failed": len(served) - len(complete),
        "lost": lost,
        "first piece p50 s": pct([first_piece(r) for r in complete], 0.5),
        "first piece max s": pct([first_piece(r) for r in complete], 1.0),
    }


def run_one(args: argparse.Namespace, concurrency: int, max_wait: float, late: float) -> dict:
    with DemoServer(seed=0) as demo, tempfile.TemporaryDirectory() as tmp:
        config = BURST_LIMITS + f"max_queue_wait = {max_wait:g}\n\n"
        model = f"max_concurrency = {concurrency}\n"
        with page_server(Path(tmp), demo.base_url, MODELS, args.slow, config, model) as server:
            pid = server.proc.pid
            warm = asyncio.run(page_burst(server.url, args.warm)) if args.warm else []
            c0, t0 = cpu_seconds(pid), time.perf_counter()
            got, one = asyncio.run(burst_and_late(server.url, args.battles, late))
            wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - c0
            admin = {"Authorization": f"Bearer {server.admin_key}"}
            raw = httpx.get(server.url + "/v1/export", headers=admin, timeout=120).content
            export = pd.read_json(io.BytesIO(raw), lines=True, dtype=False)
            out = summary(got + ([one] if one else []), export, warm)
            ends = [r["events"][-1][0] for r in got if r["status"] == 200]
            out.update(
                wall=wall,
                worker_cpu=cpu,
                answers_per_s=2 * out["served"] / max(ends) if ends else 0.0,
                late=one,
            )
            return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--battles", type=int, default=300)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--slow", type=float, default=0.1)
    ap.add_argument("--max-queue-wait", type=float, default=30.0)
    ap.add_argument("--late", type=float, default=2.0)
    ap.add_argument("--sweep", default="")
    ap.add_argument(
        "--warm",
        type=int,
        default=-1,
        help="battles read to the end before the burst, so that the models' call times are "
        "measured (default: one per slot; 0: a cold worker)",
    )
    args = ap.parse_args()
    if args.warm < 0:
        args.warm = args.concurrency
    print(f"load before: {os.getloadavg()}")
    if args.sweep:
        for c in [int(x) for x in args.sweep.split(",")]:
            s = run_one(args, c, 86_400.0, -1.0)
            print(
                f"concurrency {c}: {args.battles} battles, answers/s {s['answers_per_s']:.2f}, "
                f"first piece p50 {s['first piece p50 s']:.2f} s max {s['first piece max s']:.2f}"
                f" s, queued {s['queued']}, served {s['served']}, failed {s['failed']}, lost "
                f"{s['lost']}, worker CPU {s['worker_cpu'] / args.battles * 1e3:.1f} ms/battle, "
                f"load {os.getloadavg()[0]:.2f}"
            )
        return
    s = run_one(args, args.concurrency, args.max_queue_wait, args.late)
    late = s.pop("late")
    print(
        f"{args.battles} battles at once, {len(MODELS)} models × {args.concurrency} slots, "
        f"answers {args.slow:g} s/word, max_queue_wait {args.max_queue_wait:g} s, after "
        f"{args.warm} warm-up battles:"
    )
    for k, v in s.items():
        print(f"  {k}: {v:.2f}" if isinstance(v, float) else f"  {k}: {v}")
    if late is not None:
        kind = "refused" if late["status"] != 200 else "served"
        print(
            f"  a battle started {args.late:g} s after the burst: {kind} "
            f"({late['status']}), first sign after {first_sign(late):.2f} s"
            + (f": {late['error']['message']}" if late["error"] else "")
        )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
