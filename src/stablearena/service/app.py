"""The live arena's application factory: ``create_app(settings)``.

The routes live in :mod:`stablearena.service.api` (one router per area), their request models in
:mod:`.schemas`, authentication in :mod:`.deps`, every SQL statement in :mod:`.store`. The
application's lifespan migrates the database, loads every cache (:mod:`.state`), and starts the
group-commit writer, the refitter (:mod:`.refitter`) and the dashboard's watcher
(:mod:`.dashboard`). The JSON error of every refusal is
``{"error": {"status", "code", "message", "field"}}``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import signal
import sys
import threading
from contextlib import asynccontextmanager, suppress
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from threadpoolctl import threadpool_limits

from ..errors import StableArenaError
from . import store
from .api import ROUTERS
from .api.admin import apply_config
from .api.battles import Hot
from .arena_settings import model_tables
from .dashboard import Dashboard
from .duties import Duties, check_duties
from .errors import (
    ApiError,
    RateLimited,
    database_unreachable,
    error_body,
    invalid_message,
    rate_limited_message,
    retry_after,
)
from .holder import BattleHolder, write_model_tables
from .hot import HotRoutes
from .metrics import Metrics
from .public_boards import PublicBoards
from .refitter import Refitter
from .security import AddressLimiter, BodyLimit, limiter
from .settings import Settings
from .state import ArenaState

__all__ = ["create_app", "prepare", "apply_config", "serve_app"]

log = logging.getLogger("stablearena.service")


# ---------------------------------------------------------------------------------- set-up
def prepare(settings: Settings) -> tuple[sa.engine.Engine, str | None]:
    """Open (creating if needed) and migrate the database, and write the arena settings given
    explicitly; returns the engine and, on the first start only, the new admin key."""
    engine = store.make_engine(settings.db)
    admin_key = store.migrate(engine)
    apply_config(engine, settings.arena_overrides())
    # the serve config's [[models]] endpoints (held battles: holder.py)
    write_model_tables(engine, model_tables(settings.models))
    check_duties(settings)  # the [moderation] rules file and the [terms] file can be read
    return engine, admin_key


def serve_app(app: Any, settings: Settings, sock: Any, *, announce: bool = True) -> None:
    """Run ``app`` under uvicorn (uvloop and httptools when installed) on the bound socket
    ``sock`` until SIGTERM / SIGINT. No proxy-header middleware: nothing here reads the
    client's address as a proxy reports it: requests without a valid key are limited per
    connecting address (behind a proxy, the proxy's). Slow clients: ``header_timeout`` for a
    request to arrive (:func:`~.security.timed_http_protocol`), ``keep_alive_timeout`` idle;
    SIGTERM lets in-flight requests finish (up to ``graceful_timeout``), after ``drain_seconds``
    of serving with ``/healthz`` at 503 "draining" (a load balancer takes the host out);
    ``announce``: print a
    line when the signal arrives (the workers of ``--workers N`` leave that to their parent)."""
    import uvicorn

    from .._lifetime import say_stopping
    from .security import timed_http_protocol

    class Server(uvicorn.Server):
        draining = False
        _woken: asyncio.Event | None = None
        _loop: asyncio.AbstractEventLoop | None = None

        async def main_loop(self) -> None:
            # uvicorn's own loop wakes ten times a second (a fifth of an idle host's CPU) to
            # refresh the Date header and look for a stop: here once a second (the header has
            # whole seconds), and a stop wakes it at once
            self._loop, self._woken = asyncio.get_running_loop(), asyncio.Event()
            while not await self.on_tick(0):  # tick 0: the header refreshed every time
                with suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), 1.0)
                self._woken.clear()

        def handle_exit(self, sig: int, frame: Any) -> None:
            if announce and not self.should_exit and not self.draining:  # said once
                name = signal.Signals(sig).name
                say_stopping(name)
            if sig == signal.SIGTERM and settings.drain_seconds > 0 and not self.should_exit:
                if not self.draining:  # /healthz says "draining"; the stop comes later
                    self.draining = True
                    app.state.draining = True
                    timer = threading.Timer(settings.drain_seconds, self._stop, (sig, frame))
                    timer.daemon = True
                    timer.start()
                return
            self._stop(sig, frame)

        def _stop(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            if self._loop is not None and self._woken is not None:
                with suppress(RuntimeError):  # the loop has already closed
                    self._loop.call_soon_threadsafe(self._woken.set)
            # SIGTERM is the ordinary stop: drain, then exit 0 (uvicorn would raise the
            # signal again after the drain, and the process would die of it)
            captured = getattr(self, "_captured_signals", None)
            if sig == signal.SIGTERM and captured:
                captured[:] = [s for s in captured if s != signal.SIGTERM]

    server = Server(
        uvicorn.Config(
            app,
            log_level=settings.log_level,
            access_log=False,
            # X-Forwarded-For believed only from the configured load balancers
            proxy_headers=bool(settings.trusted_proxies),
            forwarded_allow_ips=",".join(settings.trusted_proxies) or None,
            http=timed_http_protocol(settings.header_timeout),
            timeout_keep_alive=settings.keep_alive_timeout,
            timeout_graceful_shutdown=settings.graceful_timeout,
            limit_concurrency=settings.max_connections,
            h11_max_incomplete_event_size=16 * 1024,
            lifespan="on",
        )
    )
    server.run(sockets=[sock])


def _error(
    status: int, code: str, message: str, field: str | None = None, headers: dict | None = None
) -> Response:
    return Response(
        error_body(status, code, message, field),
        status_code=status,
        headers=headers,
        media_type="application/json",
    )


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        headers = None
        if exc.retry_after is not None:
            headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after)))}
        return _error(exc.status, exc.code, exc.message, exc.field, headers)

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

    @app.exception_handler(sa.exc.OperationalError)
    async def _database(request: Request, exc: sa.exc.OperationalError) -> Response:
        # the database does not answer: not a bug (several hosts: the client retries later)
        log.warning("database fault on %s %s: %s", request.method, request.url.path, exc)
        e = database_unreachable(exc)
        return _error(e.status, e.code, e.message, e.field)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> Response:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return _error(500, "internal", f"internal error ({type(exc).__name__}); see the server log")

    @app.exception_handler(RateLimited)
    async def _limited(request: Request, exc: RateLimited) -> Response:
        return _error(
            429,
            "rate_limited",
            rate_limited_message(exc),
            "authorization",
            headers={"Retry-After": retry_after(exc)},
        )


# ---------------------------------------------------------------------------------- the app
#: The worker's cycle-collector thresholds (Python's are 700, 10, 10): a young-generation
#: collection every 20,000 allocations (not 700), the older generations after ten of the one
#: below as before — the objects of a request mostly die by reference counting, and a burst of
#: requests no longer sets off full collections (see the lifespan below).
GC_THRESHOLDS = (20_000, 10, 10)


def create_app(
    settings: Settings | None = None, *, worker: int = 0, limits_fd: int | None = None
) -> HotRoutes:
    """The live arena application for ``settings`` (see :mod:`stablearena.service.settings`):
    the FastAPI application behind the plain-ASGI front of the hot routes
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
        metrics = Metrics(state, writer)
        refitter = Refitter(
            state,
            on_fit=lambda fit: metrics.refit.observe(fit.seconds),
            # the fitted object (every count) comes back from the fit process only for drawing
            want_fitted=lambda: (
                getattr(app.state, "dashboard", None) is not None and app.state.dashboard.watched()
            ),
        )
        refitter.start()
        app.state.engine = engine
        app.state.writer = writer
        app.state.arena = state
        app.state.refitter = refitter
        app.state.metrics = metrics
        # the limits per key, page identity and address: rows of the database (one limit for
        # every host of the database) or this host's (settings ``limits``)
        buckets = app.state.buckets = (
            store.limits.Buckets(engine) if settings.limits_in_database() else None
        )
        app.state.limiter = limiter(
            settings.rate_limit, settings.rate_burst, "keys", limits_fd, buckets
        )
        app.state.strangers = AddressLimiter(
            settings.unauthenticated_rate_limit, settings.unauthenticated_burst
        )
        app.state.admin_key = admin_key
        app.state.limits_fd = limits_fd  # the page's limits share the table (visitors.py)
        app.state.settings = settings
        app.state.worker = worker
        app.state.hot = front.hot = Hot(
            state, writer, app.state.limiter, metrics, app.state.strangers
        )
        # the dashboard's watcher (and, when first needed, its render process)
        dash = app.state.dashboard = Dashboard(state, settings)
        if limits_fd is not None or buckets is not None:  # login attempts per address
            dash.login_limiter = limiter(0.5, 10, "logins", limits_fd, buckets)
        dash.start()
        # the public leaderboard's boards: drawn once per fit by one worker, read by all
        boards = app.state.public_boards = PublicBoards(state, settings)
        boards.start()
        # the battles the arena holds itself (models as endpoints, the /arena page)
        holder = app.state.holder = BattleHolder(state, writer, settings)
        # before the first request: battles a dead process left mid-turn are closed
        await holder.recover(legacy=True)
        holder.start()
        # moderation, terms of use (service/duties.py; the classifier is the holder's)
        duties = app.state.duties = Duties(settings)
        # What the worker loaded (modules, caches, the fit) lives as long as it does: out of
        # the cycle collector's sight (gc.freeze), which then runs less often (GC_THRESHOLDS).
        # Measured (bench/bench_arena.py, 200 battles at once, a round's collections timed by
        # gc.callbacks, a stack sampler running): 880 ms of pauses (two full collections, 413
        # and 187 ms) before, 135 and 157 ms in two runs after. Without the sampler, five
        # interleaved runs: worker CPU per battle 7.7 → 6.1 ms (medians, with the SSE reader).
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)
        try:
            yield
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
            await holder.stop()
            await duties.aclose()
            dash.stop()
            boards.stop()
            front.hot = None
            refitter.stop()
            writer.stop()
            state.cache_pool.shutdown(wait=False, cancel_futures=True)
            if buckets is not None:
                buckets.close()
            engine.dispose()
            blas.restore_original_limits()

    app = FastAPI(
        title="stablearena live arena",
        version="1",
        description="Pairs out, votes in, am-ELO leaderboard and annotator screening as the votes "
        "arrive (am-ELO Algorithm 3; docs/methods/live-arena.md).",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc: stablearena.service.api.docs (no CDN)
        redoc_url=None,
    )
    # a battle's body may carry an attached image, base64 in a data: URL (4 characters per 3
    # bytes): larger by that much (service/images.py refuses an image over max_image_bytes)
    image_body = (settings.arena_page.max_image_bytes + 2) // 3 * 4 + 256
    app.add_middleware(
        BodyLimit,
        limit=settings.max_body_bytes,
        paths={"/arena/battles": settings.max_body_bytes + image_body},
    )
    front = HotRoutes(app, settings.max_body_bytes)
    _install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    return front
