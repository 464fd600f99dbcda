"""The live arena's database: tables, migrations, the group-committing writer and every query.

Durable state (SPEC §9): the vote log (``votes``, each referring to a served ``battles`` row)
and, updated in the same transaction as each vote, ``pair_counts`` — per (pair i < j of model
ids, annotator) the numbers of wins of i, wins of j, ties and both-bad ties, the sufficient
statistic every fit reads. A correction keeps the old vote (``superseded``) and moves one count
from its outcome to the new one. Published fits are rows of ``fits``; ``meta`` holds the
arena's configuration and a revision number that tells other workers to reload models and keys.

Writes go through one :class:`Writer` per process: a thread that takes every write queued by
concurrent requests, runs them in one transaction and commits once (one fsync for the batch —
"group commit"), and only then completes each request. So every acknowledged write is durable
(SQLite in WAL mode with ``synchronous=FULL``; PostgreSQL with ``synchronous_commit`` on), at a
cost of one fsync per batch instead of one per request.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    event,
    false,
    func,
    select,
)
from sqlalchemy.engine import Connection, Engine

from ..errors import InputError

__all__ = [
    "metadata",
    "models",
    "annotators",
    "battles",
    "votes",
    "pair_counts",
    "fits",
    "meta",
    "dashboard_views",
    "dashboard_sessions",
    "OUTCOMES",
    "EXPORT_LABELS",
    "make_engine",
    "migrate",
    "Writer",
    "VoteResult",
    "record_vote",
    "insert_battles",
    "bump_revision",
]

#: API outcome labels, in :class:`stablearena.Outcome` code order.
OUTCOMES: tuple[str, ...] = ("model_a", "model_b", "tie", "both_bad")
#: Labels written by the export (FastChat's, read back by ``stablearena rank``).
EXPORT_LABELS: tuple[str, ...] = ("model_a", "model_b", "tie", "tie (bothbad)")

metadata = MetaData()

models = Table(
    "models",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("retired", Boolean, nullable=False, server_default=false()),
    Column("outage", Boolean, nullable=False, server_default=false()),
    Column("boost", Float, nullable=False, server_default="1"),
    Column("boost_until", Integer, nullable=False, server_default="0"),
    Column("added_at", Float, nullable=False),
)
annotators = Table(
    "annotators",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("role", String(16), nullable=False),  # annotator | admin | imported
    Column("key_id", String(32), unique=True),
    Column("key_hash", String(64)),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
)
battles = Table(
    "battles",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("model_a", Integer, ForeignKey("models.id"), nullable=False),
    Column("model_b", Integer, ForeignKey("models.id"), nullable=False),
    Column("strategy", String(40), nullable=False),
    Column("propensity", Float),
    Column("served_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)
votes = Table(
    "votes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("battle_id", String(32), ForeignKey("battles.id"), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("outcome", SmallInteger, nullable=False),
    Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("model_a", Integer, nullable=False),
    Column("model_b", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("first_at", Float, nullable=False),
    Column("superseded", Boolean, nullable=False, server_default=false()),
    UniqueConstraint("battle_id", "revision", name="uq_votes_battle_revision"),
)
pair_counts = Table(
    "pair_counts",
    metadata,
    Column("i", Integer, primary_key=True),
    Column("j", Integer, primary_key=True),
    Column("annotator_id", Integer, primary_key=True),
    Column("wins", Float, nullable=False, server_default="0"),
    Column("losses", Float, nullable=False, server_default="0"),
    Column("ties", Float, nullable=False, server_default="0"),
    Column("ties_both_bad", Float, nullable=False, server_default="0"),
)
fits = Table(
    "fits",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("method", String(40), nullable=False),
    Column("as_of_vote", Integer, nullable=False),
    Column("fitted_at", Float, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("payload", Text, nullable=False),
)
meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
# The dashboard (migration 0002): the pages drawn for a published fit (gzip-compressed HTML,
# written by the render process, served by every worker) and the admin logins (the SHA-256
# of each session token; the token itself lives only in the browser's cookie).
dashboard_views = Table(
    "dashboard_views",
    metadata,
    Column("fit_id", Integer, primary_key=True, autoincrement=False),
    Column("as_of_vote", Integer, nullable=False),
    Column("fitted_at", Float, nullable=False),
    Column("rendered_at", Float, nullable=False),
    Column("info", Text, nullable=False),
    Column("page", LargeBinary, nullable=False),
    Column("main", LargeBinary, nullable=False),
    Column("admin", LargeBinary, nullable=False),
)
dashboard_sessions = Table(
    "dashboard_sessions",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("key_id", String(32), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

#: pg_advisory lock keys (arbitrary constants): migrations, and "one refitter at a time".
MIGRATION_LOCK = 0x5AB1E_0001
REFIT_LOCK = 0x5AB1E_0002


# ---------------------------------------------------------------------------------- engine
def make_engine(url: str) -> Engine:
    """An engine for ``url``. SQLite: WAL, ``synchronous=FULL``, foreign keys, a 30 s busy
    timeout, and explicit ``BEGIN`` (``BEGIN IMMEDIATE`` on write connections) instead of the
    driver's implicit transactions, so that reads inside a transaction see one snapshot."""
    if url.startswith("sqlite"):
        u = sa.engine.make_url(url)
        if not u.database or u.database == ":memory:":
            raise InputError(
                f"--db {url!r}: the live arena needs a database file, e.g. sqlite:///arena.db."
            )
        parent = Path(u.database).expanduser().resolve().parent
        if not parent.is_dir():
            raise InputError(f"--db {url!r}: the directory {parent} does not exist.")
        engine = sa.create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=8
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("immediate") else "BEGIN")

        return engine
    if url.startswith("postgresql"):
        return sa.create_engine(url, pool_size=8, max_overflow=16, pool_pre_ping=True)
    raise InputError(f"--db {url!r}: use sqlite:///FILE or postgresql+psycopg://… .")


