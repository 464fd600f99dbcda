"""stablearena: exact, robust and honest leaderboards from LLM arena battle logs."""

from .battles import Battles, Outcome, PairCounts, as_counts, parse_outcomes
from .errors import (
    ConvergenceError,
    DisconnectedGraphError,
    InputError,
    StableArenaError,
    StableArenaWarning,
)
from .io import read_battles
from .raters import (
    ELO_SCALE,
    AmElo,
    BradleyTerry,
    Davidson,
    Elo,
    Fitted,
    MElo,
    RaoKupper,
    Rater,
    StyleAmElo,
    StyleBradleyTerry,
    StyleMElo,
    get_rater,
    rater_names,
)
from .selection import get_selector, select_pairs
from .uncertainty import covariance, intervals

__version__ = "0.1.0"

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
    "MElo",
    "BradleyTerry",
    "Elo",
    "AmElo",
    "RaoKupper",
    "Davidson",
    "StyleMElo",
    "StyleBradleyTerry",
    "StyleAmElo",
    "read_battles",
    "intervals",
    "covariance",
    "select_pairs",
    "get_selector",
    "get_rater",
    "rater_names",
]
