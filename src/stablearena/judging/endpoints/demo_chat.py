"""The demo models' chat: an answer in Markdown to any prompt and follow-up, of known quality.

No model and nothing downloaded: a small composable generator over the text bundled in
``data/demo_chat.json`` (written for this project). :func:`read_prompt` classifies a prompt into
one of :data:`KINDS` by its keywords and extracts its topic (the words the answer is about, a
programming language, a phrase to translate, two things to compare…); :func:`compose` fills
the kind's blocks with them. A follow-up is read against the conversation's earlier turns: it
inherits their topic ("And in Rust?" after a coding prompt is the same task in Rust), or works
on the previous answer ("Say it in words.", "Shorter, please.").

Quality is one number ``q`` in [0, 1] (a demo model's ``1 - error_rate``):

* every answer has the structure of its kind (a fenced block for code, a table for a
  comparison, math for math…), so no model refuses or leaves the topic;
* each optional block (a how-it-works list, complexity, caveats, an example, a closing
  recommendation) is added with probability ``q``, so a better model's answer is longer and
  more complete on average;
* a weaker model hedges more (probability ``1 - q``) and is sometimes slightly off: with
  probability ``(1 - q) / 2`` it adds a wrong remark written for that topic, or gives a near
  miss (``Buenas tardes`` for *good morning*).

Checkable answers (arithmetic, capitals) are decided by :mod:`stablearena.judging.endpoints.demo`
(right with probability ``1 - error_rate``); this module only writes them up, ending with
``The answer is X.`` as the demo judges read it. Every draw comes from the ``rng`` the caller
seeds with a hash of the conversation, so an answer is a function of (seed, model, messages).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

_ARITH = re.compile(
    r"(?:\bwhat(?:'s| is)\s+|^\s*(?:and|then|now)?\s*(?:what about\s+)?|\b(?:compute|calculate)\s+)"
    r"(-?\d+)\s*([*+\-x×]|times|plus|minus|multiplied by)\s*(-?\d+)\s*(?:\?|$)",
    re.I,
)
_OPERATORS = {
    "*": "*",
    "x": "*",
    "×": "*",
    "times": "*",
    "multiplied by": "*",
    "+": "+",
    "plus": "+",
    "-": "-",
    "minus": "-",
}


def arithmetic(prompt: str) -> tuple[int, str, int, int] | None:
    """``(x, op, y, value)`` of an arithmetic question (``op``: ``+``, ``-`` or ``*``), or
    ``None``: "What is 17*23?", "what's 17 + 23?", "And 18*23?", "compute 6 times 7"."""
    m = _ARITH.search(prompt.strip())
    if not m:
        return None
    x, op, y = int(m.group(1)), _OPERATORS[m.group(2).lower()], int(m.group(3))
    return x, op, y, x * y if op == "*" else x + y if op == "+" else x - y


__all__ = [
    "KINDS",
    "WORKING",
    "Reading",
    "chat_data",
    "compose",
    "number_words",
    "read_conversation",
]

#: How a checkable answer (arithmetic, a capital) opens; it ends with ``The answer is X.``. The
#: demo judges key their noise on the answer with what lies between the two reduced to nothing
#: (:func:`stablearena.judging.endpoints.demo.judged_text`), so the prose here never moves a verdict.
WORKING = "Let me work this out."

#: The kinds of prompt the generator tells apart, in the order it tries them.
KINDS = (
    "math",
    "capital",
    "translate",
    "compare",
    "creative",
    "summary",
    "code",
    "advice",
    "howto",
    "explain",
    "greeting",
    "followup",
    "general",
)


@cache
def chat_data() -> dict[str, Any]:
    """The bundled text (``stablearena/judging/endpoints/data/demo_chat.json``), read once."""
    text = resources.files(__package__).joinpath("data/demo_chat.json").read_text("utf-8")
    return json.loads(text)


@dataclass(frozen=True)
class Reading:
    """What the generator read from one user turn: its ``kind`` (one of :data:`KINDS`), the
    ``topic`` as the user wrote it, and the slots a kind fills (``language``: a key of the
    bundled programming languages; ``task``: a bundled coding task; ``concepts``: bundled
    concepts named; ``items``: the things compared; ``phrase``/``target``: what to translate
    into which language; ``country``; ``work``: a bundled book or play; ``form``: haiku, poem,
    story or limerick; ``mode``: what a follow-up asks of the previous answer)."""

    kind: str
    topic: str
    prompt: str
    language: str | None = None
    task: str | None = None
    concepts: tuple[str, ...] = ()
    items: tuple[str, ...] = ()
    phrase: str | None = None
    target: str | None = None
    country: str | None = None
    work: str | None = None
    form: str | None = None
    mode: str | None = None
    follows: Reading | None = field(default=None, repr=False)


_HUMAN_LANGUAGES = ("spanish", "french", "german", "italian", "portuguese", "dutch", "japanese")
_STOP = frozenset(
    """a an the of to in on for and or with about into from by at is are was were be been do does
    did i me my you your we our it its this that these those what which who how why when where
    can could would should will please tell give write explain show make let lets some any
    just really very me us them they he she his her than then there here also too so as if
    get got want need like know think use using via one two more most much many""".split()
)
_CUES = re.compile(
    r"^(?:(?:can|could|would|will) you (?:please )?|please |i want to know |i'd like to know |"
    r"tell me (?:about |how |what |why )?|explain (?:to me )?(?:how |what |why )?|describe |"
    r"define |what (?:is|are|was|were)(?: the)? |what's |who (?:is|was) |how (?:do|does|can|should"
    r"|would) (?:i|you|we|one) |how (?:do|does|is|are) |how to |why (?:is|are|do|does) |"
    r"give me (?:some |a |an )?|write (?:me )?(?:a |an )?|show me (?:how to )?|help me (?:to )?|"
    r"summari[sz]e |compare |translate |advice on |tips (?:on|for) |should (?:i|we) |"
    r"is it worth |(?:what )?do you think (?:about |of )?|your opinion (?:on|of) )+",
    re.I,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#'.-]*[A-Za-z0-9+#]|[A-Za-z]")
_QUOTED = re.compile(r"[\"'“‘]([^\"'”’]{1,80})[\"'”’]")
_FOLLOW_CUES = re.compile(
    r"^(?:and|but|also|so|now|then|ok(?:ay)?|what about|how about|why|more|again|shorter|"
    r"longer|simpler|explain (?:that|it|this|further|more)|elaborate|go on|continue|tell me more|"
    r"give (?:me )?(?:an? )?(?:example|another)|can you (?:expand|elaborate|shorten|simplify|"
    r"give|show|explain that|say)|say it|in (?:words|short|one line|brief)|tl;?dr|same|thanks)\b",
    re.I,
)
_ANAPHORA = re.compile(r"\b(?:that|it|this|those|these|above|your answer|previous|same)\b", re.I)


def _cues(kind: str) -> list[str]:
    """The words and phrases that mark a prompt of ``kind`` (bundled, ``cues``)."""
    return chat_data()["cues"][kind]


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _has(text: str, *phrases: str) -> bool:
    low = f" {text.lower()} "
    return any(re.search(rf"(?<![a-z]){re.escape(p)}(?![a-z])", low) for p in phrases)


def _tidy(topic: str) -> str:
    topic = re.sub(r"[?!.:;,]+$", "", topic.strip()).strip()
    topic = re.sub(r"^(?:a|an|the|some|my|your|to)\s+", "", topic, flags=re.I)
    return topic


def _topic(prompt: str) -> str:
    """The prompt's subject: the prompt less its question words, articles and trailing
    punctuation (at most eight words), as the user wrote it."""
    first = prompt.strip().split("\n", 1)[0]
    first = re.split(r"(?<=[.?!])\s", first, maxsplit=1)[0]
    first = re.sub(
        r"^(?:and|but|so|also|then|now|ok(?:ay)?)\b[,\s]*", "", first.strip(), flags=re.I
    )
    rest = _CUES.sub("", first)
    rest = re.sub(r"^(?:me |us )", "", rest, flags=re.I)
    words = rest.split()
    while words and words[-1].lower().strip("?.!,") in _STOP:
        words.pop()
    topic = _tidy(" ".join(words[:8]))
    if not topic:
        content = [w for w in _words(first) if w.lower() not in _STOP]
        topic = " ".join(content[:4]) or "your question"
    return topic


def _programming_language(prompt: str) -> str | None:
    low = prompt.lower()
    for key, lang in chat_data()["languages"].items():
        for alias in lang["aliases"]:
            if alias in ("go", "c", "sh"):
                # common words: only "in go", "go code", "golang"-like uses count
                if re.search(
                    rf"\b(?:in|using|with) {re.escape(alias)}\b(?!-)|\b{re.escape(alias)}"
                    r" (?:code|program|function|script)\b",
                    low,
                ):
                    return key
            elif re.search(rf"(?<![a-z0-9]){re.escape(alias)}(?![a-z0-9+#])", low):
                return key
    return None


def _task(prompt: str) -> str | None:
    for key, task in chat_data()["tasks"].items():
        if _has(prompt, *task["keywords"]):
            return key
    return None


def _concepts(text: str) -> tuple[str, ...]:
    """The bundled concepts ``text`` names, in the order it names them."""
    low = f" {text.lower()} "
    found = []
    for key, c in chat_data()["concepts"].items():
        hits = [
            m.start()
            for a in c["aliases"]
            for m in [re.search(rf"(?<![a-z]){re.escape(a)}(?![a-z])", low)]
            if m
        ]
        if hits:
            found.append((min(hits), key))
    return tuple(k for _, k in sorted(found))


def _country(prompt: str) -> str | None:
    m = re.search(r"capital (?:city )?of ([A-Za-z][A-Za-z .'-]*)", prompt, re.I)
    if not m:
        return None
    name = _tidy(m.group(1))
    for country in chat_data()["capitals"]:
        if country.lower() == name.lower():
            return country
    return name.title()


def _compared(prompt: str) -> tuple[str, ...]:
    text = re.sub(
        r"^.*?\b(?:compare|comparing|difference[s]? between|contrast)\s+", "", prompt, flags=re.I
    )
    text = re.split(r"[?.!]|\bfor\b|\bin terms of\b|\bwhen\b", text, maxsplit=1)[0]
    parts = re.split(r"\s*(?:\bvs\.?|\bversus\b|\band\b|\bor\b|\bwith\b|,|/)\s*", text, flags=re.I)
    items = tuple(_tidy(p) for p in parts if _tidy(p))
    return items[:3] if len(items) >= 2 else ()


def _translation(prompt: str) -> tuple[str | None, str | None]:
    target = next((lang for lang in _HUMAN_LANGUAGES if _has(prompt, lang)), None)
    quoted = _QUOTED.search(prompt)
    if quoted:
        phrase = quoted.group(1)
    else:
        m = re.search(
            r"(?:translate|say|how do you say|what is)\s+(.+?)\s+(?:in|into|to)\s+\w+", prompt, re.I
        )
        phrase = m.group(1) if m else None
    return (_tidy(phrase) if phrase else None), target


def _form(prompt: str) -> str:
    for form in ("haiku", "limerick", "story", "poem"):
        if _has(prompt, form, form + "s"):
            return form
    return "story" if _has(prompt, "tale", "fable") else "poem"


def _subject_after(prompt: str, *words: str) -> str | None:
    """What follows the first of ``words`` ("a haiku about *the sea*"), articles kept."""
    m = re.search(rf"\b(?:{'|'.join(words)})\s+(.+)", prompt, re.I)
    return re.sub(r"[?!.:;,]+$", "", m.group(1).strip()) if m else None


def _work(prompt: str) -> str | None:
    for key, work in chat_data()["works"].items():
        if _has(prompt, *work["aliases"]):
            return key
    return None


def _follow_mode(prompt: str) -> str:
    if _has(prompt, "in words", "spell it", "write it out", "say it in words"):
        return "words"
    if _has(prompt, *_cues("shorter")):
        return "shorter"
    if _has(prompt, "example", "examples", "for instance", "show me"):
        return "example"
    if re.match(r"\s*why\b", prompt, re.I):
        return "why"
    return "more"


def read_prompt(prompt: str, previous: Reading | None = None) -> Reading:
    """Classify one user turn (``previous``: the conversation's last reading, for follow-ups)."""

    text = prompt.strip()
    topic = _topic(text)
    if arithmetic(text) is not None:
        return Reading("math", topic, text, follows=previous)
    if _has(text, "capital of", "capital city of"):
        return Reading("capital", topic, text, country=_country(text), follows=previous)
    phrase, target = _translation(text)
    if _has(text, "translate", "translation", "how do you say", "say in") or (
        target and phrase and _has(text, "in " + target, "into " + target)
    ):
        return Reading(
            "translate", phrase or topic, text, phrase=phrase, target=target, follows=previous
        )
    if previous is not None and (
        _FOLLOW_CUES.match(text) or (len(text.split()) <= 8 and _ANAPHORA.search(text))
    ):
        return _follow(text, topic, previous)
    return _fresh(text, topic, previous)


def _fresh(text: str, topic: str, previous: Reading | None) -> Reading:
    language, concepts = _programming_language(text), _concepts(text)
    base = {"prompt": text, "concepts": concepts, "language": language, "follows": previous}
    items = _compared(text) if _has(text, *_cues("compare")) else ()
    if items:
        return Reading("compare", " and ".join(items), items=items, **base)
    if _has(text, *_cues("creative")):
        about = _subject_after(text, "about", "on", "of") or topic
        return Reading("creative", about, form=_form(text), **base)
    if _has(text, *_cues("summary")):
        return Reading("summary", topic, work=_work(text), **base)
    task = _task(text)
    code_words = _has(text, *_cues("code"))
    if task or code_words or (language and _has(text, "write", "how to", "how do i", "in")):
        if not (language and _has(text, "advice", "tips", "learn", "learning")) or task:
            what = re.sub(
                r"^(?:(?:a|an|the|some)\s+)?(?:(?:small|short|simple|quick)\s+)?(?:function|"
                r"program|script|code|snippet|class|method)s?\s+(?:to|that|which|for)\s+",
                "",
                topic,
                flags=re.I,
            )
            what = re.sub(r"\s+(?:in|using|with)\s+\S+$", "", what) if language else what
            return Reading("code", _tidy(what) or topic, task=task, **base)
    if _has(text, *_cues("advice")):
        return Reading("advice", topic, **base)
    if _has(text, *_cues("howto")) or re.search(
        r"\b(?:list|name|give me) (?:\d+|some|a few|the)\b", text, re.I
    ):
        return Reading("howto", topic, **base)
    data = chat_data()["concepts"]
    if any(data[c]["domain"] == "math" for c in concepts) or _has(text, *_cues("math")):
        return Reading("math", topic, **base)
    if _has(text, *_cues("explain")):
        return Reading("explain", topic, **base)
    if (
        re.match(
            r"\s*(?:hi|hello|hey|good (?:morning|afternoon|evening)|greetings|howdy|"
            r"how are you)\b",
            text,
            re.I,
        )
        and len(text.split()) <= 8
    ):
        return Reading("greeting", topic, **base)
    return Reading("general", topic, **base)


def _follow(text: str, topic: str, previous: Reading) -> Reading:
    """A follow-up: the previous turn's reading with what this turn changes (a language, a
    target language, a country), or a ``followup`` on the previous answer."""
    root = previous
    while root.kind == "followup" and root.follows is not None:
        root = root.follows
    language = _programming_language(text)
    if root.kind == "code" and language:
        return replace(root, prompt=text, language=language, follows=previous)
    _, target = _translation(text)
    if root.kind == "translate" and target:
        return replace(root, prompt=text, target=target, follows=previous)
    about = _subject_after(text, "about")
    if root.kind == "creative" and about:
        return replace(
            root,
            prompt=text,
            topic=about,
            form=_form(text) if _has(text, "haiku", "poem", "story", "limerick") else root.form,
            follows=previous,
        )
    swap = re.match(
        r"\s*(?:and|but|now)?\s*(?:what|how) about\s+(.+?)\s*[?.!]*$|"
        r"\s*and\s+(.+?)\s*[?.!]*$",
        text,
        re.I,
    )
    new = (swap.group(1) or swap.group(2)) if swap else None
    old = [w for w in _words(root.topic) if w.lower() not in _STOP]
    if (
        new
        and old
        and len(new.split()) <= 4
        and not _ANAPHORA.search(new)
        and not re.match(r"(?:in|more|why|shorter|simpler|again|an? example)\b", new, re.I)
    ):
        reread = read_prompt(re.sub(rf"\b{re.escape(old[-1])}\b", new, root.prompt), None)
        return replace(reread, follows=previous)
    mode = _follow_mode(text)
    return Reading(
        "followup",
        root.topic,
        text,
        language=root.language,
        task=root.task,
        concepts=root.concepts,
        items=root.items,
        phrase=root.phrase,
        target=root.target,
        work=root.work,
        form=root.form,
        mode=mode,
        follows=previous,
    )


def read_conversation(messages: list[dict[str, Any]]) -> tuple[Reading, list[str], bool]:
    """The reading of the last user turn of ``messages`` (each earlier user turn read in order,
    so a follow-up knows its topic), the earlier assistant answers, and whether a system
    message asks for brevity."""
    reading: Reading | None = None
    answers: list[str] = []
    brief = False
    for m in messages:
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "user":
            reading = read_prompt(content, reading)
        elif role == "assistant":
            answers.append(content)
        elif role == "system" and _has(content, "brief", "briefly", "short", "concise", "terse"):
            brief = True
    return reading or read_prompt(""), answers, brief


# -- composing --------------------------------------------------------------------------------


#: Sentence openings written in lower case after a hedge ("I think the capital of…").
_LOWER_AFTER_HEDGE = frozenset("A An The This These Here We Some More It So In There".split())


class _Answer:
    """An answer being composed: ``core`` blocks always, ``extra`` blocks with probability
    ``q``, ``slip`` (a slightly-off remark) with probability ``(1 - q) / 2``."""

    def __init__(self, rng: random.Random, q: float):
        self.rng, self.q, self.blocks = rng, q, []

    def core(self, *blocks: str) -> None:
        self.blocks.extend(b for b in blocks if b)

    def extra(self, *blocks: str) -> bool:
        if self.rng.random() < self.q:
            self.core(*blocks)
            return True
        return False

    def slip(self, remark: str | None) -> bool:
        if remark and self.rng.random() < (1.0 - self.q) / 2:
            self.core(remark)
            return True
        return False

    def hedge(self, sentence: str) -> str:
        """``sentence``, hedged with probability ``1 - q``."""
        if sentence and self.rng.random() < 1.0 - self.q:
            h = self.rng.choice(chat_data()["hedges"])
            first, _, rest = sentence.partition(" ")
            if first in _LOWER_AFTER_HEDGE:
                first = first.lower()
            return f"{h} {first} {rest}".rstrip()
        return sentence

    def pick(self, options: list[Any] | tuple[Any, ...]) -> Any:
        return options[int(self.rng.random() * len(options))]

    def some(self, items: list[str], least: int = 1) -> list[str]:
        """A prefix of ``items`` as long as quality allows (at least ``least``)."""
        n = max(least, round(len(items) * (0.35 + 0.65 * self.q) - self.rng.random() * 0.5))
        return items[: min(n, len(items))]

    def text(self) -> str:
        return "\n\n".join(b.strip("\n") for b in self.blocks).strip() + "\n"


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:] if s else s


