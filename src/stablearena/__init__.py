"""stablearena: exact, robust and honest leaderboards from LLM arena battle logs."""

from .battles import Battles, Outcome, PairCounts, as_counts, parse_outcomes
from .errors import (
    ConvergenceError,
    DisconnectedGraphError,
    InputError,
    StableArenaError,
    StableArenaWarning,
)
from .raters import ELO_SCALE, BradleyTerry, Fitted, MElo, Rater, get_rater, rater_names

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
    "get_rater",
    "rater_names",
]
