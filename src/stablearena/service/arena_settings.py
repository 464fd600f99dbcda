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
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ArenaPage", "DEFAULT_CATEGORY"]

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
        "the default leaderboard (stablearena.anonymity). false: every battle is anonymous.",
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
    probe_seconds: float = Field(
        10.0,
        gt=0.0,
        le=86_400.0,
        description="How often a model under outage is probed with one call.",
    )

    @field_validator("categories")
    @classmethod
    def _regexes(cls, v: dict[str, str]) -> dict[str, str]:
        from ..names import clean_name

        out = {}
        for raw, rx in v.items():
            try:  # a category is named like a model (stablearena.names)
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
    (:func:`stablearena.endpoints.config.models_from_toml`; offline models are refused)."""
    from ..endpoints.config import ModelEndpoint, models_from_toml
    from ..errors import InputError

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
