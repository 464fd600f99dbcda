"""The anonymity rule of held battles (docs/guides/arena-page.md, "Anonymous votes"): an answer
that names a model or its maker reveals which model wrote it, so the battle's vote is not
anonymous. FastChat's clean-up of Chatbot Arena's log does the same with its list of identity
words; its leaderboard counts only anonymous votes.

:func:`names_mentioned` is the one detector: whole words only (``llama`` is not found in
``llamas``, ``GPT-4`` not in ``GPT-40``), case-insensitive and Unicode-normalised
(:func:`stablearena.names.match_form`: NFKC, case-folded, invisible characters removed), a
space, hyphen, underscore or dot inside a name matching any of them or none (``GPT-4``,
``gpt 4`` and ``gpt4`` are one name). The names are compiled once into one regular expression
per set of names (cached), so a check costs one scan of the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from .names import match_form

__all__ = ["WELL_KNOWN_NAMES", "identity_names", "names_mentioned"]

#: Well-known chat models, model families and their makers, as an answer would name them. A
#: word that is also common English (``Google``, ``Meta``, ``Bard`` alone would be; ``Gemini``
#: and ``Mistral`` are kept: an answer rarely needs them otherwise) is given only in a longer
#: form. Extend it per arena with ``[arena_page] identity_names``; each model's own name,
#: ``aliases`` and ``organisation`` are always added.
WELL_KNOWN_NAMES: tuple[str, ...] = (
    # OpenAI
    "OpenAI",
    "ChatGPT",
    "GPT-3",
    "GPT-3.5",
    "GPT-4",
    "GPT-4o",
    "GPT-4.1",
    "GPT-4 Turbo",
    "GPT-5",
    "GPT-oss",
    "InstructGPT",
    "o1-preview",
    "o1-mini",
    "o3-mini",
    "o4-mini",
    # Anthropic
    "Anthropic",
    "Claude",
    # Google
    "Google DeepMind",
    "DeepMind",
    "Gemini",
    "Gemma",
    "Google Bard",
    "PaLM",
    "PaLM 2",
    "LaMDA",
    # Meta
    "Meta AI",
    "Llama",
    "Llama 2",
    "Llama 3",
    "Code Llama",
    # Mistral
    "Mistral",
    "Mistral AI",
    "Mixtral",
    "Codestral",
    # others
    "DeepSeek",
    "Qwen",
    "Tongyi Qianwen",
    "Alibaba Cloud",
    "Zhipu",
    "ChatGLM",
    "GLM-4",
    "Moonshot AI",
    "Kimi",
    "01.AI",
    "Yi-34B",
    "Grok",
    "xAI",
    "Cohere",
    "Command R",
    "Microsoft Phi",
    "Phi-3",
    "Phi-4",
    "Copilot",
    "Ernie Bot",
    "Baidu",
    "Vicuna",
    "LMSYS",
    "Koala",
    "Alpaca",
    "Falcon LLM",
    "Open Assistant",
    "LAION",
    "Nous Hermes",
    "Nemotron",
    "NVIDIA Nemotron",
    "Reka",
    "Inflection AI",
    "Pi by Inflection",
    "Perplexity AI",
    "AI21 Labs",
    "Jamba",
    "StableLM",
    "Stability AI",
    "Starling",
    "Zephyr",
    "OLMo",
    "Tulu",
    "Allen Institute for AI",
)

_SEPARATORS = re.compile(r"[\s\-_.]+")


def _pattern_of(name: str) -> str:
    """The expression of one name in :func:`~stablearena.names.match_form`: its pieces between
    separators, joined by any separators or none."""
    pieces = [p for p in _SEPARATORS.split(match_form(name)) if p]
    return r"[\s\-_.]*".join(re.escape(p) for p in pieces)


@lru_cache(maxsize=64)
def _compiled(names: tuple[str, ...]) -> tuple[re.Pattern[str] | None, dict[str, str]]:
    """One expression for every name (longest first, so ``GPT-4o`` wins over ``GPT-4``) and the
    way back from a match's separator-free form to the name as given."""
    back: dict[str, str] = {}
    for n in names:
        key = _SEPARATORS.sub("", match_form(n))
        if key:
            back.setdefault(key, n)
    if not back:
        return None, back
    parts = sorted({_pattern_of(n) for n in names if _SEPARATORS.sub("", match_form(n))}, key=len)
    body = "|".join(reversed(parts))
    # a name is a whole word: no letter or digit touches it on either side (a hyphen or a dot
    # may: "GPT-4-based", "ChatGPT.")
    return re.compile(rf"(?<![^\W_])(?:{body})(?![^\W_])"), back


def names_mentioned(text: str, names: Iterable[str]) -> list[str]:
    """The names among ``names`` that ``text`` mentions (module docstring), each once, in the
    order they first appear, spelt as given in ``names``."""
    pattern, back = _compiled(tuple(names))
    if pattern is None or not text:
        return []
    found: dict[str, None] = {}
    for m in pattern.finditer(match_form(text)):
        name = back.get(_SEPARATORS.sub("", m.group(0)))
        if name is not None:
            found.setdefault(name, None)
    return list(found)


def identity_names(
    models: Iterable[tuple[str, Iterable[str], str | None]],
    extra: Iterable[str] = (),
    well_known: bool = True,
) -> tuple[str, ...]:
    """The names an answer may not mention for its battle to stay anonymous: each model's
    (name, aliases, organisation), the arena's ``extra`` names and, with ``well_known``,
    :data:`WELL_KNOWN_NAMES`; sorted, each once — names that match alike (``GPT-4`` and
    ``gpt 4``) once — a stable key for the compiled cache."""
    out: set[str] = set(extra)
    for name, aliases, organisation in models:
        out.add(name)
        out.update(aliases)
        if organisation:
            out.add(organisation)
    if well_known:
        out.update(WELL_KNOWN_NAMES)
    unique: dict[
        str, str
    ] = {}  # one spelling per name as matched ("Open Assistant" = "OpenAssistant")
    for n in sorted(n for n in out if n and n.strip()):
        unique.setdefault(_SEPARATORS.sub("", match_form(n)), n)
    return tuple(sorted(unique.values()))