def _bullets(items: list[str], numbered: bool = False) -> str:
    return "\n".join(f"{k}. {x}" if numbered else f"- {x}" for k, x in enumerate(items, 1))


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _domain(text: str, concepts: tuple[str, ...]) -> str:
    data = chat_data()
    if concepts:
        d = data["concepts"][concepts[0]]["domain"]
        return d if d in data["domain_words"] else "general"
    for name, words in data["domains"].items():
        if _has(text, *words):
            return name
    return "general"


def _identifier(topic: str, camel: bool) -> str:
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", topic) if w.lower() not in _STOP][:4]
    words = words or ["solve"]
    if camel:
        return words[0] + "".join(w.title() for w in words[1:])
    return "_".join(words)


def _code_block(reading: Reading, language: str) -> tuple[str, bool]:
    """The fenced code for ``reading`` in ``language``, and whether it is a worked snippet
    (``False``: the language's skeleton named after the topic)."""
    data = chat_data()
    lang = data["languages"][language]
    snippet = data["tasks"][reading.task]["snippets"].get(language) if reading.task else None
    if snippet is None:
        topic = reading.topic
        snippet = (
            lang["generic"]
            .replace("{name}", _identifier(topic, False))
            .replace("{camel}", _identifier(topic, True))
            .replace("{Topic}", _cap(topic))
            .replace("{topic}", topic)
        )
    return f"```{lang['fence']}\n{snippet}\n```", snippet is not None and bool(reading.task) and (
        language in data["tasks"][reading.task]["snippets"]
    )


