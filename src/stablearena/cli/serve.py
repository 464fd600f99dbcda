"""``stablearena serve``: the live arena (docs/methods/live-arena.md) as an HTTP JSON API."""

import errno
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import app, err_console


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (not yet listening), or an :class:`InputError` saying
    which port is busy and how to choose another — checked before anything else is done."""
    from ..errors import InputError

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InputError(
                f"port {port} on {host} is busy (another program listens there); nothing was "
                f"created. Choose another port with --port N (--port 0 picks a free one) or "
                f"--set port=N, or stop the program using port {port}."
            ) from None
        raise InputError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; nothing was created. "
            "Check --host, or choose another port with --port N (--port 0 picks a free one)."
        ) from None
    return sock


@app.command()
def serve(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar="URL",
            help="Database URL: sqlite:///FILE (default sqlite:///arena.db) or "
            "postgresql+psycopg://USER@HOST:PORT/DB.",
        ),
    ] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="Address to listen on (default 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", help="Port (default 8000; 0 = any free port).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="TOML settings file (flags override it).")
    ] = None,
    import_logs: Annotated[
        list[Path] | None,
        typer.Option(
            "--import",
            help="Seed the arena from a battle log (any format 'rank' reads) before serving; "
            "repeatable. The same file is never imported twice.",
        ),
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="Any setting as KEY=VALUE, e.g. --set rate_limit=20 --set arena.exploration=0.2 "
            "(see the README, 'The live arena').",
        ),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option("--log-level", help="critical, error, warning (default), info, debug."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            help="API worker processes sharing the socket and the database (default 1; one "
            "Python process uses at most one core).",
        ),
    ] = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="Start the built-in demo models (a local OpenAI-compatible server, a child "
            "process; they answer any prompt in Markdown, streamed at a reading pace: --set "
            "demo_pace=SECONDS a word) with a prompt pool, so /arena can be tried at once "
            "(database arena-demo.db unless --db is given).",
        ),
    ] = False,
) -> None:
    """Run the live arena: pairs out, votes in, am-ELO leaderboard and annotator screening as
    the votes arrive (OpenAPI docs at /docs).

    On the first start it creates the database and prints the admin key once. Settings come
    from --config FILE (TOML), then --set KEY=VALUE, then the flags.
    """
    from ..extras import require

    require("serve", "stablearena serve")
    from ..service.settings import load_settings

    settings = load_settings(
        config,
        overrides={
            "db": db,
            "host": host,
            "port": port,
            "log_level": log_level,
            "workers": workers,
        },
        sets=list(sets or ()),
    )
    demo_server = _start_demo(settings, db_given=db is not None) if demo else None
    from ..service.app import create_app, prepare, serve_app
    from ..service.seed import import_log
    from ..service.store import make_engine

    make_engine(settings.db).dispose()  # checks the URL and its directory; connects to nothing
    sock = _bind(settings.host, settings.port)  # before the database is created or touched
    try:
        engine, admin_key = prepare(settings)
        if admin_key is not None:
            print(
                "created a new arena database; the admin key (shown once, store it now):\n"
                f"  {admin_key}",
                flush=True,
            )
        for path in import_logs or ():
            added = import_log(engine, path)
            err_console.print(
                f"imported {added['battles']:,} battles ({added['models']} models, "
                f"{added['annotators']} annotators) from {path}"
            )
        engine.dispose()
    except BaseException:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    many = f"; {settings.workers} workers" if settings.workers > 1 else ""
    print(
        f"stablearena serve: listening on http://{settings.host}:{bound} "
        f"(database {settings.redacted_db()}{many}; docs at /docs)",
        flush=True,
    )
    if settings.workers > 1:
        from ..service.worker import run_workers

        sock.listen(2048)
        code = run_workers(settings, sock, settings.workers)
        _stopped()
        if code:
            raise typer.Exit(code)
        return
    try:
        serve_app(create_app(settings), settings, sock)
    finally:
        if demo_server is not None:
            _stop(demo_server)
    _stopped()


def _stopped() -> None:
    """Say that the server has stopped, and skip the interpreter's last full garbage
    collection of the server's heap, which the exit frees anyway (measured on an idle server:
    1.75 s from SIGTERM to exit with it, 0.30 s without)."""
    import gc

    gc.freeze()
    print("stablearena serve: stopped", flush=True)


def _start_demo(settings, db_given: bool):  # noqa: ANN001, ANN202 - Settings, Popen
    """``serve --demo``: the demo server (stablearena.judging.endpoints.demo_server) as a child process
    that exits with this one, started first so that it loads while ``serve`` does; its eight
    models as the arena's endpoints, the demo prompts as the pool, its ``demo-classifier`` as
    the category classifier, and every vote in the fit at once (δ = 0) unless the settings say
    otherwise. The models stream at ``demo_pace`` seconds a word (a reading pace)."""
    import subprocess

    from ..judging.endpoints.demo import DEMO_MODELS

    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    cmd = [sys.executable, "-m", "stablearena.judging.endpoints.demo_server", "--port", str(port)]
    cmd += ["--seed", str(settings.seed or 0), "--pace", repr(settings.demo_pace)]
    cmd += ["--exit-with-parent"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    if not db_given and "db" not in settings.model_fields_set:
        settings.db = "sqlite:///arena-demo.db"
    demo = [{"name": m.name, "base_url": base_url, "model": m.name} for m in DEMO_MODELS]
    settings.models = [*settings.models, *demo]
    if settings.arena_page.prompts is None:
        settings.arena_page.prompts = "demo"
    if not settings.category_classifier.on:  # categories from the demo classifier
        from ..service.arena_settings import CategoryClassifier

        settings.category_classifier = CategoryClassifier(
            endpoint={"base_url": base_url, "model": "demo-classifier"}
        )
    arena = settings.arena
    for key, value in (("min_records", 0), ("refit_seconds", 1.0), ("refit_votes", 1)):
        if key not in arena.model_fields_set:
            setattr(arena, key, value)
    pace = f"{settings.demo_pace:g} s a word" if settings.demo_pace else "no pause"
    print(f"demo models served by {base_url} ({pace}); vote at /arena", flush=True)
    return proc


def _stop(proc) -> None:  # noqa: ANN001 - Popen
    """Stop the demo server (terminate, then kill after 5 s)."""
    proc.terminate()
    try:
        proc.wait(5)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
        proc.kill()


@app.command()
def migrate(
    db: Annotated[
        str,
        typer.Option(
            "--db", help="The arena's database URL (sqlite:///FILE or postgresql+psycopg://…)."
        ),
    ],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="The schema revision to move to, up or down ('head': this version's newest). "
            "Roll back with the newer version before running an older one on a schema that is "
            "not additive for it (docs/guides/several-hosts.md, 'Upgrades').",
            metavar="REV",
        ),
    ] = "head",
    drop: Annotated[
        bool,
        typer.Option(
            "--drop",
            help="Down past migrations that only add, drop the tables and columns they added "
            "(by default they stay, so hosts of the newer version keep serving while the older "
            "one starts).",
        ),
    ] = False,
) -> None:
    """Move the live arena's database schema to a revision, up or down, and say what it did."""
    from ..extras import require

    require("serve", "stablearena migrate")
    from ..service.store import make_engine
    from ..service.store.engine import kept_revision, migrate_to

    engine = make_engine(db)
    try:
        before, after = migrate_to(engine, to, drop=drop)
        kept = kept_revision(engine)
    finally:
        engine.dispose()
    err_console.print(
        f"schema at {after}"
        + (
            " (unchanged)"
            if before == after
            else " (a new database)"
            if before is None
            else f" (was {before})"
        )
        + (
            f"; the tables and columns added up to {kept} stay (they only add: hosts of the "
            "newer version keep serving; --drop removes them)"
            if kept
            else ""
        ),
        highlight=False,
    )
