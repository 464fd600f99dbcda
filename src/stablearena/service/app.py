"""The live arena's HTTP API (FastAPI): routes parse, authorise and call :mod:`.state` and
:mod:`.store`; nothing else happens here.

``create_app(settings)`` returns the application; its lifespan migrates the database, loads
every cache, and starts the group-commit writer and the refitter. The JSON error of every
refusal is ``{"error": {"status", "code", "message", "field"}}``. ``/`` and ``/admin`` are the
dashboard (:mod:`.dashboard`).
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import sys
import time
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from threadpoolctl import threadpool_limits

from ..errors import StableArenaError
from ..uncertainty import CI_METHODS
from . import dashboard, store
from .hot import (
    Hot,
    HotRoutes,
    RateLimited,
    Reply,
    answer,
    invalid_message,
    post_battles,
    post_vote,
)
from .security import (
    BodyLimit,
    Principal,
    RateLimiter,
    SharedRateLimiter,
    error_body,
    new_key,
)
from .settings import ArenaConfig, Settings, validation_message
from .state import ApiError, ArenaState, PublishedFit, Refitter

__all__ = ["create_app", "prepare", "apply_config", "serve_app"]

log = logging.getLogger("stablearena.service")

_METHODS = ("am-elo", "m-elo", "bt", "rao-kupper", "davidson")


# ---------------------------------------------------------------------------------- bodies
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


# ---------------------------------------------------------------------------------- set-up
def prepare(settings: Settings) -> tuple[sa.engine.Engine, str | None]:
    """Open (creating if needed) and migrate the database, and write the arena settings given
    explicitly; returns the engine and, on the first start only, the new admin key."""
    engine = store.make_engine(settings.db)
    admin_key = store.migrate(engine)
    apply_config(engine, settings.arena_overrides())
    return engine, admin_key


def apply_config(engine: sa.engine.Engine, changes: dict[str, Any]) -> ArenaConfig:
    """Merge ``changes`` into the stored arena configuration (validated); bump the revision."""
    with engine.connect() as conn:
        conn.info["immediate"] = store.is_sqlite(engine)
        try:
            with conn.begin():
                current = store.load_config(conn)
                merged = {**ArenaConfig().model_dump(), **current, **changes}
                try:
                    cfg = ArenaConfig.model_validate(merged)
                except ValidationError as exc:
                    raise ApiError(
                        422, "invalid_config", validation_message(exc, "arena"), _loc(exc)
                    ) from None
                new = cfg.model_dump_json()
                if store.get_meta(conn, "arena_config") != new:
                    store.set_meta(conn, "arena_config", new)
                    store.bump_revision(conn)
        finally:
            conn.info.pop("immediate", None)
    return cfg


def _loc(exc: ValidationError) -> str | None:
    errs = exc.errors()
    return ".".join(str(x) for x in errs[0]["loc"]) if errs else None


class _Metrics:
    def __init__(self, state: ArenaState, writer: store.Writer) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.votes = Counter("stablearena_votes", "Votes recorded", ["kind"], registry=r)
        self.battles = Counter("stablearena_battles_served", "Battles served", registry=r)
        self.redrawn = Counter(
            "stablearena_battles_redrawn",
            "Draws refused because the annotator had judged the pair through another worker",
            registry=r,
        )
        self.refit = Histogram(
            "stablearena_refit_seconds",
            "Time of a refit (the Stable Arena step)",
            registry=r,
            buckets=(0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100),
        )
        self.batch = Histogram(
            "stablearena_commit_batch_size",
            "Writes per group commit",
            registry=r,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
        )
        self.commit = Histogram(
            "stablearena_commit_seconds",
            "Time of a group commit (transaction + fsync)",
            registry=r,
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5),
        )
        sv = Gauge(
            "stablearena_staleness_votes", "Votes not yet in the published leaderboard", registry=r
        )
        sv.set_function(
            lambda: float(state.votes_seen - (state.fit.as_of_vote if state.fit else 0))
        )
        ss = Gauge(
            "stablearena_staleness_seconds",
            "Age of the published leaderboard when votes are waiting",
            registry=r,
        )
        ss.set_function(
            lambda: (
                float(time.time() - state.fit.fitted_at)
                if state.fit and state.votes_seen > state.fit.as_of_vote
                else 0.0
            )
        )

        def on_commit(n: int, seconds: float) -> None:
            self.batch.observe(n)
            self.commit.observe(seconds)

        writer.on_commit = on_commit


def _error(
    status: int, code: str, message: str, field: str | None = None, headers: dict | None = None
) -> Response:
    return Response(
        error_body(status, code, message, field),
        status_code=status,
        headers=headers,
        media_type="application/json",
    )


# ---------------------------------------------------------------------------------- auth
async def principal(
    request: Request,
    authorization: Annotated[str | None, Header()] = None,
    x_api_key: Annotated[str | None, Header()] = None,
) -> Principal:
    """The key's principal (401 without a valid key; 429 over the rate limit)."""
    return request.app.state.hot.authenticate(authorization, x_api_key)


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI request body of a route that parses its body itself (:mod:`.hot`)."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


