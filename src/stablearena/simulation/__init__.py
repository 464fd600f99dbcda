"""Layer 7 — simulation: arenas of known truth, attacks on them, and the papers' experiments.

- :mod:`.arena` — the arena simulator (a selector picks pairs, a simulated or replayed arena
  judges them, a rater refits);
- :mod:`.attacks` — rigging attacks (sleepers, drips, floods) and the defences' cost;
- :mod:`.perturbation` — annotators' errors applied to battle logs;
- :mod:`.experiments` — the protocols run by ``stablearena experiment …``.

May import: every layer below (through :mod:`stablearena.judging`).
"""
