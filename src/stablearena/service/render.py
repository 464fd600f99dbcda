"""Drawing the live arena's dashboard for one published fit, in a separate process.

Figures cost seconds of CPU at Chatbot Arena's size (129 models: about 0.6 s for the Fisher
intervals and 2–3 s for the figures) and matplotlib's style is process-global, so the server
never draws: :class:`stablearena.service.dashboard.Dashboard` hands the published fit — the
fitted object the refit made — to a low-priority worker process that runs :func:`render_view`.
It builds the page from the HTML report's pieces (:func:`stablearena.figures.report.build_report` with
Fisher intervals, the ``components.html.j2`` macros, the figures of :mod:`stablearena.figures.plots`),
compresses it (gzip, as served) and stores it in the ``dashboard_views`` table keyed by the fit,
from where every worker of the arena serves it. Each fit is drawn at most once.

Kept free of the web stack, like :mod:`.refit`.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import os
import time
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any

import sqlalchemy as sa

from .._numeric import normal_ppf
from . import store
from .refit import SOURCE, live_counts, refit_published

__all__ = [
    "PUBLIC_FIGURES",
    "ADMIN_FIGURES",
    "RenderJob",
    "RenderResult",
    "RenderedView",
    "build_view",
    "render_view",
    "store_view",
    "start_worker",
    "script",
    "script_hash",
    "time_text",
    "KEEP_VIEWS",
]

#: Figures on ``/`` (the leaderboard's interval chart sits beside the table).
PUBLIC_FIGURES: tuple[str, ...] = ("leaderboard", "winrate", "observed", "ties", "map")
#: Figures on the admin view: the annotators' abilities and the pair coverage.
ADMIN_FIGURES: tuple[str, ...] = ("annotators", "battles")
#: Drawn views kept in the database (the newest).
KEEP_VIEWS = 3
#: Seconds between two polls of an open page.
PUBLIC_POLL_SECONDS = 3.0
ADMIN_POLL_SECONDS = 5.0


@dataclass(frozen=True)
class RenderJob:
    """What the render process needs: where to store the view, the published fit's identity and
    payload, and its fitted object (``None``: refit from the counts, possible only while they
    are still those of the fit)."""

    db: str
    fit_id: int
    as_of_vote: int
    fitted_at: float
    fit_seconds: float
    payload: dict[str, Any]
    strategy: str
    fitted: Any = None


@dataclass(frozen=True)
class RenderResult:
    """``status``: ``stored``, ``exists`` (another worker drew this fit) or ``skipped`` (no
    fitted object and the counts have moved on: the next fit will be drawn). ``cpu_seconds``:
    the render process's CPU time for this job (what the pacing of renders is based on);
    ``pid``: the process that drew."""

    fit_id: int
    status: str
    cpu_seconds: float
    wall_seconds: float
    sizes: dict[str, int] = field(default_factory=dict)
    pid: int = 0


@dataclass(frozen=True)
class RenderedView:
    """One fit's pages: ``page`` (all of ``/``), ``main`` (its content, for the refresh),
    ``admin`` (the admin view's fit-dependent content) and ``info`` (what was drawn)."""

    page: str
    main: str
    admin: str
    info: dict[str, Any]


# ---------------------------------------------------------------------------------- shared
@lru_cache(maxsize=1)
def script() -> str:
    """The dashboard's one script (``templates/dashboard.js``), inlined in every page."""
    return resources.files("stablearena.service").joinpath("templates/dashboard.js").read_text()


@lru_cache(maxsize=1)
def script_hash() -> str:
    """The CSP source of :func:`script` (``'sha256-…'``): only that script may run."""
    import base64

    digest = hashlib.sha256(script().encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def time_text(t: float) -> str:
    """A Unix time as ``YYYY-MM-DD HH:MM:SS UTC``."""
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@lru_cache(maxsize=1)
def environment() -> Any:
    """The report's Jinja2 environment with the dashboard's templates in front."""
    from ..figures.report import template_environment

    return template_environment("stablearena.service")


def version_text() -> str:
    from .. import __version__

    return __version__


# ---------------------------------------------------------------------------------- drawing
def build_view(fitted: Any, job: RenderJob) -> RenderedView:
    """The pages of one published fit: the leaderboard payload with Fisher intervals, rank
    intervals and tiers, the summary cards, the figures and the notes exactly as the HTML
    report builds them (:func:`stablearena.figures.report.build_report` on the fit's own counts), and
    the annotator screening — every annotator with its decision and reason — for the admin."""
    from ..analysis.leaderboard import interval_caption
    from ..errors import InputError
    from ..figures.report import annotator_section, build_report, method_text

    if fitted.counts is None:
        raise InputError("the published fit keeps no pair counts; the dashboard cannot draw it.")
    report = build_report(
        fitted,
        fitted.counts,
        source=SOURCE,
        ci="fisher",
        kinds=PUBLIC_FIGURES + ADMIN_FIGURES,
    )
    payload = report.payload
    level = float(payload.get("ci", {}).get("level", 0.95))
    published = job.payload
    screening = (
        annotator_section(fitted, float(normal_ppf(0.5 + level / 2)), everyone=True)
        if hasattr(fitted, "annotator_table")
        else None
    )
    ann = published.get("annotators", {})
    if screening is not None and "trust" in ann:  # the bounded-influence rule, per account
        trust = {r["annotator"]: r for r in ann.get("annotators", ())}
        keys = ("weight", "influence", "influence_model", "trust")
        for row in screening["rows"]:
            row |= {k: trust.get(row["annotator"], {}).get(k) for k in keys}
        screening["trust"] = ann["trust"]
    v = {
        "fit_id": job.fit_id,
        "as_of_vote": job.as_of_vote,
        "fitted_text": time_text(job.fitted_at),
        "fit_seconds": job.fit_seconds,
        "payload": payload,
        "summary": report.summary,
        "board": report.figure("leaderboard"),
        "figures": [f for f in report.figures if f.key in PUBLIC_FIGURES[1:]],
        "admin_figures": [f for f in report.figures if f.key in ADMIN_FIGURES],
        "notes": report.notes,
        "method_text": method_text(payload),
        "interval_caption": interval_caption(payload["ci"]) if "ci" in payload else "",
        "annotators": screening,
        "changes": list(published.get("annotators", {}).get("changes", [])),
        "config": {
            "policy": "warn",
            "min_records": 0,
            "ability_threshold": 0.0,
            "confidence": None,
            **published.get("config", {}),
        },
        "strategy": job.strategy,
    }
    env = environment()
    main = env.get_template("dashboard_main.html.j2").render(v=v)
    page = env.get_template("dashboard.html.j2").render(
        main=main,
        view_version=str(job.fit_id),
        status=status_line(job.as_of_vote, job.fitted_at, None),
        every=PUBLIC_POLL_SECONDS,
        script=script(),
        version=version_text(),
    )
    admin = env.get_template("admin_main.html.j2").render(v=v)
    info = {
        "fit_id": job.fit_id,
        "as_of_vote": job.as_of_vote,
        "fitted_at": job.fitted_at,
        "fit_seconds": job.fit_seconds,
        "n_models": payload["n_models"],
        "n_battles": payload["n_battles"],
        "figures": [f.key for f in report.figures],
        "notes": len(report.notes),
    }
    return RenderedView(page, main, admin, info)


def status_line(as_of_vote: int, fitted_at: float, votes: int | None) -> str:
    """The status bar under the header: which fit the page shows and how far behind it is."""
    text = f"Leaderboard as of vote {as_of_vote:,}, fitted {time_text(fitted_at)}"
    if votes is not None:
        text += f" · {votes:,} votes so far"
    return text


# ---------------------------------------------------------------------------------- storing
_ENGINES: dict[str, sa.engine.Engine] = {}


def _engine(url: str) -> sa.engine.Engine:
    engine = _ENGINES.get(url)
    if engine is None:
        engine = _ENGINES[url] = store.make_engine(url)
    return engine


def _gzip(text: str) -> bytes:
    return gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)


def store_view(engine: sa.engine.Engine, view: RenderedView, rendered_at: float) -> dict[str, int]:
    """Insert the view (its pages gzip-compressed) unless one exists for the fit, and delete all
    but the newest :data:`KEEP_VIEWS`; returns the compressed sizes (empty when it existed)."""
    blobs = {"page": _gzip(view.page), "main": _gzip(view.main), "admin": _gzip(view.admin)}
    if not store.insert_view(engine, view.info, blobs, rendered_at, KEEP_VIEWS):
        return {}
    return {k: len(v) for k, v in blobs.items()}


def _refit(job: RenderJob) -> Any:
    """The published fit again from this process's live counts (read in full once, then only
    the new votes) — only while they hold exactly the votes of the fit (otherwise ``None``)."""
    engine, live = live_counts(job.db)
    snap = live.snapshot(engine)
    if snap.as_of_vote != job.as_of_vote or snap.empty:
        return None
    return refit_published(job.payload, snap.counts())


def render_view(job: RenderJob) -> RenderResult:
    """Draw and store the view of ``job``'s fit (the render process's one task)."""
    t0, c0 = time.perf_counter(), time.process_time()
    engine = _engine(job.db)
    exists = store.view_exists(engine, job.fit_id)

    def result(status: str, sizes: dict[str, int] | None = None) -> RenderResult:
        return RenderResult(
            job.fit_id,
            status,
            time.process_time() - c0,
            time.perf_counter() - t0,
            sizes or {},
            os.getpid(),
        )

    if exists:
        return result("exists")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit's notes carry every warning
        fitted = job.fitted if job.fitted is not None else _refit(job)
        if fitted is None:
            return result("skipped")
        view = build_view(fitted, job)
    sizes = store_view(engine, view, time.time())
    return result("stored" if sizes else "exists", sizes)


#: The render process's niceness: when the cores are busy, the server's requests come first.
NICENESS = 10


def _lower_priority(pid: int) -> None:
    try:
        current = os.getpriority(os.PRIO_PROCESS, pid)
        if current < NICENESS:
            os.setpriority(os.PRIO_PROCESS, pid, NICENESS)
    except (AttributeError, OSError):  # pragma: no cover - not on this platform
        pass


class _LowPriorityProcess(SpawnProcess):
    """A spawned process lowered to :data:`NICENESS` by its parent right after the start (the
    class is pickled into the child, so it lives at module level)."""

    def start(self) -> None:
        super().start()
        if self.pid is not None:
            _lower_priority(self.pid)


class _LowPriorityContext(SpawnContext):
    Process = _LowPriorityProcess


def low_priority_context() -> SpawnContext:
    """A "spawn" multiprocessing context whose processes run at :data:`NICENESS` almost from
    their first instruction, so that even the imports a spawned process does before any
    initialiser do not compete with the server."""
    return _LowPriorityContext()


def start_worker(parent: int | None = None) -> None:
    """Initialiser of the render process: ends with the server ``parent`` (see
    :mod:`stablearena._lifetime`), a low CPU priority (also when started another way) and the plotting
    stack imported once."""
    if parent is not None:
        from .._lifetime import exit_with_parent

        exit_with_parent(parent)
    _lower_priority(0)
    from ..figures import plots, report  # noqa: F401
    from ..raters import annotator  # noqa: F401

    environment()
