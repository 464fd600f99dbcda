"""The group-committing writer of one process.

Writes go through one :class:`Writer` per process: a thread that takes every write queued by
concurrent requests, runs them in one transaction and commits once (one fsync for the batch —
"group commit"), and only then completes each request. So every acknowledged write is durable
(SQLite in WAL mode with ``synchronous=FULL``; PostgreSQL with ``synchronous_commit`` on), at a
cost of one fsync per batch instead of one per request.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..._threads import name_this_thread
from ..errors import ApiError, fault_text
from .engine import is_sqlite, write_conn

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
        #: why the last write failed in the database (disk full, read-only, corrupt, connection
        #: lost), or None once a write succeeds again: what ``/healthz`` reports
        self.failure: str | None = None
        self.failed_at: float | None = None
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
            self._conn = write_conn(self.engine)
        return self._conn

    def _run(self) -> None:
        name_this_thread("arena-writer")
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
            if self._storage_fault(exc):
                self.failure = fault_text(exc)
                self.failed_at = time.time()
                exc = ApiError(
                    503,
                    "storage_unavailable",
                    f"the database cannot take writes now ({self.failure}); nothing was "
                    "recorded, retry later",
                )
            _complete([(batch[0][1], None, exc)])
            return
        self.failure = self.failed_at = None
        self.commits += 1
        self.writes += len(batch)
        self.last_batch = len(batch)
        if self.on_commit is not None:
            self.on_commit(len(batch), time.perf_counter() - t0)
        _complete([(fut, res, None) for (_, fut), res in zip(batch, results, strict=True)])

    def _storage_fault(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the database failing (not a constraint or a bug): an operational
        or database error of the driver (wrapped or not) other than an integrity error, or an
        OS error."""
        if isinstance(exc, sa.exc.IntegrityError | OSError):
            return isinstance(exc, OSError)
        if isinstance(exc, sa.exc.OperationalError | sa.exc.DatabaseError):
            return True
        dbapi = self.engine.dialect.dbapi
        if dbapi is None or isinstance(exc, dbapi.IntegrityError):
            return False
        return isinstance(exc, dbapi.OperationalError | dbapi.DatabaseError)

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
