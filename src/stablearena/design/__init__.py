"""Layer 5 — design: which battles to run next.

- :mod:`.selection` — pair selection by Fisher information ("Fewer Battles") and the
  information tracker;
- :mod:`.serving_draw` — the live arena's draw of the next pair for a visitor or an API
  annotator.

May import: the foundation, :mod:`stablearena.data`, :mod:`stablearena.raters`,
:mod:`stablearena.crowd`, :mod:`stablearena.analysis`.
"""
