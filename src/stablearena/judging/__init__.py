"""Layer 6 — judging: models and LLM judges, reached over HTTP, and the arenas they run.

- :mod:`.endpoints` — calling models (OpenAI-compatible endpoints, offline answer files, the
  demo models and their server);
- :mod:`.judges` — LLM judges and their verdict parsing; :mod:`.visible` — answers normalised
  to what a person sees; :mod:`.injection` — notes to the judge and judges' disagreement;
  :mod:`.judge_notes` — the generated corpus of notes; :mod:`.probes` — probe battles of known
  verdict; :mod:`.anonymity` — self-naming answers;
- :mod:`.auto_arena` — the automatic arena (``stablearena auto``); :mod:`.arena_hard` —
  Arena-Hard-Auto's files and boards; :mod:`.power` — how many judgements a question needs.

May import: every layer below (the foundation, :mod:`stablearena.data`,
:mod:`stablearena.raters`, :mod:`stablearena.crowd`, :mod:`stablearena.analysis`,
:mod:`stablearena.design`).
"""