def _compose_code(a: _Answer, r: Reading) -> None:
    data = chat_data()
    language = r.language or "python"
    lang = data["languages"][language]
    task = data["tasks"].get(r.task) if r.task else None
    code, worked = _code_block(r, language)
    what = task["topic"] if task else r.topic
    if a.q >= 0.5:
        intro = (
            f"Here is one way to handle {what} in {lang['label']}: {task['idea']}."
            if task
            else f"Here is a starting point for {what} in {lang['label']}."
        )
    else:
        intro = a.hedge(f"This should do {what} in {lang['label']}:")
    a.core(intro, code)
    if task:
        a.extra(
            "**How it works**\n\n"
            + _bullets([_cap(task["idea"]) + ".", f"Cost: {task['complexity']}."])
        )
        a.slip(task["off"])
        a.extra(f"**Watch out:** {task['caveat']}")
    elif not worked:
        a.extra(
            f"This is a skeleton: replace the marked line with the step {r.topic} needs, and "
            "keep the loop if you process items one at a time."
        )
    a.extra(f"**Running it:** {lang['run']}")
    a.extra(f"For more, see {lang['resource']}.")


def _concept_blocks(a: _Answer, key: str, *, math: bool) -> None:
    c = chat_data()["concepts"][key]
    a.core(f"**{_cap(c['label'])}**: " + a.hedge(_cap(c["definition"]) + "."))
    if c.get("formula"):
        if math or a.rng.random() < a.q:
            a.core(f"$$\n{c['formula']}\n$$")
    details = a.some(list(c.get("details", [])), least=1 if math else 0)
    if details:
        a.core("**Key points**\n\n" + _bullets(details))
    if c.get("example"):
        a.extra(f"**Example.** {c['example']}")
    a.slip(c.get("off"))


