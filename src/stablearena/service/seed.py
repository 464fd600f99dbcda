"""Seeding a live arena from an existing battle log (``stablearena serve --import LOG``).

Any log ``stablearena rank`` reads: each battle becomes a served battle (strategy ``import``,
no propensity: it was not served by the arena) with its vote, in log order, and its pair count;
a pair-count file (leaderbot's ``{models, X, Y}``) becomes one vote per counted comparison.
Models and annotators are created as needed (annotators without a key: an admin can give one
later under the same name). The same file (by content) is never imported twice.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

from ..battles import UNKNOWN_ANNOTATOR, Battles, PairCounts
from ..errors import InputError
from . import store

__all__ = ["import_log", "counts_to_battles"]

_CHUNK = 20_000


def counts_to_battles(counts: PairCounts) -> Battles:
    """One battle per counted comparison of a pair-count table (whole counts only)."""
    cols = [counts.wins, counts.losses, counts.ties, counts.ties_both_bad]
    for name, x in zip(("wins", "losses", "ties", "ties_both_bad"), cols, strict=True):
        if not np.allclose(x, np.round(x)):
            raise InputError(
                f"{counts.source}: {name} counts are not whole numbers; they cannot be votes."
            )
    reps = np.column_stack([np.round(c).astype(np.int64) for c in cols])
    n = reps.sum(axis=1)
    a = np.repeat(counts.i, n)
    b = np.repeat(counts.j, n)
    oc = (
        np.concatenate([np.repeat(np.arange(4, dtype=np.int8), r) for r in reps])
        if len(reps)
        else np.zeros(0, np.int8)
    )
    ann = None
    if counts.annotator is not None:
        ann = np.array(counts.annotators, dtype=object)[np.repeat(counts.annotator, n)]
    return Battles.from_arrays(a, b, oc, models=counts.models, annotator=ann, source=counts.source)


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


def import_log(engine: sa.engine.Engine, path: Path, progress: Any = None) -> dict[str, Any]:
    """Import the battle log at ``path`` in one transaction; returns what was added."""
    from ..io import read_battles

    path = Path(path)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise InputError(f"--import {path}: {exc.strerror}.") from None
    data = read_battles(path)
    battles = counts_to_battles(data) if isinstance(data, PairCounts) else data
    if battles.weight is not None and not np.all(battles.weight == 1.0):
        raise InputError(
            f"{path}: the log has battle weights; the live arena stores one vote per battle. "
            "Import a log without a weight column."
        )
    n = len(battles)
    now = time.time()
    ts = battles.timestamp if battles.timestamp is not None else np.full(n, now)
    ann_names = list(battles.annotators) if battles.annotator is not None else [UNKNOWN_ANNOTATOR]
    ann_codes = battles.annotator if battles.annotator is not None else np.zeros(n, dtype=np.int64)
    conn = engine.connect()
    if store.is_sqlite(engine):
        conn.info["immediate"] = True
    try:
        with conn.begin():
            key = f"import:{digest[:48]}"
            if store.get_meta(conn, key) is not None:
                raise InputError(
                    f"--import {path}: this log (same content) was imported already, as "
                    f"{store.get_meta(conn, key)!r}; importing it again would count every vote twice."
                )
            mid = _ids(conn, store.models, list(battles.models), {"added_at": now})
            aid = _ids(conn, store.annotators, ann_names, {"role": "imported", "created_at": now})
            a = mid[battles.model_a]
            b = mid[battles.model_b]
            k = aid[ann_codes]
            oc = battles.outcome
            for start in range(0, n, _CHUNK):
                sl = slice(start, min(n, start + _CHUNK))
                ids = [uuid.uuid4().hex for _ in range(sl.stop - sl.start)]
                conn.execute(
                    store.battles.insert(),
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
                    store.votes.insert(),
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
            store.add_counts(conn, list(rows.values()))
            store.set_meta(conn, key, str(path))
            store.bump_revision(conn)
    finally:
        conn.info.pop("immediate", None)
        conn.close()
    return {
        "battles": n,
        "models": len(battles.models),
        "annotators": len(ann_names),
        "source": str(path),
    }