def is_sqlite(engine: Engine | Connection) -> bool:
    return engine.dialect.name == "sqlite"


def _write_conn(engine: Engine) -> Connection:
    conn = engine.connect()
    if is_sqlite(engine):
        conn.info["immediate"] = True
    return conn


def migrate(engine: Engine) -> str | None:
    """Create or upgrade the tables (Alembic, ``stablearena/service/migrations``) under a lock,
    so that workers starting together migrate once. On the first start also create the admin
    key: returned once (only its hash is stored); ``None`` on later starts."""
    from alembic import command
    from alembic.config import Config

    from .security import new_key

    cfg = Config()
    cfg.set_main_option("script_location", "stablearena.service:migrations")
    conn = _write_conn(engine)
    try:
        with conn.begin():
            if not is_sqlite(engine):
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            admin = conn.execute(
                select(annotators.c.id).where(annotators.c.role == "admin")
            ).first()
            if admin is not None:
                return None
            key = new_key()
            conn.execute(
                annotators.insert().values(
                    name="admin",
                    role="admin",
                    key_id=key.key_id,
                    key_hash=key.key_hash,
                    created_at=time.time(),
                )
            )
            for k, v in (("revision", "0"), ("created_at", repr(time.time()))):
                conn.execute(meta.insert().values(key=k, value=v))
            return key.secret
    finally:
        conn.info.pop("immediate", None)
        conn.close()


# ---------------------------------------------------------------------------------- writer
T = TypeVar("T")


