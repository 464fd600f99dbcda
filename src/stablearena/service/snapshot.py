"""A snapshot of the live arena's pair counts: the rows at one moment and the newest vote they
include, shipped to the fit process and turned there into the
:class:`~stablearena.data.battles.PairCounts` that ``stablearena rank`` builds from the exported
vote log (docs/architecture.md). Shared by the counts kept in memory (:mod:`.counts`), the
store's reads (:mod:`.store.queries`) and the refit (:mod:`.refit`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.battles import PairCounts

__all__ = ["SOURCE", "Snapshot"]

#: The ``source`` of the live arena's payloads.
SOURCE = "live arena"


@dataclass(frozen=True)
class Snapshot:
    """The pair-count rows at one moment and the newest vote id they include. Each row names
    its lower-id model (``i``), higher-id model (``j``) and annotator by codes into the name
    tables, so that it can be shipped to another process and read there without the database.
    """

    as_of_vote: int
    n_votes: int
    model_names: tuple[str, ...]
    annotator_names: tuple[str, ...]
    i: np.ndarray  # codes into model_names
    j: np.ndarray
    annotator: np.ndarray  # codes into annotator_names
    wins: np.ndarray  # wins of i
    losses: np.ndarray
    ties: np.ndarray
    ties_both_bad: np.ndarray
    taken_at: float = field(default_factory=time.time)

    @classmethod
    def from_ids(
        cls, as_of_vote: int, cells: np.ndarray, counts: np.ndarray, model_rows: Any, ann_rows: Any
    ) -> Snapshot:
        """The snapshot of ``cells`` (rows: model id i, model id j, annotator id) with their
        four ``counts``, the ids coded into the (id, name) rows of the models and annotators
        (sorted by id)."""
        model_ids = np.array([r[0] for r in model_rows], dtype=np.int64)
        ann_ids = np.array([r[0] for r in ann_rows], dtype=np.int64)
        return cls(
            as_of_vote=int(as_of_vote),
            n_votes=int(round(counts.sum())),
            model_names=tuple(r[1] for r in model_rows),
            annotator_names=tuple(r[1] for r in ann_rows),
            i=np.searchsorted(model_ids, cells[:, 0]),
            j=np.searchsorted(model_ids, cells[:, 1]),
            annotator=np.searchsorted(ann_ids, cells[:, 2]),
            wins=counts[:, 0].copy(),
            losses=counts[:, 1].copy(),
            ties=counts[:, 2].copy(),
            ties_both_bad=counts[:, 3].copy(),
        )

    def without(self, names: Any) -> Snapshot:
        """This snapshot with the rows of the annotators ``names`` emptied (then dropped by
        :meth:`counts`): a judge flagged by its probes weighs nothing (stablearena.judging.probes)."""
        out = set(names)
        drop = np.array([self.annotator_names[int(k)] in out for k in self.annotator], dtype=bool)
        if not drop.any():
            return self
        zero = np.zeros(int(drop.sum()))

        def emptied(a: np.ndarray) -> np.ndarray:
            a = a.astype(float, copy=True)
            a[drop] = zero
            return a

        return Snapshot(
            as_of_vote=self.as_of_vote,
            n_votes=int(round(float(self.n_votes) - float(np.sum(self._totals()[drop])))),
            model_names=self.model_names,
            annotator_names=self.annotator_names,
            i=self.i,
            j=self.j,
            annotator=self.annotator,
            wins=emptied(self.wins),
            losses=emptied(self.losses),
            ties=emptied(self.ties),
            ties_both_bad=emptied(self.ties_both_bad),
            taken_at=self.taken_at,
        )

    def _totals(self) -> np.ndarray:
        return self.wins + self.losses + self.ties + self.ties_both_bad

    @property
    def empty(self) -> bool:
        return float(np.sum(self.wins + self.losses + self.ties + self.ties_both_bad)) <= 0

    def counts(self, *, by_annotator: bool = True) -> PairCounts:
        """:class:`PairCounts` exactly as ``Battles.counts(by_annotator=True)`` gives them for
        the exported log: models and annotators that have a vote, sorted by name; each row
        oriented i < j in that order; rows in (pair, annotator) key order; empty rows dropped."""
        tot = self.wins + self.losses + self.ties + self.ties_both_bad
        keep = tot > 0
        names, ia, ib = _by_name(self.model_names, self.i[keep], self.j[keep])
        anns, ik = _by_name(self.annotator_names, self.annotator[keep])
        w, lo = self.wins[keep], self.losses[keep]
        t, tb = self.ties[keep], self.ties_both_bad[keep]
        swap = ia > ib
        i = np.where(swap, ib, ia)
        j = np.where(swap, ia, ib)
        wins = np.where(swap, lo, w)
        losses = np.where(swap, w, lo)
        m, kk = len(names), len(anns)
        key = (i * m + j) * kk + ik
        order = np.argsort(key, kind="stable")
        counts = PairCounts(
            models=names,
            i=i[order].astype(np.int32),
            j=j[order].astype(np.int32),
            wins=wins[order].astype(float),
            losses=losses[order].astype(float),
            ties=t[order].astype(float),
            ties_both_bad=tb[order].astype(float),
            annotator=ik[order].astype(np.int32),
            annotators=anns,
            source=SOURCE,
        )
        return counts if by_annotator else counts.collapse()


def _by_name(table: tuple[str, ...], *codes: np.ndarray) -> tuple[Any, ...]:
    """The names of ``table`` that ``codes`` use, sorted, and the codes renumbered in that
    order."""
    used = np.unique(np.concatenate(codes)) if codes and len(codes[0]) else np.zeros(0, int)
    names = [table[c] for c in used.tolist()]
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.zeros(len(table), dtype=np.int64)
    rank[used[order]] = np.arange(len(order))
    return (tuple(names[k] for k in order), *(rank[c] for c in codes))
