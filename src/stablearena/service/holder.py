"""The battles the arena holds itself: it calls both models of a served pair, streams their
answers, stores everything about the battle, and keeps the models' outage state in step with
their endpoints' circuit breakers (docs/guides/arena-page.md).

One :class:`BattleHolder` per worker process, on the worker's event loop. It keeps one
:class:`stablearena.judging.endpoints.EndpointClient` per model with an endpoint (rebuilt when the
registry's revision shows a change). When a client's breaker opens (``outage_after``
consecutive failed calls), the model is put under outage in the database (``auto_outage``) so
that no worker serves it; every ``probe_seconds`` the holder calls each such model once, and
the first answer lifts the outage.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
import random
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..data.style_features import style_counts
from ..judging.anonymity import identity_names, names_mentioned
from ..judging.endpoints import Answer, EndpointClient, Failure, ModelEndpoint, with_image
from ..judging.endpoints.config import endpoint_from_mapping
from ..judging.visible import VisibleStream
from . import store
from .errors import ApiError
from .security import Principal
from .visitors import allowed, refuse_open

__all__ = ["BattleHolder", "endpoint_json", "load_pool", "write_model_tables"]

log = logging.getLogger("stablearena.service")

#: The conversations a worker keeps in memory to plan follow-ups without a read.
CONVERSATIONS = 1024

#: The failure a turn's stream ends with when the battle was closed under it (its process's
#: heartbeat had gone stale: store.serving) — the battle stays at its last complete turn.
NOT_KEPT = "this turn was not kept: the arena closed the battle at its last complete turn meanwhile"

#: The probe's prompt (a model under outage is back when it answers anything).
PROBE = "Reply with the word ok."

#: How often a battle waiting for a model's free call slot is told its new place (seconds).
QUEUE_EVERY = 1.0

#: The category of every battle with an image (its board tab: vision battles, as LMArena's
#: Vision Arena); neither the rules nor the classifier change it.
VISION_CATEGORY = "vision"

#: Images of vision battles a worker keeps in memory for their follow-ups (by hash).
IMAGES_KEPT = 16

Emit = Callable[[str, str | None], None]


def endpoint_json(ep: ModelEndpoint) -> str:
    """The stored form of an endpoint: its configuration without the name (never a key), and
    without the settings left at their defaults — so that a host of an older version, which
    refuses keys it does not know, still reads the endpoints a newer host stored (several hosts
    during a rolling upgrade: docs/guides/several-hosts.md) unless a new setting is used."""
    rec = ep.to_record()
    for k in ("name", "kind"):
        rec.pop(k, None)
    for f in dataclasses.fields(ep):
        if f.name in rec and f.name not in ("base_url", "model"):
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                continue
            if rec[f.name] == default:
                del rec[f.name]
    for key in ("price", "aliases", "organisation"):  # unset: stored as before they existed
        if not rec.get(key):
            rec.pop(key, None)
    return json.dumps(rec, sort_keys=True)


def endpoint_from_json(name: str, config: str) -> ModelEndpoint:
    """The endpoint of model ``name`` from its stored form."""
    return endpoint_from_mapping({**json.loads(config), "name": name}, f"model {name!r}")


def write_model_tables(engine: Any, endpoints: list[ModelEndpoint]) -> None:
    """Store the endpoints of the serve config's ``[[models]]`` (creating the models)."""
    now = time.time()
    for ep in endpoints:
        with engine.begin() as conn:
            store.held.set_endpoint(conn, ep.name, endpoint_json(ep), now)


def load_pool(spec: str | None) -> list[dict[str, str]]:
    """The prompt pool: ``None`` → none, ``"demo"`` → the demo models' 200 prompts, else a
    file read by :func:`stablearena.judging.auto_arena.read_prompts`."""
    if not spec:
        return []
    if spec == "demo":
        from ..judging.endpoints.demo import demo_prompts

        return demo_prompts(200)
    from ..judging.auto_arena import read_prompts

    return [{"id": p.id, "prompt": p.text} for p in read_prompts(spec)]


def _answer_row(
    side: str, model_id: int, ep: ModelEndpoint, res: Any, names: tuple[str, ...] = ()
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "side": side,
        "model_id": model_id,
        "params": json.dumps({**ep.params, "system_prompt": ep.system_prompt}, sort_keys=True),
        "attempts": res.attempts,
    }
    if isinstance(res, Answer):
        tokens, headers, lists, bold = style_counts(res.text)
        row.update({k: getattr(res, k) for k in store.held.ANSWER_FIELDS})
        row.update(
            style_tokens=tokens,
            style_headers=headers,
            style_lists=lists,
            style_bold=bold,
            named=",".join(names_mentioned(res.text, names)) or None,
        )
    else:
        row.update(failure=res.reason, failure_detail=res.detail, total_time=res.elapsed)
    return row


