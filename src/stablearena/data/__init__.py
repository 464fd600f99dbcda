"""Layer 1 — the data: battles and everything read from or derived from a battle log.

- :mod:`.battles` — :class:`~.battles.Battles` and :class:`~.battles.PairCounts`, the one
  sufficient statistic every rater, interval and design reads;
- :mod:`.io` — readers and writers of battle logs (CSV, JSONL, Parquet, FastChat's and
  Arena-Hard-Auto's layouts) and pair counts;
- :mod:`.graph` — the comparison graph (components, when the maximum likelihood exists);
- :mod:`.names` — model and annotator names (checks, self-naming forms);
- :mod:`.categories` — category, ``by=`` and ``where=`` boards; :mod:`.language` — prompt
  language; :mod:`.style_features` — style covariates (length, Markdown) of answers;
- :mod:`.simulate` — battles drawn from known ratings; :mod:`.datasets` — the bundled data sets.

May import: the foundation (``stablearena.errors``, ``choices``, ``inputs``, ``atomic`` and the
private helpers at the package root) and itself. Nothing here knows about raters.
"""
