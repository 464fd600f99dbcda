"""The hot path's statements: a battle served, a vote recorded with its pair count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .tables import OUTCOMES, held_battles

# PostgreSQL alike, on the driver's own cursor inside the caller's transaction: SQLAlchemy's
# statement and result machinery costs several times the database work itself (measured on
# SQLite: a vote's three statements 0.18 ms of CPU through ``exec_driver_sql``, 0.03 ms on the
# cursor). Driver errors reach the :class:`Writer` unwrapped; it classifies them itself.
_HOT_SQL: dict[str, str] = {
    "battle": "INSERT INTO battles (id, annotator_id, model_a, model_b, strategy, propensity, "
    "served_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "revision": "SELECT value FROM meta WHERE key = 'revision'",
    "judged": "SELECT 1 FROM pair_counts WHERE i = ? AND j = ? AND annotator_id = ? "
    "AND wins + losses + ties + ties_both_bad > 0",
    "lookup": "SELECT b.annotator_id, b.model_a, b.model_b, b.expires_at, v.id, v.revision, "
    "v.outcome, v.created_at, v.first_at, b.anony FROM battles b LEFT JOIN votes v "
    "ON v.battle_id = b.id AND v.superseded = false WHERE b.id = ?",
    "vote": "INSERT INTO votes (battle_id, revision, outcome, annotator_id, model_a, model_b, "
    "created_at, first_at, superseded) VALUES (?, ?, ?, ?, ?, ?, ?, ?, false) RETURNING id",
    "supersede": "UPDATE votes SET superseded = true WHERE id = ?",
    "count": "INSERT INTO pair_counts (i, j, annotator_id, wins, losses, ties, ties_both_bad) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (i, j, annotator_id) DO UPDATE SET "
    "wins = pair_counts.wins + excluded.wins, losses = pair_counts.losses + excluded.losses, "
    "ties = pair_counts.ties + excluded.ties, "
    "ties_both_bad = pair_counts.ties_both_bad + excluded.ties_both_bad",
}
_HOT_BY_DIALECT: dict[str, dict[str, str]] = {}


def _hot(conn: Connection, name: str) -> str:
    dialect = conn.dialect.name
    table = _HOT_BY_DIALECT.get(dialect)
    if table is None:
        style = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        table = _HOT_BY_DIALECT[dialect] = {k: v.replace("?", style) for k, v in _HOT_SQL.items()}
    return table[name]


_BATTLE_COLUMNS = (
    "id",
    "annotator_id",
    "model_a",
    "model_b",
    "strategy",
    "propensity",
    "served_at",
    "expires_at",
)


def cursor(conn: Connection) -> Any:
    """A cursor of the driver's connection under ``conn`` (in its transaction)."""
    return conn.connection.dbapi_connection.cursor()


def registry_changed(cur: Any, conn: Connection, revision: int | None) -> bool:
    """Whether the models, keys or settings changed (through any worker) since ``revision``,
    the registry revision a worker decided by (``None``: do not check).

    Read once per transaction, at its first write that asks (a group commit's writes were all
    submitted before it began, so a change committed before any of them was submitted is
    seen), and again after :func:`bump_revision` in the same transaction. One read per batch
    instead of per write: on PostgreSQL each read is a round trip of the single writer."""
    if revision is None:
        return False
    txn = conn.get_transaction()
    seen = conn.info.get("revision_seen")
    if seen is None or seen[0] is not txn:
        cur.execute(_hot(conn, "revision"))
        row = cur.fetchone()
        seen = conn.info["revision_seen"] = (txn, None if row is None else int(row[0]))
    return seen[1] is not None and seen[1] > revision


def insert_battles(
    conn: Connection, rows: list[dict[str, Any]], revision: int | None = None
) -> list[str] | None:
    """Store served battles (dicts with the ``battles`` columns), all or none: a row with
    ``check`` true is refused when the database holds a vote of its annotator on its pair (a
    vote recorded by another worker). Returns the ids of the refused rows (nothing is stored
    then), ``[]`` when every row is stored, and ``None`` (nothing stored) when the registry
    changed since ``revision`` (a model retired or paused, a key revoked through another
    worker: the caller reloads it and decides again)."""
    cur = cursor(conn)
    if registry_changed(cur, conn, revision):
        return None
    refused = []
    for r in rows:
        if r.get("check"):
            a, b = r["model_a"], r["model_b"]
            cur.execute(_hot(conn, "judged"), (min(a, b), max(a, b), r["annotator_id"]))
            if cur.fetchone() is not None:
                refused.append(r["id"])
    if refused:
        return refused
    params = [tuple(r[c] for c in _BATTLE_COLUMNS) for r in rows]
    if len(params) == 1:
        cur.execute(_hot(conn, "battle"), params[0])
    else:
        cur.executemany(_hot(conn, "battle"), params)
    return []


_COLUMNS = ("wins", "losses", "ties", "ties_both_bad")


def count_row(model_a: int, model_b: int, annotator_id: int, outcome: int, n: float) -> dict:
    """The ``pair_counts`` increment of ``n`` votes (``n`` = −1 takes one back): oriented to
    i < j by model id, so a win of model_a is a win of i when model_a < model_b."""
    i, j = (model_a, model_b) if model_a < model_b else (model_b, model_a)
    col = outcome
    if model_a > model_b and outcome < 2:
        col = 1 - outcome
    row = {"i": i, "j": j, "annotator_id": annotator_id}
    for k, name in enumerate(_COLUMNS):
        row[name] = float(n) if k == col else 0.0
    return row


