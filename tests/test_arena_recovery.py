"""Battles that survive a crash, at the store (issue 44, item 4; docs/guides/live-arena.md,
"A crash mid-battle"), on SQLite and PostgreSQL: which serving processes count as dead, the
battles they left mid-turn closed at their last complete turn (or failed without one), a live
host's battles left alone, a late turn of a process believed dead not kept, the battles served
before owners were stored, and a visitor abandoning its battles without a vote. The same with
real ``serve`` processes killed with SIGKILL: tests/test_arena_crash.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest
import sqlalchemy as sa

from stablearena.service import store
from stablearena.service.store import serving
from stablearena.service.store.tables import battles, held_battles, serving_processes

TTL = 3600.0


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'arena.db'}"
    else:
        url = request.getfixturevalue("postgres").create_database("r" + uuid.uuid4().hex[:12])
    eng = store.make_engine(url)
    store.migrate(eng)
    with eng.begin() as conn:
        conn.execute(store.models.insert(), [{"name": n, "added_at": 0.0} for n in ("x", "y")])
        conn.execute(store.annotators.insert().values(name="v", role="annotator", created_at=0.0))
    yield eng
    eng.dispose()


def _answers(a: str, b: str) -> list[dict]:
    return [
        {"side": s, "model_id": m, "params": "{}", "attempts": 1, "text": t}
        for s, m, t in (("a", 1, a), ("b", 2, b))
    ]


def _battle(conn, owner: str | None, turns: int, now: float, served_at: float | None = None):
    """A held battle of annotator 1 with ``turns`` complete turns, then a turn generating by
    ``owner`` (its first turn when ``turns`` is 0); its id."""
    bid = uuid.uuid4().hex
    at = now if served_at is None else served_at
    row = {
        "id": bid, "annotator_id": 1, "model_a": 1, "model_b": 2, "strategy": "random",
        "propensity": None, "served_at": at, "expires_at": 0.0, "check": False,
    }  # fmt: skip
    held = {"prompt_id": "p", "prompt": "first", "category": "other", "address": "10.0.0.1"}
    held |= {"served_at": at, "open_until": at + TTL, "owner": owner}
    assert store.held.insert_held(conn, row, held, None) == []
    for t in range(1, turns + 1):
        got = store.held.finish_held(
            conn, bid, _answers(f"A{t}", f"B{t}"), None, at, TTL, t, 1, f"q{t}", owner=owner
        )
        assert got is True
        if t < turns or owner is not None:
            nxt = store.held.accept_turn(conn, bid, 1, f"q{t + 1}", at, 8, 4, 10_000, owner)
            assert isinstance(nxt, store.held.Turn), nxt
    return bid


def _process(conn, pid_id: str, host: str, pid: int, beat_at: float) -> None:
    conn.execute(
        serving_processes.insert().values(
            id=pid_id, host=host, pid=pid, started_at=beat_at, beat_at=beat_at
        )
    )


def _dead_pid() -> int:
    """The pid of a process of this machine that has exited (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _status(conn, bid: str) -> tuple[str, float, float | None]:
    r = conn.execute(
        sa.select(held_battles.c.status, battles.c.expires_at, held_battles.c.open_until)
        .join(battles, battles.c.id == held_battles.c.battle_id)
        .where(held_battles.c.battle_id == bid)
    ).one()
    return r.status, r.expires_at, r.open_until


def test_the_battles_of_dead_processes_are_closed_and_a_live_ones_left_alone(engine):
    """Of six battles mid-turn, those of a process with a stale heartbeat (another host), one
    of this machine whose pid is gone, and one never registered are closed — at turn 1,
    votable and taking follow-ups, or failed when no turn was complete — while a fresh
    heartbeat on another host and a live pid here keep theirs."""
    now = time.time()
    here = serving.this_host()
    with engine.begin() as conn:
        _process(conn, "stale", "elsewhere#1", os.getpid(), now - serving.STALE_SECONDS - 1)
        _process(conn, "fresh", "elsewhere#1", _dead_pid(), now)  # another machine's pid
        _process(conn, "gone", here, _dead_pid(), now)
        _process(conn, "alive", here, os.getpid(), now)
        ids = {
            "stale": _battle(conn, "stale", 1, now),
            "stale first turn": _battle(conn, "stale", 0, now),
            "fresh": _battle(conn, "fresh", 1, now),
            "gone": _battle(conn, "gone", 2, now),
            "alive": _battle(conn, "alive", 1, now),
            "unregistered": _battle(conn, "nobody", 1, now),
        }
        closed = serving.recover(conn, me="me", ttl=TTL)
    assert closed == {
        ids["stale"]: "complete",
        ids["stale first turn"]: "failed",
        ids["gone"]: "complete",
        ids["unregistered"]: "complete",
    }
    with engine.begin() as conn:
        for k in ("fresh", "alive"):
            assert _status(conn, ids[k])[0] == "served"
        for k in ("stale", "gone", "unregistered"):
            status, expires, open_until = _status(conn, ids[k])
            assert status == "complete" and expires > now and open_until == now + TTL
        assert _status(conn, ids["stale first turn"]) == ("failed", 0.0, None)
        assert store.held.conversation(conn, ids["gone"])["turns"] == 2  # its last complete
        # votable at its last complete turn, and it takes a follow-up
        assert store.held.accept_turn(conn, ids["stale"], 1, "again", now, 8, 4, 10_000, "me")
        vote = store.held.record_page_vote(conn, ids["gone"], 1, 1, now + 1, 60.0)
        assert vote.kind == "new"
        # the failed one no longer counts against the caps: 6 served, 1 voted, 1 failed
        assert store.held.open_held(conn, 1, "10.0.0.1", now + 1) == (4, 4)
        # the dead processes that own nothing more are kept (forgotten after 10 stale periods)
        left = set(conn.execute(sa.select(serving_processes.c.id)).scalars())
        assert left == {"stale", "fresh", "gone", "alive", "me"}
        assert serving.recover(conn, me="me", ttl=TTL) == {}  # nothing more to close


def test_a_late_turn_of_a_process_believed_dead_is_not_kept(engine):
    """A host whose heartbeat went stale while it streamed finishes its turn after another host
    closed the battle at turn 1: nothing of the late turn is stored, the battle stays at turn 1
    and the next follow-up (by a live host) is stored as turn 2."""
    now = time.time()
    with engine.begin() as conn:
        _process(conn, "slow", "elsewhere#1", 1, now - serving.STALE_SECONDS - 1)
        bid = _battle(conn, "slow", 1, now)
        assert serving.recover(conn, me="me", ttl=TTL) == {bid: "complete"}
        late = store.held.finish_held(
            conn, bid, _answers("late A", "late B"), None, now, TTL, 2, 1, "q2", owner="slow"
        )
        assert late is False
        assert store.held.conversation(conn, bid)["turns"] == 1
        assert _status(conn, bid)[0] == "complete"
        turn = store.held.accept_turn(conn, bid, 1, "q2 again", now, 8, 4, 10_000, "me")
        assert turn.turn == 2
        kept = store.held.finish_held(
            conn, bid, _answers("A2", "B2"), None, now, TTL, 2, 1, "q2 again", owner="me"
        )
        assert kept is True
        conv = store.held.conversation(conn, bid)
        assert conv["turns"] == 2 and conv["a"][-1]["content"] == "A2"


def test_a_clean_stop_closes_its_own_battles_and_forgets_itself(engine):
    """``leave`` (a host stopping with turns still generating): its battles are closed as a
    crash's, its row removed; another process's battles are left alone."""
    now = time.time()
    with engine.begin() as conn:
        serving.beat(conn, "me", now)
        serving.beat(conn, "peer", now)
        mine, first, peer = (_battle(conn, "me", 1, now), _battle(conn, "me", 0, now),
                             _battle(conn, "peer", 1, now))  # fmt: skip
        assert serving.leave(conn, "me", TTL) == {mine: "complete", first: "failed"}
        assert _status(conn, peer)[0] == "served"
        left = set(conn.execute(sa.select(serving_processes.c.id)).scalars())
        assert left == {"peer"}


def test_battles_served_before_owners_were_stored_are_closed_once_idle_for_the_ttl(engine):
    """A battle left ``served`` without an owner (a crash before migration 0012, or an older
    host's) is closed at a host's start once nothing happened to it for ``battle_ttl``; a
    recent one (an older host may still be streaming it) is left, and so it is by the beat."""
    now = time.time()
    with engine.begin() as conn:
        old = _battle(conn, None, 1, now, served_at=now - TTL - 5)
        conn.execute(
            held_battles.update().where(held_battles.c.battle_id == old).values(status="served")
        )
        recent = _battle(conn, None, 0, now)
        assert serving.recover(conn, me="me", ttl=TTL) == {}  # the beat: owners only
        assert serving.recover(conn, me="me", ttl=TTL, legacy=True) == {old: "complete"}
        assert _status(conn, recent)[0] == "served"


def test_a_visitor_abandons_its_battles_without_a_vote(engine):
    """``abandon_open``: every battle of the visitor without a vote that its cap counts —
    complete, or generating on a live host — is abandoned: not open, never votable, no
    follow-up; the voted one and another visitor's are untouched; the live host's turn still
    keeps what came, and the battle stays abandoned."""
    now = time.time()
    with engine.begin() as conn:
        conn.execute(store.annotators.insert().values(name="w", role="annotator", created_at=0))
        serving.beat(conn, "live", now)
        done = _battle(conn, None, 1, now)
        streaming = _battle(conn, "live", 1, now)
        voted = _battle(conn, None, 1, now)
        assert store.held.record_page_vote(conn, voted, 1, 1, now, 60.0).kind == "new"
        other = _battle(conn, None, 1, now)
        conn.execute(held_battles.update().where(held_battles.c.battle_id == other).values(
            annotator_id=2))  # fmt: skip
        assert store.held.open_held(conn, 1, None, now) == (2, 0)
        assert store.held.abandon_open(conn, 1, now) == [done, streaming]  # in serving order
        assert store.held.open_held(conn, 1, None, now) == (0, 0)
        assert store.held.abandon_open(conn, 1, now) == []
        for bid in (done, streaming):
            assert _status(conn, bid) == ("abandoned", 0.0, None)
            refused = store.held.plan_turn(conn, bid, 1, "more", now, 8, 4, 10_000)
            assert (refused.status, refused.code) == (409, "abandoned")
            assert store.held.record_page_vote(conn, bid, 1, 1, now, 60.0).kind == "ended"
        assert _status(conn, voted)[0] == "complete" and _status(conn, other)[0] == "complete"
        kept = store.held.finish_held(
            conn, streaming, _answers("A2", "B2"), None, now, TTL, 2, 1, "q2", owner="live"
        )
        assert kept is True and _status(conn, streaming)[0] == "abandoned"
    assert store.held.closed_battles(engine, [done, streaming, voted, other]) == {
        done, streaming, voted,
    }  # fmt: skip