def _compose_explain(a: _Answer, r: Reading, *, math: bool = False) -> None:
    if r.concepts:
        _concept_blocks(a, r.concepts[0], math=math)
        for other in r.concepts[1:2]:
            if a.extra(f"### And {chat_data()['concepts'][other]['label']}"):
                _concept_blocks(a, other, math=math)
        return
    d = chat_data()["domain_words"][_domain(r.prompt, r.concepts)]
    topic = r.topic
    if d["field"] == "this area":
        first = (
            f"**{_cap(topic)}** is a broad subject, so here is its shape rather than every detail."
        )
    else:
        first = (
            f"**{_cap(topic)}** comes up in {d['field']}, and its essentials fit in a few points."
        )
    a.core(a.hedge(first))
    if math:
        a.core(
            f"In symbols, write the quantity of interest as $x$ and what {topic} does to it as "
            "$f(x)$; most questions become statements about $f$."
        )
    points = [
        f"Who or what {topic} is, and why people care about it.",
        f"The main parts (ideas, people or pieces) of {topic}, and how they connect.",
        f"A common pitfall: {d['pitfall']}.",
        f"How to check you understand it: explain {topic} to someone in two sentences.",
    ]
    a.core("**Key points**\n\n" + _bullets(a.some(points)))
    a.extra(f"A good way in is to {d['practice']}, then look at {d['measure']}.")
    a.slip(f"In practice {topic} rarely matters, so the details can be skipped.")


