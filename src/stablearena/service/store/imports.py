"""The statements of ``stablearena serve --import LOG``: a battle log written as served
battles, their votes and their pair counts, in one transaction (see
:mod:`stablearena.service.seed`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ...errors import InputError
from .engine import write_conn
from .queries import bump_revision, get_meta, set_meta
from .tables import annotators, models
from .votes import _BATTLE_COLUMNS, _hot, cursor

__all__ = ["import_votes"]

_CHUNK = 100_000
_VOTE_COLUMNS = (
    "battle_id",
    "revision",
    "outcome",
    "annotator_id",
    "model_a",
    "model_b",
    "created_at",
    "first_at",
    "superseded",
)
_COUNT_COLUMNS = ("i", "j", "annotator_id", "wins", "losses", "ties", "ties_both_bad")


def _bulk_insert(
    cur: Any, copy: bool, table: str, columns: tuple[str, ...], rows: Iterable[tuple]
) -> None:
    """Insert ``rows`` on the driver's cursor: PostgreSQL's ``COPY … FROM STDIN`` (psycopg),
    else one ``executemany`` — several times faster than SQLAlchemy's per-row parameters
    (measured on SQLite: about 100 s per million votes before, see docs/benchmarks.md)."""
    names = ", ".join(columns)
    if copy:
        with cur.copy(f"COPY {table} ({names}) FROM STDIN") as cp:
            for row in rows:
                cp.write_row(row)
        return
    marks = ", ".join("?" * len(columns))
    cur.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)


def _ids(
    conn: sa.Connection, table: sa.Table, names: list[str], extra: dict[str, Any]
) -> np.ndarray:
    """Database ids of ``names`` in ``table`` (by name), inserting the missing ones."""
    have = (
        dict(conn.execute(sa.select(table.c.name, table.c.id).where(table.c.name.in_(names))).all())
        if len(names) < 30000
        else dict(conn.execute(sa.select(table.c.name, table.c.id)).all())
    )
    missing = [n for n in names if n not in have]
    if missing:
        conn.execute(table.insert(), [{"name": n, **extra} for n in missing])
        have.update(
            conn.execute(sa.select(table.c.name, table.c.id).where(table.c.name.in_(missing))).all()
        )
    return np.array([have[n] for n in names], dtype=np.int64)


def import_votes(
    engine: Engine,
    *,
    key: str,
    label: str,
    model_names: list[str],
    annotator_names: list[str],
    model_a: np.ndarray,
    model_b: np.ndarray,
    annotator: np.ndarray,
    outcome: np.ndarray,
    timestamp: np.ndarray,
    now: float,
    progress: Callable[[int, int], Any] | None = None,
) -> None:
    """Write battles (codes into ``model_names`` / ``annotator_names``) as served battles
    (strategy ``import``, no propensity) with their votes and pair counts, creating models and
    annotators (without keys) as needed; ``key`` marks the import in ``meta`` (with ``label``)
    so that the same log is refused a second time (:class:`InputError`)."""
    n = len(outcome)
    conn = write_conn(engine)
    try:
        with conn.begin():
            if get_meta(conn, key) is not None:
                raise InputError(
                    f"--import {label}: this log (same content) was imported already, as "
                    f"{get_meta(conn, key)!r}; importing it again would count every vote twice."
                )
            mid = _ids(conn, models, model_names, {"added_at": now})
            aid = _ids(conn, annotators, annotator_names, {"role": "imported", "created_at": now})
            a = mid[model_a]
            b = mid[model_b]
            k = aid[annotator]
            oc = outcome
            ts = timestamp
            cur = cursor(conn)
            copy = conn.dialect.name == "postgresql"
            if not copy:  # random battle ids: the indexes' pages in memory while inserting
                cur.execute("PRAGMA cache_size = -1048576")
            for start in range(0, n, _CHUNK):
                sl = slice(start, min(n, start + _CHUNK))
                raw = os.urandom(16 * (sl.stop - sl.start)).hex()  # as uuid4().hex, faster
                ids = [raw[p : p + 32] for p in range(0, len(raw), 32)]
                kk, x, y = k[sl].tolist(), a[sl].tolist(), b[sl].tolist()
                t, o = ts[sl].astype(float).tolist(), oc[sl].astype(int).tolist()
                battle_rows = zip(ids, kk, x, y, repeat("import"), repeat(None), t, t)
                vote_rows = zip(ids, repeat(0), o, kk, x, y, t, t, repeat(False))
                _bulk_insert(cur, copy, "battles", _BATTLE_COLUMNS, battle_rows)
                _bulk_insert(cur, copy, "votes", _VOTE_COLUMNS, vote_rows)
                if progress is not None:
                    progress(sl.stop, n)
            # pair counts: oriented by model id, aggregated per (pair, annotator, outcome)
            lo, hi = np.minimum(a, b), np.maximum(a, b)
            col = oc.astype(np.int64)
            col = np.where((a > b) & (col < 2), 1 - col, col)
            keys = np.stack([lo, hi, k, col], axis=1)
            uniq, cnt = np.unique(keys, axis=0, return_counts=True)
            rows: dict[tuple[int, int, int], dict[str, Any]] = {}
            for (i, j, kk, c), m in zip(uniq.tolist(), cnt.tolist(), strict=True):
                row = rows.setdefault(
                    (i, j, kk),
                    {
                        "i": i,
                        "j": j,
                        "annotator_id": kk,
                        "wins": 0.0,
                        "losses": 0.0,
                        "ties": 0.0,
                        "ties_both_bad": 0.0,
                    },
                )
                row[("wins", "losses", "ties", "ties_both_bad")[c]] += float(m)
            # increments (the table may hold counts already): the hot path's upsert, batched
            cur.executemany(
                _hot(conn, "count"), [tuple(r[c] for c in _COUNT_COLUMNS) for r in rows.values()]
            )
            set_meta(conn, key, label)
            bump_revision(conn)
    finally:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA cache_size = -65536")  # the engine's (store.engine)
        conn.info.pop("immediate", None)
        conn.close()
