"""What one worker process of the live arena keeps in memory, and how it serves battles.

Everything here is a cache of the database: the models and keys, the arena's configuration,
the latest published fit, the information tracker of pair selection
(:class:`stablearena.design.selection.InformationTracker`) and the pairs each annotator has judged.
:meth:`ArenaState.load` rebuilds all of it, so a restart or a second worker loses nothing.

Serving: :func:`stablearena.design.serving_draw.serving_draw` (the ε-mixture of the strategy's pick and the
exploration distribution, with each pair's propensity), over the allowed pairs: both models
active (not retired, no outage), among the requested ``models`` if given, and not judged by this
annotator before unless every such pair has been. A served battle counts in the tracker at
once (as if played — the greedy batch rule, which keeps concurrent annotators from all getting
the same pair); the tracker is rebuilt from the counts after every refit
(:mod:`stablearena.service.refitter`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.engine import Connection, Engine

from ..analysis.leaderboard import leaderboard_payload
from ..data.battles import PairCounts
from ..design import selection
from ..design.selection import InformationTracker, Selector, get_selector
from ..design.serving_draw import boost_weights, serving_draw
from ..errors import StableArenaError
from . import store
from .counts import LiveCounts
from .errors import ApiError, for_the_service, waiting_message
from .refit import SOURCE, UPDATE_METHOD, merge_update, refit_published
from .security import Principal
from .settings import ArenaConfig, Settings

__all__ = [
    "ApiError",
    "ModelInfo",
    "PublishedFit",
    "ArenaState",
    "published_fit",
    "for_the_service",
    "waiting_message",
]

log = logging.getLogger("stablearena.service")


@dataclass(frozen=True)
class ModelInfo:
    id: int
    name: str
    retired: bool
    outage: bool
    boost: float
    boost_until: int

    def to_dict(self, battles: float = 0.0) -> dict[str, Any]:
        return {
            "name": self.name,
            "retired": self.retired,
            "outage": self.outage,
            "boost": self.boost,
            "boost_until": self.boost_until,
            "battles": int(round(battles)),
        }


@dataclass(frozen=True)
class PublishedFit:
    """A published fit: a full am-ELO fit, or a one-step update of one (``full``: that fit;
    ``payload``: the full fit's with the update's leaderboard and scores,
    :func:`~stablearena.service.refit.merge_update`)."""

    id: int
    as_of_vote: int
    fitted_at: float
    seconds: float
    payload: dict[str, Any]
    fitted: Any = None  # the AmEloFitted when this process made (or loaded) it
    full: PublishedFit | None = None

    @property
    def base(self) -> PublishedFit:
        """The full fit: this one, or the one this update starts from."""
        return self.full or self


@dataclass(frozen=True)
class _Candidates:
    """The models a battle may be drawn from: tracker positions (sorted), as a mask, the
    blocked-pair mask they imply (every pair touching another model), and C(n, 2)."""

    pos: np.ndarray
    is_cand: np.ndarray
    blocked: np.ndarray
    n_pairs: int


class _PairBuffer:
    """A growing (n, 2) array of position pairs (appends amortised O(1))."""

    def __init__(self, pairs: np.ndarray) -> None:
        self._data = np.zeros((max(16, 2 * len(pairs)), 2), dtype=np.int64)
        self._data[: len(pairs)] = pairs
        self._n = len(pairs)

    def append(self, i: int, j: int) -> None:
        if self._n == len(self._data):
            self._data = np.concatenate([self._data, np.zeros_like(self._data)])
        self._data[self._n] = (i, j)
        self._n += 1

    @property
    def view(self) -> np.ndarray:
        return self._data[: self._n]


class ArenaState:
    """The worker's caches of the database and the serving rule (see the module docstring)."""

    def __init__(
        self, engine: Engine, settings: Settings, writer: store.Writer, *, worker: int = 0
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.writer = writer
        self.lock = threading.RLock()
        seed = settings.seed
        self.rng = np.random.default_rng(seed if worker == 0 or seed is None else [seed, worker])
        self.models: dict[int, ModelInfo] = {}
        self.model_ids: dict[str, int] = {}
        self.keys: dict[str, Principal] = {}
        self.principals: dict[int, Principal] = {}
        self.config = ArenaConfig()
        self.revision = -1
        self.fit: PublishedFit | None = None
        self.tracker: InformationTracker | None = None
        self.tracker_ids: list[int] = []
        self.tracker_pos: dict[int, int] = {}
        self.pos_of_id = np.zeros(0, dtype=np.int64)
        self.names: dict[int, str] = {}
        self.name_json: dict[int, str] = {}  # the names as JSON strings (pre-encoded answers)
        self.selector: Selector | None = None
        self.judged: dict[int, set[tuple[int, int]]] = {}
        self._judged_pos: dict[int, _PairBuffer] = {}  # judged pairs as tracker positions
        self._all_candidates: _Candidates | None = None  # every active model
        self._boosted: list[ModelInfo] = []
        self.pending: dict[str, tuple[int, int, float]] = {}
        self.votes_seen = 0
        #: the pair counts in memory, brought up to date from the votes since the last look
        #: (journalled when the fit runs in this process: its one-step updates read the delta)
        self.counts = LiveCounts(journal=not settings.fit_in_process)
        self.battles_served = 0
        self.refit_error: str | None = None
        #: the last fit held back by the checks (stablearena.analysis.fitcheck), as stored in the
        #: database (meta ``fit_alert``) and read at each poll: ``{"problems", "as_of_vote",
        #: "n_votes", "held_at", "held_at_text"}``, or ``None`` while the board is good
        self.fit_alert: dict[str, Any] | None = None
        #: why there is no am-ELO fit yet although nothing failed (too few records: δ)
        self.refit_waiting: str | None = None
        self._vote_seq = 0
        self._recent: deque[tuple[int, int, int, int]] = deque(maxlen=100_000)
        self._cache: dict[tuple, Future] = {}
        self._published_json: tuple[Any, bytes] | None = None
        self._annotators_json: tuple[int, bytes] | None = None
        self._cache_lock = threading.Lock()
        self.cache_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="arena-board")

    # ------------------------------------------------------------------ loading
    def load(self) -> None:
        """Rebuild every cache from the database."""
        with self.engine.connect() as conn:
            self._load_registry(conn)
            row = store.latest_fit_row(conn)
            self.votes_seen = store.watermark(conn)
            if row is not None:
                self.fit = self.fit_from_row(conn, row)
        self.counts.load(self.engine)
        self.rebuild_tracker(judged=True)

    def _load_registry(self, conn: Connection) -> None:
        rev = store.get_meta(conn, "revision")
        cfg = store.load_config(conn)
        mrows = store.model_rows(conn)
        arows = store.key_rows(conn)
        with self.lock:
            if int(rev or 0) < self.revision:
                # read before a change another thread has installed already (e.g. the
                # refitter's poll racing an admin request's reload): never go back
                return
            self.revision = int(rev or 0)
            self.config = ArenaConfig.model_validate(cfg)
            self.models = {
                r.id: ModelInfo(
                    r.id,
                    r.name,
                    bool(r.retired),
                    bool(r.outage),
                    float(r.boost),
                    int(r.boost_until),
                )
                for r in mrows
            }
            self.model_ids = {m.name: m.id for m in self.models.values()}
            self.names = {m.id: m.name for m in self.models.values()}
            self.name_json = {
                m.id: json.dumps(m.name, ensure_ascii=False) for m in self.models.values()
            }
            self._boosted = [m for m in self.models.values() if m.boost > 1.0]
            self._all_candidates = None
            self.keys = {}
            self.principals = {}
            for r in arows:
                p = Principal(r.id, r.name, r.role, r.key_id, r.key_hash, r.revoked_at is not None)
                self.keys[r.key_id] = p
                self.principals[r.id] = p
            if self.selector is None or self.selector.name != self.strategy_name:
                self.selector = get_selector(self.strategy_name)
            estimate = self.selector.estimate
            stale = [m for m in self.models] != self.tracker_ids or (
                self.tracker is not None
                and estimate is not None
                and self.tracker.estimate != estimate
            )  # new models, or a strategy that reads the information at another estimate
        if stale:
            self.rebuild_tracker()

    def reload_registry(self) -> None:
        """Reload the models, keys and settings now (after a change made through this worker)."""
        with self.engine.connect() as conn:
            self._load_registry(conn)

    def refresh_registry(self) -> bool:
        """Reload the models, keys and settings when the database has a newer revision than
        this worker's (a change made through another worker since its last poll); returns
        whether it did. One small query when nothing changed."""
        with self.engine.connect() as conn:
            if int(store.get_meta(conn, "revision") or 0) <= self.revision:
                return False
            self._load_registry(conn)
        return True

    @property
    def strategy_name(self) -> str:
        """The configured strategy, or the project's default read now (issue 13 may change it)."""
        return self.config.strategy or selection.DEFAULT_STRATEGY

    def principal_for(self, key_id: str) -> Principal | None:
        """The key record for ``key_id``: from the cache, else from the database (a key created
        by another worker a moment ago)."""
        p = self.keys.get(key_id)
        if p is not None:
            return p
        with self.engine.connect() as conn:
            r = store.key_row(conn, key_id)
        if r is None:
            return None
        p = Principal(r.id, r.name, r.role, r.key_id, r.key_hash, r.revoked_at is not None)
        with self.lock:
            self.keys[key_id] = p
            self.principals[p.id] = p
        return p

    def rebuild_tracker(self, *, judged: bool = False) -> None:
        """Information tracker over every model (in id order) from the current pair counts, at
        the latest fit's scores (0 = average for a model the fit does not know), plus the
        battles served here and not yet voted on; with ``judged``, also each annotator's
        judged pairs (read at start only: later they grow by the votes recorded here and by
        the pairs :meth:`refused` learns from other workers' votes)."""
        with self.lock:
            mark = self._vote_seq
        self.counts.update(self.engine)  # the votes since the last look only
        pairs = self.counts.pair_totals()
        judged_rows = self.counts.judged() if judged else []
        with self.lock:
            ids = sorted(self.models)
            fit = self.fit
            selector = self.selector or get_selector(self.strategy_name)
            pending = dict(self.pending)
        if len(ids) < 2:
            with self.lock:
                self.tracker, self.tracker_ids, self.tracker_pos = (
                    None,
                    ids,
                    {m: k for k, m in enumerate(ids)},
                )
                self._all_candidates = None
            return
        pos = {m: k for k, m in enumerate(ids)}
        pos_of_id = np.full(max(ids) + 1, -1, dtype=np.int64)
        pos_of_id[ids] = np.arange(len(ids))
        names = [self.models[m].name for m in ids]
        scores = np.zeros(len(ids))
        if fit is not None:
            known = fit.payload.get("scores", {})
            for k, name in enumerate(names):
                scores[k] = known.get(name, 0.0)
        pi, pj, n = pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64), pairs[:, 2]
        inside = (pi <= max(ids)) & (pj <= max(ids)) & (n > 0)
        pi, pj, n = pos_of_id[pi[inside]], pos_of_id[pj[inside]], n[inside]
        keep = (pi >= 0) & (pj >= 0)
        counts = PairCounts(
            models=tuple(names),
            i=pi[keep].astype(np.int32),
            j=pj[keep].astype(np.int32),
            wins=n[keep].astype(float),
            losses=np.zeros(int(keep.sum())),
            ties=np.zeros(int(keep.sum())),
            ties_both_bad=np.zeros(int(keep.sum())),
        )
        tracker = InformationTracker(names, estimate=selector.estimate or "plug-in")
        tracker.refresh(scores, counts)
        now = time.time()
        for i, j, expires in pending.values():
            if expires > now and i in pos and j in pos:
                tracker.add(pos[i], pos[j])
        _ = tracker.sigma  # the O(N³) step here, not in a request
        if selector.needs_sigma2:
            _ = tracker.sigma2
        judged_pairs: dict[int, set[tuple[int, int]]] = {}
        for ann, i, j in judged_rows:
            judged_pairs.setdefault(ann, set()).add((i, j))
        with self.lock:
            # battles served here while the tracker was being built count in it too
            for bid, (i, j, _) in self.pending.items():
                if bid not in pending and i in pos and j in pos:
                    tracker.add(pos[i], pos[j])
            if judged:
                # votes recorded here while the counts were being read stay judged
                for seq, ann, i, j in self._recent:
                    if seq > mark:
                        judged_pairs.setdefault(ann, set()).add((i, j))
                self.judged = judged_pairs
            self.tracker, self.tracker_ids, self.tracker_pos = tracker, ids, pos
            self.pos_of_id = pos_of_id
            self._judged_pos = {}
            self._all_candidates = None
            self.selector = selector

    def fit_from_row(self, conn: Connection, row: Any) -> PublishedFit | None:
        """The :class:`PublishedFit` of a ``fits`` row; for a one-step update, completed from
        its full fit (the one installed, else read from the database; ``None`` if gone)."""
        if row.method != UPDATE_METHOD:
            return published_fit(row)
        upd = json.loads(row.payload)
        base_id = int(upd["update"]["base"])
        full = self.fit.base if self.fit is not None else None
        if full is None or full.id != base_id:
            base_row = store.fit_row(conn, base_id)
            if base_row is None:
                return None
            full = published_fit(base_row)
        return published_fit(row, full=full, payload=upd)

    def install_row(self, conn: Connection, row: Any) -> None:
        """Install the fit of a ``fits`` row (:meth:`fit_from_row`, :meth:`install_fit`)."""
        fit = self.fit_from_row(conn, row)
        if fit is not None:
            self.install_fit(fit)

    def install_fit(self, fit: PublishedFit) -> None:
        """Publish ``fit`` here, and rebuild the information tracker at its scores — once per
        full fit: a one-step update of the full fit installed before leaves the tracker (its
        scores stay the full fit's, its counts grow with every battle): a rebuild (two M×M
        inverses and a solve) every K votes would cost the API process more than the update
        costs the fit process."""
        with self.lock:
            prev = self.fit
            if prev is not None and fit.id <= prev.id:
                return
            self.fit = fit
            self.refit_waiting = None
            self._expire_pending()
        if fit.full is None or prev is None or prev.base.id != fit.base.id:
            self.rebuild_tracker()

    def _expire_pending(self) -> None:
        now = time.time()
        for bid in [b for b, (_, _, exp) in self.pending.items() if exp <= now]:
            del self.pending[bid]

    # ------------------------------------------------------------------ serving
    def _candidates(self, models: list[str] | None) -> _Candidates:
        """The candidate models of a request (all active models, or those among ``models``)
        as tracker positions, with the blocked-pair mask they imply; the one of all active
        models is kept until the registry or the tracker changes. Call under ``self.lock``."""
        if models is None and self._all_candidates is not None:
            return self._all_candidates
        active = [m for m in self.models.values() if not m.retired and not m.outage]
        if models is not None:
            unknown = [n for n in models if n not in self.model_ids]
            if unknown:
                raise ApiError(
                    422,
                    "unknown_model",
                    f"unknown model(s): {', '.join(unknown[:5])}",
                    "models",
                )
            wanted = set(models)
            active = [m for m in active if m.name in wanted]
        if len(active) < 2:
            why = "of the requested models " if models is not None else ""
            raise ApiError(
                409,
                "no_pair",
                f"fewer than two {why}models are active (not retired, no outage); no battle can be served",
                "models" if models is not None else None,
            )
        tracker = self.tracker
        if tracker is None or self.selector is None:
            raise ApiError(503, "not_ready", "the arena is still loading; retry shortly")
        # a model added a moment ago waits for the tracker's rebuild (which follows every
        # registry change); meanwhile the others are served
        known = [self.tracker_pos[m.id] for m in active if m.id in self.tracker_pos]
        if len(known) < 2:
            raise ApiError(
                503,
                "not_ready",
                "a requested model was added a moment ago and is being loaded; retry shortly",
                "models" if models is not None else None,
            )
        pos = np.array(sorted(known), dtype=np.int64)
        is_cand = np.zeros(tracker.n_models, dtype=bool)
        is_cand[pos] = True
        blocked = tracker.mask(np.flatnonzero(~is_cand), np.zeros((0, 2), dtype=np.int64))
        out = _Candidates(pos, is_cand, blocked, len(pos) * (len(pos) - 1) // 2)
        if models is None:
            self._all_candidates = out
        return out

    def _judged_positions(self, annotator: int) -> np.ndarray:
        """The pairs ``annotator`` has judged, as (n, 2) tracker positions: built once per
        tracker, then grown by :meth:`_judge` (a request's cost does not grow with the
        annotator's history beyond marking its pairs). Call under ``self.lock``."""
        buf = self._judged_pos.get(annotator)
        if buf is None:
            mine = self.judged.get(annotator)
            jp = np.zeros((0, 2), dtype=np.int64)
            if mine:
                ids = np.array(list(mine), dtype=np.int64)
                ids = ids[(ids < len(self.pos_of_id)).all(axis=1)]
                jp = self.pos_of_id[ids]
                jp = jp[(jp >= 0).all(axis=1)]
            buf = self._judged_pos[annotator] = _PairBuffer(jp)
        return buf.view

    def _judge(self, annotator: int, i: int, j: int) -> None:
        """Record that ``annotator`` has judged the pair of model ids i < j. Call under
        ``self.lock``."""
        mine = self.judged.setdefault(annotator, set())
        if (i, j) in mine:
            return
        mine.add((i, j))
        buf = self._judged_pos.get(annotator)
        if buf is not None and i < len(self.pos_of_id) and j < len(self.pos_of_id):
            pi, pj = int(self.pos_of_id[i]), int(self.pos_of_id[j])
            if pi >= 0 and pj >= 0:
                buf.append(pi, pj)

    def serve(self, principal: Principal, k: int, models: list[str] | None) -> list[dict[str, Any]]:
        """Choose ``k`` battles for ``principal`` by the serving rule; returns the rows to store
        (each also saying, as ``check``, whether the annotator had pairs left unjudged: then
        :func:`~stablearena.service.store.insert_battles` refuses a pair that another worker
        has recorded a vote of this annotator on, see :meth:`refused`)."""
        with self.lock:
            cands = self._candidates(models)
            tracker, selector, cfg = self.tracker, self.selector, self.config
            assert tracker is not None and selector is not None  # checked by _candidates
            jp = self._judged_positions(principal.id)
            judged = jp[cands.is_cand[jp[:, 0]] & cands.is_cand[jp[:, 1]]] if len(jp) else jp
            check = len(judged) < cands.n_pairs
            if not check:
                judged = judged[:0]  # every allowed pair judged: repeats are allowed again
            base = cands.blocked
            if len(judged):
                base = base.copy()
                base[judged[:, 0], judged[:, 1]] = True
                base[judged[:, 1], judged[:, 0]] = True
            blocked, n_excluded = base, len(judged)
            boost = boost_weights(
                tracker,
                (
                    (self.tracker_pos[m.id], m.boost, m.boost_until)
                    for m in self._boosted
                    if m.id in self.tracker_pos
                ),
            )
            now = time.time()
            out: list[dict[str, Any]] = []
            for t in range(k):
                i, j, strategy, prop = serving_draw(
                    tracker,
                    selector,
                    cands.pos,
                    blocked,
                    n_excluded,
                    exploration=cfg.exploration,
                    boost=boost,
                    rng=self.rng,
                )
                tracker.add(i, j)
                if t < k - 1:  # distinct pairs in a batch, while pairs remain
                    if n_excluded + 1 >= cands.n_pairs:
                        blocked, n_excluded = base, len(judged)
                    else:
                        if blocked is cands.blocked or blocked is base:
                            blocked = blocked.copy()
                        blocked[i, j] = blocked[j, i] = True
                        n_excluded += 1
                a, b = self.tracker_ids[i], self.tracker_ids[j]
                if self.rng.random() < 0.5:
                    a, b = b, a
                bid = uuid.uuid4().hex
                expires = now + cfg.battle_ttl
                self.pending[bid] = (min(a, b), max(a, b), expires)
                out.append(
                    {
                        "id": bid,
                        "annotator_id": principal.id,
                        "model_a": a,
                        "model_b": b,
                        "strategy": strategy,
                        "propensity": prop,
                        "served_at": now,
                        "expires_at": expires,
                        "check": check,
                    }
                )
            self.battles_served += len(out)
            if len(self.pending) > 100_000:
                self._expire_pending()
        return out

    def refused(self, principal: Principal, rows: list[dict[str, Any]], refused: list[str]) -> None:
        """The battles ``rows`` were not stored: the pairs of the ``refused`` ones have a vote
        of ``principal`` (recorded by another worker). Learn them as judged and forget the
        rows. (They stay counted in the tracker until its next rebuild: a rank-one update is
        not taken back.)"""
        bad = set(refused)
        with self.lock:
            for r in rows:
                self.pending.pop(r["id"], None)
                if r["id"] in bad:
                    a, b = r["model_a"], r["model_b"]
                    self._judge(principal.id, min(a, b), max(a, b))
            self.battles_served -= len(rows)

    def learn_judged(self, principal: Principal) -> None:
        """Read every pair ``principal`` has a vote on from the database (votes recorded by
        other hosts included, :func:`store.judged_pairs_of`) and learn each as judged: after a
        refused draw, so that a host whose view lags the others' stops drawing judged pairs.
        Blocking: call in a thread."""
        with self.engine.connect() as conn:
            pairs = store.judged_pairs_of(conn, principal.id)
        with self.lock:
            for i, j in pairs:
                self._judge(principal.id, min(i, j), max(i, j))

    # ------------------------------------------------------------------ votes
    def after_vote(self, principal: Principal, battle_id: str, res: store.VoteResult) -> None:
        """Bookkeeping after a vote is durable: judged pairs, and the tracker for a battle that
        another worker served (battles served here already count in it)."""
        if res.kind != "new":
            return
        i, j = min(res.model_a, res.model_b), max(res.model_a, res.model_b)
        with self.lock:
            self.votes_seen = max(self.votes_seen, int(res.vote_id or 0))
            self._judge(principal.id, i, j)
            self._vote_seq += 1
            self._recent.append((self._vote_seq, principal.id, i, j))
            if self.pending.pop(battle_id, None) is None and self.tracker is not None:
                pi, pj = self.tracker_pos.get(i), self.tracker_pos.get(j)
                if pi is not None and pj is not None:
                    self.tracker.add(pi, pj)

    # ------------------------------------------------------------------ leaderboards
    def published(self) -> PublishedFit:
        fit = self.fit
        if fit is None:
            if self.votes_seen == 0:
                raise ApiError(
                    503, "no_votes", "no votes yet: the first leaderboard follows the first votes"
                )
            if self.refit_waiting:
                raise ApiError(503, "waiting", f"no leaderboard yet: {self.refit_waiting}")
            why = f" (last attempt: {self.refit_error})" if self.refit_error else ""
            raise ApiError(503, "not_fitted", f"no leaderboard yet: the first fit is pending{why}")
        return fit

    def published_json(self) -> bytes:
        """The published leaderboard (:meth:`leaderboard` of am-ELO without intervals) as the
        JSON of its answer, encoded once per fit (as Starlette's ``JSONResponse`` would). Its
        annotators (A entries, the full fit's) are encoded once per full fit: a one-step
        update encodes only what it changed."""
        fit = self.published()
        alert = self.fit_alert
        # the alert as a whole: a later held-back fit keeps held_at but moves checked_at, and a
        # host that cached the older one would show another board than the others
        key = (fit.id, json.dumps(alert, sort_keys=True) if alert else None)
        cached = self._published_json
        if cached is None or cached[0] != key:
            board = self.leaderboard("am-elo", "none", 0.95)
            if fit.full is None or "annotators" not in board:
                body = _json(board)
            else:
                ann = self._annotators_json
                if ann is None or ann[0] != fit.full.id:
                    ann = self._annotators_json = (fit.full.id, _json(board["annotators"]))
                rest = _json({k: v for k, v in board.items() if k != "annotators"})
                body = rest[:-1] + b',"annotators":' + ann[1] + b"}"
            if alert:  # the board is stale: a newer fit was held back
                body = body[:-1] + b',"stale":true,"fit_alert":' + _json(alert) + b"}"
            cached = self._published_json = (key, body)
        return cached[1]

    def leaderboard(self, method: str, ci: str, level: float) -> dict[str, Any]:
        """The ``rank --format json`` payload plus ``as_of_vote`` and ``fitted_at``: the
        published am-ELO fit, or another method / intervals computed from the counts (cached
        until the next published fit). Before the first am-ELO fit (no annotator has δ votes
        yet) the other methods are computed from all the counts, recomputed every K votes."""
        fit = self.fit
        generation: Any
        if fit is None and method != "am-elo" and self.votes_seen > 0:
            generation = ("young", self.votes_seen // max(int(self.config.refit_votes), 1))
        else:
            fit = self.published()
            if method == "am-elo" and ci == "none":
                out = dict(fit.payload["leaderboard"])
                out.setdefault("update", "full")
                out["as_of_vote"] = fit.as_of_vote
                out["fitted_at"] = fit.fitted_at
                if self.fit_alert:
                    out["stale"], out["fit_alert"] = True, self.fit_alert
                return out
            fit = fit.base  # computed from the counts: once per full fit
            generation = fit.id
        key = (method, ci, level, generation)
        with self._cache_lock:
            fut = self._cache.get(key)
            if fut is None:
                for old in [k for k in self._cache if k[3] != generation]:
                    del self._cache[old]
                fut = self.cache_pool.submit(self._compute, method, ci, level, fit)
                self._cache[key] = fut
        try:
            return fut.result(timeout=300)
        except StableArenaError as exc:
            with self._cache_lock:
                self._cache.pop(key, None)
            raise ApiError(422, "cannot_fit", for_the_service(str(exc)), "method") from None

    def _compute(
        self, method: str, ci: str, level: float, fit: PublishedFit | None
    ) -> dict[str, Any]:
        import warnings

        from ..raters import get_rater

        snap = self.counts.snapshot(self.engine)
        counts = snap.counts()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if method == "am-elo" and fit is not None:
                fitted = refit_published(
                    fit.payload,
                    counts,
                    start=fit.fitted if snap.as_of_vote == fit.as_of_vote else None,
                    config=self.config.model_dump(),
                )
            else:
                fitted = get_rater(method).fit(counts)
            payload = leaderboard_payload(fitted, counts, source=SOURCE, ci=ci, level=level)
        payload["as_of_vote"] = snap.as_of_vote
        payload["fitted_at"] = time.time()
        return payload

    def annotators(self) -> dict[str, Any]:
        """The full fit's annotators payload (a one-step update keeps its abilities)."""
        fit = self.published().base
        out = dict(fit.payload["annotators"])
        out["as_of_vote"] = fit.as_of_vote
        out["fitted_at"] = fit.fitted_at
        return out

    def model_list(self) -> list[dict[str, Any]]:
        """The models with their battles played (voted on, as this worker knows): the
        tracker's counts less the battles served here and not voted on yet."""
        with self.lock:
            tracker, pos = self.tracker, self.tracker_pos
            battles = tracker.pair_battles.sum(axis=1) if tracker is not None else None
            if battles is not None and self.pending:
                served = np.array([p[:2] for p in self.pending.values()], dtype=np.int64).ravel()
                at = self.pos_of_id[served[served < len(self.pos_of_id)]]
                at = at[at >= 0]
                battles = np.maximum(battles - np.bincount(at, minlength=len(battles)), 0)
            return [  # a model the tracker does not know yet (added a moment ago): 0
                m.to_dict(float(battles[pos[m.id]]) if battles is not None and m.id in pos else 0.0)
                for m in sorted(self.models.values(), key=lambda m: m.id)
            ]


def _json(obj: Any) -> bytes:
    """``obj`` as the JSON of an answer (Starlette's ``JSONResponse``)."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def published_fit(
    row: Any,
    fitted: Any = None,
    *,
    full: PublishedFit | None = None,
    payload: dict[str, Any] | None = None,
) -> PublishedFit:
    """The :class:`PublishedFit` of a ``fits`` row (``payload``: its payload, already
    decoded); a one-step update's completed from its ``full`` fit."""
    payload = json.loads(row.payload) if payload is None else payload
    if full is not None:
        payload = merge_update(full.payload, payload)
    return PublishedFit(
        int(row.id),
        int(row.as_of_vote),
        float(row.fitted_at),
        float(row.seconds),
        payload,
        fitted,
        full,
    )
