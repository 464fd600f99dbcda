"""Layer 4 — analysis of fitted results: what a board says and how well it fits.

- :mod:`.leaderboard` — the leaderboard payload (the JSON contract of ``rank``, the service and
  the report);
- :mod:`.metrics` — agreement and prediction metrics (Kendall τ, log-loss, paired differences);
- :mod:`.comparison` — raters compared on held-out battles (``stablearena compare``);
- :mod:`.fitcheck` — problems of a fitted board worth a warning.

May import: the foundation, :mod:`stablearena.data`, :mod:`stablearena.raters`,
:mod:`stablearena.crowd`.
"""
