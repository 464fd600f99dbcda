"""Old module paths of the flat layout (release 0.1), kept importable for one release.

Until 0.2 the library was 45 modules side by side; they now live in layer subpackages
(docs/architecture.md). ``import stablearena.uncertainty`` or
``from stablearena.battles import Battles`` still work: a finder placed first on
:data:`sys.meta_path` answers each old name with the module at its new path (the same module
object, so monkeypatching either name patches both) and emits a :class:`DeprecationWarning`
naming the new path. Submodules of moved packages (``stablearena.endpoints.client``) are answered
the same way. The public names of :mod:`stablearena` (``from stablearena import MElo``) never
moved. These paths go in the release after next.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "new_name", "install"]

#: old module (below ``stablearena.``) → its module now. ``crowd`` is not here: the old module
#: is now the package :mod:`stablearena.crowd`, which re-exports the crowd rule's names.
MOVED: dict[str, str] = {
    "battles": "data.battles",
    "graph": "data.graph",
    "names": "data.names",
    "categories": "data.categories",
    "language": "data.language",
    "io": "data.io",
    "style_features": "data.style_features",
    "simulate": "data.simulate",
    "datasets": "data.datasets",
    "information": "raters.information",
    "uncertainty": "raters.uncertainty",
    "influence": "crowd.influence",
    "screening": "crowd.screening",
    "trust": "crowd.trust",
    "arena_rule": "crowd.board_rule",
    "metrics": "analysis.metrics",
    "comparison": "analysis.comparison",
    "fitcheck": "analysis.fitcheck",
    "leaderboard": "analysis.leaderboard",
    "selection": "design.selection",
    "serving": "design.serving_draw",
    "judges": "judging.judges",
    "injection": "judging.injection",
    "anonymity": "judging.anonymity",
    "visible": "judging.visible",
    "judge_notes": "judging.judge_notes",
    "probes": "judging.probes",
    "auto": "judging.auto_arena",
    "arena_hard": "judging.arena_hard",
    "power": "judging.power",
    "endpoints": "judging.endpoints",
    "arena": "simulation.arena",
    "attacks": "simulation.attacks",
    "perturbation": "simulation.perturbation",
    "experiments": "simulation.experiments",
    "plots": "figures.plots",
    "report": "figures.report",
    "client": "service.client",
}

_PREFIX = "stablearena."


def new_name(fullname: str) -> str | None:
    """The module now at old path ``fullname`` (``stablearena.endpoints.client`` →
    ``stablearena.judging.endpoints.client``), or None when ``fullname`` did not move."""
    if not fullname.startswith(_PREFIX):
        return None
    head, _, rest = fullname[len(_PREFIX) :].partition(".")
    new = MOVED.get(head)
    if new is None:
        return None
    return _PREFIX + new + ("." + rest if rest else "")


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module at its new path (imported under its own name first)."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.module: ModuleType | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new} (docs/architecture.md); the old path goes in the "
            "release after next",
            DeprecationWarning,
            stacklevel=2,
        )
        self.module = importlib.import_module(self.new)
        self._spec = self.module.__spec__
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        # the import system set the alias's spec on the real module: give it back its own
        module.__spec__ = self._spec


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder first on :data:`sys.meta_path` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
