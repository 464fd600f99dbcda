"""The live arena's serving rule as a library function (stablearena.design.serving_draw): the propensity it
stores with each battle is the probability the pair was drawn with."""

from __future__ import annotations

import numpy as np
import pytest

from stablearena.data.battles import PairCounts
from stablearena.design.selection import InformationTracker, get_selector
from stablearena.design.serving_draw import boost_weights, serving_draw

NAMES = ("a", "b", "c", "d", "e")


def _tracker() -> InformationTracker:
    counts = PairCounts(
        models=NAMES,
        i=np.array([0, 0, 1, 2, 3], dtype=np.int32),
        j=np.array([1, 2, 3, 3, 4], dtype=np.int32),
        wins=np.array([6.0, 3.0, 5.0, 2.0, 4.0]),
        losses=np.array([2.0, 3.0, 1.0, 2.0, 4.0]),
        ties=np.zeros(5),
        ties_both_bad=np.zeros(5),
    )
    tracker = InformationTracker(list(NAMES))
    tracker.refresh(np.linspace(0.5, -0.5, len(NAMES)), counts)
    return tracker


@pytest.mark.parametrize(
    ("strategy", "eps", "boosted"), [("a-opt", 0.2, False), ("random", 0.5, True)]
)
def test_the_propensities_sum_to_one_and_match_the_draws(strategy, eps, boosted):
    tracker = _tracker()
    selector = get_selector(strategy)
    candidates = np.array([0, 1, 2, 4])  # d is out (e.g. retired)
    blocked = tracker.mask(np.array([3]), np.array([[0, 1]]))  # a–b judged already
    boost = boost_weights(tracker, [(4, 5.0, 1e9)] if boosted else [])
    assert (boost is None) != boosted
    rng = np.random.default_rng(1)
    n = 4000
    seen: dict[tuple[int, int], float] = {}
    hits: dict[tuple[int, int], int] = {}
    for _ in range(n):
        i, j, path, prop = serving_draw(
            tracker, selector, candidates, blocked, 1, exploration=eps, boost=boost, rng=rng
        )
        assert i < j and 3 not in (i, j) and (i, j) != (0, 1)
        assert path in ("explore", selector.name) and 0 < prop <= 1
        assert seen.setdefault((i, j), prop) == pytest.approx(prop)
        hits[(i, j)] = hits.get((i, j), 0) + 1
    assert len(seen) == 5  # C(4, 2) − 1 allowed pairs, each drawn (ε > 0)
    assert sum(seen.values()) == pytest.approx(1.0)
    for pair, prop in seen.items():  # frequencies within 4.5 binomial standard errors
        assert abs(hits[pair] / n - prop) < 4.5 * np.sqrt(prop * (1 - prop) / n), pair
