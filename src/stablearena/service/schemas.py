"""The live arena's request bodies (pydantic models): what ``/docs`` shows and what a body is
validated against. Answers are built by the routes (``/v1/leaderboard`` is the ``stablearena
rank --format json`` contract, :func:`stablearena.leaderboard.leaderboard_payload`).

Every body is validated in strict mode: ``"3"``, ``3.0`` or ``true`` is not an integer, ``1``
is not a boolean (a 422 naming the field, never a silent conversion). Names (of models and
annotators) go through :func:`clean_name`: normalised to Unicode NFC and refused when they hold
a character that is not printable (docs/guides/live-arena-security.md)."""

from __future__ import annotations

import unicodedata
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = [
    "BattleRequest",
    "VoteRequest",
    "ModelCreate",
    "ModelPatch",
    "AnnotatorCreate",
    "Name",
    "clean_name",
    "name_problem",
    "MAX_NAME",
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


#: A model or annotator name in a request body: NFC, printable (:func:`clean_name`).
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME), AfterValidator(clean_name)]

_STRICT = ConfigDict(extra="forbid", strict=True)
#: Upper bounds of integers the database stores (a signed 64-bit column; keep far below).
_MAX_COUNT = 1_000_000_000


class BattleRequest(BaseModel):
    model_config = _STRICT
    k: int = Field(1, ge=1, le=64, description="How many battles (greedy batch, distinct pairs).")
    models: list[Annotated[str, Field(min_length=1, max_length=MAX_NAME)]] | None = Field(
        None,
        min_length=2,
        max_length=5000,
        description="Restrict the candidates to these models (e.g. a prompt category).",
    )


class VoteRequest(BaseModel):
    model_config = _STRICT
    outcome: Literal["model_a", "model_b", "tie", "both_bad"]


class ModelCreate(BaseModel):
    model_config = _STRICT
    name: Name
    boost: float | None = Field(None, ge=1.0, le=1000.0, allow_inf_nan=False)
    boost_until: int | None = Field(None, ge=0, le=_MAX_COUNT)


class ModelPatch(BaseModel):
    model_config = _STRICT
    retired: bool | None = None
    outage: bool | None = None
    boost: float | None = Field(None, ge=1.0, le=1000.0, allow_inf_nan=False)
    boost_until: int | None = Field(None, ge=0, le=_MAX_COUNT)


class AnnotatorCreate(BaseModel):
    model_config = _STRICT
    name: Name
    role: Literal["annotator", "admin"] = "annotator"
