"""Layer 8 — figures: plots and the one-file HTML report.

- :mod:`.plots` — the matplotlib figures (``stablearena plot``);
- :mod:`.report` — the report (``stablearena report``) and its Jinja2 templates.

May import: every layer below (through :mod:`stablearena.simulation`).
"""
