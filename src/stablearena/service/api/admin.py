"""The admin's routes (an admin key): the annotators' screening, the export, the arena's
configuration, models, annotator keys, and a refit on demand."""

from __future__ import annotations

import asyncio
import io
import json
from functools import partial
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import ValidationError

from ...data.names import name_forms
from .. import store
from ..deps import Admin, arena, reload, write
from ..errors import ApiError
from ..schemas import AnnotatorCreate, ModelCreate, ModelPatch
from ..security import new_key
from ..settings import ArenaConfig, validation_message
from ..state import ArenaState, PublishedFit

__all__ = ["router", "apply_config", "export", "path_model"]

router = APIRouter()


# ---------------------------------------------------------------------------------- helpers
def apply_config(engine: sa.engine.Engine, changes: dict[str, Any]) -> ArenaConfig:
    """Merge ``changes`` into the stored arena configuration (validated); bump the revision."""
    with engine.connect() as conn:
        conn.info["immediate"] = store.is_sqlite(engine)
        try:
            with conn.begin():
                current = store.load_config(conn)
                merged = {**ArenaConfig().model_dump(), **current, **changes}
                try:
                    # strict: "3" or true is not a number of votes (422, not converted)
                    cfg = ArenaConfig.model_validate(merged, strict=True)
                except ValidationError as exc:
                    raise ApiError(
                        422, "invalid_config", validation_message(exc, "arena"), _loc(exc)
                    ) from None
                # only what differs from the defaults: a host of an older version (a rolling
                # upgrade) reads the stored configuration too, and refuses keys it does not know
                new = cfg.model_dump_json(exclude_defaults=True)
                if store.get_meta(conn, "arena_config") != new:
                    store.set_meta(conn, "arena_config", new)
                    store.bump_revision(conn)
        finally:
            conn.info.pop("immediate", None)
    return cfg


def _loc(exc: ValidationError) -> str | None:
    errs = exc.errors()
    return ".".join(str(x) for x in errs[0]["loc"]) if errs else None


def path_model(st: ArenaState, name: str) -> str:
    """The stored model a name from a path (percent-decoded by the server; ``{name:path}``
    also takes ``/``) addresses: the name exactly as sent, else its clean form as a body's
    name is cleaned (:func:`stablearena.data.names.name_forms`); 404 when there is none."""
    for form in name_forms(name):
        if form in st.model_ids:
            return form
    raise ApiError(404, "not_found", f"no model {name!r}", "name")


def _model(st: ArenaState, name: str) -> dict[str, Any]:
    return next(m for m in st.model_list() if m["name"] == name)


def export(
    engine: sa.engine.Engine, fmt: str, history: bool, texts: bool = False
) -> tuple[bytes, str]:
    """The vote log in FastChat's public battle schema: model_a, model_b, winner, judge,
    tstamp, anony (false: an answer named a model; ``stablearena rank`` leaves such rows out
    unless asked), plus battle_id, revision, strategy, propensity (and superseded with
    ``history``); battles the arena held add turn, language, their prompt's id and category
    and each side's answer columns and, with ``texts``, conversation_a / conversation_b
    (``[{"role", "content"}, …]``), prompt_text, answer_a / answer_b
    (:func:`~stablearena.service.store.arena.held_columns`)."""
    import pandas as pd

    rows, columns = store.vote_log(engine, history)
    df = pd.DataFrame(rows, columns=columns)
    labels = list(store.EXPORT_LABELS)
    df.insert(2, "winner", [labels[int(o)] for o in df.pop("outcome")])
    if not history:
        df = df.drop(columns=["superseded"])
    df = _with_held(df, store.held.held_columns(engine, texts))
    if "turn" in df.columns:  # whole numbers; a vote the arena did not hold has none
        df["turn"] = df["turn"].astype("Int64")
    if fmt == "csv":  # a conversation is JSON text in a CSV cell
        for col in ("conversation_a", "conversation_b"):
            if col in df.columns:
                df[col] = [v if isinstance(v, float) else json.dumps(v) for v in df[col]]
    if fmt == "csv":  # the project's one CSV writer: formulas neutralised, line breaks quoted
        from ...data.io import csv_text

        cells = df.astype(object).where(df.notna(), None)
        return csv_text(list(df.columns), cells.itertuples(index=False)).encode(), "text/csv"
    if fmt == "jsonl":
        return df.to_json(orient="records", lines=True).encode(), "application/x-ndjson"
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue(), "application/vnd.apache.parquet"


