"""Refitting the ratings of a growing arena, batch after batch: the simulator's loop
(:func:`stablearena.simulation.arena.run_arena`) and the automatic arena
(:mod:`stablearena.judging.auto_arena`) refit through this one class (docs/methods/selection.md).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..data.battles import Battles, PairCounts
from ..data.graph import check_comparison_graph
from ..errors import DisconnectedGraphError, StableArenaWarning
from .base import get_rater
from .bradley_terry import solve_bradley_terry

__all__ = ["Refitter"]


class Refitter:
    """Refits the ratings of a growing arena.

    ``"m-elo"``: exact Newton on the pair counts, warm-started from the previous scores; while
    the MLE does not exist (a disconnected comparison graph, or a win graph that is not
    strongly connected) the documented existence prior of
    :mod:`stablearena.raters.bradley_terry` (a virtual half-battle tie against the average
    model) is applied to every model, so that the ratings stay finite and moderate from the
    first battle; once the MLE exists the fit is the plain m-ELO.
    ``"elo"``: online Elo over the battles in the order played (``get_rater("elo")``).
    Any other registered rater name: fitted on the pair counts (or battles) from scratch.
    """

    def __init__(self, models: Sequence[str], rater: str = "m-elo", **options: Any) -> None:
        self.models = tuple(models)
        m = len(self.models)
        self.rater = rater
        self.options = options
        self._n = np.zeros((m, m))
        self._s = np.zeros((m, m))
        self._a: list[np.ndarray] = []
        self._b: list[np.ndarray] = []
        self._o: list[np.ndarray] = []
        self.scores = np.zeros(m)
        self._mle_exists = False  # once it does it always will: battles only add edges
        if rater != "m-elo":
            get_rater(rater, **options)  # fail early on an unknown rater or option

    def add(self, a: np.ndarray, b: np.ndarray, outcome: np.ndarray) -> None:
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        o = np.asarray(outcome, dtype=np.int8)
        score_a = np.array([1.0, 0.0, 0.5, 0.5])[o]
        i, j = np.minimum(a, b), np.maximum(a, b)
        s = np.where(a < b, score_a, 1.0 - score_a)
        np.add.at(self._n, (i, j), 1.0)
        np.add.at(self._s, (i, j), s)
        self._a.append(a)
        self._b.append(b)
        self._o.append(o)

    def counts(self) -> PairCounts:
        """The battles so far as pair counts."""
        return self.battles().counts()

    def log(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self._a:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z.astype(np.int8)
        return np.concatenate(self._a), np.concatenate(self._b), np.concatenate(self._o)

    def battles(self) -> Battles:
        a, b, o = self.log()
        return Battles(
            models=self.models,
            model_a=a.astype(np.int32),
            model_b=b.astype(np.int32),
            outcome=o,
            source="arena",
        )

    def fit(self) -> np.ndarray:
        """Refit and return the scores (natural units, mean zero)."""
        if not self._a:
            return self.scores
        if self.rater == "m-elo":
            self.scores = self._fit_melo()
        else:
            rater = get_rater(self.rater, **self.options)
            data: Battles | PairCounts = self.battles() if self.rater == "elo" else self.counts()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", StableArenaWarning)
                    fitted = rater.fit(data)
            except DisconnectedGraphError:
                return self.scores  # keep the previous ratings until the graph is connected
            x = np.asarray(fitted.scores, dtype=float)
            self.scores = x - x.mean()
        return self.scores

    def _fit_melo(self) -> np.ndarray:
        iu, ju = np.nonzero(self._n)
        n, s = self._n[iu, ju], self._s[iu, ju]
        m = len(self.models)
        c = PairCounts(
            models=self.models,
            i=iu.astype(np.int32),
            j=ju.astype(np.int32),
            wins=s,
            losses=n - s,
            ties=np.zeros(len(iu)),
            ties_both_bad=np.zeros(len(iu)),
            source="arena",
        )
        # wins = s, losses = n − s has the same likelihood and the same win graph as the real
        # counts when ties are counted as half a win each way
        # while the MLE does not exist, the prior goes on every model: on the never-won /
        # never-lost models alone, a group that only beat outsiders still drifts to hundreds of
        # natural units (measured: a range of 139 after 600 battles of 100 models)
        mask = None
        if not self._mle_exists:
            try:
                self._mle_exists = check_comparison_graph(c, ties_count=True).ok
            except DisconnectedGraphError:
                pass
            mask = None if self._mle_exists else np.ones(m, dtype=bool)
        sol = solve_bradley_terry(m, iu, ju, n, s, x0=self.scores, prior_mask=mask)
        return sol.x
