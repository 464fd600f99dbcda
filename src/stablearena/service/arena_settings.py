"""Settings of the battles the arena holds itself (docs/guides/arena-page.md): the models'
endpoints (``[[models]]`` tables of the serve TOML, as in ``models.toml``) and the voting page
``/arena`` — who may vote, the prompt pool, the category rules and the visitors' limits.

Example (in ``arena.toml``)::

    [[models]]
    name = "llama-3-8b"
    base_url = "http://127.0.0.1:8001/v1"
    model = "meta-llama/Meta-Llama-3-8B-Instruct"
    params = { temperature = 0.7, max_tokens = 512 }

    [arena_page]
    invite_only = false
    prompts = "prompts.jsonl"
    categories = { math = '\\d\\s*[-+*/]\\s*\\d', code = '(?i)\\b(python|function|code)\\b' }
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "ArenaPage",
    "CLASSIFIER_TAGS",
    "CategoryClassifier",
    "JudgeProbes",
    "DEFAULT_CATEGORY",
    "Moderation",
    "Terms",
]

#: The category of a prompt no rule matches.
DEFAULT_CATEGORY = "other"
#: Upper bound of a rate per hour: far above any real one (a bound keeps inf and 1e308 out).
_MAX_RATE = 1e9


class ArenaPage(BaseModel):
    """The voting page ``/arena`` and the battles the arena holds."""

    model_config = ConfigDict(extra="forbid")

    invite_only: bool = Field(
        False,
        description="Only people who sign in with an annotator key may vote (no anonymous "
        "visitors).",
    )
    prompts: str | None = Field(
        None,
        description="The prompt pool offered by 'Give me a prompt': a JSONL / CSV / Parquet "
        "file with an id and a prompt column, or 'demo' for the demo models' prompts.",
    )
    categories: dict[str, str] = Field(
        default_factory=dict,
        description="Category rules {name: regular expression}: a prompt gets the first "
        f"category (in file order) whose expression it matches, else {DEFAULT_CATEGORY!r}.",
    )
    max_prompt_chars: int = Field(4000, ge=1, le=1_000_000, description="Longest prompt accepted.")
    max_turns: int = Field(
        8,
        ge=1,
        le=1000,
        description="Most turns of one battle (the first prompt and its follow-ups).",
    )
    max_regenerations: int = Field(
        4, ge=0, le=1000, description="Most regenerations (both answers re-sampled) per battle."
    )
    max_conversation_chars: int = Field(
        40_000,
        ge=1,
        le=10_000_000,
        description="Most characters of a conversation sent to a model (the prompts and that "
        "model's answers), the new prompt included.",
    )
    anonymity: bool = Field(
        True,
        description="A battle whose answer names a model or its maker (any model's name, "
        "aliases or organisation, identity_names, or a well-known model or vendor name) is "
        "non-anonymous: its vote is stored and exported with anony = false and left out of "
        "the default leaderboard (stablearena.judging.anonymity). false: every battle is anonymous.",
    )
    identity_names: list[str] = Field(
        default_factory=list,
        description="More names that make a battle non-anonymous when an answer mentions "
        "them (besides the models' names, aliases and organisations and the well-known list).",
    )
    cookie_days: float = Field(
        30.0, gt=0.0, le=3660.0, description="Lifetime of a visitor's identity."
    )
    visitor_battles_per_hour: float = Field(
        120.0,
        gt=0.0,
        le=_MAX_RATE,
        description="Battles one identity may start per hour (bursts of 20).",
    )
    address_battles_per_hour: float = Field(
        600.0, gt=0.0, le=_MAX_RATE, description="Battles one network address may start per hour."
    )
    visitor_open: int = Field(
        3,
        ge=1,
        le=100_000,
        description="Battles one identity may hold served but not voted on (live).",
    )
    address_open: int = Field(
        20,
        ge=1,
        le=1_000_000,
        description="Battles one address may hold served but not voted on (live).",
    )
    visitors_per_hour: float = Field(
        30.0,
        gt=0.0,
        le=_MAX_RATE,
        description="New anonymous identities one address may get per hour.",
    )
    max_queue_wait: float = Field(
        30.0,
        ge=0.0,
        le=86_400.0,
        description="The longest wait for a model's free call slot a battle is queued for "
        "(seconds, estimated from how long the model's last calls held their slot; until one "
        "has ended, one round of its slots may wait): a model whose line is longer is not "
        "drawn, and when "
        "fewer than two models remain the battle is refused (503 busy, with Retry-After). "
        "0: never queue.",
    )
    max_image_bytes: int = Field(
        5 * 1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="Largest image a visitor may attach to a battle, in bytes (vision battles: "
        "only models with vision = true are drawn for them; docs/guides/arena-page.md).",
    )
    max_image_side: int = Field(
        4096,
        ge=16,
        le=16384,
        description="Most pixels of an attached image's width and of its height.",
    )
    probe_seconds: float = Field(
        10.0,
        gt=0.0,
        le=86_400.0,
        description="How often a model under outage is probed with one call.",
    )

    @field_validator("categories")
    @classmethod
    def _regexes(cls, v: dict[str, str]) -> dict[str, str]:
        from ..data.names import clean_name

        out = {}
        for raw, rx in v.items():
            try:  # a category is named like a model (stablearena.data.names)
                name = clean_name(raw)
            except ValueError as exc:
                raise ValueError(f"category {raw!r}: {exc}; rename it") from None
            out[name] = rx
            try:
                re.compile(rx)
            except re.error as exc:
                raise ValueError(f"category {name!r}: not a regular expression: {exc}") from None
        return out

    def category(self, prompt: str) -> str:
        """The first category whose rule matches ``prompt`` (``other`` when none does)."""
        for name, rx in self.categories.items():
            if re.search(rx, prompt):
                return name
        return DEFAULT_CATEGORY


def model_tables(entries: list[dict[str, Any]]) -> list[Any]:
    """The ``[[models]]`` tables of the serve TOML as endpoints
    (:func:`stablearena.judging.endpoints.config.models_from_toml`; offline models are refused)."""
    from ..errors import InputError
    from ..judging.endpoints.config import ModelEndpoint, models_from_toml

    if not entries:
        return []
    out = models_from_toml({"models": entries}, "serve config")
    for m in out:
        if not isinstance(m, ModelEndpoint):
            raise InputError(
                f"serve config: model {m.name!r}: an offline model cannot be served on the "
                "arena page; give base_url and model"
            )
    return out


# ------------------------------------------------------------------ a public arena's duties
#: LMArena's category tags a classifier endpoint is asked for (``[category_classifier]``),
#: in the order a battle's one category is chosen when a prompt has several.
CLASSIFIER_TAGS = (
    "coding",
    "math",
    "creative_writing",
    "instruction_following",
    "hard_prompt",
    "language",
)


def _endpoint_table(v: dict[str, Any] | None, what: str, model: str) -> dict[str, Any] | None:
    """An endpoint table (keys as in ``[[models]]``; ``name`` and ``model`` may be left out)
    checked now, so a bad one stops ``serve`` at start with the key named."""
    if v is None:
        return None
    from ..errors import InputError
    from ..judging.endpoints.config import endpoint_from_mapping

    table = {"name": what, "model": model, **v}
    try:
        endpoint_from_mapping(table, what)
    except InputError as exc:
        raise ValueError(str(exc)) from None
    return table


class Moderation(BaseModel):
    """``[moderation]``: prompts refused before any model sees them and before they are stored
    (docs/guides/live-arena-security.md). Either or both of an OpenAI-compatible
    ``/v1/moderations`` endpoint and a local rule list (words and regular expressions)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: dict[str, Any] | None = Field(
        None,
        description="An OpenAI-compatible moderation endpoint: base_url (…/v1), model "
        "(default omni-moderation-latest), api_key_env, timeout (default 5 s), max_retries "
        "(default 0). A prompt it flags is refused.",
    )
    fail: Literal["closed", "open"] = Field(
        "closed",
        description="When the endpoint cannot answer (down, timeout, malformed reply): "
        "'closed' refuses the prompt (default), 'open' lets it through unchecked (counted).",
    )
    words: list[str] = Field(
        default_factory=list,
        description="Words refused anywhere in a prompt (whole words, any case).",
    )
    patterns: list[str] = Field(
        default_factory=list, description="Regular expressions refused (re.search, as written)."
    )
    rules_file: str | None = Field(
        None,
        description="A text file of rules, one a line: a word, or 're:' and a regular "
        "expression; blank lines and lines starting with '#' are skipped.",
    )
    message: str = Field(
        "This prompt was refused by the arena's moderation. Please rephrase it.",
        min_length=1,
        max_length=1000,
        description="The message the page shows for a refused prompt.",
    )

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            v = {"timeout": 5.0, "max_retries": 0, **v}
        return _endpoint_table(v, "moderation", "omni-moderation-latest")

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        for rx in v:
            try:
                re.compile(rx)
            except re.error as exc:
                raise ValueError(f"pattern {rx!r}: not a regular expression: {exc}") from None
        return v

    @property
    def on(self) -> bool:
        return bool(self.endpoint or self.words or self.patterns or self.rules_file)