class BattleHolder:
    """Calls the models of held battles and keeps their outage state (module docstring)."""

    def __init__(self, state: Any, writer: store.Writer, settings: Any) -> None:
        self.state = state
        self.writer = writer
        self.page = settings.arena_page
        self.pool = load_pool(self.page.prompts)
        self.rng = random.Random()
        self.endpoints: dict[int, ModelEndpoint] = {}
        self.auto_outage: set[int] = set()
        self.clients: dict[int, tuple[str, EndpointClient]] = {}
        #: per model, the calls of battles let in that are not yet in its client's line (a
        #: burst's battles are let in before their calls start: :meth:`queue_wait` counts them)
        self.starting: Counter[int] = Counter()
        self._revision = -2
        self._probe: asyncio.Task | None = None
        self._recovery: asyncio.Task | None = None
        #: this process among the serving processes (store.serving): the owner of the turns it
        #: generates, its heartbeat renewed every store.serving.BEAT_SECONDS
        self.process = uuid.uuid4().hex
        self.judges = _judge_clients(settings.judges, settings.injection)
        self.judge_ids: dict[str, int] = {}
        #: the judges' probe battles (stablearena.judging.probes): the share of their calls, the draws,
        #: and the judges the stored probes flag (read from the database when first needed)
        self.probe_share = float(settings.judge_probes.share)
        self.probe_rng = np.random.default_rng(settings.seed)
        self.flagged_judges: dict[str, str] | None = None
        self.probe_counts: dict[str, int] = {}
        self.tasks: set[asyncio.Task] = set()
        #: the battles generating on this worker: their task (cancelled by stop)
        self.live: dict[str, asyncio.Task] = {}
        #: the conversations this worker generated last (a follow-up is planned from memory,
        #: without a read: :meth:`follow`), newest last, at most CONVERSATIONS
        self.convs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._identity: tuple[Any, tuple[str, ...]] = (None, ())
        #: the [category_classifier] (service/duties.py), None without one
        self.categoriser: Any = None
        #: classifications in flight, by battle id, and the newest categories they gave (the
        #: judges' copies of a battle take its category: judge())
        self.categorising: dict[str, asyncio.Task] = {}
        self.categories: dict[str, str] = {}
        #: the data: URLs of the images of the vision battles generated last, by hash
        self.images: OrderedDict[str, str] = OrderedDict()
        if settings.category_classifier.on:
            from .duties import Categoriser

            self.categoriser = Categoriser(settings.category_classifier)

    # ------------------------------------------------------------------ registry
    def _read(self) -> tuple[int, list[Any]]:
        rev = self.state.revision
        with self.state.engine.connect() as conn:
            return rev, store.held.endpoint_rows(conn)

    async def refresh(self, force: bool = False) -> None:
        """Reload the endpoints when the registry changed since they were read."""
        if not force and self._revision == self.state.revision:
            return
        rev, rows = await asyncio.to_thread(self._read)
        endpoints, auto = {}, set()
        for r in rows:
            try:
                endpoints[r.model_id] = endpoint_from_json(r.name, r.config)
            except Exception as exc:  # noqa: BLE001 - a bad stored row must not stop the page
                log.error("model %s: stored endpoint unusable: %s", r.name, exc)
                continue
            if r.auto_outage:
                auto.add(r.model_id)
        for mid in list(self.clients):
            cfg, client = self.clients[mid]
            if mid not in endpoints or endpoint_json(endpoints[mid]) != cfg:
                del self.clients[mid]
                await client.aclose()
        self.endpoints, self.auto_outage, self._revision = endpoints, auto, rev

    def identity_names(self) -> tuple[str, ...]:
        """The names an answer may not mention for its battle to stay anonymous
        (stablearena.judging.anonymity): every model's name, aliases and organisation, the page's
        ``identity_names`` and the well-known names; none with ``anonymity = false``."""
        if not self.page.anonymity:
            return ()
        key = (self._revision, id(self.endpoints))
        if self._identity[0] != key:
            eps = {ep.name: ep for ep in self.endpoints.values()}
            models = [  # every model of the arena, with an endpoint or not
                (m.name, eps[m.name].aliases, eps[m.name].organisation)
                if m.name in eps
                else (m.name, (), None)
                for m in self.state.models.values()
            ]
            self._identity = (key, identity_names(models, self.page.identity_names))
        return self._identity[1]

    def client(self, model_id: int) -> EndpointClient:
        """The client of a model with an endpoint (made on first use)."""
        ep = self.endpoints[model_id]
        got = self.clients.get(model_id)
        if got is None:
            got = self.clients[model_id] = (endpoint_json(ep), EndpointClient(ep))
        return got[1]

    def servable(self, vision: bool = False) -> list[str]:
        """The names of the models with an endpoint that may be served now (``vision``: only
        those that take images, ``vision = true``)."""
        models = self.state.models
        return [
            models[m].name
            for m, ep in self.endpoints.items()
            if m in models
            and not models[m].retired
            and not models[m].outage
            and (ep.vision or not vision)
        ]

    # ------------------------------------------------------------------ the models' lines
    def queue_wait(self, model_id: int) -> float:
        """The estimated seconds a new call of the model would wait for one of its
        ``max_concurrency`` call slots on this worker (0: one is free): the calls in its line
        and those of battles let in but not yet started, at the mean time its last calls held
        a slot (:meth:`~stablearena.judging.endpoints.client.Slots.wait_estimate`; until one has
        ended, a call is taken to hold its slot for ``max_queue_wait``: one round of slots may
        wait)."""
        slots = self.client(model_id).slots
        ahead = slots.active + slots.waiting + self.starting[model_id] - slots.limit
        return slots.wait_estimate(ahead, self.page.max_queue_wait)

    def _busy(self, waits: list[float]) -> ApiError:
        """The refusal of a battle when the models' lines are longer than the page queues."""
        limit = self.page.max_queue_wait
        shortest = sorted(waits)[1]  # a battle needs two models
        again = max(5.0, shortest - limit)
        return ApiError(
            503,
            "busy",
            f"the models are busy: the wait for a free answer slot is about {shortest:.0f} s, "
            f"longer than this arena queues a battle ({limit:g} s); try again in about "
            f"{again:.0f} s",
            retry_after=again,
        )

    def _expect(self, row: dict[str, Any]) -> Callable[[int | None], None]:
        """Count the calls of a battle let in as starting (:attr:`starting`); the callback
        returned uncounts the call of one model once it is in its client's line (None: all
        that are left — the battle's task ended, or was cancelled before it started)."""
        left = [row["model_a"], row["model_b"]]
        for m in left:
            self.starting[m] += 1

        def entered(mid: int | None) -> None:
            for m in list(left) if mid is None else [mid]:
                if m in left:
                    left.remove(m)
                    self.starting[m] -= 1
                    if self.starting[m] <= 0:
                        del self.starting[m]

        return entered

    # ------------------------------------------------------------------ outage
    async def _set_outage(self, model_id: int, on: bool) -> None:
        changed = await self.writer.submit_async(
            partial(store.held.set_auto_outage, model_id=model_id, on=on)
        )
        if changed:
            log.warning(
                "model %s: %s",
                self.endpoints[model_id].name if model_id in self.endpoints else model_id,
                "under outage (its endpoint keeps failing)" if on else "answering again",
            )
            await asyncio.to_thread(self.state.reload_registry)
            await self.refresh(force=True)

    async def after_call(self, model_id: int, res: Any) -> None:
        """Bring the model's outage in the registry in step with its breaker."""
        client = self.clients.get(model_id)
        if client is None:
            return
        under = client[1].breaker.under_outage
        if under and not self.state.models[model_id].outage:
            await self._set_outage(model_id, True)
        elif not under and isinstance(res, Answer) and model_id in self.auto_outage:
            await self._set_outage(model_id, False)

    async def probe_once(self) -> None:
        """Call each model under an automatic outage once; an answer lifts its outage."""
        await self.refresh()
        for mid in sorted(self.auto_outage):
            if mid not in self.endpoints:
                continue
            client = self.client(mid)
            res = await client.complete(client.messages(PROBE))
            if isinstance(res, Answer):
                await self._set_outage(mid, False)

    async def _probe_loop(self) -> None:
        while True:
            await asyncio.sleep(self.page.probe_seconds)
            try:
                await self.probe_once()
            except Exception:  # noqa: BLE001 - keep probing
                log.exception("probing models under outage failed")

    async def recover(self, legacy: bool = False) -> dict[str, str]:
        """Renew this process's heartbeat and close the battles dead serving processes left
        mid-turn — at their last complete turn, or failed without one
        (:func:`~.store.serving.recover`; ``legacy``: also those served before owners were
        stored, idle for ``battle_ttl``). Returns battle id → its new status."""
        closed = await self.writer.submit_async(
            partial(
                store.serving.recover,
                me=self.process,
                ttl=self.state.config.battle_ttl,
                legacy=legacy,
            )
        )
        if closed:
            log.warning(
                "closed %d battle(s) a stopped process left mid-turn: %s",
                len(closed),
                ", ".join(f"{b} {s}" for b, s in sorted(closed.items())),
            )
        return closed

    async def _recovery_loop(self) -> None:
        while True:
            await asyncio.sleep(store.serving.BEAT_SECONDS)
            try:
                await self.recover()
            except Exception:  # noqa: BLE001 - keep beating (the database may come back)
                log.exception("the serving heartbeat failed")

    def start(self) -> None:
        """Start the outage probe and the heartbeat (on the running loop); call
        :meth:`recover` first, once, at the process's start."""
        loop = asyncio.get_running_loop()
        self._probe = loop.create_task(self._probe_loop())
        self._recovery = loop.create_task(self._recovery_loop())

    async def stop(self) -> None:
        """Stop the probe and the heartbeat; close the battles whose turn this process is still
        generating at their last complete turn, as a crash's (:func:`~.store.serving.leave`),
        then stop those generations (their turns are not kept); close the clients."""
        for t in [self._probe, self._recovery]:
            if t is not None:
                t.cancel()
        try:
            closed = await self.writer.submit_async(
                partial(store.serving.leave, process=self.process, ttl=self.state.config.battle_ttl)
            )
            if closed:
                log.warning(
                    "stopping: closed %d battle(s) mid-turn at their last complete turn: %s",
                    len(closed),
                    ", ".join(f"{b} {s}" for b, s in sorted(closed.items())),
                )
        except Exception:  # noqa: BLE001 - the database may be gone: a peer's heartbeat rule
            log.exception("stopping: the battles in flight could not be closed")
        for t in list(self.tasks):
            t.cancel()
        for _, client in self.clients.values():
            await client.aclose()
        for jc in self.judges:
            await jc.aclose()
        if self.categoriser is not None:
            await self.categoriser.aclose()
        self.clients.clear()

    # ------------------------------------------------------------------ battles
    def prompt(self) -> dict[str, str]:
        """A prompt from the pool (404 when the arena has none)."""
        if not self.pool:
            raise ApiError(404, "no_prompts", "this arena has no prompt pool; type a prompt")
        return self.rng.choice(self.pool)

    def _draw(
        self,
        who: Principal,
        names: list[str],
        prompt: str,
        prompt_id: str | None,
        address: str | None,
        image: bool = False,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A pair among ``names`` by the serving rule: the battle's row and its prompt's (with
        ``image``, of the category :data:`VISION_CATEGORY`)."""
        held = self._held(prompt, prompt_id, address, image)
        (row,) = self.state.serve(who, 1, names)
        row["prompt_id"] = held["prompt_id"]  # for the judges' copies (not a battles column)
        return row, held

    def _held(
        self, prompt: str, prompt_id: str | None, address: str | None, image: bool = False
    ) -> dict[str, Any]:
        """A held battle's ``held_battles`` row (without its status)."""
        if not prompt_id:  # a typed prompt: an id from its text (the same text, the same id)
            prompt_id = "typed-" + hashlib.sha256(prompt.encode()).hexdigest()[:16]
        now = time.time()
        return {
            "prompt_id": prompt_id,
            "prompt": prompt,
            "category": VISION_CATEGORY if image else self.page.category(prompt),
            "address": address,
            "served_at": now,
            "open_until": now + self.state.config.battle_ttl,
            "owner": self.process,
        }

    def _picked(
        self,
        who: Principal,
        picked: tuple[str, str],
        prompt: str,
        prompt_id: str | None,
        address: str | None,
        image: bool = False,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A side-by-side battle of the two models the visitor picked by name, in that order
        (model A, model B): not drawn by the serving rule (strategy ``named``, no propensity),
        stored with mode ``named`` — never anonymous, never on the default board. With an
        ``image``, both must take images."""
        a, b = (self.model_id(n, image) for n in picked)
        if a == b:
            raise ApiError(422, "invalid_input", "pick two different models", "models")
        held = {**self._held(prompt, prompt_id, address, image), "mode": "named"}
        row = {
            "id": uuid.uuid4().hex,
            "annotator_id": who.id,
            "model_a": a,
            "model_b": b,
            "strategy": "named",
            "propensity": None,
            "served_at": held["served_at"],
            "expires_at": held["open_until"],
            "check": False,
            "prompt_id": held["prompt_id"],
        }
        return row, held

    def model_id(self, name: str, vision: bool = False) -> int:
        """The id of a model the page may call now, by its name (422 naming the ones it may;
        ``vision``: among the models that take images)."""
        mid = self.state.model_ids.get(name)
        servable = self.servable(vision)
        if mid is None or name not in servable:
            raise ApiError(
                422,
                "invalid_input",
                f"model {name!r} cannot answer now{' an image' if vision else ''}; pick one "
                f"of: {', '.join(sorted(servable))}",
                "models",
            )
        return int(mid)

    def drawable(self, vision: bool = False) -> list[str]:
        """The models a new battle may be drawn among: those that can answer now
        (:meth:`servable`; with ``vision``, those that take images: 503 ``no_vision_models``
        when fewer than two), less those whose line is longer than ``max_queue_wait`` (503
        ``busy`` when fewer than two are left, 503 ``no_models`` when fewer than two can answer
        at all)."""
        names = self.servable(vision)
        if vision and len(names) < 2:
            raise ApiError(
                503,
                "no_vision_models",
                f"{len(names)} model(s) that take images (vision = true) can answer now, and "
                "a battle with an image needs two; send the prompt without the image",
                "image",
            )
        if len(names) < 2:
            raise ApiError(
                503,
                "no_models",
                "fewer than two models with an endpoint can answer now; try again later",
            )
        ids, limit = self.state.model_ids, self.page.max_queue_wait
        waits = {n: self.queue_wait(ids[n]) for n in names}
        free = [n for n in names if waits[n] <= limit]
        if len(free) < 2:
            raise self._busy(sorted(waits.values()))
        return free

    async def hold(
        self,
        who: Principal,
        prompt: str,
        prompt_id: str | None,
        address: str | None,
        open_caps: tuple[int, int, float] | None = None,
        picked: tuple[str, str] | None = None,
        image: Any = None,
    ) -> tuple[dict[str, Any], asyncio.Queue[dict[str, Any] | None]]:
        """Draw a pair by the arena's serving rule (or, with ``picked``, take the two models the
        visitor picked by name: a side-by-side battle, :meth:`_picked`), call both models at once and, while their
        answers start, store the battle (status ``served``, not votable; with ``open_caps``,
        counted against the caps on battles without a vote in the same transaction,
        :func:`~.store.arena.insert_held`). Returns the battle's row and the queue of its
        answers' pieces — ``{"side", "delta"}`` (``{"side", "restart": True}`` when a call
        starts over; ``{"side", "state", …}`` while a side waits for its model's free call
        slot: :class:`_Line`), then ``{"done": True, "status", "failure"}``, then None. The
        pair is drawn among the models whose line is within ``max_queue_wait``
        (:meth:`drawable`: else 503 ``busy``).

        The calls start before the battle is stored so that storing it adds nothing to the
        time to the first token; the answers are stored only once the battle is. When the
        battle is refused (a cap, or the registry changed under the draw: then a new pair is
        drawn), its calls are cancelled and nothing of it is kept.

        ``image`` (a :class:`~.images.CleanImage`): a vision battle — drawn among the models
        that take images only, each given the image with the prompt, stored with the battle,
        its category :data:`VISION_CATEGORY` (the classifier is not asked)."""
        await self.refresh()
        st = self.state
        vision = image is not None
        names = self.drawable(vision)
        url = image.url if vision else None
        stored_image = dataclasses.asdict(image) if vision else None
        if vision:
            self._keep_image(image.hash, url)
        learned = False
        for _ in range(8):
            revision = st.revision  # stored only if the registry is still this one
            if not allowed(st, who):  # its key revoked since the request was authenticated
                raise ApiError(403, "forbidden", "this annotator's key was revoked", "cookie")
            if picked is None:
                row, held = self._draw(who, names, prompt, prompt_id, address, vision)
            else:
                row, held = self._picked(who, picked, prompt, prompt_id, address, vision)
            if vision:
                row["image_hash"] = image.hash  # for the conversation kept in memory
            queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
            stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            # the classifier is asked once the first answer piece is out: nothing waits for it,
            # and its call does not compete with the models' first tokens
            streaming = asyncio.Event() if self.categoriser is not None and not vision else None
            entered = self._expect(row)  # no await since drawable(): counted before the next
            task = self._spawn(
                self._run(
                    row, prompt, queue, stored, streaming=streaming, entered=entered, image=url
                )
            )
            task.add_done_callback(lambda _, e=entered: e(None))
            self._live(row["id"], task)
            tasks = [task]
            if streaming is not None:
                ctask = self._spawn(self._categorise(row["id"], prompt, stored, streaming))
                self.categorising[row["id"]] = ctask
                ctask.add_done_callback(lambda _, bid=row["id"]: self.categorising.pop(bid, None))
                tasks.append(ctask)
            try:
                refused = await self.writer.submit_async(
                    partial(
                        store.held.insert_held,
                        row=row,
                        held=held,
                        revision=revision,
                        open_caps=open_caps,
                        image=stored_image,
                    )
                )
            except BaseException:
                for t in tasks:
                    t.cancel()
                raise
            if refused == []:
                stored.set_result(None)
                return row, queue
            for t in tasks:
                t.cancel()
            if isinstance(refused, store.held.OpenHeld):
                if picked is None:
                    st.refused(who, [row], [])
                refuse_open(self.page, refused.mine, refused.there)
            if picked is None:  # a picked pair was not drawn: nothing to take back
                st.refused(who, [row], refused or [])
            if refused and not learned:
                # judged through another host: learn every pair the database holds a vote of
                # this visitor on, once, instead of one refused draw at a time
                learned = True
                await asyncio.to_thread(st.learn_judged, who)
            if refused is None:
                await asyncio.to_thread(st.reload_registry)
                await self.refresh()
                names = self.drawable(vision)
        raise ApiError(503, "busy", "the arena is changing fast; try again")

    def _keep_image(self, image_hash: str, url: str) -> None:
        self.images.pop(image_hash, None)
        self.images[image_hash] = url
        while len(self.images) > IMAGES_KEPT:
            self.images.popitem(last=False)

    async def _image_of(
        self, battle_id: str, conv: dict[str, Any] | None
    ) -> tuple[str | None, str | None]:
        """(hash, data: URL) of a battle's image for a follow-up ((None, None): a battle without
        one): from memory when this worker generated it lately, else read."""
        if conv is not None:
            image_hash = conv.get("image")
            if image_hash is None:
                return None, None
            if image_hash in self.images:
                return image_hash, self.images[image_hash]
        got = await asyncio.to_thread(self._read_image, battle_id)
        if got is None:
            return None, None
        from .images import data_url

        url = data_url(got["media_type"], got["data"])
        self._keep_image(got["hash"], url)
        return got["hash"], url

    def _read_image(self, battle_id: str) -> dict[str, Any] | None:
        with self.state.engine.connect() as conn:
            return store.held.battle_image(conn, battle_id)

    async def _categorise(
        self,
        battle_id: str,
        prompt: str,
        stored: asyncio.Future[None],
        streaming: asyncio.Event,
    ) -> None:
        """Once the answers stream (``streaming``), ask the [category_classifier] for the
        prompt's category and, once the battle is stored (with the rules' category), store the
        classifier's in its place; a failed or malformed reply keeps the rules' (counted by the
        :class:`~.duties.Categoriser`)."""
        await streaming.wait()
        category = await self.categoriser.category(prompt)
        await asyncio.shield(stored)
        if category is None:
            return
        try:
            await self.writer.submit_async(
                partial(store.held.set_category, battle_id=battle_id, category=category)
            )
        except Exception:  # noqa: BLE001 - the rules' category stays
            log.exception("battle %s: its category could not be stored", battle_id)
            return
        if len(self.categories) >= 1024:  # the judges read it within a battle's life
            self.categories.pop(next(iter(self.categories)))
        self.categories[battle_id] = category

    async def category_of(self, battle_id: str, prompt: str) -> str:
        """A held battle's category: the classifier's (waited for, when it is still being
        asked) or the rules'."""
        task = self.categorising.get(battle_id)
        if task is not None:
            try:
                await asyncio.shield(task)
            except Exception:  # noqa: BLE001 - the rules' category
                pass
        return self.categories.get(battle_id) or self.page.category(prompt)

    async def _category_for_judges(
        self, battle_id: str, prompt: str, material: dict[str, Any] | None
    ) -> str:
        if (material or {}).get("image") is not None:
            return VISION_CATEGORY
        return await self.category_of(battle_id, prompt)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def _live(self, battle_id: str, task: asyncio.Task[Any]) -> None:
        self.live[battle_id] = task
        task.add_done_callback(
            lambda t: self.live.pop(battle_id, None) if self.live.get(battle_id) is t else None
        )

    async def follow(
        self, who: Principal, battle_id: str, prompt: str | None
    ) -> tuple[store.held.Turn, asyncio.Queue[dict[str, Any] | None]]:
        """A follow-up turn (``prompt``) or, with ``prompt`` None, the last turn regenerated, on
        a complete battle of ``who``. Both models are called with the whole conversation, each
        with its own answers; returns the accepted turn and the queue of its pieces, as
        :meth:`hold`. As there, the calls start before the writer has accepted the turn, so
        that accepting it adds nothing to the time to the first token: the turn is planned —
        from the conversation this worker generated, kept in memory, or else from a read of the
        stored one (:func:`~.store.arena.plan_turn`: the limits) — and the writer accepts it
        only if the stored conversation is still the one planned on
        (:func:`~.store.arena.accept_planned`; not voted, not stopped). A turn refused
        meanwhile is cancelled and nothing of it is kept."""
        await self.refresh()
        page = self.page
        limits = {
            "battle_id": battle_id,
            "annotator_id": who.id,
            "prompt": prompt,
            "now": time.time(),
            "max_turns": page.max_turns,
            "max_regenerations": page.max_regenerations,
            "max_chars": page.max_conversation_chars,
        }
        conv = self.convs.get(battle_id)
        if conv is not None and conv["annotator"] == who.id:
            plan = store.held.plan_from(
                conv,
                conv["regens"],
                conv["attempt"],
                conv["models"],
                prompt,
                page.max_turns,
                page.max_regenerations,
                page.max_conversation_chars,
            )
        else:
            plan = await asyncio.to_thread(self._plan, limits)
        if isinstance(plan, store.held.TurnRefused):
            raise ApiError(plan.status, plan.code, plan.message, "battle_id")
        image_hash, image = await self._image_of(battle_id, conv)
        row = {
            "id": battle_id,
            "model_a": plan.model_a,
            "model_b": plan.model_b,
            "annotator_id": who.id,
            "regens": plan.regenerated + (plan.attempt > 1),  # after this turn
            "attempt": plan.attempt,
            "image_hash": image_hash,
        }
        waits = [self.queue_wait(m) for m in (plan.model_a, plan.model_b) if m in self.endpoints]
        if waits and max(waits) > page.max_queue_wait:
            raise self._busy([max(waits)] * 2)
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entered = self._expect(row)
        task = self._spawn(
            self._run(
                row,
                plan.prompt,
                queue,
                stored,
                plan.history,
                plan.turn,
                plan.attempt,
                entered=entered,
                image=image,
            )
        )
        task.add_done_callback(lambda _: entered(None))
        try:
            got = await self.writer.submit_async(
                partial(
                    store.held.accept_planned,
                    battle_id=battle_id,
                    annotator_id=who.id,
                    turn=plan.turn,
                    attempt=plan.attempt,
                    now=limits["now"],
                    owner=self.process,
                )
            )
        except BaseException:
            task.cancel()
            raise
        if got is not None:
            task.cancel()
            self.convs.pop(battle_id, None)  # planned on an old state: read it next time
            if got.code == "busy":  # why, from the stored battle (voted, stopped, …)
                again = await asyncio.to_thread(self._plan, limits)
                if isinstance(again, store.held.TurnRefused):
                    got = again
            raise ApiError(got.status, got.code, got.message, "battle_id")
        stored.set_result(None)
        self._live(battle_id, task)
        return plan, queue

    def remember(
        self, row: dict[str, Any], prompt: str, history: dict[str, Any] | None, texts: dict
    ) -> None:
        """Keep a completed turn's conversation in memory (:attr:`convs`) for the next plan."""
        hist = history or {"a": [], "b": []}
        self.convs.pop(row["id"], None)
        self.convs[row["id"]] = {
            **{
                side: [
                    *hist[side],
                    {"role": "user", "content": prompt},
                    {"role": "assistant", "content": texts.get(side) or ""},
                ]
                for side in "ab"
            },
            "regens": row.get("regens", 0),
            "attempt": row.get("attempt", 1),
            "annotator": row["annotator_id"],
            "models": (row["model_a"], row["model_b"]),
            "image": row.get("image_hash"),
        }
        while len(self.convs) > CONVERSATIONS:
            self.convs.popitem(last=False)

    def _plan(self, limits: dict[str, Any]) -> store.held.Turn | store.held.TurnRefused:
        with self.state.engine.connect() as conn:
            return store.held.plan_turn(conn, **limits)

    async def stop_battle(self, who: Principal, battle_id: str) -> str:
        """Stop a battle of ``who``: stored ``stopped`` (never votable, not counted), then its
        calls on this worker cancelled (both upstream streams closed; what came of the answers
        is stored with the failure ``stopped``). A battle generating on another worker is
        stored stopped all the same; its calls there run to their end. Returns its status."""
        got = await self.writer.submit_async(
            partial(
                store.held.stop_battle, battle_id=battle_id, annotator_id=who.id, now=time.time()
            )
        )
        if isinstance(got, store.held.TurnRefused):
            raise ApiError(got.status, got.code, got.message, "battle_id")
        self.convs.pop(battle_id, None)
        task = self.live.get(battle_id)
        if task is not None:
            task.cancel()
        return got

    async def abandon_open(self, who: Principal) -> list[str]:
        """Abandon every battle of ``who`` without a vote that counts against its cap
        (:func:`~.store.arena.abandon_open`), then cancel those generating on this worker (one
        generating on another worker or host runs to its end; the battle stays abandoned).
        Returns their ids."""
        ids = await self.writer.submit_async(
            partial(store.held.abandon_open, annotator_id=who.id, now=time.time())
        )
        for bid in ids:
            self.convs.pop(bid, None)
            task = self.live.get(bid)
            if task is not None:
                task.cancel()
        return ids

    async def _run(
        self,
        row: dict[str, Any],
        prompt: str,
        queue: asyncio.Queue[dict[str, Any] | None],
        stored: asyncio.Future[None] | None,
        history: dict[str, list[dict[str, str]]] | None = None,
        turn: int = 1,
        attempt: int = 1,
        streaming: asyncio.Event | None = None,
        entered: Callable[[int | None], None] | None = None,
        image: str | None = None,
    ) -> None:
        """Generate the battle's answers into ``queue`` (the generation goes on, and is stored,
        even when the page goes away; only a stop cancels it); ``streaming`` is set at the first
        piece (or the end); ``entered``: :meth:`_expect`'s callback."""

        def emit(side: str, delta: str | None) -> None:
            if streaming is not None and not streaming.is_set():
                streaming.set()
            queue.put_nowait(
                {"side": side, "delta": delta}
                if delta is not None
                else {"side": side, "restart": True}
            )

        try:
            try:
                end = await self.generate(
                    row,
                    prompt,
                    emit,
                    stored,
                    history,
                    turn,
                    attempt,
                    state=queue.put_nowait,
                    entered=entered,
                    image=image,
                )
            except asyncio.CancelledError:  # stopped: its answers were stored as they came
                end = {"status": "stopped", "failure": "stopped by the person"}
            except Exception as exc:  # noqa: BLE001 - the page's stream must get its last line
                log.exception("battle %s: the generation failed", row["id"])
                end = {"status": "failed", "failure": f"{type(exc).__name__}: {exc}"}
            queue.put_nowait({"done": True, **end})
        finally:
            if streaming is not None:
                streaming.set()
            queue.put_nowait(None)

    async def generate(
        self,
        row: dict[str, Any],
        prompt: str,
        emit: Emit,
        stored: asyncio.Future[None] | None = None,
        history: dict[str, list[dict[str, str]]] | None = None,
        turn: int = 1,
        attempt: int = 1,
        state: Callable[[dict[str, Any]], None] | None = None,
        entered: Callable[[int | None], None] | None = None,
        image: str | None = None,
    ) -> dict[str, Any]:
        """Call both models at once — each with the conversation so far (``history[side]``:
        the user's messages and its own answers) and ``prompt`` — ``emit(side, delta)`` as
        their answers stream in, then (once ``stored`` says the battle is) store both answers
        as turn ``turn`` (attempt ``attempt``) and the battle's new status; returns
        ``{"status", "failure"}``. Cancelled (a stop), it stores what came of both answers,
        with the failure ``stopped``, and is cancelled. A side whose model has no free call
        slot is ``state``-d its place in the line (:class:`_Line`) until it gets one;
        ``entered(model_id)`` is called as each call joins its model's line. ``image``: a vision
        battle's image (a data: URL), on the conversation's first user message at every turn
        (:func:`~stablearena.judging.endpoints.client.with_image`)."""
        sides = (("a", row["model_a"]), ("b", row["model_b"]))
        came: dict[str, list[str]] = {"a": [], "b": []}
        # the page is sent each answer as a person sees it (stablearena.judging.visible), as the judges
        # are given it; what the model sent is stored
        shown = {"a": VisibleStream(), "b": VisibleStream()}
        t0 = time.monotonic()

        def heard(side: str, delta: str | None) -> None:
            if delta is None:
                came[side].clear()
                shown[side] = VisibleStream()
                emit(side, None)
                return
            came[side].append(delta)
            for piece in shown[side].feed(delta):
                emit(side, piece)

        def heard_all(side: str) -> None:
            for piece in shown[side].finish():
                emit(side, piece)

        async def one(side: str, mid: int) -> Any:
            if mid not in self.endpoints:
                return Failure(str(mid), "no_endpoint", "the model lost its endpoint")
            line = None
            try:
                client = self.client(mid)
                messages = client.messages(prompt, (history or {}).get(side, ()))
                if state is not None:
                    line = _Line(side, client.slots, self.page.max_queue_wait, state)
                if entered is not None:
                    entered(mid)
                if image is not None:
                    messages = with_image(messages, image)
                res = await client.complete(messages, partial(heard, side), line)
                heard_all(side)
            except asyncio.CancelledError:  # stopped: the page gets all that came, as stored
                heard_all(side)
                raise
            except Exception as exc:  # noqa: BLE001 - a failed call, never a wedged battle
                log.exception("model %s: the call failed unexpectedly", mid)
                res = Failure(str(mid), "bad_response", f"{type(exc).__name__}: {exc}")
            finally:
                if line is not None:
                    line.close()
            try:
                await self.after_call(mid, res)
            except Exception:  # noqa: BLE001 - the outage flag is set again by the next call
                log.exception("model %s: its outage state could not be stored", mid)
            return res

        ttl = self.state.config.battle_ttl

        def finish(answers: list[dict[str, Any]], failure: str | None) -> Any:
            return self.writer.submit_async(
                partial(
                    store.held.finish_held,
                    battle_id=row["id"],
                    answers=answers,
                    failure=failure,
                    now=time.time(),
                    ttl=ttl,
                    turn=turn,
                    attempt=attempt,
                    prompt=prompt,
                    owner=self.process,
                )
            )

        try:
            results = await asyncio.gather(*(one(s, m) for s, m in sides))
        except asyncio.CancelledError:  # stopped: keep what came, then end
            if stored is not None and not stored.done():
                raise  # never accepted (refused): nothing of it is kept
            cut = Failure("", "stopped", "stopped by the person", elapsed=time.monotonic() - t0)
            rows = [
                {**_answer_row(s, m, self.endpoints[m], cut), "text": "".join(came[s])}
                for s, m in sides
                if m in self.endpoints
            ]
            try:
                if stored is not None:
                    await stored
                await finish(rows, "stopped by the person")
            except Exception:  # noqa: BLE001 - the battle is stored stopped all the same
                log.exception("battle %s: its stopped answers could not be stored", row["id"])
            raise
        names = self.identity_names()
        rows = [
            _answer_row(s, m, self.endpoints[m], r, names)
            for (s, m), r in zip(sides, results, strict=True)
            if m in self.endpoints
        ]
        failed = [
            f"model {s.upper()}: {r.reason} ({r.detail})"
            for (s, _), r in zip(sides, results, strict=True)
            if not r.ok
        ]
        failure = "; ".join(failed) or None
        if stored is not None:
            await stored
        # the one place where a turn's answers are finished (checks of an answer hook in here)
        try:
            kept = await finish(rows, failure)
        except Exception as exc:  # noqa: BLE001 - stored failed, without the answers
            log.exception("battle %s: its answers could not be stored", row["id"])
            failure = f"the answers could not be stored: {type(exc).__name__}"
            await finish([], failure)
        else:
            if not kept:  # closed meanwhile by another process, this one believed dead
                log.warning(
                    "battle %s: closed by another process; turn %d not kept", row["id"], turn
                )
                self.convs.pop(row["id"], None)
                return {"status": "failed", "failure": NOT_KEPT}
        if failure:
            self.convs.pop(row["id"], None)
        elif "annotator_id" in row:
            self.remember(row, prompt, history, {r["side"]: r.get("text") for r in rows})
        return {"status": "failed" if failure else "complete", "failure": failure}

    # ------------------------------------------------------------------ direct chats
    async def chat(
        self, who: Principal, chat_id: str | None, model: str | None, prompt: str
    ) -> tuple[str, int, asyncio.Queue[dict[str, Any] | None]]:
        """A turn of a direct chat of ``who``: a new chat with ``model`` (picked by name), or
        the next turn of chat ``chat_id`` (the model given the whole conversation). The turn is
        accepted (stored ``served``: :mod:`.store.modes`) before the call starts; the answer
        streams into the queue as a battle's side ``a`` does (``{"side": "a", "delta"}``, then
        ``{"done": True, "status", "failure"}``, then None) and is stored when it ends, even if
        the page went away. Never a battle, never a vote. Returns (chat id, turn, queue)."""
        await self.refresh()
        if chat_id is None:
            if not model:
                raise ApiError(422, "invalid_input", "pick the model to chat with", "model")
            mid, turn, history = self.model_id(model), 1, []
            chat_id = uuid.uuid4().hex
            await self.writer.submit_async(
                partial(
                    store.modes.new_chat,
                    chat_id=chat_id,
                    annotator_id=who.id,
                    model_id=mid,
                    now=time.time(),
                )
            )
        else:
            plan = await asyncio.to_thread(self._plan_chat, chat_id, who.id, prompt)
            if isinstance(plan, store.held.TurnRefused):
                raise ApiError(plan.status, plan.code, plan.message, "chat_id")
            mid, turn, history = plan
            if mid not in self.endpoints or self.state.models[mid].retired:
                raise ApiError(
                    409, "no_models", "this chat's model cannot answer any more; start a new chat"
                )
            got = await self.writer.submit_async(
                partial(
                    store.modes.accept_chat_turn, chat_id=chat_id, annotator_id=who.id, turn=turn
                )
            )
            if got is not None:
                raise ApiError(got.status, got.code, got.message, "chat_id")
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._spawn(self._chat_turn(chat_id, mid, turn, prompt, history, queue))
        return chat_id, turn, queue

    def _plan_chat(self, chat_id: str, annotator_id: int, prompt: str) -> Any:
        with self.state.engine.connect() as conn:
            return store.modes.plan_chat(
                conn,
                chat_id,
                annotator_id,
                prompt,
                self.page.max_turns,
                self.page.max_conversation_chars,
            )

    async def _chat_turn(
        self,
        chat_id: str,
        mid: int,
        turn: int,
        prompt: str,
        history: list[dict[str, str]],
        queue: asyncio.Queue[dict[str, Any] | None],
    ) -> None:
        """Call the chat's model, stream its answer (as a person sees it: stablearena.judging.visible)
        into ``queue``, store the turn."""
        came: list[str] = []
        shown = [VisibleStream()]
        t0 = time.monotonic()

        def put(piece: str | None) -> None:
            queue.put_nowait(
                {"side": "a", "delta": piece}
                if piece is not None
                else {"side": "a", "restart": True}
            )

        def heard(delta: str | None) -> None:
            if delta is None:  # the call starts over
                came.clear()
                shown[0] = VisibleStream()
                put(None)
                return
            came.append(delta)
            for piece in shown[0].feed(delta):
                put(piece)

        # what the page is told if the turn is cut (the process stopping)
        end: dict[str, Any] = {"status": "failed", "failure": "the arena stopped"}
        try:
            try:
                client = self.client(mid)
                res = await client.complete(client.messages(prompt, history), heard)
                for piece in shown[0].finish():
                    put(piece)
            except Exception as exc:  # noqa: BLE001 - a failed call, never a wedged chat
                log.exception("model %s: the chat call failed unexpectedly", mid)
                res = Failure(str(mid), "bad_response", f"{type(exc).__name__}: {exc}")
            try:
                await self.after_call(mid, res)
            except Exception:  # noqa: BLE001 - the outage flag is set again by the next call
                log.exception("model %s: its outage state could not be stored", mid)
            if isinstance(res, Answer):
                answer = {k: getattr(res, k) for k in store.modes.CHAT_ANSWER}
                failure = None
            else:
                answer = {"text": "".join(came), "total_time": time.monotonic() - t0}
                failure = f"{res.reason} ({res.detail})"
            await self.writer.submit_async(
                partial(
                    store.modes.finish_chat_turn,
                    chat_id=chat_id,
                    turn=turn,
                    prompt=prompt,
                    answer=answer,
                    failure=failure,
                    now=time.time(),
                )
            )
            end = {"status": "failed" if failure else "complete", "failure": failure}
        except Exception as exc:  # noqa: BLE001 - the page's stream must get its last line
            log.exception("chat %s: turn %d could not be stored", chat_id, turn)
            end = {"status": "failed", "failure": f"{type(exc).__name__}: {exc}"}
        finally:
            queue.put_nowait({"done": True, **end})
            queue.put_nowait(None)

    def after_vote(self, battle_id: str, judge: bool = True) -> None:
        """A person's vote closed the battle: the judges (if any, and with ``judge``: not for a
        side-by-side battle of models the visitor picked) judge its whole conversation."""
        self.convs.pop(battle_id, None)
        if self.judges and judge:
            self._spawn(self.judge_battle(battle_id))

    async def judge_battle(self, battle_id: str) -> int:
        """Every judge judges the conversation of a held battle closed by a vote (read with
        :func:`~.store.arena.judge_material`); the votes recorded."""
        got = await asyncio.to_thread(self._judge_material, battle_id)
        if got is None:
            return 0
        return await self.judge(got["row"], got["prompt"], got["answers"], got)

    def _judge_material(self, battle_id: str) -> dict[str, Any] | None:
        with self.state.engine.connect() as conn:
            return store.held.judge_material(conn, battle_id)

    # ------------------------------------------------------------------ judges
    async def judge(
        self,
        row: dict[str, Any],
        prompt: str,
        answers: list[dict[str, Any]],
        material: dict[str, Any] | None = None,
    ) -> int:
        """Every judge judges a completed battle in both orders (stablearena.judging.judges; orders
        that disagree are a tie) and votes on its own copy of it as an annotator of the arena;
        a failed or unparseable judgement is no vote. A conversation of several turns is judged
        whole (:func:`judged_texts`). A vision battle (its image in ``material``) is judged only
        by the judges that take images (``vision = true``), each given the image with the
        prompt; the others do not vote on it, and it gets no probe battles. Returns the votes
        recorded."""
        text = {a["side"]: a["text"] for a in answers}
        conv = (material or {}).get("conversation")
        image = (material or {}).get("image")
        asked = prompt
        if conv and conv["turns"] > 1:
            asked, text = judged_texts(conv)
        if self.flagged_judges is None:
            self.flagged_judges = await asyncio.to_thread(self._flagged)
        # a judge its probes flagged judges no more (its votes are out of every fit)
        judges = [j for j in self.judges if j.name not in self.flagged_judges]
        urls: tuple[str, ...] = ()
        if image is not None:
            from .images import data_url

            judges = [j for j in judges if j.judge.endpoint.vision]
            urls = (data_url(image["media_type"], image["data"]),)
        got = await asyncio.gather(
            *(
                j.judge_pair(asked, row["id"], "a", text["a"], "b", text["b"], images=urls)
                for j in judges
            )
        )
        st, now, done = self.state, time.time(), 0
        held = {
            "prompt": prompt,
            "category": await self._category_for_judges(row["id"], prompt, material),
            "image_hash": image["hash"] if image is not None else None,
            "status": "complete",
            "served_at": now,
            "completed_at": now,
        }
        report = next((j.injection for j in got if j.injection is not None), None)
        if report is not None:  # the answers are checked alike for every judge: flagged once
            log.warning("battle %s: an answer talks to the judge: %s", row["id"], report)
            await self.writer.submit_async(
                partial(
                    store.held.record_flags,
                    battle_id=row["id"],
                    answers=answers,
                    report=report,
                    now=now,
                )
            )
        for jc, judgement in zip(judges, got, strict=True):
            if judgement.outcome is None:
                log.warning("judge %s: no verdict: %s", jc.name, judgement.failure)
                continue
            jid = await self._judge_id(jc.name, now)
            copy = {**row, "id": uuid.uuid4().hex, "strategy": "judge", "check": False}
            res = await self.writer.submit_async(
                partial(
                    store.held.record_judgement,
                    row=copy,
                    judge_id=jid,
                    verdict=judgement.outcome,
                    now=now,
                    ttl=st.config.battle_ttl,
                    held={
                        **held,
                        "prompt_id": row.get("prompt_id"),
                        "judge_reasoning": json.dumps(judgement.verdict_records()),
                    },
                    answers=answers,
                    turns=(material or {}).get("turns"),
                )
            )
            st.after_vote(Principal(jid, jc.name, "annotator", "", ""), copy["id"], res)
            done += 1
        if image is None:  # a probe shows no image: a vision battle's judges are not probed
            await self.probe_judges(judges, asked, row["id"], [text["a"], text["b"]])
        return done

    async def _judge_id(self, name: str, now: float) -> int:
        jid = self.judge_ids.get(name)
        if jid is None:
            jid = self.judge_ids[name] = await self.writer.submit_async(
                partial(store.held.judge_annotator, name=name, now=now)
            )
        return jid

    def _flagged(self) -> dict[str, str]:
        """The judges the stored probes flag (and each judge's probes, for the controls)."""
        from collections import Counter

        from ..judging.probes import DEFAULT_THRESHOLD, DEFAULT_Z

        with self.state.engine.connect() as conn:
            self.probe_counts = dict(Counter(r["judge"] for r in store.probes.probe_records(conn)))
            return store.probes.flagged_judges(conn, DEFAULT_THRESHOLD, DEFAULT_Z)

    async def _probe_answer(self, prompt: str, rng: np.random.Generator) -> str | None:
        """The answer probes are built on: of a model drawn uniformly from those with an
        endpoint, asked ``prompt`` anew (None when the call fails). Not one of the battle's
        answers: a model that writes notes to the judge would put one on both sides of a probe
        built on its answer (the cut copy keeps it), which hides a judge's obedience; drawn
        uniformly, it is the source of 1/M of the probes (as in ``auto``)."""
        mids = sorted(self.endpoints)
        if not mids:
            return None
        mid = mids[int(rng.integers(len(mids)))]
        try:
            client = self.client(mid)
            res = await client.complete(client.messages(prompt, ()))
        except Exception:  # noqa: BLE001 - a probe is never worth a failed battle
            log.warning("probe: the answer of model %s failed", mid, exc_info=True)
            return None
        return res.text if isinstance(res, Answer) else None

    async def probe_judges(
        self, judges: list[Any], prompt: str, battle_id: str, answers: list[str]
    ) -> int:
        """After a judged battle: each of ``judges`` gets a probe battle (stablearena.judging.probes:
        an answer to this battle's prompt by a model drawn uniformly, :meth:`_probe_answer` — one
        model call for the round's probes — against its cut copy, with a corpus note after the
        copy or, one probe in three, none) with the chance p/(1 − p) of share p, which keeps the probes
        at that share of its calls (a battle and a probe cost two calls each). Shown as a real
        battle is (the same prompt, frame and both orders); stored, never a vote; the judges
        the probes now flag are left out from here on. Returns the probes recorded."""
        from ..judging.judge_notes import notes
        from ..judging.probes import DEFAULT_CONTROL, is_control, probe

        p = self.probe_share
        if p <= 0 or not judges:
            return 0
        rng, chance, done = self.probe_rng, p / (1.0 - p), 0
        base: str | None = None
        for jc in judges:
            if rng.random() >= chance:
                continue
            if base is None:  # one answer for this round's probes, asked for the first
                base = await self._probe_answer(prompt, rng)
                if base is None:  # its model failed: one of the battle's answers
                    base = answers[int(rng.integers(len(answers)))]
            note = None
            k = self.probe_counts.get(jc.name, 0)
            self.probe_counts[jc.name] = k + 1
            if not is_control(k, DEFAULT_CONTROL):
                part = notes("all")
                note = part[int(rng.integers(len(part)))]
            rec = await probe(jc, prompt, battle_id, base, note, rng)
            if rec is None or not rec["picked"]:
                continue
            jid = await self._judge_id(jc.name, time.time())
            await self.writer.submit_async(
                partial(
                    store.probes.record_probe,
                    judge_id=jid,
                    battle_id=battle_id,
                    note=rec["note"],
                    picked=rec["picked"],
                    calls=rec["calls"],
                    now=time.time(),
                )
            )
            done += 1
        if done:
            before = self.flagged_judges or {}
            self.flagged_judges = await asyncio.to_thread(self._flagged)
            for name, reason in self.flagged_judges.items():
                if name not in before:
                    log.warning("judge %s is flagged: %s; its votes weigh nothing", name, reason)
        return done


