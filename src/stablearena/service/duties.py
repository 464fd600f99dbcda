"""A public arena's duties (docs/guides/live-arena-security.md): moderation of every prompt
before any model sees it and before it is stored, terms of use accepted per identity, and the
categories of held battles from a classifier endpoint.

- :class:`Moderator` — ``[moderation]``: a local rule list (words, regular expressions, a rules
  file) and an optional OpenAI-compatible ``/v1/moderations`` endpoint, reached with the
  project's one HTTP client (:meth:`stablearena.judging.endpoints.EndpointClient.post_json`). When the
  endpoint cannot answer, ``fail = "closed"`` (default) refuses the prompt, ``"open"`` lets it
  through unchecked; both are counted.
- :func:`terms_text` / :func:`terms_version` — ``[terms]``.
- :class:`Categoriser` — ``[category_classifier]``: an LLM asked for LMArena's tags
  (:data:`~.arena_settings.CLASSIFIER_TAGS`); a failed call or a reply that does not parse
  keeps the rules' category (:meth:`~.arena_settings.ArenaPage.category`) and is counted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import InputError
from ..inputs import read_input_text
from .arena_settings import CLASSIFIER_TAGS, CategoryClassifier, Moderation, Terms

__all__ = [
    "Categoriser",
    "Duties",
    "check_duties",
    "duties_summary",
    "Moderator",
    "Verdict",
    "parse_tags",
    "read_rules",
    "terms_text",
    "terms_version",
]

log = logging.getLogger("stablearena.service")


# ---------------------------------------------------------------------------------- moderation
class Verdict(NamedTuple):
    """A prompt's moderation: ``refused``; ``source`` — ``rules``, ``endpoint``,
    ``unavailable`` (the endpoint could not answer, fail-closed), ``unchecked`` (could not
    answer, fail-open: let through) or ``clean``; ``reasons``: the rule or categories."""

    refused: bool
    source: str
    reasons: tuple[str, ...] = ()


def read_rules(path: str | Path) -> tuple[list[str], list[str]]:
    """(words, patterns) of a rules file: one rule a line, a word or ``re:`` + a regular
    expression; blank lines and ``#`` comments skipped. A bad line is an :class:`InputError`
    naming the file and the line."""
    try:
        lines = read_input_text(path, "rules").splitlines()
    except InputError as exc:
        raise InputError(f"[moderation] rules_file: {exc}") from None
    words, patterns = [], []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("re:"):
            rx = line[3:].strip()
            try:
                re.compile(rx)
            except re.error as exc:
                raise InputError(
                    f"[moderation] rules_file {path}, line {n}: {rx!r} is not a regular "
                    f"expression ({exc}); fix or remove the line"
                ) from None
            patterns.append(rx)
        else:
            words.append(line)
    return words, patterns


class Moderator:
    """The ``[moderation]`` step (module docstring). :meth:`check` never raises."""

    def __init__(self, settings: Moderation) -> None:
        self.settings = settings
        words, patterns = list(settings.words), list(settings.patterns)
        if settings.rules_file:
            more_words, more_patterns = read_rules(settings.rules_file)
            words += more_words
            patterns += more_patterns
        # the words as one expression (one pass over the prompt however many there are)
        alternatives = "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))
        self.words = (
            re.compile(r"(?<!\w)(?:" + alternatives + r")(?!\w)", re.IGNORECASE) if words else None
        )
        self.rules: list[tuple[str, re.Pattern[str]]] = [
            (f"re:{rx}", re.compile(rx)) for rx in patterns
        ]
        self.client: Any = None
        if settings.endpoint is not None:
            from ..judging.endpoints import EndpointClient
            from ..judging.endpoints.config import endpoint_from_mapping

            self.client = EndpointClient(endpoint_from_mapping(settings.endpoint, "[moderation]"))

    @property
    def on(self) -> bool:
        return bool(self.words or self.rules or self.client)

    async def check(self, text: str, image: str | None = None) -> Verdict:
        """The prompt's verdict: the rules first (no call when one matches), then the
        endpoint. ``image`` (a vision battle's image, a data: URL) goes to the endpoint with the
        text as OpenAI's multimodal moderation input (``[{"type": "text", …}, {"type":
        "image_url", …}]``, which ``omni-moderation-latest`` reads); the rules read text only,
        so without an endpoint an image passes ``unchecked`` (let through, counted)."""
        word = self.words.search(text) if self.words is not None else None
        hits = (f"word:{word.group(0).lower()}",) if word else ()
        hits += tuple(name for name, rx in self.rules if rx.search(text))
        if hits:
            return Verdict(True, "rules", hits)
        if self.client is None:
            if image is not None:
                return Verdict(False, "unchecked", ("image: no moderation endpoint",))
            return Verdict(False, "clean")
        given: Any = text
        if image is not None:
            given = [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": image}},
            ]
        got = await self.client.post_json(
            "moderations", {"model": self.client.endpoint.model, "input": given}
        )
        flagged, why = _moderation_reply(got)
        if flagged is None:
            log.warning("moderation endpoint: no verdict (%s); failing %s", why, self.settings.fail)
            if self.settings.fail == "open":
                return Verdict(False, "unchecked", (why,))
            return Verdict(True, "unavailable", (why,))
        return Verdict(flagged, "endpoint" if flagged else "clean", why if flagged else ())

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()


def _moderation_reply(got: Any) -> tuple[bool | None, Any]:
    """(flagged, categories) of an OpenAI moderation reply ``{"results": [{"flagged",
    "categories"}]}``; (None, why) for a failed call or another reply."""
    from ..judging.endpoints import Failure

    if isinstance(got, Failure):
        return None, f"{got.reason}: {got.detail}"[:300]
    results = got.get("results") if isinstance(got, dict) else None
    if not isinstance(results, list) or not results:
        return None, "bad_response: no results list"
    flagged, cats = False, []
    for res in results:
        if not isinstance(res, dict) or not isinstance(res.get("flagged"), bool):
            return None, "bad_response: a result without a boolean 'flagged'"
        flagged |= res["flagged"]
        c = res.get("categories")
        if isinstance(c, dict):
            cats += [str(k)[:60] for k, v in c.items() if v is True]
    return flagged, tuple(sorted(set(cats)))


# ---------------------------------------------------------------------------------- terms
def terms_text(settings: Terms) -> str | None:
    """The terms of use (``text``, or the ``file``'s), or None when there are none."""
    if settings.text:
        return settings.text
    if settings.file:
        try:
            return read_input_text(settings.file, "terms")
        except InputError as exc:
            raise InputError(f"[terms] file: {exc}") from None
    return None


def terms_version(text: str) -> str:
    """The terms' version: the first 16 hex digits of the text's SHA-256 (new text, new
    acceptance)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------------------------- categories
_CLASSIFY = (
    "Classify the user prompt below. Tags:\n"
    "- coding: asks for or about program code\n"
    "- math: asks to compute or prove something mathematical\n"
    "- creative_writing: asks for a story, poem, lyrics or other creative text\n"
    "- instruction_following: gives precise constraints on the answer's form or content\n"
    "- hard_prompt: complex, specific, needs domain knowledge and problem solving\n"
    "- language: about languages (translation, grammar) or not written in English\n"
    'Reply with JSON only: {{"tags": [the tags that apply, possibly none]}}.\n\n'
    "<prompt>\n{prompt}\n</prompt>"
)
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_tags(reply: Any) -> list[str] | None:
    """The tags of a classifier's reply — a JSON object ``{"tags": [...]}`` (alone or inside
    other text or a code fence) — in :data:`CLASSIFIER_TAGS` order; None when the reply is not
    that (not text, no object, not JSON, ``tags`` not a list of strings, an unknown tag)."""
    if not isinstance(reply, str):
        return None
    m = _OBJECT.search(reply)
    if m is None:
        return None
    try:
        data = json.loads(m.group(0))
    except (ValueError, RecursionError):
        return None
    tags = data.get("tags") if isinstance(data, dict) else None
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        return None
    norm = {t.strip().lower().replace(" ", "_").replace("-", "_") for t in tags}
    if not norm <= set(CLASSIFIER_TAGS):
        return None
    return [t for t in CLASSIFIER_TAGS if t in norm]


class Categoriser:
    """The ``[category_classifier]`` endpoint (module docstring). ``counts``: ``asked``,
    ``tagged`` (a category from the classifier), ``untagged`` (valid reply, no tag: the rules'
    category kept), ``malformed`` and ``failed`` (the rules' category kept)."""

    def __init__(self, settings: CategoryClassifier) -> None:
        from ..judging.endpoints import EndpointClient
        from ..judging.endpoints.config import endpoint_from_mapping

        assert settings.endpoint is not None
        self.client = EndpointClient(
            endpoint_from_mapping(settings.endpoint, "[category_classifier]")
        )
        self.counts: Counter[str] = Counter()

    async def category(self, prompt: str) -> str | None:
        """The prompt's first tag, or None (the rules' category stays). Never raises."""
        self.counts["asked"] += 1
        try:
            got = await self.client.complete(
                self.client.messages(_CLASSIFY.format(prompt=prompt.replace("</prompt>", "")))
            )
        except Exception:  # noqa: BLE001 - a classifier never stops a battle
            log.exception("category classifier: the call failed")
            self.counts["failed"] += 1
            return None
        if not got.ok:
            self.counts["failed"] += 1
            return None
        tags = parse_tags(got.text)
        if tags is None:
            log.warning("category classifier: a reply that does not parse: %.200r", got.text)
            self.counts["malformed"] += 1
            return None
        self.counts["tagged" if tags else "untagged"] += 1
        return tags[0] if tags else None

    async def aclose(self) -> None:
        await self.client.aclose()


# ---------------------------------------------------------------------------------- together
class Duties:
    """A worker's duties (one per process, ``app.state.duties``): the moderator, the terms and
    the identities this worker has seen accept them (a cache of ``terms_acceptances``)."""

    def __init__(self, settings: Any) -> None:
        self.moderation = settings.moderation
        self.moderator = Moderator(settings.moderation)
        self.terms = terms_text(settings.terms)
        self.version = terms_version(self.terms) if self.terms else None
        self.accepted: set[int] = set()

    def remember(self, annotator_id: int) -> None:
        """Note that ``annotator_id`` accepted the current terms (at most 100,000 remembered:
        then all are forgotten and read again)."""
        if len(self.accepted) >= 100_000:
            self.accepted.clear()
        self.accepted.add(annotator_id)

    async def aclose(self) -> None:
        await self.moderator.aclose()


def check_duties(settings: Any) -> None:
    """Read the files the duties name (rules, terms) now: a bad one stops ``serve`` at start
    with an :class:`InputError` naming it."""
    if settings.moderation.rules_file:
        read_rules(settings.moderation.rules_file)
    terms_text(settings.terms)


def duties_summary(app: Any) -> dict[str, Any]:
    """The admin's counts (``GET /v1/admin/duties`` and the admin view): the [moderation]
    step's refusals and prompts let through unchecked, by source and reason; the identities
    that accepted the current [terms]; this worker's [category_classifier] counts."""
    from . import store

    d, engine = app.state.duties, app.state.holder.state.engine
    cat = app.state.holder.categoriser
    keys = ("asked", "tagged", "untagged", "malformed", "failed")
    return {
        "moderation": {"on": d.moderator.on, "fail": d.moderation.fail}
        | store.held.moderation_counts(engine),
        "terms": {
            "version": d.version,
            "accepted": store.held.terms_count(engine, d.version) if d.version else 0,
        },
        "classifier": None if cat is None else {k: cat.counts.get(k, 0) for k in keys},
    }
