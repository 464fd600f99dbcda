"""``stablearena auto --db``: an uninterrupted run against one killed with SIGKILL halfway and
resumed, on the demo arena (the 8 demo models, the 5 demo judges, the 200 demo prompts, served
by the demo server over loopback HTTP — the configuration of ``auto --demo``).

Per round, interleaved: (A) one run to ``--budget`` judge calls on a fresh SQLite file; (B) the
same run killed once its journal holds half the budget's judgements, then run again to the
end. Each run gets a fresh demo server, whose request counts are the calls really made (the
calls in flight at the kill included). Prints per round the wall time (B: both processes), the
judge and model requests the server saw, the judge calls the run reports, and the judgements
and answers the journal holds twice (none expected); then medians.

    nice python bench/bench_auto_resume.py --budget 400 --rounds 3
    nice python bench/bench_auto_resume.py --budget 400 --rounds 3 --demo   # auto --demo
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stablearena.judging.endpoints.demo import DEMO_MODELS, demo_prompts  # noqa: E402
from stablearena.judging.endpoints.demo_server import DemoServer  # noqa: E402
from stablearena.judging.judges import demo_judges  # noqa: E402
from stablearena.service import store  # noqa: E402


def _files(base_url: str, tmp: Path) -> list[str]:
    models, judges, prompts = tmp / "models.toml", tmp / "judges.toml", tmp / "prompts.jsonl"
    models.write_text(
        "".join(
            f'[[models]]\nname = "{m.name}"\nbase_url = "{base_url}"\nmodel = "{m.name}"\n\n'
            for m in DEMO_MODELS
        )
    )
    judges.write_text(
        "".join(
            f'[[judges]]\nname = "{j.name}"\nbase_url = "{base_url}"\nmodel = "{j.name}"\n\n'
            for j in demo_judges(base_url)
        )
    )
    prompts.write_text("\n".join(json.dumps(p) for p in demo_prompts(200)))
    return [str(prompts), "--models", str(models), "--judges", str(judges)]


def _judged(url: str) -> int:
    engine = store.make_engine(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.exec_driver_sql(
                    "SELECT count(*) FROM auto_journal WHERE kind = 'judgement'"
                ).scalar_one()
            )
    except Exception:  # noqa: BLE001 - not created yet
        return 0
    finally:
        engine.dispose()


def _repeats(url: str) -> tuple[int, int]:
    """Judgements made twice (a pair and prompt judged again) and answers generated twice (a
    model and prompt), from the journal."""
    from collections import Counter

    engine = store.make_engine(url)
    try:
        records = store.auto.journal_records(engine)
    finally:
        engine.dispose()
    judged = Counter(
        (*sorted((r["x"], r["y"])), r["prompt_id"]) for r in records if r["type"] == "judgement"
    )
    answered = Counter((r["model"], r["prompt_id"]) for r in records if r["type"] == "answer")
    return sum(n - 1 for n in judged.values()), sum(n - 1 for n in answered.values())


def one(budget: int, kill: bool, tmp: Path, demo: bool = False) -> dict:
    """One run (A) or one killed-and-resumed run (B) on a fresh database and demo server
    (``demo``: ``auto --demo``, its own demo server, whose requests are not counted)."""
    db = tmp / f"run-{time.monotonic_ns()}.db"
    url = f"sqlite:///{db}"
    with DemoServer(seed=0) as server:
        args = ["--demo"] if demo else _files(server.base_url, tmp)
        out = tmp / "board.json"
        cmd = [sys.executable, "-m", "stablearena", "auto", *args, "--budget", str(budget),
               "--db", url, "--output", str(out)]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
        t0 = time.perf_counter()
        killed_at = None
        if kill:
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            while proc.poll() is None:
                n = _judged(url)
                if n >= budget // 4:  # half the budget's battles (two calls each)
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    killed_at = _judged(url)
                    break
                time.sleep(0.02)
            proc.stderr.close()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if done.returncode:
            raise RuntimeError(done.stderr)
        stats = {} if demo else server.stats()
    board = json.loads(out.read_text())
    judged_twice, answered_twice = _repeats(url)
    judges = {j.name for j in demo_judges("http://x")}
    requests = {
        "judge_requests": sum(v["requests"] for k, v in stats.items() if k in judges),
        "model_requests": sum(v["requests"] for k, v in stats.items() if k not in judges),
    }
    return {
        "seconds": seconds,
        **({} if demo else requests),
        "judge_calls": board["judge_calls"],
        "resumed": board["resumed"],
        "killed_at": killed_at,
        "judged_twice": judged_twice,
        "answered_twice": answered_twice,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--demo", action="store_true", help="run `auto --demo` (its requests are not counted)"
    )
    a = ap.parse_args()
    rows: dict[str, list[dict]] = {"A uninterrupted": [], "B killed + resumed": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for name, kill in (("A uninterrupted", False), ("B killed + resumed", True)):
                got = one(a.budget, kill, Path(tmp), a.demo)
                rows[name].append(got)
                print(f"round {r} {name}: {got}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    for name, rs in rows.items():
        med = {k: statistics.median(x[k] for x in rs) for k in rs[0] if k != "killed_at"}
        print(f"median {name}: " + ", ".join(f"{k} {v:g}" for k, v in med.items()))


if __name__ == "__main__":
    main()