def add_counts(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Add count increments (rows of :func:`count_row`), creating rows as needed."""
    sql = _hot(conn, "count")
    cur = cursor(conn)
    for r in rows:
        cur.execute(
            sql,
            (
                r["i"],
                r["j"],
                r["annotator_id"],
                r["wins"],
                r["losses"],
                r["ties"],
                r["ties_both_bad"],
            ),
        )


def _insert_vote(cur: Any, sql: str, *values: Any) -> int:
    cur.execute(sql, values)
    return int(cur.fetchone()[0])


@dataclass(frozen=True)
class VoteResult:
    """What :func:`record_vote` did: ``kind`` is ``new``, ``replay`` (the same vote again:
        the stored one is returned), ``corrected``, or an error — ``missing`` (404), ``forbidden``
        (403), ``conflict`` (409), ``expired`` (410), ``incomplete`` (409: a held battle whose
    answers are still being generated), ``failed``, ``ended`` (409: a held battle the person
    stopped or abandoned) — or ``stale`` (nothing done: the registry
        changed since the caller's revision; reload it and try again)."""

    kind: str
    vote_id: int | None = None
    revision: int = 0
    outcome: int = -1
    created_at: float = 0.0
    model_a: int = -1
    model_b: int = -1
    stored_outcome: int = -1
    message: str = ""
    # a page vote's battle: whether it counts on the default board (False: an answer named a
    # model or its maker — stablearena.judging.anonymity); None where not read
    anony: bool | None = None
    # a page vote's battle: its models were picked by the visitor (a side-by-side battle,
    # held_battles.mode "named": never on the default board)
    picked: bool = False


def record_vote(
    conn: Connection,
    battle_id: str,
    annotator_id: int,
    outcome: int,
    now: float,
    correction_window: float,
    revision: int | None = None,
) -> VoteResult:
    """Record one vote and its count in the caller's transaction (see :class:`VoteResult`);
    a vote on a non-anonymous battle (``battles.anony`` false) is recorded without a count;
    nothing when the registry changed since ``revision`` (:func:`registry_changed`)."""
    cur = cursor(conn)
    if registry_changed(cur, conn, revision):
        return VoteResult("stale", message="the arena's keys, models or settings changed")
    cur.execute(_hot(conn, "lookup"), (battle_id,))
    row = cur.fetchone()
    if row is None:
        return VoteResult("missing", message=f"no battle {battle_id!r}")
    owner, a, b, expires, vid, rev, old, created, first, anony = row
    # a battle whose answers named a model (stablearena.judging.anonymity): its vote is in the log,
    # not in pair_counts, so the default board (and every fit of the counts) leaves it out
    counted = bool(anony)
    if owner != annotator_id:
        return VoteResult("forbidden", message="this battle was served to another annotator")
    if vid is not None:
        if old == outcome:
            return VoteResult("replay", vid, rev, old, created, a, b)
        if correction_window <= 0 or now - first > correction_window:
            why = (
                "this arena does not accept corrections"
                if correction_window <= 0
                else f"the correction window of {correction_window:g} s after the first vote has passed"
            )
            return VoteResult(
                "conflict",
                vid,
                rev,
                outcome,
                created,
                a,
                b,
                stored_outcome=old,
                message=f"battle {battle_id} already has the vote {OUTCOMES[old]!r}; {why}",
            )
        cur.execute(_hot(conn, "supersede"), (vid,))
        new_id = _insert_vote(
            cur, _hot(conn, "vote"), battle_id, rev + 1, outcome, annotator_id, a, b, now, first
        )
        if counted:
            add_counts(
                conn,
                [
                    count_row(a, b, annotator_id, old, -1.0),
                    count_row(a, b, annotator_id, outcome, 1.0),
                ],
            )
        return VoteResult("corrected", new_id, rev + 1, outcome, now, a, b, stored_outcome=old)
    if expires == 0.0:  # a battle the arena holds, not votable: still generating, or failed
        status = conn.execute(
            sa.select(held_battles.c.status).where(held_battles.c.battle_id == battle_id)
        ).scalar()
        if status == "failed":
            return VoteResult("failed", message="a model failed to answer; this battle has no vote")
        if status in ("stopped", "abandoned"):
            return VoteResult(
                "ended",
                message=f"battle {battle_id} was {status} by the person: it takes no vote; "
                "start a new battle",
            )
        return VoteResult(
            "incomplete",
            message=f"battle {battle_id}: both answers must be complete before a vote; "
            "vote once they are",
        )
    if now > expires:
        return VoteResult("expired", message=f"battle {battle_id} expired at {expires:.3f}")
    new_id = _insert_vote(
        cur, _hot(conn, "vote"), battle_id, 0, outcome, annotator_id, a, b, now, now
    )
    if counted:
        add_counts(conn, [count_row(a, b, annotator_id, outcome, 1.0)])
    return VoteResult("new", new_id, 0, outcome, now, a, b)
