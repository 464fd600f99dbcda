"""The comparison graph and when a maximum-likelihood rating exists (docs/methods/ratings.md).

The Bradley–Terry MLE is finite iff the comparison graph is connected and the *win graph*
(an edge i→j when i beat or tied j; ties count both ways) is strongly connected
(Zermelo 1929; Ford 1957). A disconnected comparison graph makes ratings of different
components incomparable: that is an error. A win graph that is connected but not strongly
connected (a model that never lost, never won, or a group that beat every outsider) makes some
ratings run to ±∞: the raters then add a small documented prior and warn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import DisconnectedGraphError

if TYPE_CHECKING:  # pragma: no cover
    from .battles import PairCounts

__all__ = ["GraphCheck", "check_comparison_graph", "components"]


def components(m: int, i: np.ndarray, j: np.ndarray, *, directed: bool = False) -> np.ndarray:
    """Component label of each of ``m`` nodes for edges i→j (strong components when directed)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    g = coo_matrix((np.ones(len(i)), (i, j)), shape=(m, m)).tocsr()
    _, labels = connected_components(g, directed=directed, connection="strong")
    return labels


@dataclass(frozen=True)
class GraphCheck:
    """Outcome of :func:`check_comparison_graph`.

    ``needs_prior``: boolean mask of the models that get the existence prior (all of them when
    the win graph is not strongly connected, none otherwise).
    ``message``: the warning text (empty when the MLE exists).
    """

    needs_prior: np.ndarray
    message: str

    @property
    def ok(self) -> bool:
        return not bool(self.needs_prior.any())


def _mutually_connected(m: int, i: np.ndarray, j: np.ndarray, both: np.ndarray) -> bool:
    """True when the pairs where each side has beaten or tied the other connect all m models
    (then the comparison graph is connected and the win graph strongly connected).

    Vectorised label propagation: every node carries the smallest label of its component found
    so far; each round lowers the larger endpoint label of every edge to the smaller one (the
    "hook") and then follows labels to their roots (pointer jumping), so a round costs O(edges)
    and the number of rounds grows like the logarithm of the component diameter.
    """
    if m <= 1:
        return True
    a = np.asarray(i, dtype=np.int64)[both]
    b = np.asarray(j, dtype=np.int64)[both]
    if len(a) < m - 1:
        return False
    # a model with an edge to every other one connects them all: the usual case of a dense
    # arena, checked on the model with the most edges (rows may repeat a pair)
    hub = int(np.argmax(np.bincount(a, minlength=m) + np.bincount(b, minlength=m)))
    reached = np.zeros(m, dtype=bool)
    reached[hub] = True
    reached[b[a == hub]] = True
    reached[a[b == hub]] = True
    if reached.all():
        return True
    label = np.arange(m)
    while True:
        la, lb = label[a], label[b]
        lo, hi = np.minimum(la, lb), np.maximum(la, lb)
        moved = lo != hi
        if not moved.any():
            break
        np.minimum.at(label, hi[moved], lo[moved])
        while True:  # pointer jumping: label[v] ← label[label[v]] until stable
            up = label[label]
            if np.array_equal(up, label):
                break
            label = up
    return bool(np.all(label == 0))


def check_comparison_graph(counts: PairCounts, *, ties_count: bool = True) -> GraphCheck:
    """Raise :class:`DisconnectedGraphError` if the comparison graph is disconnected; otherwise
    report which models have no finite MLE.

    With ``ties_count`` a tie is an edge both ways (ties-as-half and the tie models); without it
    (Bradley–Terry with ties dropped) only decisive results count.
    """
    m = counts.n_models
    c = counts.collapse()
    ties = c.all_ties if ties_count else np.zeros(len(c))
    if m == 1 or _mutually_connected(m, c.i, c.j, ((c.wins + ties) > 0) & ((c.losses + ties) > 0)):
        return GraphCheck(np.zeros(m, dtype=bool), "")
    played = (c.wins + c.losses + ties) > 0
    labels = components(m, c.i[played], c.j[played])
    seen = np.zeros(m, dtype=bool)
    seen[c.i[played]] = True
    seen[c.j[played]] = True
    if not seen.all():
        absent = [counts.models[k] for k in np.flatnonzero(~seen)]
        raise DisconnectedGraphError(
            f"{counts.source}: {len(absent)} model(s) have no comparisons that count "
            f"({', '.join(absent[:8])}{' …' if len(absent) > 8 else ''}); remove them (e.g. --min-battles) "
            "or add battles.",
            [absent],
        )
    n_comp = labels.max() + 1
    if n_comp > 1:
        groups = [[counts.models[k] for k in np.flatnonzero(labels == g)] for g in range(n_comp)]
        groups.sort(key=len, reverse=True)
        shown = "; ".join(
            f"{{{', '.join(g[:5])}{' …' if len(g) > 5 else ''}}} ({len(g)} models)"
            for g in groups[:5]
        )
        raise DisconnectedGraphError(
            f"{counts.source}: the comparison graph has {n_comp} disconnected components, so their "
            f"ratings cannot be compared: {shown}. Fit each component separately, or add battles "
            "between them.",
            groups,
        )
    # win graph: i -> j when i beat or tied j
    fwd = (c.wins + ties) > 0
    bwd = (c.losses + ties) > 0
    src = np.concatenate([c.i[fwd], c.j[bwd]])
    dst = np.concatenate([c.j[fwd], c.i[bwd]])
    strong = components(m, src, dst, directed=True)
    if strong.max() == 0:
        return GraphCheck(np.zeros(m, dtype=bool), "")
    never_lost = np.bincount(dst, minlength=m) == 0
    never_won = np.bincount(src, minlength=m) == 0
    parts = []
    if never_lost.any():
        names = [counts.models[k] for k in np.flatnonzero(never_lost)]
        parts.append(f"never lost: {', '.join(names[:8])}{' …' if len(names) > 8 else ''}")
    if never_won.any():
        names = [counts.models[k] for k in np.flatnonzero(never_won)]
        parts.append(f"never won: {', '.join(names[:8])}{' …' if len(names) > 8 else ''}")
    # Any split of the win graph sends some differences to ±∞, not only those of the models that
    # never lost or never won (a group can beat every outsider), so the prior goes on every model.
    needs = np.ones(m, dtype=bool)
    if parts:
        detail = "; ".join(parts)
    else:
        detail = f"the models split into {strong.max() + 1} groups that only beat (or only lost to) each other"
    message = (
        f"{counts.source}: the maximum-likelihood rating is infinite for some models ({detail}). "
        "All ratings are kept finite by a weak prior (half a virtual tie of each model against the "
        "average model); read the extreme ones as lower/upper bounds."
    )
    return GraphCheck(needs, message)
