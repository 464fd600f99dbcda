"""The language of a prompt, guessed cheaply for the export's ``language`` column (FastChat's
public battle schema has one; docs/guides/live-arena.md, "Export").

No model, no download: the letters' scripts decide, and for Latin text a list of common
English words. What a script shows without doubt is named (Hangul: Korean; kana: Japanese; Han
without kana: Chinese; Greek, Thai, Hebrew, Armenian, Georgian); Latin text is English when at
least a fifth of its words (and two or more) are among the commonest English words. Anything
else — French, Spanish, Russian (Cyrillic is also Ukrainian, Bulgarian, …), Arabic (also
Persian, Urdu), a prompt of numbers only — is ``"unknown"``: a guess that would often be wrong
is not given.
"""

from __future__ import annotations

import re

__all__ = ["UNKNOWN", "language_of"]

UNKNOWN = "unknown"

#: How many characters are read (a prompt's start tells its language).
_HEAD = 2000

#: Script → language, for the scripts of one language, as (name, first, last code point).
_RANGES: tuple[tuple[str, int, int], ...] = (
    ("Korean", 0xAC00, 0xD7AF),
    ("Korean", 0x1100, 0x11FF),
    ("Korean", 0x3130, 0x318F),
    ("kana", 0x3040, 0x30FF),
    ("han", 0x4E00, 0x9FFF),
    ("han", 0x3400, 0x4DBF),
    ("Greek", 0x0370, 0x03FF),
    ("Thai", 0x0E00, 0x0E7F),
    ("Hebrew", 0x0590, 0x05FF),
    ("Armenian", 0x0530, 0x058F),
    ("Georgian", 0x10A0, 0x10FF),
    ("other", 0x0400, 0x04FF),  # Cyrillic: several languages
    ("other", 0x0600, 0x06FF),  # Arabic script: several languages
    ("other", 0x0900, 0x097F),  # Devanagari: several languages
)
_ENGLISH = frozenset(
    "the a an of to and in is are was were be been it that this what which who how why when "
    "where do does did can could would should will i you he she we they my your me please "
    "write explain give tell with for on from about not no yes there their if or as by at".split()
)
_WORD = re.compile(r"[a-z']+")


def language_of(text: str) -> str:
    """The language of ``text`` (module docstring): a language's English name or
    ``"unknown"``."""
    head = text[:_HEAD]
    counts: dict[str, int] = {}
    latin = 0
    for ch in head:
        o = ord(ch)
        if o < 0x80:
            latin += ch.isalpha()
            continue
        for name, lo, hi in _RANGES:
            if lo <= o <= hi:
                counts[name] = counts.get(name, 0) + 1
                break
        else:
            latin += ch.isalpha() and o < 0x250  # accented Latin letters
    scripts = sum(counts.values())
    if scripts > latin:
        if counts.get("kana"):
            return "Japanese"
        best = max(counts, key=lambda k: counts[k])
        if best == "han":
            return "Chinese"
        return UNKNOWN if best in ("other", "kana") else best
    if latin == 0:
        return UNKNOWN
    words = _WORD.findall(head.lower())
    hits = sum(w in _ENGLISH for w in words)
    return "English" if hits >= 2 and hits * 5 >= len(words) else UNKNOWN
