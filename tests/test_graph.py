"""stablearena.data.graph: the connectivity test behind every maximum-likelihood fit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9), st.integers(0, 40), st.booleans(), st.integers(0, 2**32 - 1))
def test_mutually_connected_matches_scipy_components(m, n_rows, star, seed):
    """The hub shortcut (a model with an edge to every other) and the label propagation agree
    with SciPy's connected components, on random pair rows (repeats allowed) and on stars with
    one spoke sometimes missing or only repeated."""
    from stablearena.data.graph import _mutually_connected, components

    rng = np.random.default_rng(seed)
    if star and m > 1:
        hub = int(rng.integers(0, m))
        others = [k for k in range(m) if k != hub]
        if rng.random() < 0.5:
            others = others[1:] + others[:1] * int(rng.integers(0, 2))  # drop or repeat a spoke
        pairs = [(min(hub, k), max(hub, k)) for k in others]
    else:
        pairs = []
    for _ in range(n_rows if m > 1 else 0):
        x, y = rng.choice(m, 2, replace=False)
        pairs.append((min(x, y), max(x, y)))
    i = np.array([p[0] for p in pairs], dtype=np.int32)
    j = np.array([p[1] for p in pairs], dtype=np.int32)
    both = rng.random(len(pairs)) < 0.8
    expected = m <= 1 or bool(components(m, i[both], j[both]).max() == 0)
    assert _mutually_connected(m, i, j, both) == expected
