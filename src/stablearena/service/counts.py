"""The live counts: the ``pair_counts`` table kept in memory and brought up to date from the
votes recorded since it last looked, so that a refit costs the same on the 100th vote and the
millionth.

Rebuilt once at start from the table (:meth:`LiveCounts.load`, one full read); afterwards
:meth:`LiveCounts.update` reads only the votes with an id above the newest one it has applied
(an indexed range read of the vote log) and applies each as the writer did: +1 on its (pair,
annotator, outcome) and, for a correction, −1 on the outcome it replaces. On PostgreSQL vote
ids are taken before commit, so a vote may become visible after a higher id: the ids skipped
below the newest seen are looked for again at each update (for ``GAP_SECONDS``; an id whose
transaction rolled back never appears). :meth:`LiveCounts.verify` compares the memory with the
table.

What it keeps is the statistic the fits read: per (pair, annotator) cell the four counts (am-ELO
needs them per annotator; m-ELO and the tie models their sum over annotators), plus the totals
per pair (the information tracker's). Memory grows with the cells (at most pairs × annotators),
not with the votes.
"""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from typing import Any

import numpy as np
from sqlalchemy.engine import Connection, Engine

from . import store
from .snapshot import Snapshot

__all__ = ["LiveCounts", "GAP_SECONDS"]

#: How long a skipped vote id is looked for again (a PostgreSQL transaction that took an id
#: commits within the writer's batch; one that rolled back never does).
GAP_SECONDS = 300.0
_SHIFT_I, _SHIFT_J = 44, 22  # cell key: i << 44 | j << 22 | annotator (ids < 2^22)


def _key(i: Any, j: Any, a: Any) -> Any:
    return (i << _SHIFT_I) | (j << _SHIFT_J) | a


