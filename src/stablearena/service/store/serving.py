"""The processes serving held battles and the battles a dead one left mid-turn (issue 44,
item 4; docs/guides/live-arena.md, "A crash mid-battle").

Each ``serve`` worker registers itself in ``serving_processes`` at its first heartbeat and
renews it; a held battle whose turn is generating carries its owner (``held_battles.owner``,
cleared when the turn ends). A live worker closes, at its start and then every
``BEAT_SECONDS``, the battles in flight whose owner is dead — its heartbeat older than
``STALE_SECONDS`` or, on the same machine (:func:`this_host`), its pid gone — at their last
complete turn (votable again) or, with none, as failed. Battles a host streams while alive are
never touched: their owner's heartbeat is fresh. A process stopped cleanly closes its own
(:func:`leave`). The heartbeats are compared with this host's clock: the hosts' clocks must
agree to well within ``STALE_SECONDS`` (NTP does)."""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .tables import battle_turns, battles, held_battles, serving_processes

__all__ = [
    "BEAT_SECONDS",
    "STALE_SECONDS",
    "CRASHED",
    "this_host",
    "beat",
    "leave",
    "in_flight",
    "close_orphans",
    "dead_owners",
    "recover",
]

#: How often a serving process renews its heartbeat and looks for battles dead ones left.
BEAT_SECONDS = 10.0
#: A heartbeat older than this is a dead process's: six beats missed (a worker busy with a
#: fit or a slow database still beats well within it; its writes wait at most seconds).
STALE_SECONDS = 6 * BEAT_SECONDS
#: The failure stored on a battle closed with no complete turn.
CRASHED = "the process serving this battle stopped before a turn was complete"


def this_host() -> str:
    """This machine as a process table sees it: the host name, the kernel's boot id and the
    PID namespace — two machines that share a name (cloned images), or two containers of one
    machine, never take each other's pids for their own; a machine booted again is another.
    ``""`` where these cannot be read (not Linux): there only heartbeats tell a dead process."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{socket.gethostname()}#{boot}#{ns}"[:300]


def beat(conn: Connection, process: str, now: float) -> None:
    """Renew the heartbeat of ``process``, registering it (host, pid) at its first beat."""
    done = conn.execute(
        serving_processes.update().where(serving_processes.c.id == process).values(beat_at=now)
    ).rowcount
    if not done:
        conn.execute(
            serving_processes.insert().values(
                id=process, host=this_host(), pid=os.getpid(), started_at=now, beat_at=now
            )
        )


def leave(conn: Connection, process: str, ttl: float) -> dict[str, str]:
    """A clean stop of ``process``: the battles whose turn it is still generating are closed
    as a dead process's would be (:func:`close_orphans`; the generations are cancelled next,
    and their turns are not kept), and its row is removed. Returns battle id → new status."""
    closed = close_orphans(conn, {process}, time.time(), ttl)
    conn.execute(serving_processes.delete().where(serving_processes.c.id == process))
    return closed


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def in_flight(conn: Connection) -> list[Any]:
    """The held battles whose turn is generating, with their owner's row (host, pid,
    heartbeat; None when the owner is not registered): reads only the battles in flight (an
    index on ``owner``)."""
    return conn.execute(
        sa.select(
            held_battles.c.battle_id,
            held_battles.c.owner,
            serving_processes.c.host,
            serving_processes.c.pid,
            serving_processes.c.beat_at,
        )
        .select_from(
            held_battles.outerjoin(
                serving_processes, serving_processes.c.id == held_battles.c.owner
            )
        )
        .where(held_battles.c.owner.is_not(None), held_battles.c.status == "served")
    ).all()


def dead_owners(rows: list[Any], me: str, now: float) -> set[str]:
    """The owners among ``rows`` (of :func:`in_flight`) that are dead: not this process, and
    unregistered, with a heartbeat older than :data:`STALE_SECONDS`, or on this machine
    without their pid."""
    host = this_host()
    dead = set()
    for r in rows:
        if r.owner == me:
            continue
        if r.beat_at is None or now - r.beat_at > STALE_SECONDS:
            dead.add(r.owner)
        elif host and r.host == host and not _pid_alive(int(r.pid)):
            dead.add(r.owner)
    return dead


def close_orphans(
    conn: Connection, owners: set[str], now: float, ttl: float, legacy: bool = False
) -> dict[str, str]:
    """Close the battles in flight of the dead ``owners`` — and, with ``legacy``, battles
    served before owners were recorded (``owner`` NULL) whose last activity (served, or a turn
    stored) is more than ``ttl`` ago — at their last complete turn: ``complete``, votable for
    ``ttl`` seconds from ``now``; a battle with no complete turn ``failed`` (:data:`CRASHED`),
    no longer open for the caps. Each update is guarded by the owner it was read with, so a
    battle that changed meanwhile is left alone. Returns battle id → its new status."""
    ids = []
    if owners:
        ids = [
            (bid, owner)
            for bid, owner in conn.execute(
                sa.select(held_battles.c.battle_id, held_battles.c.owner).where(
                    held_battles.c.owner.in_(sorted(owners)), held_battles.c.status == "served"
                )
            ).all()
        ]
    if legacy:
        last = (
            sa.select(sa.func.max(battle_turns.c.asked_at))
            .where(battle_turns.c.battle_id == held_battles.c.battle_id)
            .scalar_subquery()
        )
        old = conn.execute(
            sa.select(held_battles.c.battle_id).where(
                held_battles.c.owner.is_(None),
                held_battles.c.status == "served",
                held_battles.c.served_at < now - ttl,
                sa.func.coalesce(last, 0.0) < now - ttl,
            )
        ).all()
        ids += [(r.battle_id, None) for r in old]
    closed: dict[str, str] = {}
    for bid, owner in ids:
        turns = conn.execute(
            sa.select(sa.func.count()).where(battle_turns.c.battle_id == bid)
        ).scalar_one()
        mine = held_battles.c.owner.is_(None) if owner is None else held_battles.c.owner == owner
        where = (held_battles.c.battle_id == bid, held_battles.c.status == "served", mine)
        if turns:
            changed = conn.execute(
                held_battles.update().where(*where).values(status="complete", owner=None)
            ).rowcount
            if changed:
                conn.execute(
                    battles.update().where(battles.c.id == bid).values(expires_at=now + ttl)
                )
                closed[bid] = "complete"
        else:
            changed = conn.execute(
                held_battles.update()
                .where(*where)
                .values(
                    status="failed", failure=CRASHED, completed_at=now, owner=None, open_until=None
                )
            ).rowcount
            if changed:
                closed[bid] = "failed"
    return closed


def recover(conn: Connection, me: str, ttl: float, legacy: bool = False) -> dict[str, str]:
    """One look (at a worker's start with ``legacy``, then every :data:`BEAT_SECONDS`): renew
    this process's heartbeat, close the battles dead processes left mid-turn
    (:func:`close_orphans`) and forget dead processes that own nothing any more."""
    now = time.time()
    beat(conn, me, now)
    dead = dead_owners(in_flight(conn), me, now)
    closed = close_orphans(conn, dead, now, ttl, legacy)
    conn.execute(
        serving_processes.delete().where(
            serving_processes.c.beat_at < now - 10 * STALE_SECONDS,
            ~sa.exists().where(held_battles.c.owner == serving_processes.c.id),
        )
    )
    return closed