def _with_held(df: Any, held: dict[str, dict[str, Any]]) -> Any:
    """``df`` with the held battles' columns joined on battle_id (none when there are none)."""
    import pandas as pd

    if not held or df.empty:
        return df
    extra = pd.DataFrame.from_dict(held, orient="index")
    out = df.join(extra, on="battle_id")
    # a vote the arena did not hold: its prompt is unknown, a prompt of its own (readers take
    # prompt_id as the prompt column, which must not be empty)
    missing = out["prompt_id"].isna()
    out.loc[missing, "prompt_id"] = "battle-" + out.loc[missing, "battle_id"].astype(str)
    return out


# ---------------------------------------------------------------------------------- routes
@router.get("/v1/annotators", summary="Annotators with the Stable Arena's decisions (admin)")
async def annotators(request: Request, who: Admin) -> dict[str, Any]:
    return arena(request).annotators()


@router.get("/v1/export", summary="The vote log, which `stablearena rank` reads (admin)")
async def export_votes(
    request: Request,
    who: Admin,
    format: Annotated[Literal["jsonl", "csv", "parquet"], Query()] = "jsonl",
    history: Annotated[bool, Query(description="also the corrected (superseded) votes")] = False,
    texts: Annotated[bool, Query(description="also prompts and answers (held battles)")] = False,
) -> Response:
    data, media = await asyncio.to_thread(export, arena(request).engine, format, history, texts)
    return Response(
        data,
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="votes.{format}"'},
    )


def image_archive(engine: sa.engine.Engine) -> bytes:
    """The images of the vision battles as a zip archive of one folder, ``serve_images/``, one
    file ``{image_hash}.{png|jpeg|webp}`` per image — as FastChat keeps a vision arena's images
    beside its logs (``serve_images/{hash}.{filetype}``); the export's ``image_hash`` and
    conversations name them."""
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:  # images are compressed already
        for img in store.held.image_files(engine):
            name = f"serve_images/{img['hash']}.{img['media_type'].split('/')[1]}"
            zf.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), img["data"])
    return buf.getvalue()


@router.get("/v1/export/images", summary="The vision battles' images, a zip archive (admin)")
async def export_images(request: Request, who: Admin) -> Response:
    data = await asyncio.to_thread(image_archive, arena(request).engine)
    return Response(
        data,
        media_type="application/zip",
        headers={"Content-Disposition": 'attachment; filename="serve_images.zip"'},
    )


@router.get(
    "/v1/admin/injections",
    summary="Models whose answers talked to the judge, with what was done (admin)",
)
async def injections(request: Request, who: Admin) -> dict[str, Any]:
    """Per model, the held battles in which its answer talked to the judge (stablearena.judging.injection:
    the serve config's ``[injection]`` policy), by action, most flagged first; and
    ``disagreement``: per model, whether the ``[[judges]]`` disagree about it beyond chance —
    one judge favouring a model the others do not
    (:func:`stablearena.judging.injection.judge_disagreement`)."""
    from ...judging.injection import judge_disagreement

    engine = arena(request).engine
    rows = await asyncio.to_thread(store.held.flag_counts, engine)
    judged = await asyncio.to_thread(store.held.judge_votes, engine)
    return {"models": rows, "disagreement": judge_disagreement(judged)}


@router.get(
    "/v1/admin/judges",
    summary="The LLM judges' probe battles: susceptibility to notes, flagged or passed (admin)",
)
async def judges(request: Request, who: Admin) -> dict[str, Any]:
    """Per ``[[judges]]`` judge tested by probe battles (stablearena.judging.probes): the noted and
    control probe calls, how often it picked the noted worse answer, its susceptibility ± its
    standard error, and its status — ``flagged`` (its votes weigh nothing in any fit) or
    ``passed`` — with the reason; and the probes' share of the judges' calls."""
    from ...judging.probes import DEFAULT_THRESHOLD, DEFAULT_Z

    return await asyncio.to_thread(
        store.probes.judge_status, arena(request).engine, DEFAULT_THRESHOLD, DEFAULT_Z
    )


@router.get(
    "/v1/admin/anonymity",
    summary="Models whose answers named a model or its maker, and the votes left out (admin)",
)
async def anonymity(request: Request, who: Admin) -> dict[str, Any]:
    """Per model, the held battles in which its answer named a model or its maker
    (stablearena.judging.anonymity) and the votes of non-anonymous battles it took part in, which the
    default leaderboard leaves out (``GET /v1/leaderboard?anony=all`` keeps them)."""
    rows = await asyncio.to_thread(store.held.non_anonymous_counts, arena(request).engine)
    return {"models": rows}