class LiveCounts:
    """The pair counts of one worker, in memory (see the module docstring). Thread-safe.

    ``journal``: also keep what changed since the last :meth:`snapshot` with ``mark`` (the
    full fit's), for :meth:`delta` — the new votes a one-step update of that fit reads."""

    def __init__(self, *, journal: bool = False) -> None:
        self._lock = threading.RLock()
        self.journal = journal
        self._marked: dict[int, np.ndarray] = {}  # row → its counts at the mark
        self._index: dict[int, int] = {}  # cell key → row
        self._cells = np.zeros((0, 3), dtype=np.int64)  # i, j, annotator id
        self._counts = np.zeros((0, 4))  # wins of i, losses, ties, both-bad
        self._n = 0
        self._pairs: dict[tuple[int, int], float] = {}  # votes per pair (i < j)
        self._gaps: dict[int, float] = {}  # vote id → when first missed
        self._annotators: dict[int, str] = {}
        self.as_of_vote = 0
        self.loaded = False
        self.updates = 0
        self.votes_applied = 0

    # ------------------------------------------------------------------ building
    def load(self, engine: Engine) -> None:
        """Rebuild from the ``pair_counts`` table (one full read: at start only)."""
        wm, rows, recent = store.read_count_rows(engine)
        cells = rows[:, :3].astype(np.int64)
        counts = rows[:, 3:].copy()
        keys = _key(cells[:, 0], cells[:, 1], cells[:, 2])
        now = time.time()
        seen = set(recent)
        gaps = {v: now for v in range(max(1, wm - 4095), wm + 1) if v not in seen}
        tot = counts.sum(axis=1)
        pair_keys = cells[:, 0] * (1 << 32) + cells[:, 1]
        uniq, inv = np.unique(pair_keys, return_inverse=True)
        per_pair = np.bincount(inv.ravel(), weights=tot, minlength=len(uniq))
        pairs = {
            (int(k >> 32), int(k & 0xFFFFFFFF)): float(n)
            for k, n in zip(uniq.tolist(), per_pair.tolist(), strict=True)
        }
        with engine.connect() as conn:
            names = dict(store.names_after(conn, "annotators", 0))
        with self._lock:
            self._index = dict(zip(keys.tolist(), range(len(keys)), strict=True))
            self._cells, self._counts, self._n = cells, counts, len(keys)
            self._pairs, self._gaps, self._annotators = pairs, gaps, names
            self._marked = {}
            self.as_of_vote = wm
            self.loaded = True

    def _row(self, i: int, j: int, a: int) -> int:
        k = _key(i, j, a)
        r = self._index.get(k)
        if r is None:
            r = self._n
            if r == len(self._cells):
                grow = max(64, r)
                self._cells = np.concatenate([self._cells, np.zeros((grow, 3), np.int64)])
                self._counts = np.concatenate([self._counts, np.zeros((grow, 4))])
            self._cells[r] = (i, j, a)
            self._index[k] = r
            self._n += 1
        return r

    def _add(self, a: int, b: int, annotator: int, outcome: int, n: float) -> None:
        # as store.count_row: oriented to i < j by model id, a win of a is a win of i when a < b
        i, j = (a, b) if a < b else (b, a)
        col = 1 - outcome if a > b and outcome < 2 else outcome
        r = self._row(i, j, annotator)  # first: it may grow (replace) the arrays
        if self.journal and r not in self._marked:
            self._marked[r] = self._counts[r].copy()
        self._counts[r, col] += n
        self._pairs[(i, j)] = self._pairs.get((i, j), 0.0) + n

    def update(self, engine: Engine, conn: Connection | None = None) -> int:
        """Apply the votes recorded since the last look; returns how many. Reads only those
        votes (and the few skipped ids still in flight), on ``conn`` when given (a poll's one
        connection) or a connection of its own."""
        with self._lock:
            if not self.loaded:
                self.load(engine)
                return 0
            now = time.time()
            self._gaps = {v: t for v, t in self._gaps.items() if now - t < GAP_SECONDS}
            with nullcontext(conn) if conn is not None else engine.connect() as c:
                rows = store.votes_after(c, self.as_of_vote, sorted(self._gaps))
                known = max(self._annotators, default=0)
                if rows and max(r[3] for r in rows) > known:
                    self._annotators.update(store.names_after(c, "annotators", known))
            wm = self.as_of_vote
            for vid, a, b, ann, outcome, prev, anony in rows:
                if anony:  # a non-anonymous battle's vote is not in pair_counts either
                    self._add(a, b, ann, outcome, 1.0)
                    if prev is not None:
                        self._add(a, b, ann, prev, -1.0)
                self._gaps.pop(vid, None)
                if vid > wm:
                    for missing in range(max(wm + 1, vid - 4096), vid):
                        self._gaps[missing] = now
                    wm = vid
            self.as_of_vote = wm
            self.updates += 1
            self.votes_applied += len(rows)
            return len(rows)

    # ------------------------------------------------------------------ reading
    def pair_totals(self) -> np.ndarray:
        """(i, j, votes) per pair of model ids (i < j), summed over annotators and outcomes."""
        with self._lock:
            if not self._pairs:
                return np.zeros((0, 3))
            return np.array([(i, j, n) for (i, j), n in self._pairs.items()], dtype=float)

    def judged(self) -> list[tuple[int, int, int]]:
        """(annotator id, i, j) of every cell with a vote."""
        with self._lock:
            cells = self._cells[: self._n]
            has = self._counts[: self._n].sum(axis=1) > 0
            return [(a, i, j) for i, j, a in cells[has].tolist()]

    def snapshot(self, engine: Engine, *, mark: bool = False) -> Snapshot:
        """Brought up to date, then copied into a :class:`Snapshot` (what a fit reads): the
        same rows, codes and names :func:`store.read_snapshot` gives for the table. ``mark``:
        :meth:`delta` counts from here (the snapshot of a full fit)."""
        self.update(engine)
        with engine.connect() as conn:
            model_rows = store.names_after(conn, "models", 0)
        with self._lock:
            cells = self._cells[: self._n].copy()
            counts = self._counts[: self._n].copy()
            ann = sorted(self._annotators.items())
            wm = self.as_of_vote
            if mark:
                self._marked = {}
        return Snapshot.from_ids(wm, cells, counts, model_rows, ann)

    def delta(self, engine: Engine) -> Snapshot:
        """Brought up to date, then the change of each cell since the last ``mark``ed
        :meth:`snapshot` as a :class:`Snapshot` of those cells only (a correction: −1 on one
        outcome, +1 on another; ``n_votes``: the new votes). Costs the cells changed, not C.
        Needs ``journal``."""
        if not self.journal:
            raise RuntimeError("LiveCounts.delta needs LiveCounts(journal=True)")
        self.update(engine)
        with engine.connect() as conn:
            model_rows = store.names_after(conn, "models", 0)
        with self._lock:
            rows = np.fromiter(self._marked, dtype=np.int64, count=len(self._marked))
            before = np.array(list(self._marked.values())).reshape(len(rows), 4)
            cells = self._cells[rows].copy()
            counts = self._counts[rows] - before
            ann = sorted(self._annotators.items())
            wm = self.as_of_vote
        return Snapshot.from_ids(wm, cells, counts, model_rows, ann)

    def verify(self, engine: Engine) -> list[tuple[int, int, int, list[float], list[float]]]:
        """Compare with the ``pair_counts`` table after an update: the cells that differ, as
        (i, j, annotator, in memory, in the table); empty when they agree. (A full read: for
        checks and tests, not for the hot path.)"""
        self.update(engine)
        _, rows, _ = store.read_count_rows(engine, window=0)
        table = {(int(r[0]), int(r[1]), int(r[2])): r[3:].tolist() for r in rows}
        with self._lock:
            mine = {
                (int(c[0]), int(c[1]), int(c[2])): v.tolist()
                for c, v in zip(self._cells[: self._n], self._counts[: self._n], strict=True)
            }
        zero = [0.0] * 4
        return [
            (*k, mine.get(k, zero), table.get(k, zero))
            for k in sorted(set(mine) | set(table))
            if mine.get(k, zero) != table.get(k, zero)
        ]

    @property
    def cells(self) -> int:
        """(pair, annotator) cells held."""
        return self._n

    def stats(self) -> dict[str, Any]:
        """Cells, pairs, annotators and the bytes the arrays take (for /healthz and the docs)."""
        with self._lock:
            return {
                "cells": self._n,
                "pairs": len(self._pairs),
                "as_of_vote": self.as_of_vote,
                "gaps": len(self._gaps),
                "array_bytes": int(self._cells.nbytes + self._counts.nbytes),
            }
