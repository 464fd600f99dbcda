"""Layer 3 — the crowd: who votes, how much each vote weighs, and the live board's rule.

- :mod:`.rule` — the crowd rule (every account's votes count; abilities shrunk toward the
  crowd's; per-model limit; flood test): :func:`~.rule.crowd_fit`, docs/methods/crowd.md;
- :mod:`.board_rule` — the live board's rule (``arena.board_rule``: the crowd rule or am-ELO's
  screening with bounded influence) as one object the service and ``rank --method arena`` call;
- :mod:`.screening` — am-ELO's Stable Arena loop (annotators screened by ability);
- :mod:`.trust` — account weights by votes and days of record, bounded fits;
- :mod:`.influence` — each account's influence on the scores.

May import: the foundation, :mod:`stablearena.data`, :mod:`stablearena.raters`.

The names of the crowd rule are also importable from here (``from stablearena.crowd import
crowd_fit``), as they were from the module ``stablearena.crowd`` before the layers.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    """The crowd rule's public names (``stablearena.crowd.rule.__all__`` and its defaults),
    imported on first use."""
    if name.startswith("__"):
        raise AttributeError(name)
    rule = importlib.import_module(".rule", __name__)
    if name in rule.__all__ or name in ("DEFAULT_MODEL_VOTES", "DEFAULT_FLOOD_DAYS"):
        value = getattr(rule, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
