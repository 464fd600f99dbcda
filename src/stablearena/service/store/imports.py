"""The statements of ``stablearena serve --import LOG``: a battle log written as served
battles, their votes and their pair counts, in one transaction (see
:mod:`stablearena.service.seed`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ...errors import InputError
from .engine import write_conn
from .queries import bump_revision, get_meta, set_meta
from .tables import annotators, battles, models, votes
from .votes import add_counts

__all__ = ["import_votes"]

_CHUNK = 20_000


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
            for start in range(0, n, _CHUNK):
                sl = slice(start, min(n, start + _CHUNK))
                ids = [uuid.uuid4().hex for _ in range(sl.stop - sl.start)]
                conn.execute(
                    battles.insert(),
                    [
                        {
                            "id": bid,
                            "annotator_id": int(kk),
                            "model_a": int(x),
                            "model_b": int(y),
                            "strategy": "import",
                            "propensity": None,
                            "served_at": float(t),
                            "expires_at": float(t),
                        }
                        for bid, kk, x, y, t in zip(ids, k[sl], a[sl], b[sl], ts[sl], strict=True)
                    ],
                )
                conn.execute(
                    votes.insert(),
                    [
                        {
                            "battle_id": bid,
                            "revision": 0,
                            "outcome": int(o),
                            "annotator_id": int(kk),
                            "model_a": int(x),
                            "model_b": int(y),
                            "created_at": float(t),
                            "first_at": float(t),
                            "superseded": False,
                        }
                        for bid, o, kk, x, y, t in zip(
                            ids, oc[sl], k[sl], a[sl], b[sl], ts[sl], strict=True
                        )
                    ],
                )
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
            add_counts(conn, list(rows.values()))
            set_meta(conn, key, label)
            bump_revision(conn)
    finally:
        conn.info.pop("immediate", None)
        conn.close()
