"""Rating models. Importing this package registers every rater with :func:`get_rater`."""

from .annotator import AmElo, AmEloFitted
from .base import ELO_SCALE, Convergence, Fitted, Rater, get_rater, rater_names, register_rater
from .bradley_terry import BradleyTerry, MElo, solve_bradley_terry
from .elo import Elo
from .style import StyleAmElo, StyleBradleyTerry, StyleFitted, StyleMElo
from .ties import Davidson, RaoKupper, ThurstonianBT, TieFitted

__all__ = [
    "ELO_SCALE",
    "Convergence",
    "Fitted",
    "Rater",
    "get_rater",
    "rater_names",
    "register_rater",
    "MElo",
    "BradleyTerry",
    "solve_bradley_terry",
    "Elo",
    "AmElo",
    "AmEloFitted",
    "RaoKupper",
    "Davidson",
    "ThurstonianBT",
    "TieFitted",
    "StyleMElo",
    "StyleBradleyTerry",
    "StyleAmElo",
    "StyleFitted",
]