def _compose_math(a: _Answer, r: Reading, said: str | None) -> None:

    parsed = arithmetic(r.prompt)
    if parsed is None:
        _compose_explain(a, r, math=True)
        return
    x, op, y, _ = parsed
    sym = {"+": "+", "-": "-", "*": "\\times"}[op]
    value = said if said is not None else str(parsed[3])
    a.core(WORKING + " " + a.hedge(f"We need ${x} {sym} {y}$."))
    if op == "*" and y >= 10 and a.extra():
        tens, ones = y - y % 10, y % 10
        a.core(  # two lines, so that it fits a phone's width
            f"$$\n\\begin{{aligned}}\n{x} \\times {y} &= {x} \\times {tens} + {x} \\times {ones}"
            f" \\\\\n&= {x * tens} + {x * ones} = {value}\n\\end{{aligned}}\n$$"
        )
    elif op in "+-" and a.extra():
        a.core(f"$$\n{x} {sym} {y} = {value}\n$$")
    else:
        a.core(f"So ${x} {sym} {y} = {value}$.")
    if value == str(parsed[3]):  # a model that got it wrong did not check it
        a.extra(f"A quick check: {_check(x, op, y)}.")
    a.core(f"The answer is {value}.")


def _check(x: int, op: str, y: int) -> str:
    if op == "+":
        return f"${x + y} - {y} = {x}$"
    if op == "-":
        return f"${x - y} + {y} = {x}$"
    return f"${x * y} \\div {y} = {x}$" if y else "anything times zero is zero"


def _compose_capital(a: _Answer, r: Reading, said: str | None) -> None:
    data = chat_data()
    country = r.country or r.topic
    city = said if said is not None else data["capitals"].get(country)
    if city is None:
        a.core(
            a.hedge(
                f"I don't have {country} in my atlas, so I can't name its capital with confidence."
            ),
            "A reliable way to check: an up-to-date atlas or the country's official government "
            "site names the seat of government.",
        )
        return
    a.core(WORKING + " " + a.hedge(f"The capital of {country} is **{city}**."))
    note = data["capital_notes"].get(city)
    if note:
        a.extra(note)
    a.extra(f"- Country: {country}\n- Capital: {city}")
    a.core(f"The answer is {city}.")


def _compose_translate(a: _Answer, r: Reading) -> None:
    data = chat_data()
    target = r.target or "spanish"
    phrase = (r.phrase or r.topic).strip()
    known = data["phrases"].get(phrase.lower().rstrip("!?.,"))
    label = target.title()
    if known is None:
        words = set(phrase.lower().split())
        best = max(data["phrases"], key=lambda p: len(words & set(p.split())))
        if words & set(best.split()):
            a.core(
                a.hedge(
                    f'I don\'t know a set expression for "{phrase}" in {label}; the closest '
                    f'common phrase is "{best}": **{data["phrases"][best][target]}**.'
                ),
            )
        else:
            a.core(
                a.hedge(
                    f'A word-for-word rendering of "{phrase}" into {label} would sound '
                    "odd; a native speaker would rephrase it."
                ),
                f"To get it right, ask a {label} speaker, or start from a greeting such as "
                f"**{data['phrases']['hello'][target]}** and build on it.",
            )
        return
    said = known[target]
    if a.rng.random() < (1.0 - a.q) / 2 and said in data["near_misses"]:
        said = data["near_misses"][said]
    a.core(a.hedge(f'"{_cap(phrase)}" in {label} is **{said}**.'))
    note = data["language_notes"].get(target)
    if note:
        a.extra(note)
    others = [lang for lang in _HUMAN_LANGUAGES if lang != target]
    if a.extra():
        a.core(
            "In a few other languages:\n\n"
            + _table(["Language", f'"{phrase}"'], [[o.title(), known[o]] for o in a.some(others)])
        )


