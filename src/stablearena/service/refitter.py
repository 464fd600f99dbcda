"""The background refitter of one worker (a thread): installs the newest published fit and,
when the newest fit is K votes or T seconds behind, refits — or updates.

It polls the database every ``poll_seconds``: a newer fit published by any worker is installed;
when the newest fit is K votes or T seconds behind, the worker that gets the refit lock
(PostgreSQL: an advisory lock; SQLite: a lock file) either reads a snapshot of the counts, runs
the Stable Arena step (:func:`stablearena.service.refit.run_fit`, in a separate process by
default) and publishes it — when the full fit's pacing allows (:meth:`Refitter.paced`) — or
else publishes a one-step update of the last full fit by the votes since
(:func:`stablearena.service.refit.run_update`: their cost, not the arena's), so that the
leaderboard stays within K votes / T seconds while full fits are paced. Votes never wait.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection

from .._threads import stop_watching, watch
from ..analysis.fitcheck import board_problems
from ..errors import TooFewRecords
from . import store
from .errors import ApiError, for_the_service, waiting_message
from .refit import (
    UPDATE_METHOD,
    FitOutput,
    live_active_days,
    live_ages,
    merge_update,
    probe_flagged,
    run_fit,
    run_live_fit,
    run_live_update,
    run_update,
)
from .state import PublishedFit

if TYPE_CHECKING:
    from .state import ArenaState

__all__ = ["Refitter"]

log = logging.getLogger("stablearena.service")

#: The meta key of the last held-back fit's alert (empty: none).
FIT_ALERT = "fit_alert"

#: Arenas with fewer (pair, annotator) cells than this are not paced by ``refit_share``
#: (their fits take milliseconds: K votes or T seconds decide alone).
UNPACED_CELLS = 20_000


class _FileLock:
    """An exclusive, non-blocking lock file (SQLite: one refitter per database file)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> bool:
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Refitter:
    """The background loop of one worker (see the module docstring)."""

    def __init__(self, state: ArenaState, *, on_fit: Any = None, want_fitted: Any = None) -> None:
        self.state = state
        #: whether the fit process should send back the fitted object (it holds every count:
        #: only while the dashboard draws); ``None``: always
        self.want_fitted = want_fitted
        #: the last fit's CPU and wall seconds, and the wall clock and this process's CPU
        #: clock when it ended (:meth:`paced`)
        self.last_fit = (0.0, 0.0, 0.0, 0.0)
        self.settings = state.settings
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="arena-refitter", daemon=True)
        self._executor: Executor | None = None
        self.on_fit = on_fit
        self.last_error: str | None = None
        self.fits_done = 0
        self.fits_held = 0  # full fits held back by the checks (stablearena.analysis.fitcheck)
        self.updates_done = 0
        #: the id of the published full fit this worker's fit process made (its one-step
        #: updates start from it), or None
        self.base_id: int | None = None
        self._lock_conn: Connection | None = None
        self._wake = threading.Event()
        self._local = threading.Lock()
        engine = state.engine
        if store.is_sqlite(engine):
            self._file_lock: _FileLock | None = _FileLock(str(engine.url.database) + ".refit-lock")
        else:
            self._file_lock = None

    def start(self) -> None:
        self._start_executor()
        self._thread.start()

    def _start_executor(self) -> None:
        if self.settings.fit_in_process:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            from .._lifetime import exit_with_parent
            from .refit import warm_up_worker

            self._executor = ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=exit_with_parent,  # no orphan fit process after a crash
                initargs=(os.getpid(),),
            )
            self._executor.submit(warm_up_worker)
        else:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="arena-fit")

    def stop(self) -> None:
        stop_watching(self._stop, self._wake, self._thread, 60)
        if self._executor is not None:
            from .._lifetime import stop_pool

            stop_pool(self._executor)
        if self._lock_conn is not None:
            self._lock_conn.close()

    def nudge(self) -> None:
        """Look now (e.g. after an admin change) instead of at the next poll."""
        self._wake.set()

    def _loop(self) -> None:
        def tick() -> None:
            try:
                self.tick()
            except TooFewRecords as exc:  # not a failure: the arena is young
                self.state.refit_waiting = waiting_message(exc)
            self.last_error = self.state.refit_error = None

        def failed(exc: Exception) -> None:  # a failed fit, a lost connection
            msg = for_the_service(f"{type(exc).__name__}: {exc}")
            if msg != self.last_error:
                log.warning("refitter: %s", msg)
            self.last_error = msg
            self.state.refit_error = msg
            if type(exc).__name__ == "BrokenProcessPool" and not self._stop.is_set():
                self.base_id = None  # its base died with it
                self._start_executor()  # the fit process died (e.g. killed): a new one

        watch("arena-refitter", tick, self._stop, self._wake, self.settings.poll_seconds, failed)

    def tick(self) -> None:
        st = self.state
        with st.engine.connect() as conn:  # one connection, two queries for the whole poll
            st.counts.update(st.engine, conn)
            # the alert: a fit held back by any worker
            wm, newer, (rev, alert) = store.poll(
                conn, st.fit.id if st.fit else 0, "revision", FIT_ALERT
            )
            if int(rev or 0) != st.revision:
                st._load_registry(conn)
            if newer is not None and (row := store.fit_row(conn, newer)) is not None:
                st.install_row(conn, row)
        st.fit_alert = json.loads(alert) if alert else None
        with st.lock:
            st.votes_seen = max(st.votes_seen, wm)
        if self._due(wm):
            if self.paced():
                self.refit()
            else:
                self.update()

    def paced(self) -> bool:
        """Whether the next fit may start: once this worker has spent d/``refit_share``
        seconds of CPU since the last fit, which took d seconds of CPU (so fits cost at most
        that share of the serving CPU, per vote, however their cost grows with the arena's
        cells), or, when the worker idles, 10·w/``refit_share`` seconds of wall time after it
        (w: the fit's wall time). An arena of fewer than :data:`UNPACED_CELLS` cells is not
        paced: K votes or T seconds decide alone. The staleness pacing adds grows with the
        fit's cost."""
        cpu, wall, ended, cpu_at = self.last_fit
        share = self.settings.refit_share
        busy = (time.process_time() - cpu_at) * share >= cpu
        idle = (time.time() - ended) * share >= 10.0 * wall
        return self.state.counts.cells < UNPACED_CELLS or busy or idle

    def _due(self, wm: int) -> bool:
        fit = self.state.fit
        if wm == 0:
            return False
        if fit is None:
            return True
        cfg = self.state.config
        behind = wm - fit.as_of_vote
        return behind > 0 and (
            behind >= cfg.refit_votes or time.time() - fit.fitted_at >= cfg.refit_seconds
        )

    def _acquire(self) -> bool:
        if self._file_lock is not None:
            return self._file_lock.acquire()
        if self._lock_conn is None or self._lock_conn.closed or self._lock_conn.invalidated:
            self._lock_conn = self.state.engine.connect()
        return store.try_refit_lock(self._lock_conn)

    def _release(self) -> None:
        if self._file_lock is not None:
            self._file_lock.release()
            return
        if self._lock_conn is not None:
            store.release_refit_lock(self._lock_conn)

    def refit_now(self, timeout: float = 120.0) -> PublishedFit | None:
        """Refit at once if any vote is newer than the published fit (waiting for a refit that
        is running, here or in another worker); returns the fit that includes every vote seen."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                fit = self.refit(force=True, wait=True)
            except TooFewRecords as exc:
                self.state.refit_waiting = waiting_message(exc)
                raise ApiError(
                    503, "waiting", f"no leaderboard yet: {waiting_message(exc)}"
                ) from None
            if fit is not None:
                return fit
            with self.state.engine.connect() as conn:
                wm = store.watermark(conn)
            cur = self.state.fit
            if cur is not None and cur.as_of_vote >= wm:
                return cur
            if wm == 0:
                return None
            time.sleep(0.05)
        raise ApiError(503, "busy", "another refit is taking long; retry later")

    def refit(self, *, force: bool = False, wait: bool = False) -> PublishedFit | None:
        """Refit now if this worker gets the lock and no other worker has just published
        (``force``: whenever a vote is newer than the published fit)."""
        return self._locked(lambda: self._refit_locked(force), wait)

    def update(self) -> PublishedFit | None:
        """Publish a one-step update of the last full fit by the votes since
        (:func:`~stablearena.service.refit.run_update`) if this worker gets the lock, the
        published board is due and this worker's fit process made the last full fit."""
        return self._locked(self._update_locked, False)

    def _locked(self, work: Any, wait: bool) -> PublishedFit | None:
        """``work()`` under this worker's lock and the arena's refit lock (None when a lock is
        taken); ``work`` first installs a fit another worker has just published
        (:meth:`_newest`)."""
        if not self._local.acquire(blocking=wait):
            return None
        try:
            if not self._acquire():
                return None
            try:
                return work()
            finally:
                self._release()
        finally:
            self._local.release()

    def _newest(self) -> int:
        """Install a newer published fit; returns the watermark."""
        st = self.state
        with st.engine.connect() as conn:
            newer = store.latest_fit_row(conn, after=st.fit.id if st.fit else 0)
            wm = store.watermark(conn)
            if newer is not None:
                st.install_row(conn, newer)
        return wm

    def _want(self) -> bool:
        return self.want_fitted is None or bool(self.want_fitted())

    def _refit_locked(self, force: bool) -> PublishedFit | None:
        st = self.state
        wm = self._newest()
        fit = st.fit
        stale = wm > 0 and (fit is None or wm > fit.as_of_vote)
        if not (self._due(wm) or (force and stale)):
            return None
        cfg = st.config.model_dump()
        screening = st.fit.payload.get("screening") if st.fit else None
        assert self._executor is not None
        t0 = time.perf_counter()
        self.base_id = None  # the fit process's base is the one this fit makes
        if self.settings.fit_in_process:
            # the fit process keeps its own live counts: only the settings go there and
            # the payload (models + annotators) comes back, nothing the size of the counts
            out: FitOutput = self._executor.submit(
                run_live_fit, self.settings.db, cfg, screening, self._want()
            ).result()
            if not out.payload:
                return None
        else:
            snap = st.counts.snapshot(st.engine, mark=True)  # the votes since the last look
            snap = snap.without(probe_flagged(st.engine))  # judges that follow notes: out
            if snap.empty:
                return None
            ages = live_ages(st.engine, cfg)
            active = live_active_days(st.engine, cfg)
            out = self._executor.submit(
                run_fit, snap, cfg, screening, self.settings.db, ages, active
            ).result()
        self.last_fit = (
            out.cpu_seconds or out.seconds,
            time.perf_counter() - t0,
            time.time(),
            time.process_time(),
        )
        if self._held_back(out):
            return None
        fit = self._publish("am-elo", out)
        self.base_id = fit.id
        self.fits_done += 1
        if self.on_fit is not None:
            self.on_fit(fit)
        return fit

    def _update_locked(self) -> PublishedFit | None:
        st = self.state
        wm = self._newest()
        fit = st.fit
        if fit is None or self.base_id is None or fit.base.id != self.base_id or not self._due(wm):
            return None
        full = fit.base
        info = {
            "id": full.id,
            "as_of_vote": full.as_of_vote,
            "n_votes": int(full.payload.get("n_votes", 0)),
            "fitted_at": full.fitted_at,
        }
        assert self._executor is not None
        if self.settings.fit_in_process:
            out: FitOutput = self._executor.submit(
                run_live_update, self.settings.db, info, self._want()
            ).result()
        else:
            delta = st.counts.delta(st.engine).without(probe_flagged(st.engine))
            out = self._executor.submit(
                run_update, delta, self.settings.db, info, self._want()
            ).result()
        if not out.payload or out.as_of_vote <= fit.as_of_vote:
            return None
        upd = self._publish(UPDATE_METHOD, out, full)
        self.updates_done += 1
        return upd

    def _held_back(self, out: FitOutput) -> bool:
        """Check a full fit before it is published (stablearena.analysis.fitcheck): a fit that did not
        converge, has a score that is not finite, or whose scores' spread jumped against the
        last good board is not published — the last good board stays, marked stale, and the
        alert is stored (meta ``fit_alert``) for every worker's ``/healthz``, board and admin
        view. A fit that passes clears the alert."""
        st = self.state
        prev = st.fit
        pay = out.payload
        problems = board_problems(
            pay.get("scores", {}),
            converged=bool(pay.get("converged", True)),
            previous=prev.payload.get("scores") if prev is not None else None,
            votes=int(pay.get("n_votes", 0)),
            previous_votes=int(prev.payload.get("n_votes", 0)) if prev is not None else 0,
        )
        if not problems:
            if st.fit_alert is not None:
                st.writer.run(lambda c: store.set_meta(c, FIT_ALERT, ""))
                st.fit_alert = None
            return False
        now = time.time()
        # the board has been held since the first fit held back, whichever host held it: every
        # host shows the same held_at (it differed per host); checked_at is the latest fit's
        with st.engine.connect() as conn:
            stored = store.get_meta(conn, FIT_ALERT)
        first = json.loads(stored) if stored else None
        held = float(first["held_at"]) if first and "held_at" in first else now
        alert = {
            "problems": problems,
            "as_of_vote": int(out.as_of_vote),
            "n_votes": int(pay.get("n_votes", 0)),
            "held_at": held,
            "held_at_text": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(held)),
            "checked_at": now,
        }
        log.error(
            "refit as of vote %d not published: %s; the last good board stays",
            out.as_of_vote,
            "; ".join(problems),
        )
        st.writer.run(lambda c: store.set_meta(c, FIT_ALERT, json.dumps(alert)))
        st.fit_alert = alert
        self.fits_held += 1
        return True

    def _publish(
        self, method: str, out: FitOutput, full: PublishedFit | None = None
    ) -> PublishedFit:
        """Store ``out`` in ``fits`` (a one-step update of ``full``: only what it changes) and
        install it here."""
        st = self.state
        as_of, fitted_at = out.as_of_vote, time.time()
        fid = st.writer.run(
            lambda c: store.publish_fit(
                c,
                method,
                as_of,
                fitted_at,
                out.seconds,
                out.payload,
                self.settings.keep_fits,
                None if full is None else full.id,
            )
        )
        payload = out.payload if full is None else merge_update(full.payload, out.payload)
        fit = PublishedFit(fid, as_of, fitted_at, out.seconds, payload, out.fitted, full)
        st.install_fit(fit)
        return fit