class Writer:
    """Group commit: one thread runs every queued write of this process, as many as are
    waiting (up to ``max_batch``) in one transaction, commits once, then completes them.

    :meth:`submit` takes a function of an open connection (inside the transaction) and
    returns a :class:`~concurrent.futures.Future` of its result, set only after the commit. A
    function must not swallow database errors: when one fails, nothing of the batch was
    committed and each write is retried alone (a unique-key race with another worker process
    is retried once more, when the function sees the other worker's row).
    """

    def __init__(self, engine: Engine, max_batch: int = 512) -> None:
        self.engine = engine
        self.max_batch = max_batch
        # SQLite: the writers of several processes take turns through a lock file (a blocking
        # flock wakes the next one as soon as a commit ends; SQLite's own busy handler sleeps
        # 1, 2, 5, 10… ms between tries)
        self._lock_path = str(engine.url.database) + ".write-lock" if is_sqlite(engine) else None
        self._lock_fd: int | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="arena-writer", daemon=True)
        self._conn: Connection | None = None
        self.commits = 0
        self.writes = 0
        self.last_batch = 0
        self.on_commit: Callable[[int, float], None] | None = None
        dbapi = engine.dialect.dbapi
        self._dbapi_error: tuple[type, ...] = (dbapi.Error,) if dbapi else ()
        # a unique-key race with another worker, a busy database: worth one more try alone
        self._retryable: tuple[type, ...] = (sa.exc.IntegrityError, sa.exc.OperationalError)
        if dbapi is not None:
            self._retryable += (dbapi.IntegrityError, dbapi.OperationalError)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=30)

    def submit(self, fn: Callable[[Connection], T]) -> Future[T]:
        fut: Future[T] = Future()
        self._queue.put((fn, fut))
        return fut

    def submit_async(self, fn: Callable[[Connection], T]) -> asyncio.Future[T]:
        """:meth:`submit` for a coroutine: an asyncio future of the running loop. The writer
        completes all the futures of one loop in a batch with one wake-up of that loop."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put((fn, fut))
        return fut

    def run(self, fn: Callable[[Connection], T], timeout: float = 60.0) -> T:
        """Submit and wait (for threads other than the event loop's)."""
        return self.submit(fn).result(timeout=timeout)

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed or self._conn.invalidated:
            self._conn = _write_conn(self.engine)
        return self._conn

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._commit(batch)
            if stop:
                break
        if self._conn is not None:
            self._conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _commit(
        self, batch: list[tuple[Callable[[Connection], Any], Future]], tries: int = 2
    ) -> None:
        t0 = time.perf_counter()
        try:
            conn = self._connection()
            self._lock()
            try:
                with conn.begin():
                    results = [fn(conn) for fn, _ in batch]
            finally:
                self._unlock()
        except Exception as exc:  # nothing of the batch is committed
            self._reset_after(exc)
            if len(batch) > 1:
                for item in batch:
                    self._commit([item])
                return
            if tries > 1 and isinstance(exc, self._retryable):
                self._commit(batch, tries - 1)
                return
            _complete([(batch[0][1], None, exc)])
            return
        self.commits += 1
        self.writes += len(batch)
        self.last_batch = len(batch)
        if self.on_commit is not None:
            self.on_commit(len(batch), time.perf_counter() - t0)
        _complete([(fut, res, None) for (_, fut), res in zip(batch, results, strict=True)])

    def _lock(self) -> None:
        if self._lock_path is None:
            return
        import fcntl

        if self._lock_fd is None:
            self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            import fcntl

            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _reset_after(self, exc: Exception) -> None:
        """Drop the connection when ``exc`` says it is lost (wrapped by SQLAlchemy, or a driver
        error of the hot path's cursor)."""
        conn = self._conn
        if conn is None:
            return
        lost = isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated
        if not lost and isinstance(exc, self._dbapi_error) and not conn.invalidated:
            try:
                raw = conn.connection.dbapi_connection
                lost = self.engine.dialect.is_disconnect(exc, raw, None)
            except Exception:
                lost = True
            if lost:
                conn.invalidate()
        if lost or conn.invalidated:
            conn.close()
            self._conn = None


def _complete(done: list[tuple[Any, Any, BaseException | None]]) -> None:
    """Set the results (or exceptions) of ``(future, result, exception)`` triples: thread
    futures at once, asyncio futures by one call into each event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list] = {}
    for fut, res, exc in done:
        if isinstance(fut, asyncio.Future):
            by_loop.setdefault(fut.get_loop(), []).append((fut, res, exc))
        elif exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(res)
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_set_all, items)
        except RuntimeError:  # the loop has closed: nobody waits for these any more
            pass


def _set_all(items: list[tuple[asyncio.Future, Any, BaseException | None]]) -> None:
    for fut, res, exc in items:
        if fut.done():  # cancelled meanwhile
            continue
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(res)


# ---------------------------------------------------------------------------------- queries
def bump_revision(conn: Connection) -> None:
    """Tell every worker to reload models, keys and the configuration."""
    conn.info.pop("revision_seen", None)  # read again by the next write of this transaction
    conn.execute(
        meta.update()
        .where(meta.c.key == "revision")
        .values(value=sa.cast(sa.cast(meta.c.value, Integer) + 1, Text))
    )


def get_meta(conn: Connection, key: str) -> str | None:
    row = conn.execute(select(meta.c.value).where(meta.c.key == key)).first()
    return None if row is None else row[0]


def set_meta(conn: Connection, key: str, value: str) -> None:
    done = conn.execute(meta.update().where(meta.c.key == key).values(value=value)).rowcount
    if not done:
        conn.execute(meta.insert().values(key=key, value=value))


def load_config(conn: Connection) -> dict[str, Any]:
    raw = get_meta(conn, "arena_config")
    return {} if raw is None else json.loads(raw)


# The hot path (a battle served, a vote recorded) runs plain SQL, valid in SQLite and
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
    "v.outcome, v.created_at, v.first_at FROM battles b LEFT JOIN votes v "
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
    (403), ``conflict`` (409), ``expired`` (410) — or ``stale`` (nothing done: the registry
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
    nothing when the registry changed since ``revision`` (:func:`registry_changed`)."""
    cur = cursor(conn)
    if registry_changed(cur, conn, revision):
        return VoteResult("stale", message="the arena's keys, models or settings changed")
    cur.execute(_hot(conn, "lookup"), (battle_id,))
    row = cur.fetchone()
    if row is None:
        return VoteResult("missing", message=f"no battle {battle_id!r}")
    owner, a, b, expires, vid, rev, old, created, first = row
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
        add_counts(
            conn,
            [count_row(a, b, annotator_id, old, -1.0), count_row(a, b, annotator_id, outcome, 1.0)],
        )
        return VoteResult("corrected", new_id, rev + 1, outcome, now, a, b, stored_outcome=old)
    if now > expires:
        return VoteResult("expired", message=f"battle {battle_id} expired at {expires:.3f}")
    new_id = _insert_vote(
        cur, _hot(conn, "vote"), battle_id, 0, outcome, annotator_id, a, b, now, now
    )
    add_counts(conn, [count_row(a, b, annotator_id, outcome, 1.0)])
    return VoteResult("new", new_id, 0, outcome, now, a, b)


def watermark(conn: Connection) -> int:
    """The newest vote id (0 with no votes)."""
    return int(conn.execute(select(func.coalesce(func.max(votes.c.id), 0))).scalar_one())


def latest_fit_row(conn: Connection, after: int = 0) -> Any:
    """The newest published fit (id, method, as_of_vote, fitted_at, seconds, payload), or None
    when there is none newer than id ``after``."""
    return conn.execute(
        select(fits).where(fits.c.id > after).order_by(fits.c.id.desc()).limit(1)
    ).first()


def publish_fit(
    conn: Connection,
    method: str,
    as_of_vote: int,
    fitted_at: float,
    seconds: float,
    payload: dict[str, Any],
    keep: int,
) -> int:
    """Insert a fit and delete all but the newest ``keep``; returns its id."""
    fid = conn.execute(
        fits.insert().values(
            method=method,
            as_of_vote=as_of_vote,
            fitted_at=fitted_at,
            seconds=seconds,
            payload=json.dumps(payload, allow_nan=False),
        )
    ).inserted_primary_key[0]
    conn.execute(fits.delete().where(fits.c.id <= fid - keep))
    return int(fid)