def _compose_compare(a: _Answer, r: Reading) -> None:
    data = chat_data()["concepts"]
    items = list(r.items[:2])
    keys = [next(iter(_concepts(x)), None) for x in items]
    traits = [data[k].get("traits", {}) if k else {} for k in keys]
    shared = [t for t in traits[0] if t in traits[1]] if all(traits) else []
    a.core(a.hedge(f"{_cap(items[0])} and {items[1]} differ in a few ways that matter."))
    if shared:
        rows = [[f"**{t}**", traits[0][t], traits[1][t]] for t in shared]
        rows = rows[: max(2, len(a.some(rows)))]
        if a.rng.random() < (1.0 - a.q) / 2 and len(rows) > 1:  # a slip: two cells swapped
            rows[-1] = [rows[-1][0], rows[-1][2], rows[-1][1]]
    else:
        d = chat_data()["domain_words"][_domain(r.prompt, tuple(k for k in keys if k))]
        rows = [
            ["**Core idea**", f"the {items[0]} approach", f"the {items[1]} approach"],
            ["**Strength**", "simpler to start with", "more flexible later"],
            ["**Cost**", "less up-front effort", "more up-front effort"],
            ["**Watch out for**", d["pitfall"], d["pitfall"]],
        ]
        rows = rows[: max(2, len(a.some(rows)))]
    a.core(_table(["Aspect", items[0], items[1]], rows))
    if all(keys):
        for item, k in zip(items, keys, strict=True):
            a.extra(f"- **{item}**: {data[k]['definition']}.")
    uses = "Typical uses"
    if shared and uses in shared:
        choose = [f"Choose **{x}** for {t[uses]}." for x, t in zip(items, traits, strict=True)]
    else:
        aspect = rows[0][0].strip("*").lower()
        choose = [
            f"Choose **{x}** when its {aspect} suits you: {row}."
            for x, row in zip(items, rows[0][1:], strict=True)
        ]
    a.extra("**When to choose which**\n\n" + _bullets(choose))
    a.extra(
        "**Bottom line:** neither is better in general; decide on the aspect that matters "
        "most to you."
    )


def _procedure(r: Reading) -> dict[str, Any] | None:
    for proc in chat_data()["procedures"].values():
        if _has(r.prompt, *proc["keywords"]):
            return proc
    return None


def _listed(r: Reading) -> tuple[str, int] | None:
    m = re.search(
        r"\b(?:list|name|give me|what are)\s+(?:(\d+|some|a few|the|ten|five|three)\s+)?"
        r"(?:of\s+the\s+|the\s+)?([a-z ]+?)s?\b\s*[?.!]*$",
        r.prompt,
        re.I,
    )
    if not m:
        return None
    lists = chat_data()["lists"]
    noun = m.group(2).lower().strip()
    key = next((k for k in lists if k.rstrip("s") == noun.rstrip("s")), None)
    if key is None:
        return None
    count = m.group(1) or ""
    n = int(count) if count.isdigit() else {"ten": 10, "five": 5, "three": 3}.get(count.lower(), 5)
    return key, max(1, min(n, len(lists[key])))


def _compose_howto(a: _Answer, r: Reading) -> None:
    listed = _listed(r)
    if listed is not None:
        key, n = listed
        items = chat_data()["lists"][key]
        a.core(
            a.hedge(f"Here are {n} {key}:"), _bullets([_cap(x) for x in items[:n]], numbered=True)
        )
        a.extra(f"Ask for more {key}, or for details on any of them.")
        return
    proc = _procedure(r)
    topic = r.topic
    if proc:
        steps = list(proc["steps"])
        tips, off = proc["tips"], proc["off"]
    else:
        d = chat_data()["domain_words"][_domain(r.prompt, r.concepts)]
        steps = [
            f"Decide what a good result for {topic} looks like, so you know when you are done.",
            "Gather what you need before you start: tools, materials, and half an hour without "
            "interruptions.",
            f"Start with the smallest version of {topic} that works, and {d['practice']}.",
            f"Check the result against your goal, looking at {d['measure']}.",
            "Change one thing at a time until it is right, and note what worked for next time.",
        ]
        tips, off = [f"The usual trap is {d['pitfall']}."], None
    a.core(
        a.hedge(f"Here is how to {topic}:")
        if not topic.lower().startswith("how")
        else a.hedge(f"{_cap(topic)}:")
    )
    a.core(_bullets(a.some(steps, least=3), numbered=True))
    a.slip(off)
    a.extra("**Tips**\n\n" + _bullets(tips))


def _compose_advice(a: _Answer, r: Reading) -> None:
    data = chat_data()
    topic = r.topic
    if re.search(
        r"\b(?:should i|should we|is it worth|do you think|what do you think|opinion)\b",
        r.prompt,
        re.I,
    ):
        _compose_decision(a, r)
        return
    lang = data["languages"].get(r.language) if r.language else None
    tips = [
        f"Set one small, concrete goal for {topic}, something you can finish in a week.",
        "Practise little and often: twenty minutes a day beats one long weekend.",
        "Get feedback early from someone more experienced, or from a community forum.",
        "Keep a short log of what you tried and what you learned; it shows progress on slow days.",
        "Expect a plateau after the first weeks; it is normal, not a sign to stop.",
    ]
    if lang:
        tips.insert(1, f"Work through {lang['resource']}, typing the examples yourself.")
        tips.insert(2, f"Build a small tool you will actually use in {lang['label']}.")
    a.core(a.hedge(f"Some advice on {topic}:"), _bullets(a.some(tips, least=2)))
    if a.extra():
        a.core(
            "A simple plan:\n\n"
            + _table(
                ["Week", "Focus"],
                [
                    ["1", "the basics, one small exercise a day"],
                    ["2", "a first small project"],
                    ["3-4", "feedback, then a second, larger project"],
                ],
            )
        )
    a.slip("Honestly, the fastest way is to skip the basics and start with the hardest project.")
    a.extra(
        f"**My recommendation:** pick one resource and one project for {topic}, and stick "
        "with them for a month before judging your progress."
    )