class _Line:
    """A side's place in its model's line for a call slot (the ``on_queue`` of
    :meth:`~stablearena.judging.endpoints.EndpointClient.complete`), told to the page: ``{"side",
    "state": "queued", "position", "wait", "text"}`` at once and then at most every
    :data:`QUEUE_EVERY` seconds as it moves up (the newest place), ``{"side", "state":
    "answering"}`` when it gets its slot. The model is named by its side only (the battle is
    anonymous)."""

    def __init__(
        self, side: str, slots: Any, prior: float, state: Callable[[dict[str, Any]], None]
    ) -> None:
        self.side, self.slots, self.prior, self.state = side, slots, prior, state
        self.place = 0
        self.last = -math.inf
        self.timer: asyncio.TimerHandle | None = None

    def __call__(self, place: int) -> None:
        self.place = place
        if place == 0:
            self.close()
            self.state({"side": self.side, "state": "answering"})
            return
        if self.timer is not None:  # a send is due: it takes the newest place
            return
        due = self.last + QUEUE_EVERY - time.monotonic()
        if due <= 0:
            self.send()
        else:
            self.timer = asyncio.get_running_loop().call_later(due, self.send)

    def send(self) -> None:
        """Tell the page the side's place now."""
        self.timer = None
        if self.place == 0:
            return
        self.last = time.monotonic()
        wait = self.slots.wait_estimate(self.place - 1, self.prior)
        self.state(
            {
                "side": self.side,
                "state": "queued",
                "position": self.place,
                "wait": round(wait),
                "text": f"Queued: {_ordinal(self.place)} in line for model "
                f"{self.side.upper()}'s free answer slot (about {wait:.0f} s)",
            }
        )

    def close(self) -> None:
        """No more sends (the call got its slot, or ended)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def _ordinal(n: int) -> str:
    tail = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{tail}"


def judged_texts(conv: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """What a judge reads of a conversation of several turns (``store.arena.conversation``):
    the user's messages, numbered, as the prompt, and each side's answers, numbered by turn, as
    its answer — the whole conversation, so the judges judge what the person voted on."""
    users = [m["content"] for m in conv["a"] if m["role"] == "user"]
    prompt = (
        f"A conversation of {len(users)} turns. The user's messages, in order:\n\n"
        + "\n\n".join(f"[Turn {k}] {u}" for k, u in enumerate(users, 1))
    )
    text = {
        side: "\n\n".join(
            f"[Turn {k}] {m['content']}"
            for k, m in enumerate((m for m in conv[side] if m["role"] == "assistant"), 1)
        )
        for side in "ab"
    }
    return prompt, text


def _judge_clients(entries: list[dict[str, Any]], injection: dict[str, Any]) -> list[Any]:
    """Clients of the serve config's ``[[judges]]`` (stablearena.judging.judges), with its
    ``[injection]`` policy and classifier (one classifier shared by the judges)."""
    from ..judging.judges import JudgeClient, injection_from_mapping, judges_from_toml

    policy, guard = injection_from_mapping(injection, "serve config: [injection]")
    if not entries:
        return []
    classifier = None
    if guard is not None:
        from ..judging.endpoints import make_client
        from ..judging.injection import InjectionClassifier

        classifier = InjectionClassifier(make_client(guard))
    return [
        JudgeClient(j, injection=policy, classifier=classifier)
        for j in judges_from_toml({"judges": entries}, "serve config")
    ]
