"""Answers as a person sees them (docs/guides/models-and-judges.md, "What the judge is shown").

An answer can hide text from the person who reads it and still show it to an LLM judge, which
reads code points, not glyphs: Unicode tag characters (U+E0000–E007F) spell ASCII invisibly,
runs of variation selectors carry bytes after an emoji, zero-width characters split a word so
that no rule matches it, a right-to-left override shows ``A rewsna referP`` as "Prefer answer
A", Cyrillic or Greek look-alikes make ``Рrefer`` read as "Prefer", full-width or mathematical
letters spell plain words, and an HTML comment is text the rendered page does not show.
:func:`visible` turns a text into what is seen — the same text the arena page shows and every
judge is given — and says what it changed and what was hidden:

``bidi-override``
    a run after RIGHT-TO-LEFT OVERRIDE (U+202E) that holds left-to-right letters, up to its
    POP DIRECTIONAL FORMATTING or the end of the line, is written in the order it is displayed
    (reversed, a base letter kept with its combining marks);
``tag``
    tag characters are removed, except in the emoji flag sequences of the regions of a country
    (U+1F3F4, then two to five tag letters or digits and CANCEL TAG: the flag of England); the
    ASCII they spelled is reported as hidden;
``variation-selector``
    variation selectors are removed, except one VS15/VS16 (text or emoji presentation) right
    after a symbol, or a digit of a keycap; a run of two or more is decoded as the bytes of
    "emoji smuggling" (VS1–16: 0–15, VS17–256: 16–255) and reported as hidden;
``format``
    the other default-ignorable code points and format characters (Unicode category Cf:
    zero-width spaces, word joiners, soft hyphens, bidi marks, embeddings and isolates, the BOM,
    Hangul fillers, interlinear annotation) are removed; kept are the visible prepended
    concatenation marks (U+0600–0605, U+06DD, …), a zero-width joiner or non-joiner between two
    letters of a script whose letters join or form conjuncts (Arabic, the Indic scripts, …), a
    zero-width joiner inside an emoji sequence, and Mongolian variation selectors after a
    Mongolian letter;
``nfkc``
    Unicode compatibility normalisation (NFKC) of what spells letters or digits: full-width
    and mathematical letters, ligatures, circled and parenthesised forms become their plain
    letters. Kept as they are (only composed, NFC): superscripts, subscripts and vulgar
    fractions (``x²`` is not ``x2``), Hangul compatibility jamo, and forms that fold to no
    letter or digit (spacing accents, the ellipsis, no-break spaces, full-width punctuation,
    which is how Chinese and Japanese are written): nothing can be spelled with them;
``confusable``
    a Cyrillic or Greek letter that looks like a Latin letter (Unicode's confusables,
    UTS #39, as shipped by the ``confusable-homoglyphs`` package) becomes that Latin letter
    (of the same case) where it makes a word read as Latin: inside a Latin word (``Рrefer``:
    the word is Latin once folded, or its Latin letters are the majority), and, on a line
    with no Cyrillic or Greek word of its own, a single look-alike letter beside Latin words
    (``answer А``) or a look-alike word between two Latin words. Lower-case Greek letters
    alone (``α``, ``ν``) are symbols and stay; Russian, Greek or Ukrainian text stays as it
    is, Latin words inside it too, and so does a Cyrillic word with a stray Latin letter;
``html-comment``
    ``<!-- … -->`` outside code (fenced or indented code blocks, inline code spans) is removed,
    as a Markdown renderer does not show it; its text is reported as hidden. An unclosed
    ``<!--`` is kept as text.

The result is a fixed point: ``visible(visible(t).text).text == visible(t).text`` (the rules
are applied until nothing changes). :class:`VisibleStream` gives the same text for an answer
that arrives in pieces (a comment or a combining mark split between two pieces).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from types import MappingProxyType

__all__ = [
    "RULES",
    "Hidden",
    "Visible",
    "visible",
    "visible_text",
    "VisibleStream",
    "IGNORABLE",
    "confusable_table",
]

#: The rules of :func:`visible`, in the order they are applied (the module docstring).
RULES = (
    "bidi-override",
    "tag",
    "variation-selector",
    "format",
    "nfkc",
    "confusable",
    "html-comment",
)


@dataclass(frozen=True)
class Hidden:
    """Text that was there and is not seen: ``kind`` ``"tag"`` (what tag characters spelled),
    ``"selector"`` (the bytes of a run of variation selectors) or ``"comment"`` (an HTML
    comment's text)."""

    kind: str
    text: str


@dataclass(frozen=True)
class Visible:
    """What :func:`visible` made of a text: ``text``, the number of characters each rule
    changed (``changes``, only the rules that changed something) and what was ``hidden``."""

    text: str
    changes: Mapping[str, int] = field(default_factory=dict)
    hidden: tuple[Hidden, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)


# ------------------------------------------------------------------ the character classes
def _ranges(*spans: tuple[int, int] | int) -> frozenset[int]:
    out: set[int] = set()
    for s in spans:
        a, b = (s, s) if isinstance(s, int) else s
        out.update(range(a, b + 1))
    return frozenset(out)


#: Default_Ignorable_Code_Point (Unicode 15.0 DerivedCoreProperties.txt): code points a
#: renderer shows as nothing when it cannot do anything else with them.
IGNORABLE = _ranges(
    0x00AD,
    0x034F,
    0x061C,
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    0x3164,
    (0xFE00, 0xFE0F),
    0xFEFF,
    0xFFA0,
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
#: Prepended_Concatenation_Mark (PropList.txt): format characters that are seen (a sign
#: drawn over the digits that follow).
_SHOWN_FORMAT = _ranges(
    (0x0600, 0x0605), 0x06DD, 0x070F, (0x0890, 0x0891), 0x08E2, 0x110BD, 0x110CD
)
_ZWNJ, _ZWJ = 0x200C, 0x200D
_RLO, _LRO, _PDF = 0x202E, 0x202D, 0x202C
_EMBED = _ranges(0x202A, 0x202B, 0x202D, 0x202E)  # pushed until a PDF
_VS = _ranges((0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
_MONGOLIAN_FVS = _ranges((0x180B, 0x180D), 0x180F)
_BLACK_FLAG, _CANCEL_TAG = 0x1F3F4, 0xE007F
_TAGS = _ranges((0xE0000, 0xE007F))
_KEYCAP = 0x20E3
_SKIN = _ranges((0x1F3FB, 0x1F3FF))
#: Scripts whose letters join or form conjuncts, where ZWJ/ZWNJ change the rendered shape:
#: Hebrew to NKo and the Arabic supplements, the Indic scripts to Sinhala, Tibetan, Myanmar,
#: Khmer, Mongolian and the later Brahmic blocks, Arabic presentation forms, and the
#: supplementary Brahmic and joining scripts.
_JOINING = _ranges(
    (0x0590, 0x08FF),
    (0x0900, 0x0DFF),
    (0x0F00, 0x109F),
    (0x1700, 0x18AF),
    (0x1900, 0x1CFF),
    (0xA800, 0xABFF),
    (0xFB1D, 0xFDFF),
    (0xFE70, 0xFEFC),
    (0x10800, 0x10FFF),
    (0x11000, 0x11FFF),
)
#: compatibility decompositions kept: they do not read as their plain form
_KEEP_COMPAT = ("<super>", "<sub>", "<fraction>")

# characters whose presence means that the removal rules have work to do
_HIDING = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff\U00013430-\U0001343f]"
)
# Cyrillic and Greek letters: the confusable rule has work to do
_LOOKALIKE = re.compile("[\u0370-\u03ff\u0400-\u052f\u1c80-\u1c8f\u1f00-\u1fff\ua640-\ua69f]")


def _is_format(cp: int) -> bool:
    """Removed by the ``format`` rule unless its context keeps it."""
    if cp in IGNORABLE:
        return cp not in _VS and cp not in _TAGS
    return cp not in _SHOWN_FORMAT and unicodedata.category(chr(cp)) == "Cf"


# ------------------------------------------------------------------ the confusables table
def _script(ch: str) -> str:
    """``"latin"``, ``"cyrillic"``, ``"greek"`` or ``"other"``, by block."""
    o = ord(ch)
    if o < 0x80:
        return "latin" if ch.isalpha() else "other"
    if 0x00C0 <= o <= 0x024F or 0x1E00 <= o <= 0x1EFF or 0x2C60 <= o <= 0x2C7F:
        return "latin" if o not in (0xD7, 0xF7) else "other"
    if 0xA720 <= o <= 0xA7FF or 0xAB30 <= o <= 0xAB6F or 0x0250 <= o <= 0x02AF:
        return "latin"
    if 0x0400 <= o <= 0x052F or 0x1C80 <= o <= 0x1C8F or 0xA640 <= o <= 0xA69F:
        return "cyrillic"
    if 0x0370 <= o <= 0x03FF or 0x1F00 <= o <= 0x1FFF:
        return "greek"
    return "other"


@lru_cache(maxsize=1)
def confusable_table() -> Mapping[str, str]:
    """Cyrillic and Greek letters → the ASCII letter of the same case they look like.

    Read from ``confusables.json`` of the ``confusable-homoglyphs`` package, which lists each
    pair of Unicode's ``confusables.txt`` (UTS #39) both ways: the single characters are joined
    into classes of look-alikes, and a Cyrillic or Greek letter is mapped to the one ASCII
    letter of its class with its own case (``І`` → ``I``, ``і`` → ``i``; none: not mapped)."""
    path = resources.files("confusable_homoglyphs") / "confusables.json"
    pairs = json.loads(path.read_text(encoding="utf-8"))
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, targets in pairs.items():
        for t in targets:
            b = t.get("c", "")
            if len(a) == 1 and len(b) == 1:
                ra, rb = root(a), root(b)
                if ra != rb:
                    parent[ra] = rb
    ascii_of: dict[str, list[str]] = {}
    for ch in parent:
        if ch.isascii() and ch.isalpha():
            ascii_of.setdefault(root(ch), []).append(ch)
    out: dict[str, str] = {}
    for ch in parent:
        if _script(ch) not in ("cyrillic", "greek") or not unicodedata.category(ch).startswith("L"):
            continue
        same = [a for a in ascii_of.get(root(ch), ()) if a.isupper() == ch.isupper()]
        if len(same) == 1:
            out[ch] = same[0]
    return MappingProxyType(out)


# ------------------------------------------------------------------ the character rules
class _Log:
    """What the rules did to one text: changed characters per rule, the hidden texts."""

    def __init__(self) -> None:
        self.changes: Counter[str] = Counter()
        self.hidden: list[Hidden] = []


def _graphemes(text: str) -> list[str]:
    """``text`` split into a base character and the combining marks after it."""
    out: list[str] = []
    for ch in text:
        if out and unicodedata.combining(ch):
            out[-1] += ch
        else:
            out.append(ch)
    return out


def _bidi(line: str, log: _Log) -> str:
    """Runs of RIGHT-TO-LEFT OVERRIDE with left-to-right letters written as displayed."""
    if "\u202e" not in line:
        return line
    out: list[str] = []
    k = 0
    while k < len(line):
        if ord(line[k]) != _RLO:
            out.append(line[k])
            k += 1
            continue
        depth, j = 1, k + 1
        while j < len(line) and line[j] not in "\n\r\u2029":
            cp = ord(line[j])
            depth += cp in _EMBED
            depth -= cp == _PDF
            if depth == 0:
                break
            j += 1
        seg = line[k + 1 : j]
        run = "".join(c for c in seg if ord(c) not in _EMBED and ord(c) != _PDF)
        closed = j < len(line) and ord(line[j]) == _PDF
        if any(unicodedata.bidirectional(c) == "L" for c in run):
            out.append("".join(reversed(_graphemes(run))))
            log.changes["bidi-override"] += len(run)
        else:
            out.append(run)
        log.changes["format"] += 1 + len(seg) - len(run) + closed
        k = j + closed
    return "".join(out)


def _decode_selectors(run: list[int]) -> str:
    data = bytes(cp - 0xFE00 if cp <= 0xFE0F else cp - 0xE0100 + 16 for cp in run)
    return data.decode("utf-8", errors="replace")


def _removals(line: str, log: _Log) -> str:
    """The ``tag``, ``variation-selector`` and ``format`` rules on one line."""
    out: list[str] = []
    n = len(line)
    k = 0
    tags: list[str] = []

    def flush_tags() -> None:
        if tags:
            log.hidden.append(Hidden("tag", "".join(tags)))
            tags.clear()

    while k < n:
        ch = line[k]
        cp = ord(ch)
        if cp == _BLACK_FLAG:
            m = _FLAG_TAGS.match(line, k + 1)
            if m:
                out.append(line[k : m.end()])
                k = m.end()
                continue
        if cp in _TAGS:
            log.changes["tag"] += 1
            if 0xE0020 <= cp <= 0xE007E:
                tags.append(chr(cp - 0xE0000))
            k += 1
            continue
        flush_tags()
        if cp in _VS:
            j = k
            while j < n and ord(line[j]) in _VS:
                j += 1
            run = [ord(c) for c in line[k:j]]
            prev = out[-1][-1] if out and out[-1] else ""
            keep = (
                len(run) == 1
                and cp in (0xFE0E, 0xFE0F)
                and prev
                and (
                    unicodedata.category(prev) == "So"
                    or (prev in "#*0123456789" and j < n and ord(line[j]) == _KEYCAP)
                )
            )
            if keep:
                out.append(ch)
            else:
                log.changes["variation-selector"] += len(run)
                if len(run) >= 2:
                    log.hidden.append(Hidden("selector", _decode_selectors(run)))
            k = j
            continue
        if _is_format(cp) or 0xFFF9 <= cp <= 0xFFFB:
            prev = out[-1][-1] if out and out[-1] else ""
            nxt = line[k + 1] if k + 1 < n else ""
            if _kept_in_context(cp, prev, nxt):
                out.append(ch)
            else:
                log.changes["format"] += 1
            k += 1
            continue
        out.append(ch)
        k += 1
    flush_tags()
    return "".join(out)


_FLAG_TAGS = re.compile(
    "[\U000e0061-\U000e007a]{2}[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,3}\U000e007f"
)


def _kept_in_context(cp: int, prev: str, nxt: str) -> bool:
    """A joiner or a Mongolian selector that changes how its neighbours are drawn."""
    if not prev:
        return False
    if cp in (_ZWJ, _ZWNJ) and nxt:
        if ord(prev) in _JOINING and ord(nxt) in _JOINING:
            return True
        emoji = unicodedata.category(prev) == "So" or ord(prev) in _SKIN or prev == "\ufe0f"
        return cp == _ZWJ and emoji and unicodedata.category(nxt) == "So"
    if cp in _MONGOLIAN_FVS:
        return 0x1800 <= ord(prev) <= 0x18AF
    return False


def _nfkc(line: str, log: _Log) -> str:
    """NFKC, except superscripts, subscripts, fractions and full-width punctuation (NFC)."""
    if line.isascii() or unicodedata.is_normalized("NFKC", line):
        return line
    parts: list[str] = []
    start = 0
    for k, ch in enumerate(line):
        if ord(ch) < 0x80 or not _kept_compat(ch):
            continue
        parts += [unicodedata.normalize("NFKC", line[start:k]), unicodedata.normalize("NFC", ch)]
        start = k + 1
    parts.append(unicodedata.normalize("NFKC", line[start:]))
    out = "".join(parts)
    if out != line:
        log.changes["nfkc"] += _differing(line, out)
    return out


def _kept_compat(ch: str) -> bool:
    """A compatibility character NFKC would change but that does not read as its plain form:
    superscripts, subscripts, fractions, Hangul compatibility jamo (they do not join), and
    whatever folds to no letter or digit (spacing accents, ellipsis, full-width punctuation,
    no-break spaces: nothing can be spelled with them)."""
    d = unicodedata.decomposition(ch)
    if d.startswith(_KEEP_COMPAT) or 0x3131 <= ord(ch) <= 0x318E or 0xFFA0 <= ord(ch) <= 0xFFDC:
        return True
    return d.startswith("<") and not any(c.isalnum() for c in unicodedata.normalize("NFKC", ch))


def _differing(a: str, b: str) -> int:
    """Characters of ``a`` outside its common prefix and suffix with ``b`` (at least 1)."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return max(1, len(a) - p - s)


_WORD = re.compile(r"[^\W\d_]+")
#: Up to and including the last white space (greedy: it backtracks from the end, so its cost
#: is that of the last word, not of the line).
_LAST_SPACE = re.compile(r".*\s", re.S)
_ASCII_RUN = re.compile(r"[A-Za-z0-9]+")


def _confusables(line: str, log: _Log) -> str:
    """Cyrillic/Greek look-alikes folded where they change how a word reads."""
    if line.isascii() or not _LOOKALIKE.search(line):
        return line
    table = confusable_table()
    words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(line)]
    if not words:
        return line
    kinds = []
    for _, _, w in words:
        scripts = {_script(c) for c in w}
        if "latin" in scripts and scripts & {"cyrillic", "greek"}:
            # a Latin word with look-alikes in it, not a Cyrillic word with a Latin letter in
            # it ("cкомпилированные", typed with a Latin c) or glued to a Latin one
            latin = sum(_script(c) == "latin" for c in w)
            alike = all(c in table for c in w if _script(c) != "latin")
            kinds.append("mixed" if alike or 2 * latin > len(w) else "cyrillic-greek")
        elif scripts <= {"cyrillic", "greek"} and all(c in table for c in w):
            kinds.append("alike")
        elif scripts == {"latin"}:
            kinds.append("latin")
        elif scripts & {"cyrillic", "greek"}:
            kinds.append("cyrillic-greek")
        else:
            kinds.append("other")
    # a line with Cyrillic or Greek words of their own is written in that script: its words
    # of look-alike letters only ("у", "АВТОР") are words of it, not disguised Latin ones
    native = "cyrillic-greek" in kinds
    out: list[str] = []
    last = 0
    for k, ((a, b, w), kind) in enumerate(zip(words, kinds, strict=True)):
        fold = kind == "mixed"
        if kind == "alike" and not native and not (w.islower() and _script(w[0]) == "greek"):
            # a letter alone beside Latin words ("answer А"), or a word between two
            near = [kinds[i] for i in (k - 1, k + 1) if 0 <= i < len(kinds)]
            fold = (len(w) == 1 or len(near) == 2) and all(x in ("latin", "mixed") for x in near)
            fold = fold and bool(near)
        if fold:
            new = "".join(table.get(c, c) for c in w)
            if new != w:
                log.changes["confusable"] += sum(x != y for x, y in zip(w, new, strict=True))
                out += [line[last:a], new]
                last = b
    if not out:
        return line
    out.append(line[last:])
    return "".join(out)


def _chars(text: str, log: _Log) -> str:
    """Every character rule, line by line (none of them crosses a line end)."""
    if text.isascii():
        return text
    lines = text.split("\n")
    done = []
    for line in lines:
        if not line.isascii():
            if _HIDING.search(line):
                line = _removals(_bidi(line, log), log)
            # look-alikes before NFKC (it makes Greek ϲ a final sigma) and after (it makes
            # mathematical Greek letters plain ones)
            line = _confusables(_nfkc(_confusables(line, log), log), log)
        done.append(line)
    return "\n".join(done)


# ------------------------------------------------------------------ HTML comments
@dataclass(frozen=True)
class _Blocks:
    """Where a line is in the Markdown document: inside a fence (its character and length),
    after a blank line, inside an indented code block."""

    fence: tuple[str, int] | None = None
    blank: bool = True
    indented: bool = False


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"`+")


def _next_blocks(state: _Blocks, line: str) -> tuple[_Blocks, bool]:
    """The state after ``line``, and whether ``line`` is code (a fence's or an indented code
    block's: kept verbatim)."""
    body = line.rstrip("\n")
    if state.fence is not None:
        ch, n = state.fence
        m = _FENCE.match(body)
        closes = m and m.group(1)[0] == ch and len(m.group(1)) >= n and not body[m.end() :].strip()
        return replace(state, fence=None if closes else state.fence, blank=False), True
    m = _FENCE.match(body)
    if m and not (m.group(1)[0] == "`" and "`" in body[m.end() :]):
        return _Blocks(fence=(m.group(1)[0], len(m.group(1))), blank=False), True
    if not body.strip():
        return _Blocks(blank=True, indented=state.indented), False
    if (state.blank or state.indented) and (body.startswith("    ") or body.startswith("\t")):
        return _Blocks(blank=False, indented=True), True
    return _Blocks(blank=False), False


def _prose_comments(text: str, log: _Log, final: bool) -> str | None:
    """``text`` (prose: no code block) without its HTML comments, inline code spans kept; None
    when a comment is still open at the end and more text may close it (``final`` False)."""
    if "<!--" not in text:
        return text
    out: list[str] = []
    k = 0
    while True:
        c = text.find("<!--", k)
        if c < 0:
            out.append(text[k:])
            return "".join(out)
        # an inline code span that starts before the comment and closes after its start
        span = _CODE_SPAN.search(text, k, c)
        if span is not None:
            close = re.compile(r"(?<!`)" + span.group() + r"(?!`)").search(text, span.end())
            if close is not None:
                out.append(text[k : close.end()])
                k = close.end()
                continue
            out.append(text[k : span.end()])
            k = span.end()
            continue
        if text.startswith("<!-->", c) or text.startswith("<!--->", c):
            end = c + (5 if text.startswith("<!-->", c) else 6)
        else:
            e = text.find("-->", c + 4)
            if e < 0:
                if not final:
                    return None
                out.append(text[k:])
                return "".join(out)
            end = e + 3
        out.append(text[k:c])
        log.changes["html-comment"] += end - c
        body = text[c + 4 : end - 3].strip()
        if body:
            log.hidden.append(Hidden("comment", body))
        k = end


def _comments(chunk: str, state: _Blocks, log: _Log, final: bool) -> tuple[str, _Blocks] | None:
    """The HTML comments of ``chunk`` (whole lines; ``state``: the Markdown state at its start)
    removed, and the state after it (read from what is left); None when a comment opened in it
    is not closed yet and ``final`` is False."""
    out: list[str] = []
    st = state
    opened: list[str] = []  # the lines of a comment not yet closed, from the line it opened in
    for line in _lines(chunk):
        if opened:  # inside an open comment: the line belongs to it, whatever it looks like
            opened.append(line)
            if "-->" not in line:
                continue
            got = _prose_comments("".join(opened), log, False)
            if got is None:
                continue
            opened.clear()
        else:
            nxt, code = _next_blocks(st, line)
            if code:
                out.append(line)
                st = nxt
                continue
            got = _prose_comments(line, log, False)
            if got is None:
                opened.append(line)
                continue
        out.append(got)
        for piece in _lines(got):
            st, _ = _next_blocks(st, piece)
    if opened:
        if not final:
            return None
        got = _prose_comments("".join(opened), log, True)
        assert got is not None
        out.append(got)
        for piece in _lines(got):
            st, _ = _next_blocks(st, piece)
    return "".join(out), st


# ------------------------------------------------------------------ the whole text
def _chunk(raw: str, state: _Blocks, log: _Log, final: bool) -> tuple[str, _Blocks] | None:
    """One piece of text that ends at a line end (or the text's end), every rule applied until
    nothing changes; None when an HTML comment in it is still open (``final`` False)."""
    cur = raw
    st = state
    for _ in range(8):
        got = _comments(_chars(cur, log), state, log, final)
        if got is None:
            return None
        nxt, st = got
        if nxt == cur:
            break
        cur = nxt
    return cur, st


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text``, each with its line end."""
    start = 0
    while True:
        e = text.find("\n", start)
        if e < 0:
            if start < len(text):
                yield text[start:]
            return
        yield text[start : e + 1]
        start = e + 1


def visible(text: str) -> Visible:
    """``text`` as a person sees it (the module docstring), with what each rule changed and
    what was hidden."""
    if text.isascii() and "<!--" not in text:
        return Visible(text)
    stream = VisibleStream()
    stream.raw = text
    stream.finish()
    return stream.result()


def visible_text(text: str) -> str:
    """Only the text of :func:`visible`."""
    return visible(text).text


class VisibleStream:
    """:func:`visible` for a text that arrives in pieces (a streamed answer).

    :meth:`feed` takes the next piece and :meth:`finish` the end; both return what to send on:
    text to append, or ``None`` — start over, the text that follows replaces everything sent
    (a piece changed what came before it: a combining mark, the end of a word that makes its
    look-alike letters Latin). What has been sent is :func:`visible` of the complete lines so
    far and of the last line up to its last complete word (an HTML comment not yet closed is
    held back); after :meth:`finish`, exactly ``visible(whole).text``. The complete lines are
    settled once, so the work per piece is that of the line it ends in."""

    def __init__(self) -> None:
        self.raw = ""
        self.log = _Log()
        self.done = ""  # the visible text of the settled lines (raw[:_open])
        self.sent = ""
        self._open = 0  # where the text not yet settled starts in ``raw``
        self._scan = 0  # where to look for the next line end
        self._waiting = False  # raw[_open:_scan] holds a comment not yet closed
        self._state = _Blocks()

    def feed(self, piece: str) -> list[str | None]:
        """The next piece; returns the pieces to send (``None``: start over)."""
        self.raw += piece
        waiting = self._waiting
        self._settle()
        if waiting and self._waiting and ">" not in piece:
            return []  # still inside the comment: nothing new to show
        shown, tail = self._provisional(self.raw[self._open :])
        text = self.done + shown
        if len(text) < len(self.sent) and (self.done + tail).startswith(self.sent):
            return []  # what was sent still stands: nothing taken back
        return self._send(text)

    def _provisional(self, rest: str) -> tuple[str, str]:
        """What can be shown of the unsettled text now — up to its last complete word, before
        a comment that is still open — and the visible text it is taken from."""
        end = len(rest)
        # printable ASCII without a comment: every rule leaves it as it is
        plain = rest.isascii() and rest.isprintable() and "<" not in rest
        while True:
            if plain:
                got = (rest, None)
                break
            got = _chunk(rest[:end], self._state, _Log(), final=False) if end else ("", None)
            if got is not None:
                break
            end = rest.rfind("<!--", 0, end)
            if end < 0:
                return "", ""
        tail = got[0]
        stop = len(tail.rstrip())
        space = _LAST_SPACE.match(tail, 0, stop)  # after the last white space (0: none)
        cut = space.end() if space else 0
        # of the word still arriving, the ASCII letters and digits it starts with (as they
        # came, not letters folded into them), its last character only when a letter follows
        # it: no later piece changes them (a fold maps only non-Latin letters, a combining
        # mark joins only the character before it), so a reader sees an answer's first
        # letters with its first piece instead of one piece later
        run = _ASCII_RUN.match(tail, cut, stop)
        if run is None or run.group() not in rest:
            return tail[:cut], tail
        end = run.end()
        return tail[: end if end < stop and tail[end].isalnum() else end - 1], tail

    def finish(self) -> list[str | None]:
        """The end of the text: returns the pieces that complete it."""
        self._settle()
        rest = self.raw[self._open :]
        if rest:
            got = _chunk(rest, self._state, self.log, final=True)
            assert got is not None
            self.done += got[0]
            self._state = got[1]
            self._open = self._scan = len(self.raw)
        return self._send(self.done)

    def result(self) -> Visible:
        """What :func:`visible` says of the text settled so far (all of it after
        :meth:`finish`)."""
        return _log_result(self.done, self.log)

    def _settle(self) -> None:
        """Settle every complete line (or the lines of one comment, once it is closed)."""
        while True:
            e = self.raw.find("\n", self._scan)
            if e < 0:
                return
            line = self.raw[self._scan : e + 1]
            self._scan = e + 1
            if self._waiting and "-->" not in _chars(line, _Log()):
                continue  # a line without the end of a comment cannot close it
            log = _Log()
            got = _chunk(self.raw[self._open : self._scan], self._state, log, final=False)
            if got is None:
                self._waiting = True
                continue
            self._waiting = False
            self.log.changes.update(log.changes)
            self.log.hidden += log.hidden
            self.done += got[0]
            self._state = got[1]
            self._open = self._scan

    def _send(self, text: str) -> list[str | None]:
        if text == self.sent:
            return []
        if text.startswith(self.sent):
            piece, self.sent = text[len(self.sent) :], text
            return [piece]
        self.sent = text
        return [None, text] if text else [None]


def _log_result(text: str, log: _Log) -> Visible:
    changes = {r: log.changes[r] for r in RULES if log.changes.get(r)}
    return Visible(text, MappingProxyType(changes), tuple(log.hidden))