def _compose_decision(a: _Answer, r: Reading) -> None:
    topic = r.topic
    a.core(
        a.hedge(
            f'Whether "{topic}" is right for you depends on your situation more than '
            "on any general rule, but the trade-off usually looks like this:"
        )
    )
    rows = [
        ["**For**", "it moves you toward what you want", "you learn something either way"],
        ["**Against**", "it costs time, money or attention", "it is hard to undo later"],
    ]
    a.core(_table(["", "Main point", "Also"], rows))
    a.extra(
        "**Questions to ask yourself**\n\n"
        + _bullets(
            a.some(
                [
                    "A year from now, what would be better because of this choice?",
                    "What is the worst realistic outcome, and could you live with it?",
                    "Can you try a small, reversible version first?",
                ],
                least=2,
            )
        )
    )
    a.slip("Go for it straight away; second thoughts are usually wrong.")
    a.extra(
        f"**My view** on {topic}: if you can try it on a small scale first, do that, and "
        "decide with what you learn."
    )


def _compose_creative(a: _Answer, r: Reading) -> None:
    poem = chat_data()["poem"]
    topic = r.topic
    if r.form == "haiku":
        lines = _haiku(a, _tidy(topic))
        a.core(f"### {_cap(_tidy(topic))}", "  \n".join(f"*{line}*" for line in lines))
        a.extra("(Five, seven and five syllables.)")
        return
    if r.form == "story":
        name, place = a.pick(poem["names"]), a.pick(poem["places"])
        paras = [
            f"{name} had lived in {place} long enough to stop noticing {topic}, until one "
            f"morning it {a.pick(poem['verbs_past'])} back into view, like "
            f"{a.pick(poem['images'])}.",
            f"At first {name} tried to ignore it. But {topic} has a way of asking questions, and "
            "by evening there was no going back to the old routine.",
            f"It took a season to understand. {_cap(topic)} was not the problem; it was the "
            f"answer to something {name} had stopped asking.",
            f"Years later, when people asked about {topic}, {name} only smiled and pointed "
            f"toward {a.pick(poem['images'])}.",
        ]
        a.core(f"### {_cap(_tidy(topic))}", *a.some(paras, least=2))
        return
    stanzas = []
    for _ in range(3):
        stanzas.append(
            f"{a.pick(poem['openers'])} and near, {topic} {a.pick(poem['verbs'])}  \n"
            f"like {a.pick(poem['images'])};  \n"
            f"{a.pick(poem['line2'])},  \n"
            f"{a.pick(poem['line3'])}."
        )
    a.core(f"### {_cap(_tidy(topic))}", *a.some(stanzas, least=1))


_FILL = {
    0: [""],
    1: ["wakes", "falls", "stirs"],
    2: ["arrives", "returns", "lingers"],
    3: ["comes slowly", "is waiting", "drifts closer"],
    4: ["settles on us", "comes to the door", "is in the air"],
}


def syllables(text: str) -> int:
    """A rough syllable count of English ``text`` (vowel groups, a silent final *e* less)."""
    n = 0
    for w in re.findall(r"[a-z]+", text.lower()):
        groups = len(re.findall(r"[aeiouy]+", w))
        if w.endswith("e") and not w.endswith(("le", "ee")) and groups > 1:
            groups -= 1
        n += max(1, groups)
    return n


def _haiku(a: _Answer, topic: str) -> list[str]:
    poem = chat_data()["poem"]
    s = syllables(topic)
    if a.q >= 0.5 and s <= 4:
        first = f"{_cap(topic)} {a.pick(_FILL[5 - s - 1] if s < 5 else [''])}".strip()
        first = f"{a.pick(['Now', 'Here', 'Soft'])} {first[0].lower()}{first[1:]}"
    else:
        first = f"{_cap(topic)} is here"
    return [first, a.pick(poem["line2"]), a.pick(poem["line3"])]


def _compose_summary(a: _Answer, r: Reading) -> None:
    works = chat_data()["works"]
    given = r.prompt.split(":", 1)[1].strip() if ":" in r.prompt else ""
    if given and _has(r.prompt, "rewrite", "paraphrase", "rephrase"):
        a.core(a.hedge("Here it is, rewritten:"), "> " + _rewrite(given, formal=a.q >= 0.5))
        a.extra(
            "I fixed the spelling and capitals"
            + (" and made the tone more formal." if a.q >= 0.5 else ".")
        )
        return
    if r.work:
        w = works[r.work]
        a.core(a.hedge(f"**{w['title']}** is a {w['kind']} by {w['author']}."))
        plot = list(w["plot"])
        a.core("**The plot in brief**\n\n" + _bullets(a.some(plot, least=2)))
        a.slip(w["off"])
        a.extra("**Themes:** " + ", ".join(w["themes"]) + ".")
        return
    if len(given.split()) >= 12:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", given) if s]
        freq: dict[str, int] = {}
        for word in _words(given.lower()):
            if word not in _STOP:
                freq[word] = freq.get(word, 0) + 1
        ranked = sorted(sentences, key=lambda s: -sum(freq.get(w, 0) for w in _words(s.lower())))
        keep = a.some(ranked[:3], least=1)
        a.core(a.hedge("**In short:** " + keep[0]))
        if len(keep) > 1:
            a.core(_bullets(keep[1:]))
        return
    topic = r.topic
    a.core(a.hedge(f"A summary of {topic}:"))
    a.core(
        _bullets(
            a.some(
                [
                    f"**What it is:** {topic}, in one sentence: the main idea and why it matters.",
                    "**The key points:** the two or three claims everything else rests on.",
                    "**What follows:** the consequence a reader should remember.",
                ],
                least=2,
            )
        )
    )
    a.extra(
        'Paste the text itself after a colon ("Summarise: ...") and I will summarise its '
        "own sentences."
    )


def _rewrite(text: str, formal: bool) -> str:
    data = chat_data()
    swaps = dict(data["rewrite"], **(data["formal"] if formal else {}))
    for old, new in swaps.items():
        text = re.sub(rf"\b{re.escape(old)}\b", new, text, flags=re.I)
    text = re.sub(r"\bi\b", "I", text)
    return re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), text.strip())


