"""The live arena's request bodies (pydantic models): what ``/docs`` shows and what a body is
validated against. Answers are built by the routes (``/v1/leaderboard`` is the ``stablearena
rank --format json`` contract, :func:`stablearena.analysis.leaderboard.leaderboard_payload`).

Every body is validated in strict mode: ``"3"``, ``3.0`` or ``true`` is not an integer, ``1``
is not a boolean (a 422 naming the field, never a silent conversion). Names (of models and
annotators) go through :func:`clean_name`: normalised to Unicode NFC and refused when they hold
a character that is not printable (docs/guides/live-arena-security.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..data.names import MAX_NAME, clean_name, name_problem

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
