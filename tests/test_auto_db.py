"""``stablearena auto --db``: the automatic arena kept in the live arena's database, on SQLite
and PostgreSQL — a run killed with SIGKILL resumes without repeating a call and ends where an
unkilled run ends, and ``stablearena serve`` on that database shows the models, the judges as
annotators and every judgement as one vote (both orders judged, one verdict). Against the real local demo model server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
import sqlalchemy as sa
from arena_process import ServerProcess
from test_auto import PROMPTS, _toml, failing_arena

from stablearena.judging.auto_arena import AutoArena, AutoConfig
from stablearena.judging.endpoints.demo import DEMO_MODELS
from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.service import store
from stablearena.service.client import ArenaClient
from stablearena.service.journal import DatabaseJournal

JUDGES = ("judge-keen", "judge-fair", "judge-contrary")  # the judges of test_auto._toml
BUDGET = 160


@pytest.fixture(scope="module")
def server():
    with DemoServer(seed=0) as s:
        yield s


@pytest.fixture(params=["sqlite", "postgresql"])
def new_db(request, tmp_path):
    """A function making a new, empty database URL of the parameter's kind."""

    def make() -> str:
        name = "a" + uuid.uuid4().hex[:12]
        if request.param == "sqlite":
            return f"sqlite:///{tmp_path / (name + '.db')}"
        return request.getfixturevalue("postgres").create_database(name)

    return make


def _count(url: str, sql: str) -> int:
    engine = store.make_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.exec_driver_sql(sql).scalar_one())
    except sa.exc.SQLAlchemyError:  # not created yet
        return 0
    finally:
        engine.dispose()


def _journal(url: str) -> list[dict]:
    engine = store.make_engine(url)
    try:
        return store.auto.journal_records(engine)
    finally:
        engine.dispose()


def _command(server, tmp_path, db: str) -> list[str]:
    models, judges, prompts = _toml(server, tmp_path)
    return [sys.executable, "-m", "stablearena", "auto", str(prompts), "--models", str(models),
            "--judges", str(judges), "--budget", str(BUDGET), "--db", db, "--parallel", "4",
            "--seed", "7", "--design", "round-robin", "--rater", "m-elo",
            # probes off: a resumed run is compared battle for battle with an unkilled one, and
            # where a kill falls changes which batch a probe goes with (the budget's last
            # battles); probes in the database: tests/test_probes.py
            "--probe-share", "0"]  # fmt: skip


