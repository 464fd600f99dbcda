"""stablearena: exact, robust and honest leaderboards from LLM arena battle logs.

The public names below are imported lazily (PEP 562): ``import stablearena`` costs almost
nothing, and ``stablearena.MElo`` imports :mod:`stablearena.raters.bradley_terry` on first use.
This keeps the command line fast to start (see :mod:`stablearena.cli` for the rules); the names
behave exactly as if they had been imported eagerly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _moved
from ._lazy import lazy_names

__version__ = "0.1.0"

#: public name → module (relative to this package) that defines it
_LAZY: dict[str, str] = {
    "Battles": ".data.battles",
    "Outcome": ".data.battles",
    "PairCounts": ".data.battles",
    "as_counts": ".data.battles",
    "parse_outcomes": ".data.battles",
    "StableArenaError": ".errors",
    "InputError": ".errors",
    "DisconnectedGraphError": ".errors",
    "ConvergenceError": ".errors",
    "StableArenaWarning": ".errors",
    "ELO_SCALE": ".raters.base",
    "Fitted": ".raters.base",
    "Rater": ".raters.base",
    "get_rater": ".raters.base",
    "rater_names": ".raters.base",
    "MElo": ".raters.bradley_terry",
    "BradleyTerry": ".raters.bradley_terry",
    "Elo": ".raters.elo",
    "AmElo": ".raters.annotator",
    "RaoKupper": ".raters.ties",
    "Davidson": ".raters.ties",
    "read_battles": ".data.io",
    "read_counts": ".data.io",
    "intervals": ".raters.uncertainty",
    "covariance": ".raters.uncertainty",
    "select_pairs": ".design.selection",
    "get_selector": ".design.selection",
    "StyleMElo": ".raters.style",
    "StyleBradleyTerry": ".raters.style",
    "StyleAmElo": ".raters.style",
}

__all__ = [
    "Battles",
    "Outcome",
    "PairCounts",
    "as_counts",
    "parse_outcomes",
    "StableArenaError",
    "InputError",
    "DisconnectedGraphError",
    "ConvergenceError",
    "StableArenaWarning",
    "ELO_SCALE",
    "Fitted",
    "Rater",
    "get_rater",
    "rater_names",
    "MElo",
    "BradleyTerry",
    "Elo",
    "AmElo",
    "RaoKupper",
    "Davidson",
    "read_battles",
    "read_counts",
    "intervals",
    "covariance",
    "select_pairs",
    "get_selector",
    "StyleMElo",
    "StyleBradleyTerry",
    "StyleAmElo",
]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())

# the old module paths of the flat layout answer for one release (stablearena._moved)
_moved.install()


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .data.battles import Battles, Outcome, PairCounts, as_counts, parse_outcomes
    from .data.io import read_battles, read_counts
    from .design.selection import get_selector, select_pairs
    from .errors import (
        ConvergenceError,
        DisconnectedGraphError,
        InputError,
        StableArenaError,
        StableArenaWarning,
    )
    from .raters.annotator import AmElo
    from .raters.base import ELO_SCALE, Fitted, Rater, get_rater, rater_names
    from .raters.bradley_terry import BradleyTerry, MElo
    from .raters.elo import Elo
    from .raters.style import StyleAmElo, StyleBradleyTerry, StyleMElo
    from .raters.ties import Davidson, RaoKupper
    from .raters.uncertainty import covariance, intervals