async def admin(p: Annotated[Principal, Depends(principal)]) -> Principal:
    if not p.is_admin:
        raise ApiError(403, "forbidden", "this request needs an admin key", "authorization")
    return p


Anyone = Annotated[Principal, Depends(principal)]
Admin = Annotated[Principal, Depends(admin)]


def _response(reply: Reply) -> Response:
    return Response(
        reply.body,
        status_code=reply.status,
        headers={k.decode(): v.decode() for k, v in reply.headers},
        media_type="application/json",
    )


# ---------------------------------------------------------------------------------- the app
def serve_app(app: Any, settings: Settings, sock: Any) -> None:
    """Run ``app`` under uvicorn (uvloop and httptools when installed) on the bound socket
    ``sock`` until SIGTERM / SIGINT. No proxy-header middleware: nothing here reads the
    client's address (keys, not addresses, are limited)."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level=settings.log_level,
            access_log=False,
            proxy_headers=False,
            timeout_keep_alive=30,
            lifespan="on",
        )
    )
    server.run(sockets=[sock])


def create_app(
    settings: Settings | None = None, *, worker: int = 0, limits_fd: int | None = None
) -> HotRoutes:
    """The live arena application for ``settings`` (see :mod:`stablearena.service.settings`):
    the FastAPI application behind the plain-ASGI front of the two hot routes
    (:class:`~stablearena.service.hot.HotRoutes`, which exposes the FastAPI application's
    attributes: ``state``, ``routes``, ``include_router``, …). ``worker``: this process's
    number among ``--workers`` (its random draws differ from the other workers'); ``limits_fd``:
    the rate-limit table the workers share (:class:`~.security.SharedRateLimiter`), ``None``
    for a limiter of this process alone."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):  # noqa: ANN202
        # The writer thread gives up the interpreter lock at every database call (and the
        # fsync); with the default 5 ms switch interval it then waits up to 5 ms to get it
        # back from the event loop, per statement. A short interval keeps group commits short.
        sys.setswitchinterval(settings.switch_interval)
        # one BLAS thread: the worker's matrices (the tracker's Σ, N×N) are small, and extra
        # BLAS threads mostly spin on a machine whose cores serve requests (measured: a
        # 200×200 inverse 3 ms of CPU on one thread, 5–47 ms on two under load)
        blas = threadpool_limits(1)
        engine, admin_key = await asyncio.to_thread(prepare, settings)
        writer = store.Writer(engine, settings.max_batch)
        writer.start()
        state = ArenaState(engine, settings, writer, worker=worker)
        await asyncio.to_thread(state.load)
        metrics = _Metrics(state, writer)
        refitter = Refitter(state, on_fit=lambda fit: metrics.refit.observe(fit.seconds))
        refitter.start()
        app.state.engine = engine
        app.state.writer = writer
        app.state.arena = state
        app.state.refitter = refitter
        app.state.metrics = metrics
        app.state.limiter = (
            RateLimiter(settings.rate_limit, settings.rate_burst)
            if limits_fd is None
            else SharedRateLimiter(settings.rate_limit, settings.rate_burst, limits_fd)
        )
        app.state.admin_key = admin_key
        app.state.settings = settings
        app.state.hot = front.hot = Hot(state, writer, app.state.limiter, metrics)
        try:
            yield
        finally:
            front.hot = None
            refitter.stop()
            writer.stop()
            state.cache_pool.shutdown(wait=False, cancel_futures=True)
            engine.dispose()
            blas.restore_original_limits()

    app = FastAPI(
        title="stablearena live arena",
        version="1",
        description="Pairs out, votes in, am-ELO leaderboard and annotator screening as the votes "
        "arrive (am-ELO Algorithm 3; SPEC §9).",
        lifespan=lifespan,
    )
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    front = HotRoutes(app, settings.max_body_bytes)

    # ------------------------------------------------------------------ errors
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return _error(exc.status, exc.code, exc.message, exc.field)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        message, field = invalid_message(list(exc.errors()))
        return _error(422, "invalid_input", message, field)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        field = "path" if exc.status_code in (404, 405) else None
        return _error(exc.status_code, code, str(exc.detail), field)

    @app.exception_handler(StableArenaError)
    async def _library(request: Request, exc: StableArenaError) -> Response:
        return _error(422, "invalid_input", str(exc), None)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> Response:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return _error(500, "internal", f"internal error ({type(exc).__name__}); see the server log")

    @app.exception_handler(RateLimited)
    async def _limited(request: Request, exc: RateLimited) -> Response:
        return _error(
            429,
            "rate_limited",
            f"too many requests for this key; retry in {exc.wait:.2f} s",
            "authorization",
            headers={"Retry-After": str(max(1, round(exc.wait + 0.5)))},
        )

    def arena(request: Request) -> ArenaState:
        return request.app.state.arena

    async def write(request: Request, fn: Any) -> Any:
        return await asyncio.wrap_future(request.app.state.writer.submit(fn))

    # ------------------------------------------------------------------ public
    dashboard.install(app)  # / (the live leaderboard) and /admin: stablearena.service.dashboard

    @app.get("/healthz", summary="Liveness and the state of the arena")
    async def healthz(request: Request) -> dict[str, Any]:
        st = arena(request)
        fit = st.fit
        ok = await asyncio.to_thread(_db_ok, st.engine)
        return {
            "status": "ok" if ok else "degraded",
            "database": "ok" if ok else "unreachable",
            "db": request.app.state.settings.redacted_db(),
            "models": len(st.models),
            "votes": st.votes_seen,
            "fit_as_of_vote": fit.as_of_vote if fit else None,
            "fitted_at": fit.fitted_at if fit else None,
            "strategy": st.strategy_name,
            "refit_error": request.app.state.refitter.last_error,
            "refit_waiting": st.refit_waiting,
            "worker": worker,
            "pid": os.getpid(),
        }

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics(request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(
            generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
        )

    @app.get("/v1/models", summary="The arena's models and their state")
    async def list_models(request: Request) -> dict[str, Any]:
        return {"models": arena(request).model_list()}

    @app.get(
        "/v1/leaderboard", summary="The leaderboard (the `stablearena rank --format json` contract)"
    )
    async def leaderboard(
        request: Request,
        method: Annotated[
            str, Query(description="am-elo (published), m-elo, bt, rao-kupper, davidson")
        ] = "am-elo",
        ci: Annotated[str, Query(description="none, fisher, sandwich or bootstrap")] = "none",
        level: Annotated[float, Query(gt=0.5, lt=1.0)] = 0.95,
    ) -> Response:
        if method not in _METHODS:
            raise ApiError(
                422,
                "invalid_input",
                f"method must be one of {', '.join(_METHODS)}, not {method!r}",
                "method",
            )
        if ci not in ("none", *CI_METHODS):
            raise ApiError(
                422,
                "invalid_input",
                f"ci must be none or one of {', '.join(CI_METHODS)}, not {ci!r}",
                "ci",
            )
        st = arena(request)
        if method == "am-elo" and ci == "none":
            return Response(st.published_json(), media_type="application/json")
        return JSONResponse(await asyncio.to_thread(st.leaderboard, method, ci, level))

    # ------------------------------------------------------------------ annotators' requests
    # The two hot routes: answered by the plain-ASGI front (:mod:`.hot`); these FastAPI routes
    # document them and run the same functions for any request that reaches them.
    @app.post(
        "/v1/battles",
        summary="The next battle(s) for this annotator",
        openapi_extra=body_doc(BattleRequest),
    )
    async def next_battles(request: Request) -> Response:
        h = request.headers
        return _response(
            await answer(
                post_battles,
                request.app.state.hot,
                h.get("authorization"),
                h.get("x-api-key"),
                request.body,
            )
        )

    @app.post(
        "/v1/battles/{battle_id}/vote",
        summary="Vote on a battle served to you (idempotent)",
        openapi_extra=body_doc(VoteRequest),
    )
    async def vote(request: Request, battle_id: str) -> Response:
        h = request.headers
        return _response(
            await answer(
                post_vote,
                request.app.state.hot,
                battle_id,
                h.get("authorization"),
                h.get("x-api-key"),
                request.body,
            )
        )

    # ------------------------------------------------------------------ admin
    @app.get("/v1/annotators", summary="Annotators with the Stable Arena's decisions (admin)")
    async def annotators(request: Request, who: Admin) -> dict[str, Any]:
        return arena(request).annotators()

    @app.get("/v1/export", summary="The vote log, which `stablearena rank` reads (admin)")
    async def export(
        request: Request,
        who: Admin,
        format: Annotated[Literal["jsonl", "csv", "parquet"], Query()] = "jsonl",
        history: Annotated[
            bool, Query(description="also the corrected (superseded) votes")
        ] = False,
    ) -> Response:
        data, media = await asyncio.to_thread(_export, arena(request).engine, format, history)
        return Response(
            data,
            media_type=media,
            headers={"Content-Disposition": f'attachment; filename="votes.{format}"'},
        )

    @app.get("/v1/admin/config", summary="The arena's configuration (admin)")
    async def get_config(request: Request, who: Admin) -> dict[str, Any]:
        out = arena(request).config.model_dump()
        out["strategy_in_use"] = arena(request).strategy_name
        return out

    @app.patch("/v1/admin/config", summary="Change the arena's configuration (admin)")
    async def patch_config(request: Request, who: Admin, body: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(body) - set(ArenaConfig.model_fields))
        if unknown:
            raise ApiError(
                422, "invalid_input", f"unknown setting(s): {', '.join(unknown)}", unknown[0]
            )
        cfg = await asyncio.to_thread(apply_config, arena(request).engine, body)
        await _reload(request)
        return cfg.model_dump()

    @app.get("/v1/admin/models", summary="Models (admin)")
    async def admin_models(request: Request, who: Admin) -> dict[str, Any]:
        return {"models": arena(request).model_list()}

    @app.post("/v1/admin/models", status_code=201, summary="Add a model (admin)")
    async def add_model(request: Request, who: Admin, body: ModelCreate) -> dict[str, Any]:
        st = arena(request)
        name = body.name.strip()
        if not name:
            raise ApiError(422, "invalid_input", "the model name is empty", "name")
        if name in st.model_ids:
            raise ApiError(409, "conflict", f"model {name!r} exists", "name")
        cfg = st.config
        boost = body.boost if body.boost is not None else 1.0
        until = (
            body.boost_until
            if body.boost_until is not None
            else (cfg.boost_until if boost > 1 else 0)
        )

        def add(conn: sa.Connection) -> None:
            conn.execute(
                store.models.insert().values(
                    name=name, boost=boost, boost_until=until, added_at=time.time()
                )
            )
            store.bump_revision(conn)

        try:
            await write(request, add)
        except sa.exc.IntegrityError:
            raise ApiError(409, "conflict", f"model {name!r} exists", "name") from None
        await _reload(request)
        return {"model": _model(st, name)}

    @app.patch("/v1/admin/models/{name}", summary="Retire, outage on/off, boost (admin)")
    async def patch_model(
        request: Request, who: Admin, name: str, body: ModelPatch
    ) -> dict[str, Any]:
        st = arena(request)
        if name not in st.model_ids:
            raise ApiError(404, "not_found", f"no model {name!r}", "name")
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

        def change(conn: sa.Connection) -> None:
            conn.execute(store.models.update().where(store.models.c.id == mid).values(**values))
            store.bump_revision(conn)

        await write(request, change)
        await _reload(request)
        return {"model": _model(st, name)}

    @app.get("/v1/admin/annotators", summary="Annotator keys (admin; never the keys themselves)")
    async def list_keys(request: Request, who: Admin) -> dict[str, Any]:
        def read() -> list[dict[str, Any]]:
            with arena(request).engine.connect() as conn:
                rows = conn.execute(
                    sa.select(store.annotators).order_by(store.annotators.c.id)
                ).all()
            return [
                {
                    "name": r.name,
                    "role": r.role,
                    "has_key": r.key_id is not None,
                    "created_at": r.created_at,
                    "revoked": r.revoked_at is not None,
                }
                for r in rows
            ]

        return {"annotators": await asyncio.to_thread(read)}

    @app.post("/v1/admin/annotators", status_code=201, summary="Create an annotator key (admin)")
    async def create_key(request: Request, who: Admin, body: AnnotatorCreate) -> dict[str, Any]:
        key = new_key()
        name = body.name.strip()

        def create(conn: sa.Connection) -> str:
            row = conn.execute(
                sa.select(store.annotators).where(store.annotators.c.name == name)
            ).first()
            values = {
                "role": body.role,
                "key_id": key.key_id,
                "key_hash": key.key_hash,
                "revoked_at": None,
            }
            if row is None:
                conn.execute(
                    store.annotators.insert().values(name=name, created_at=time.time(), **values)
                )
            elif row.key_id is not None and row.revoked_at is None:
                return "exists"
            else:  # an imported annotator gets its first key, or a revoked one a new key
                conn.execute(
                    store.annotators.update()
                    .where(store.annotators.c.id == row.id)
                    .values(**values)
                )
            store.bump_revision(conn)
            return "ok"

        if await write(request, create) == "exists":
            raise ApiError(
                409, "conflict", f"annotator {name!r} has a key; revoke it first", "name"
            )
        await _reload(request)
        return {"name": name, "role": body.role, "key": key.secret}

    @app.delete("/v1/admin/annotators/{name}", summary="Revoke an annotator's key (admin)")
    async def revoke_key(request: Request, who: Admin, name: str) -> dict[str, Any]:
        if name == who.name:
            raise ApiError(409, "conflict", "an admin cannot revoke its own key", "name")

        def revoke(conn: sa.Connection) -> int:
            n = conn.execute(
                store.annotators.update()
                .where(store.annotators.c.name == name, store.annotators.c.key_id.is_not(None))
                .values(revoked_at=time.time())
            ).rowcount
            store.bump_revision(conn)
            return n

        if not await write(request, revoke):
            raise ApiError(404, "not_found", f"no annotator {name!r} with a key", "name")
        await _reload(request)
        return {"name": name, "revoked": True}

    @app.post("/v1/admin/refit", summary="Refit now (admin)")
    async def refit_now(request: Request, who: Admin) -> dict[str, Any]:
        fit: PublishedFit | None = await asyncio.to_thread(request.app.state.refitter.refit_now)
        st = arena(request)
        fit = fit or st.fit
        if fit is None:
            raise ApiError(503, "no_votes", "nothing to fit yet")
        return {
            "fit_id": fit.id,
            "as_of_vote": fit.as_of_vote,
            "fitted_at": fit.fitted_at,
            "seconds": fit.seconds,
        }

    async def _reload(request: Request) -> None:
        st = arena(request)

        def reload() -> None:
            with st.engine.connect() as conn:
                st._load_registry(conn)

        await asyncio.to_thread(reload)

    return front


def _model(st: ArenaState, name: str) -> dict[str, Any]:
    return next(m for m in st.model_list() if m["name"] == name)


def _db_ok(engine: sa.engine.Engine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        return True
    except Exception:
        return False


def _export(engine: sa.engine.Engine, fmt: str, history: bool) -> tuple[bytes, str]:
    """The vote log as FastChat-style records: model_a, model_b, winner, judge, tstamp, plus
    battle_id, revision, strategy, propensity (and superseded with ``history``)."""
    import pandas as pd

    v, b = store.votes, store.battles
    ma = store.models.alias("ma")
    mb = store.models.alias("mb")
    q = (
        sa.select(
            ma.c.name.label("model_a"),
            mb.c.name.label("model_b"),
            v.c.outcome,
            store.annotators.c.name.label("judge"),
            v.c.created_at.label("tstamp"),
            v.c.battle_id,
            v.c.revision,
            b.c.strategy,
            b.c.propensity,
            v.c.superseded,
        )
        .select_from(
            v.join(ma, ma.c.id == v.c.model_a)
            .join(mb, mb.c.id == v.c.model_b)
            .join(store.annotators, store.annotators.c.id == v.c.annotator_id)
            .join(b, b.c.id == v.c.battle_id)
        )
        .order_by(v.c.id)
    )
    if not history:
        q = q.where(v.c.superseded == sa.false())
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    df = pd.DataFrame(rows, columns=[c.name for c in q.selected_columns])
    labels = list(store.EXPORT_LABELS)
    df.insert(2, "winner", [labels[int(o)] for o in df.pop("outcome")])
    if not history:
        df = df.drop(columns=["superseded"])
    if fmt == "csv":
        return df.to_csv(index=False).encode(), "text/csv"
    if fmt == "jsonl":
        return df.to_json(orient="records", lines=True).encode(), "application/x-ndjson"
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue(), "application/vnd.apache.parquet"
