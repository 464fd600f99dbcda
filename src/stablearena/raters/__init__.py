"""Rating models. :func:`get_rater` finds every rater by name.

The names below are imported lazily (PEP 562): each rater module, and the NumPy/SciPy code it
needs, loads on first use (``stablearena.raters.base.RATER_MODULES`` says which module registers
which rater name).

Layer 2 — the rating models, their Fisher information (:mod:`.information`), the uncertainty of
their fits (:mod:`.uncertainty`: covariances, intervals, bootstrap, rank intervals) and the
refitting of a growing arena (:mod:`.refit`). May import: the foundation and
:mod:`stablearena.data`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

_LAZY: dict[str, str] = {
    "ELO_SCALE": ".base",
    "Convergence": ".base",
    "Fitted": ".base",
    "Rater": ".base",
    "get_rater": ".base",
    "rater_names": ".base",
    "register_rater": ".base",
    "MElo": ".bradley_terry",
    "BradleyTerry": ".bradley_terry",
    "solve_bradley_terry": ".bradley_terry",
    "Elo": ".elo",
    "AmElo": ".annotator",
    "AmEloFitted": ".annotator",
    "RaoKupper": ".ties",
    "Davidson": ".ties",
    "ThurstonianBT": ".ties",
    "TieFitted": ".ties",
    "StyleMElo": ".style",
    "StyleBradleyTerry": ".style",
    "StyleAmElo": ".style",
    "StyleFitted": ".style",
}

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


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


if TYPE_CHECKING:  # pragma: no cover
    from .annotator import AmElo, AmEloFitted
    from .base import (
        ELO_SCALE,
        Convergence,
        Fitted,
        Rater,
        get_rater,
        rater_names,
        register_rater,
    )
    from .bradley_terry import BradleyTerry, MElo, solve_bradley_terry
    from .elo import Elo
    from .style import StyleAmElo, StyleBradleyTerry, StyleFitted, StyleMElo
    from .ties import Davidson, RaoKupper, ThurstonianBT, TieFitted
