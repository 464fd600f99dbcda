"""Names of models, annotators, judges and categories: the one validator every route, config
file and log reader uses (docs/guides/live-arena-security.md).

A name is normalised to Unicode NFC without leading or trailing spaces and refused when it
holds a character that is not printable or that hides or reorders text: control and format
characters (zero-width, bidirectional overrides and isolates), surrogates, private-use and
unassigned code points, line and paragraph separators, spaces other than U+0020.
:func:`name_forms` gives the spellings under which a name from a URL path is looked up, so the
same name is found the same way in a path and in a body."""

from __future__ import annotations

import re
import unicodedata

from ..errors import InputError

__all__ = [
    "MAX_NAME",
    "checked_name",
    "clean_name",
    "match_form",
    "name_problem",
    "name_forms",
]

#: Longest model or annotator name (the database columns are String(200)).
MAX_NAME = 200
#: Unicode categories refused in a name: control (Cc), format (Cf: zero-width characters, the
#: bidirectional overrides and isolates U+202A–U+202E, U+2066–U+2069, …), surrogates (Cs),
#: private use (Co), unassigned (Cn), line and paragraph separators (Zl, Zp).
_REFUSED = {
    "Cc": "a control character",
    "Cf": "an invisible formatting character",
    "Cs": "a surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
_BIDI = {0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069}


def name_problem(name: str) -> str | None:
    """Why ``name`` (already NFC) cannot be a name, naming the first offending character
    (``"U+202E RIGHT-TO-LEFT OVERRIDE is a bidirectional override …"``), or ``None``."""
    for ch in name:
        cat = unicodedata.category(ch)
        what = _REFUSED.get(cat)
        if what is None and cat == "Zs" and ch != " ":
            what = "a space other than U+0020 (it looks like one)"
        if what is None:
            continue
        if ord(ch) in _BIDI:
            what = "a bidirectional override (it reverses how the text is displayed)"
        label = unicodedata.name(ch, "")
        label = f"U+{ord(ch):04X}" + (f" {label}" if label else "")
        return (
            f"contains {label}, {what}; names may hold printable characters and "
            "ordinary spaces only"
        )
    if not name:
        return "is empty"
    return None


def clean_name(value: str) -> str:
    """``value`` normalised to Unicode NFC, without leading or trailing spaces; ``ValueError``
    with the offending character (see :func:`name_problem`) when it is not a valid name."""
    name = unicodedata.normalize("NFC", value).strip(" ")
    problem = name_problem(name)
    if problem:
        raise ValueError(f"the name {problem}")
    if len(name) > MAX_NAME:
        raise ValueError(f"the name is longer than {MAX_NAME} characters")
    return name


def name_forms(raw: str) -> list[str]:
    """The spellings to look a name from a path up by, best first: ``raw`` exactly as sent (a
    name stored before names were validated stays addressable), then its clean form
    (:func:`clean_name`: NFC, no outer spaces) when it is a valid name and differs."""
    forms = [raw]
    try:
        clean = clean_name(raw)
    except ValueError:
        return forms
    if clean != raw:
        forms.append(clean)
    return forms


def checked_name(value: object, where: str) -> object:
    """A name read from a file (a config's ``name = …``) as :func:`clean_name` makes it; an
    :class:`~stablearena.errors.InputError` saying where, what is wrong and what to do. A value
    that is not a string is returned as it is (its reader reports the missing name)."""
    if not isinstance(value, str):
        return value
    try:
        return clean_name(value)
    except ValueError as exc:
        raise InputError(f"{where}: {exc} (got {value!r}); rename it") from None


def match_form(text: str) -> str:
    """``text`` as names are compared inside free text (stablearena.judging.anonymity): Unicode NFKC
    (full-width letters, ligatures and compatibility forms become their plain letters) and
    case-folded (``ChatGPT``, ``CHATGPT`` and ``ｃｈａｔｇｐｔ`` are one form). Invisible
    formatting characters (zero-width spaces and joiners, soft hyphens) are removed, so a
    name split by one is still the name."""
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text).casefold())


#: The invisible formatting characters :func:`match_form` removes: soft hyphen, zero-width
#: space / joiners, marks and overrides, word joiner and invisible operators, byte-order mark.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