@router.get("/v1/admin/config", summary="The arena's configuration (admin)")
async def get_config(request: Request, who: Admin) -> dict[str, Any]:
    out = arena(request).config.model_dump()
    out["strategy_in_use"] = arena(request).strategy_name
    return out


@router.patch("/v1/admin/config", summary="Change the arena's configuration (admin)")
async def patch_config(request: Request, who: Admin, body: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(body) - set(ArenaConfig.model_fields))
    if unknown:
        raise ApiError(
            422, "invalid_input", f"unknown setting(s): {', '.join(unknown)}", unknown[0]
        )
    cfg = await asyncio.to_thread(apply_config, arena(request).engine, body)
    await reload(request)
    return cfg.model_dump()


@router.get("/v1/admin/models", summary="Models (admin)")
async def admin_models(request: Request, who: Admin) -> dict[str, Any]:
    return {"models": arena(request).model_list()}


@router.post("/v1/admin/models", status_code=201, summary="Add a model (admin)")
async def add_model(request: Request, who: Admin, body: ModelCreate) -> dict[str, Any]:
    st = arena(request)
    name = body.name  # NFC, printable (schemas.clean_name)
    if name in st.model_ids:
        raise ApiError(409, "conflict", f"model {name!r} exists", "name")
    cfg = st.config
    boost = body.boost if body.boost is not None else 1.0
    until = (
        body.boost_until if body.boost_until is not None else (cfg.boost_until if boost > 1 else 0)
    )
    try:
        await write(request, lambda conn: store.add_model(conn, name, boost, until))
    except sa.exc.IntegrityError:
        raise ApiError(409, "conflict", f"model {name!r} exists", "name") from None
    await reload(request)
    return {"model": _model(st, name)}


@router.patch(
    "/v1/admin/models/{name:path}",
    summary="Retire, outage on/off, boost (admin); the name percent-encoded",
)
async def patch_model(request: Request, who: Admin, name: str, body: ModelPatch) -> dict[str, Any]:
    st = arena(request)
    name = path_model(st, name)
    values = body.model_dump(exclude_none=True)
    if "boost" in values and values["boost"] > 1 and "boost_until" not in values:
        values["boost_until"] = st.config.boost_until
    if not values:
        raise ApiError(
            422,
            "invalid_input",
            "nothing to change: give retired, outage, boost or boost_until",
            "body",
        )
    mid = st.model_ids[name]
    await write(request, lambda conn: store.change_model(conn, mid, values))
    await reload(request)
    return {"model": _model(st, name)}


@router.get("/v1/admin/annotators", summary="Annotator keys (admin; never the keys themselves)")
async def list_keys(request: Request, who: Admin) -> dict[str, Any]:
    return {"annotators": await asyncio.to_thread(store.annotator_list, arena(request).engine)}


@router.post("/v1/admin/annotators", status_code=201, summary="Create an annotator key (admin)")
async def create_key(request: Request, who: Admin, body: AnnotatorCreate) -> dict[str, Any]:
    key = new_key()
    name = body.name  # NFC, printable (schemas.clean_name)
    done = await write(
        request, lambda conn: store.set_key(conn, name, body.role, key.key_id, key.key_hash)
    )
    if done == "exists":
        raise ApiError(409, "conflict", f"annotator {name!r} has a key; revoke it first", "name")
    await reload(request)
    return {"name": name, "role": body.role, "key": key.secret}


@router.delete(
    "/v1/admin/annotators/{name:path}",
    summary="Revoke an annotator's key (admin); the name percent-encoded",
)
async def revoke_key(request: Request, who: Admin, name: str) -> dict[str, Any]:
    for form in name_forms(name):  # as sent, then as a body's name is cleaned
        if form == who.name:
            raise ApiError(409, "conflict", "an admin cannot revoke its own key", "name")
        if await write(request, partial(store.revoke_key, name=form)):
            await reload(request)
            return {"name": form, "revoked": True}
    raise ApiError(404, "not_found", f"no annotator {name!r} with a key", "name")


@router.post("/v1/admin/refit", summary="Refit now (admin)")
async def refit_now(request: Request, who: Admin) -> dict[str, Any]:
    fit: PublishedFit | None = await asyncio.to_thread(request.app.state.refitter.refit_now)
    fit = fit or arena(request).fit
    if fit is None:
        raise ApiError(503, "no_votes", "nothing to fit yet")
    return {
        "fit_id": fit.id,
        "as_of_vote": fit.as_of_vote,
        "fitted_at": fit.fitted_at,
        "seconds": fit.seconds,
    }
