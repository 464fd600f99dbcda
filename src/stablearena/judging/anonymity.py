"""The anonymity rule of held battles (docs/guides/arena-page.md, "Anonymous votes"): an answer
that names a model or its maker reveals which model wrote it, so the battle's vote is not
anonymous. FastChat's clean-up of Chatbot Arena's log does the same with its list of identity
words; its leaderboard counts only anonymous votes.

:func:`names_mentioned` is the one detector: whole words only (``llama`` is not found in
``llamas``, ``GPT-4`` not in ``GPT-40``), case-insensitive and Unicode-normalised
(:func:`stablearena.data.names.match_form`: NFKC, case-folded, invisible characters removed), a
space, hyphen, underscore or dot inside a name matching any of them or none (``GPT-4``,
``gpt 4`` and ``gpt4`` are one name). The names are prepared once per set of names (cached);
a check splits the answer into words once and looks up only the words that can begin a name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

from ..data.names import match_form

__all__ = ["MIN_MODEL_NAME", "WELL_KNOWN_NAMES", "identity_names", "names_mentioned"]

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

#: A text as words (runs of letters and digits) and what lies between them.
#: A model's name, alias or organisation shorter than this (letters and digits) is not looked
#: for: ``a``, ``b``, ``x1`` are ordinary words (``identity_names`` in the serve config may
#: still list such a name).
MIN_MODEL_NAME = 3
_WORDS = re.compile(r"([^\W_]+)")
#: What may lie between two pieces of one name: separators or nothing.
_JOIN = re.compile(r"[\s\-_.]*\Z")


class _Names(NamedTuple):
    starts: frozenset[str]  # the joined first pieces of every name (p1, p1p2, …)
    full: dict[str, str]  # a name's pieces joined → the name as given


@lru_cache(maxsize=64)
def _compiled(names: tuple[str, ...]) -> _Names:
    """The names as the scan of :func:`names_mentioned` reads them (cached per set of names)."""
    starts: set[str] = set()
    full: dict[str, str] = {}
    for n in names:
        pieces = [p for p in _WORDS.findall(match_form(n))]
        if not pieces:
            continue
        for k in range(1, len(pieces) + 1):
            starts.add("".join(pieces[:k]))
        full.setdefault("".join(pieces), n)
    return _Names(frozenset(starts), full)


def names_mentioned(text: str, names: Iterable[str]) -> list[str]:
    """The names among ``names`` that ``text`` mentions (module docstring), each once, in the
    order they first appear, spelt as given in ``names``.

    The text is split into words (a compiled expression) and the words are looked up as a set:
    an answer where no name can begin costs that one pass in C; the others are scanned word by
    word from the words that can begin a name."""
    spec = _compiled(tuple(names))
    if not spec.full or not text:
        return []
    folded = match_form(text)
    if spec.starts.isdisjoint(_WORDS.findall(folded)):  # most answers: no name can begin
        return []
    parts = _WORDS.split(folded)
    words = parts[1::2]  # parts: between, word, between, word, …, between
    found: dict[str, None] = {}
    for i, w in enumerate(words):
        if w not in spec.starts:
            continue
        best = spec.full.get(w)
        joined, j = w, i
        while j + 1 < len(words) and _JOIN.match(parts[2 * j + 2]):  # longest name first
            joined += words[j + 1]
            if joined not in spec.starts:
                break
            j += 1
            best = spec.full.get(joined, best)
        if best is not None:
            found.setdefault(best, None)
    return list(found)


def identity_names(
    models: Iterable[tuple[str, Iterable[str], str | None]],
    extra: Iterable[str] = (),
    well_known: bool = True,
) -> tuple[str, ...]:
    """The names an answer may not mention for its battle to stay anonymous: each model's
    (name, aliases, organisation) — those of at least :data:`MIN_MODEL_NAME` letters and
    digits — the arena's ``extra`` names and, with ``well_known``,
    :data:`WELL_KNOWN_NAMES`; sorted, each once — names that match alike (``GPT-4`` and
    ``gpt 4``) once — a stable key for the compiled cache."""
    out: set[str] = set(extra)
    for name, aliases, organisation in models:
        for n in (name, *aliases, organisation or ""):
            if len("".join(_WORDS.findall(match_form(n)))) >= MIN_MODEL_NAME:
                out.add(n)
    if well_known:
        out.update(WELL_KNOWN_NAMES)
    unique: dict[
        str, str
    ] = {}  # one spelling per name as matched ("Open Assistant" = "OpenAssistant")
    for n in sorted(n for n in out if n and n.strip()):
        unique.setdefault("".join(_WORDS.findall(match_form(n))), n)
    return tuple(sorted(unique.values()))