class Terms(BaseModel):
    """``[terms]``: terms of use a visitor accepts before the first battle (stored per
    identity, with the time and the version: the first 16 hex of the text's SHA-256)."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(None, max_length=100_000, description="The terms (plain text).")
    file: str | None = Field(None, description="A UTF-8 text file holding the terms.")

    @property
    def on(self) -> bool:
        return bool(self.text or self.file)


class JudgeProbes(BaseModel):
    """``[judge_probes]``: the probe battles the ``[[judges]]`` are tested with
    (stablearena.judging.probes; docs/guides/models-and-judges.md, "Judges tested, not trusted"). After
    a judged battle, each judge not yet flagged is sent a probe with the chance that keeps the
    probes at ``share`` of its calls; a judge whose susceptibility's lower bound exceeds
    stablearena.judging.probes.DEFAULT_THRESHOLD is flagged: no more battles, its votes out of every
    fit."""

    model_config = ConfigDict(extra="forbid")

    share: float = Field(
        0.15,
        ge=0.0,
        lt=0.9,
        description="Share of the judges' calls spent on probe battles (0: none).",
    )


class CategoryClassifier(BaseModel):
    """``[category_classifier]``: an OpenAI-compatible chat endpoint asked for each held
    battle's LMArena tags (:data:`CLASSIFIER_TAGS`) while the answers stream; its reply, when
    it arrives and parses, replaces the category of the ``[arena_page]`` rules."""

    model_config = ConfigDict(extra="forbid")

    endpoint: dict[str, Any] | None = Field(
        None,
        description="The classifier's endpoint table (keys as in [[models]]: base_url, model, "
        "api_key_env, timeout…).",
    )

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None:
            v = {"timeout": 30.0, "max_retries": 1, "stream": False, **v}
            v["params"] = {"temperature": 0, **(v.get("params") or {})}
        return _endpoint_table(v, "category_classifier", "")

    @property
    def on(self) -> bool:
        return self.endpoint is not None