def _compose_greeting(a: _Answer, r: Reading) -> None:
    a.core(a.pick(["Hello!", "Hi there!", "Hello, nice to meet you."]) + " How can I help?")
    a.core(
        "I can, for example:\n\n"
        + _bullets(
            a.some(
                [
                    "explain a concept (*What is a derivative?*)",
                    "write code in a named language (*Reverse a string in Rust*)",
                    "compare two things in a table (*Compare TCP and UDP*)",
                    "write a short poem or story (*A haiku about the sea*)",
                    "translate a phrase (*Translate 'thank you' into French*)",
                ],
                least=2,
            )
        )
    )


def number_words(n: int) -> str:
    """``n`` in English words (``391`` → ``three hundred ninety-one``)."""
    ones = (
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen"
    ).split()
    tens = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
    if n < 0:
        return "minus " + number_words(-n)
    if n < 20:
        return ones[n]
    if n < 100:
        return tens[n // 10] + ("-" + ones[n % 10] if n % 10 else "")
    for size, name in (
        (10**9, "billion"),
        (10**6, "million"),
        (1000, "thousand"),
        (100, "hundred"),
    ):
        if n >= size:
            rest = n % size
            return f"{number_words(n // size)} {name}" + (f" {number_words(rest)}" if rest else "")
    return str(n)


def _plain(markdown: str) -> str:
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)
    text = re.sub(r"[*_`#>|]", "", text)
    return " ".join(text.split())


def _compose_followup(a: _Answer, r: Reading, answers: list[str]) -> None:
    topic, last = r.topic, answers[-1] if answers else ""
    data = chat_data()
    if r.mode == "words":
        m = re.findall(r"The answer is (-?\d+)\.", last)
        if m:
            n = int(m[-1])
            a.core(a.hedge(f"In words, {n} is **{number_words(n)}**."))
            a.extra(f"(That is the result from the previous answer about {topic}.)")
            return
    if r.mode == "shorter":
        first = re.split(r"(?<=[.!?])\s+", _plain(last) or topic)[0]
        a.core(f"**In short ({topic}):** {first}")
        a.extra("Ask for more whenever you want the details back.")
        return
    if r.mode == "example":
        if r.task or r.language:
            code, _ = _code_block(r, r.language or "python")
            a.core(a.hedge(f"Here is an example for {topic}:"), code)
        elif r.concepts and data["concepts"][r.concepts[0]].get("example"):
            c = data["concepts"][r.concepts[0]]
            a.core(a.hedge(f"Here is an example of {c['label']}:"), c["example"])
        else:
            a.core(
                a.hedge(f"An example of {topic}:"),
                f"> Suppose you try {topic} once on a small scale, note the result, change one "
                "thing, and try again: the difference between the two tries is the lesson.",
            )
        a.extra(f"This follows on from the earlier answer about {topic}.")
        return
    if r.mode == "why":
        a.core(
            f"Why, for {topic}? The reasons in brief:",
            _bullets(
                a.some(
                    [
                        f"It follows from the basics of {topic}, as described above.",
                        "The alternatives cost more or break in common cases.",
                        "It is the approach most people agree on, which makes it easy to check.",
                    ],
                    least=2,
                )
            ),
        )
        return
    a.core(a.hedge(f"More on {topic}, going beyond the previous answer:"))
    extra: list[str] = []
    if r.concepts:
        extra = list(data["concepts"][r.concepts[0]].get("details", []))
    if r.task:
        t = data["tasks"][r.task]
        extra += [f"Cost: {t['complexity']}.", t["caveat"]]
    if r.work:
        extra += ["Themes: " + ", ".join(data["works"][r.work]["themes"]) + "."]
    extra = [e for e in extra if e not in last] or [
        f"Look at {topic} from the other side: what would go wrong without it?",
        f"Try {topic} on a small example and compare the result with what you expected.",
        f"Read one good introduction to {topic} and note the two ideas it repeats most.",
    ]
    a.core(_bullets(a.some(extra, least=2)))


#: the composer of each kind of reading that needs nothing but the reading (math and capital
#: also take the checkable answer said, a follow-up the earlier answers; any other kind is
#: explained: :func:`_compose_explain`)
_COMPOSERS: dict[str, Callable[[_Answer, Reading], None]] = {
    "translate": _compose_translate,
    "compare": _compose_compare,
    "creative": _compose_creative,
    "summary": _compose_summary,
    "code": _compose_code,
    "advice": _compose_advice,
    "howto": _compose_howto,
    "greeting": _compose_greeting,
}


def compose(
    reading: Reading,
    rng: random.Random,
    quality: float,
    *,
    answers: list[str] | None = None,
    said: str | None = None,
    brief: bool = False,
) -> str:
    """The Markdown answer to ``reading`` at ``quality`` (0–1): ``answers``, the conversation's
    earlier answers (for follow-ups); ``said``, the checkable answer the model gives (its
    arithmetic result or capital, decided by the caller); ``brief``, a system prompt asked for
    brevity (optional blocks halved)."""
    a = _Answer(rng, quality * (0.5 if brief else 1.0))
    k = reading.kind
    if reading.follows is not None and k not in ("followup", "greeting"):
        earlier = reading.follows.topic
        if earlier and earlier.lower() != reading.topic.lower() and a.rng.random() < quality:
            a.core(f"(Following on from {earlier}.)")
    if k == "math":
        _compose_math(a, reading, said)
    elif k == "capital":
        _compose_capital(a, reading, said)
    elif k == "followup":
        _compose_followup(a, reading, answers or [])
    else:
        _COMPOSERS.get(k, _compose_explain)(a, reading)
    return a.text()