def _finish(cmd: list[str], out) -> tuple[dict, str]:
    done = subprocess.run(cmd + ["--output", str(out)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stdout + done.stderr


@pytest.mark.slow_on("sqlite")  # the PostgreSQL run stays in the default suite
def test_killed_run_resumes_and_serve_shows_it(server, tmp_path, new_db):
    # an unkilled run: the reference
    ref_db = new_db()
    ref, _ = _finish(_command(server, tmp_path, ref_db), tmp_path / "ref.json")
    assert ref["judge_calls"] == BUDGET and ref["stop_reason"] == "budget"
    # the same run killed with SIGKILL after 30 judgements, then run again
    db = new_db()
    cmd = _command(server, tmp_path, db)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first_line = proc.stdout.readline()  # the admin key of the new database, before any battle
    assert "admin key" in first_line
    admin_key = proc.stdout.readline().strip()
    deadline = time.monotonic() + 90
    judged = "SELECT count(*) FROM auto_journal WHERE kind = 'judgement'"
    while time.monotonic() < deadline and proc.poll() is None:
        if _count(db, judged) >= 30:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    before = [r for r in _journal(db) if r["type"] == "judgement"]
    assert 30 <= len(before) < BUDGET // 2
    assert _count(db, "SELECT count(*) FROM votes") == len(before)  # no half judgement
    board, log = _finish(cmd, tmp_path / "board.json")
    assert f"resumed: {len(before)} judgements replayed from --db" in log
    assert "admin key" not in log  # shown once, on creation
    records = _journal(db)
    after = [r for r in records if r["type"] == "judgement"]
    assert after[: len(before)] == before  # nothing lost or rewritten
    keys = [(*sorted((r["x"], r["y"])), r["prompt_id"]) for r in after]
    assert len(set(keys)) == len(keys)  # no judgement made twice
    assert sum(r["calls"] for r in after) == board["judge_calls"] == ref["judge_calls"]
    answers = [(r["model"], r["prompt_id"]) for r in records if r["type"] == "answer"]
    assert len(set(answers)) == len(answers)  # no answer generated twice
    ref_judged = [r for r in _journal(ref_db) if r["type"] == "judgement"]
    assert set(keys) == {(*sorted((r["x"], r["y"])), r["prompt_id"]) for r in ref_judged}
    assert board["models"] == ref["models"]  # the same leaderboard
    ok = [r for r in after if r["outcome"] is not None]
    assert _count(db, "SELECT count(*) FROM votes") == len(ok)
    failed = "SELECT count(*) FROM held_battles WHERE status = 'failed'"
    assert _count(db, failed) == len(after) - len(ok)

    # serve on the same database shows the result
    with ServerProcess(db, "--set", "arena.min_records=0", cwd=tmp_path) as s:
        admin = ArenaClient(s.url, admin_key, timeout=60)
        admin.refit()
        lb = admin.leaderboard(method="m-elo")
        assert {m["model"] for m in lb["models"]} == {m.name for m in DEMO_MODELS[:6]}
        assert sum(m["battles"] for m in lb["models"]) == 2 * len(ok)  # 1 vote, 2 models
        names = {a["name"] for a in admin._request("GET", "/v1/admin/annotators")["annotators"]}
        assert set(JUDGES) <= names  # one annotator per judge
        assert {a["annotator"] for a in admin.annotators()["annotators"]} <= set(JUDGES)
        rows = [json.loads(line) for line in admin.export().decode().splitlines()]
        admin.close()
    assert len(rows) == len(ok) and {r["judge"] for r in rows} <= set(JUDGES)
    pairs = Counter((*sorted((r["model_a"], r["model_b"])), r["prompt_id"]) for r in rows)
    assert set(pairs.values()) == {1}  # one vote per judgement (its verdict of both orders)
    assert all(r["strategy"] == "auto" and r["status"] == "complete" for r in rows)


def test_failures_are_failed_battles_never_votes(server, tmp_path):
    names = [m.name for m in DEMO_MODELS[:3]]
    models, judges = failing_arena(server, names)
    url = f"sqlite:///{tmp_path / 'f.db'}"
    configs = [m.endpoint for m in models]
    journal = DatabaseJournal(url, PROMPTS[:6], configs)
    assert journal.admin_key is not None
    r = AutoArena(models, judges, PROMPTS[:6], AutoConfig(budget=200), journal=journal).run()
    journal.close()
    stages = Counter(f.get("stage") for f in r.failures)
    assert stages["answer"] > 0 and stages["judge"] > 0
    ok = len(r.judgements) - len(r.failures)
    assert _count(url, "SELECT count(*) FROM votes") == ok
    engine = store.make_engine(url)
    with engine.connect() as conn:
        failed = conn.exec_driver_sql(
            "SELECT h.failure, b.expires_at FROM held_battles h JOIN battles b "
            "ON b.id = h.battle_id WHERE h.status = 'failed'"
        ).all()
        voted_failed = conn.exec_driver_sql(
            "SELECT count(*) FROM votes v JOIN held_battles h ON h.battle_id = v.battle_id "
            "WHERE h.status = 'failed'"
        ).scalar_one()
        endpoints = dict(conn.exec_driver_sql(
            "SELECT m.name, e.config FROM model_endpoints e JOIN models m ON m.id = e.model_id"
        ).all())  # fmt: skip
    engine.dispose()
    assert len(failed) == len(r.failures) and voted_failed == 0
    assert all(e == 0.0 for _, e in failed)  # never votable
    reasons = Counter(f.split(":")[0] for f, _ in failed)
    assert reasons["answer"] == stages["answer"] and reasons["judge mumbler"] == stages["judge"]
    assert set(endpoints) == {*names, "broken"}  # stored as serve's [[models]] are
    assert "http_500" in " ".join(f for f, _ in failed)


def test_a_database_of_another_run_or_a_bad_url_is_refused(server, tmp_path, cli):
    models, judges, prompts = _toml(server, tmp_path)
    url = f"sqlite:///{tmp_path / 'a.db'}"
    base = ["auto", prompts, "--judges", judges, "--budget", "2", "--db", url]
    code, _, err = cli(*base, "--models", models)
    assert code == 0, err
    fewer = tmp_path / "fewer.toml"
    fewer.write_text("\n".join(models.read_text().split("\n\n")[:3]))
    code, _, err = cli(*base, "--models", fewer)
    assert code == 2 and "belongs to another run" in err and "another --db" in err
    code, _, err = cli(*base, "--models", models, "--journal", tmp_path / "j.jsonl")
    assert code == 2 and "not both" in err
    bad = ["auto", prompts, "--models", models, "--judges", judges, "--db"]
    code, _, err = cli(*bad, "mysql://somewhere/x")
    assert code == 2 and "sqlite:///FILE or postgresql" in err
    (tmp_path / "not.db").write_text("not a database")
    code, _, err = cli(*bad, f"sqlite:///{tmp_path / 'not.db'}")
    assert code == 2 and "the database file is damaged" in err
    code, _, err = cli(*bad, f"sqlite:///{tmp_path / 'nowhere' / 'x.db'}")
    assert code == 2 and "does not exist" in err
    code, _, err = cli(*bad, "postgresql+psycopg://nobody@127.0.0.1:1/x")
    assert code == 2 and "cannot open the database" in err and "check the URL" in err


@pytest.mark.slow_on("sqlite")  # the PostgreSQL run stays in the default suite
def test_auto_beside_a_live_serve(server, tmp_path, new_db):
    """auto writing into the database (SQLite file or PostgreSQL) a live serve is using: both
    go on, nothing is lost, and serve counts the judges' votes once it refits."""
    url = new_db()
    with ServerProcess(url, "--set", "arena.min_records=0", cwd=tmp_path) as s:
        cmd = _command(server, tmp_path, url)
        cmd[cmd.index("--budget") + 1] = "80"
        board, _ = _finish(cmd, tmp_path / "live.json")
        admin = ArenaClient(s.url, s.admin_key, timeout=60)
        admin.refit()
        lb = admin.leaderboard(method="m-elo")
        admin.close()
    assert sum(m["battles"] for m in lb["models"]) == 2 * board["judgements"]
