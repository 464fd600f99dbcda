"""The live arena's request bodies (pydantic models): what ``/docs`` shows and what a body is
validated against. Answers are built by the routes (``/v1/leaderboard`` is the ``stablearena
rank --format json`` contract, :func:`stablearena.leaderboard.leaderboard_payload`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BattleRequest", "VoteRequest", "ModelCreate", "ModelPatch", "AnnotatorCreate"]


class BattleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    k: int = Field(1, ge=1, le=64, description="How many battles (greedy batch, distinct pairs).")
    models: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None,
        min_length=2,
        max_length=5000,
        description="Restrict the candidates to these models (e.g. a prompt category).",
    )


class VoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    outcome: Literal["model_a", "model_b", "tie", "both_bad"]


class ModelCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    boost: float | None = Field(None, ge=1.0, le=1000.0)
    boost_until: int | None = Field(None, ge=0)


class ModelPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    retired: bool | None = None
    outage: bool | None = None
    boost: float | None = Field(None, ge=1.0, le=1000.0)
    boost_until: int | None = Field(None, ge=0)


class AnnotatorCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\s].*$")
    role: Literal["annotator", "admin"] = "annotator"
