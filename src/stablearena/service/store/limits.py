"""Rate limits kept in the database (table ``rate_buckets``), so that every ``serve`` host of
one database enforces one limit: settings ``limits = "database"`` (the default on PostgreSQL;
docs/guides/live-arena-security.md).

A check is one statement, one round trip: an upsert of the bucket that refills it from the
database's clock (``statement_timestamp()`` on PostgreSQL, so hosts with skewed clocks agree),
takes up to the tokens asked for (a host may take a few at once and spend them itself:
:class:`~stablearena.service.security.DatabaseRateLimiter`), and returns how many it took and
the tokens left. Two
hosts checking the same bucket at once are serialised by the row lock of the upsert: neither
sees the other's token as still there. Each thread keeps its own connection (autocommit, out
of the pool), so a check is that one statement and nothing else (no ``BEGIN``/``COMMIT``, no
pool ping), and commits without waiting for the disk (``synchronous_commit = off``: a crash of
the database may forget the last moments of a few buckets, i.e. give a few tokens back); a
connection that fails is replaced once, then the error is raised.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy.engine import Engine

__all__ = ["Buckets"]

#: The database's clock in seconds since the epoch, fixed for one statement.
_NOW = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM statement_timestamp()) AS DOUBLE PRECISION)",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}
_MAX = {"postgresql": ("GREATEST", "LEAST"), "sqlite": ("MAX", "MIN")}


#: The integer part of a non-negative number.
_FLOOR = {"postgresql": "CAST(FLOOR({}) AS INTEGER)", "sqlite": "CAST({} AS INTEGER)"}


def _take_sql(dialect: str) -> str:
    now = _NOW[dialect]
    big, small = _MAX[dialect]

    def p(name: str) -> str:  # a named parameter in the driver's style
        return f":{name}" if dialect == "sqlite" else f"%({name})s"

    rate, burst, want = p("rate"), p("burst"), p("want")
    # the bucket refilled to now: tokens + elapsed * rate, at most burst; then up to ``want``
    # whole tokens taken, as many as there are
    r = f"{small}({burst}, rate_buckets.tokens + {big}(0.0, {now} - rate_buckets.at) * {rate})"
    n = f"(CASE WHEN {r} >= 1.0 THEN {_FLOOR[dialect].format(f'{small}({want}, {r})')} ELSE 0 END)"
    last = f"{big}(rate_buckets.at, {now})"
    return (
        "INSERT INTO rate_buckets (name, tokens, at, full_at, taken) "
        f"VALUES ({p('name')}, {burst} - {p('first')}, {now}, {now} + {p('first')} / {rate}, "
        f"{p('first')}) "
        "ON CONFLICT (name) DO UPDATE SET "
        f"tokens = {r} - {n}, taken = {n}, at = {last}, "
        f"full_at = {last} + ({burst} - ({r} - {n})) / {rate} "
        "RETURNING tokens, taken"
    )


def _sweep_sql(dialect: str) -> str:
    return f"DELETE FROM rate_buckets WHERE full_at < {_NOW[dialect]}"


class Buckets:
    """Token buckets in the table ``rate_buckets`` of ``engine``'s database."""

    #: Connections kept between checks (more are opened while more checks run at once, and
    #: closed after): a few, so that the buckets never hold the engine's pool, whose size the
    #: other work of the process needs (a connection per thread held every one of anyio's 40
    #: worker threads' connections and exhausted the pool under a burst of requests).
    KEEP = 4

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        dialect = engine.dialect.name
        if dialect not in _NOW:
            raise ValueError(f"no database rate limits on {dialect}")
        self._take = _take_sql(dialect)
        self._sweep = _sweep_sql(dialect)
        self._free: list[Any] = []  # idle connection fairies, newest last
        self._lock = threading.Lock()

    def _open(self) -> Any:
        # out of the engine's pool: held by the buckets and, when dropped, invalidated (closed)
        fairy = self.engine.raw_connection()
        conn = fairy.dbapi_connection
        # a bucket is not worth a disk flush: its commit returns without waiting for one
        # (a crash forgets the last moments of a few buckets, i.e. gives a few tokens back)
        cur = conn.cursor()
        if self.engine.dialect.name == "postgresql":
            conn.autocommit = True
            cur.execute("SET synchronous_commit = off")
        else:
            cur.execute("PRAGMA synchronous = OFF")
        cur.close()
        return fairy

    def _run(self, sql: str, params: dict | tuple) -> Any:
        for attempt in (0, 1):
            with self._lock:
                fairy = self._free.pop() if self._free else None
            if fairy is None:
                fairy = self._open()
            try:
                cur = fairy.dbapi_connection.cursor()
                cur.execute(sql, params)
                row = cur.fetchone() if cur.description else None
                cur.close()
            except Exception:
                _invalidate(fairy)
                if attempt:
                    raise
                continue
            with self._lock:
                keep = len(self._free) < self.KEEP
                if keep:
                    self._free.append(fairy)
            if not keep:
                _invalidate(fairy)
            return row
        return None  # pragma: no cover

    def take(self, name: str, rate: float, burst: float, want: int = 1) -> tuple[int, float]:
        """Take up to ``want`` tokens from the bucket ``name`` (``rate`` tokens per second, at
        most ``burst``): (the tokens taken, 0) or, when not even one was there, (0, the seconds
        until one is)."""
        tokens, taken = self._run(
            self._take,
            {
                "name": name,
                "rate": float(rate),
                "burst": float(burst),
                "want": int(want),
                "first": min(int(want), int(burst)),
            },
        )
        if taken:
            return int(taken), 0.0
        return 0, max(0.0, (1.0 - float(tokens)) / rate)

    def sweep(self) -> None:
        """Delete the buckets that are full again (the same as no row)."""
        self._run(self._sweep, ())

    def close(self) -> None:
        with self._lock:
            fairies, self._free = self._free, []
        for fairy in fairies:
            _invalidate(fairy)


def _invalidate(fairy: Any) -> None:
    try:
        fairy.invalidate()  # closes the connection; the pool never sees it again
    except Exception:  # noqa: BLE001 - a broken connection: nothing more to do
        pass
