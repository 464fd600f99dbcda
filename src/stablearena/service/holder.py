"""The battles the arena holds itself: it calls both models of a served pair, streams their
answers, stores everything about the battle, and keeps the models' outage state in step with
their endpoints' circuit breakers (docs/guides/arena-page.md).

One :class:`BattleHolder` per worker process, on the worker's event loop. It keeps one
:class:`stablearena.endpoints.EndpointClient` per model with an endpoint (rebuilt when the
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
import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..anonymity import identity_names, names_mentioned
from ..endpoints import Answer, EndpointClient, Failure, ModelEndpoint, with_image
from ..endpoints.config import endpoint_from_mapping
from ..style_features import style_counts
from ..visible import VisibleStream
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
    file read by :func:`stablearena.auto.read_prompts`."""
    if not spec:
        return []
    if spec == "demo":
        from ..endpoints.demo import demo_prompts

        return demo_prompts(200)
    from ..auto import read_prompts

    return [{"id": p.id, "prompt": p.text} for p in read_prompts(spec)]


#: The fields of an :class:`~stablearena.endpoints.Answer` stored as they are.
_ANSWER_FIELDS = (
    "text",
    "ttft",
    "total_time",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
)


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
        row.update({k: getattr(res, k) for k in _ANSWER_FIELDS})
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
        self._revision = -2
        self._probe: asyncio.Task | None = None
        self._recovery: asyncio.Task | None = None
        #: this process among the serving processes (store.serving): the owner of the turns it
        #: generates, its heartbeat renewed every store.serving.BEAT_SECONDS
        self.process = uuid.uuid4().hex
        self.judges = _judge_clients(settings.judges, settings.injection)
        self.judge_ids: dict[str, int] = {}
        #: the judges' probe battles (stablearena.probes): the share of their calls, the draws,
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
        (stablearena.anonymity): every model's name, aliases and organisation, the page's
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
        if not prompt_id:  # a typed prompt: an id from its text (the same text, the same id)
            prompt_id = "typed-" + hashlib.sha256(prompt.encode()).hexdigest()[:16]
        now = time.time()
        held = {
            "prompt_id": prompt_id,
            "prompt": prompt,
            "category": VISION_CATEGORY if image else self.page.category(prompt),
            "address": address,
            "served_at": now,
            "open_until": now + self.state.config.battle_ttl,
            "owner": self.process,
        }
        (row,) = self.state.serve(who, 1, names)
        row["prompt_id"] = prompt_id  # for the judges' copies (not a battles column)
        return row, held

    def drawable(self, vision: bool = False) -> list[str]:
        """The models a battle may be drawn among (:meth:`servable`); 503 when fewer than two."""
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
        return names

    async def hold(
        self,
        who: Principal,
        prompt: str,
        prompt_id: str | None,
        address: str | None,
        open_caps: tuple[int, int, float] | None = None,
        image: Any = None,
    ) -> tuple[dict[str, Any], asyncio.Queue[dict[str, Any] | None]]:
        """Draw a pair by the arena's serving rule, call both models at once and, while their
        answers start, store the battle (status ``served``, not votable; with ``open_caps``,
        counted against the caps on battles without a vote in the same transaction,
        :func:`~.store.arena.insert_held`). Returns the battle's row and the queue of its
        answers' pieces — ``{"side", "delta"}`` (``{"side", "restart": True}`` when a call
        starts over), then ``{"done": True, "status", "failure"}``, then None.

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
            row, held = self._draw(who, names, prompt, prompt_id, address, vision)
            if vision:
                row["image_hash"] = image.hash  # for the conversation kept in memory
            queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
            stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            # the classifier is asked once the first answer piece is out: nothing waits for it,
            # and its call does not compete with the models' first tokens
            streaming = asyncio.Event() if self.categoriser is not None and not vision else None
            task = self._spawn(
                self._run(row, prompt, queue, stored, streaming=streaming, image=url)
            )
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
                st.refused(who, [row], [])
                refuse_open(self.page, refused.mine, refused.there)
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
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = self._spawn(
            self._run(
                row, plan.prompt, queue, stored, plan.history, plan.turn, plan.attempt, image=image
            )
        )
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
        image: str | None = None,
    ) -> None:
        """Generate the battle's answers into ``queue`` (the generation goes on, and is stored,
        even when the page goes away; only a stop cancels it); ``streaming`` is set at the first
        piece (or the end)."""

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
                    row, prompt, emit, stored, history, turn, attempt, image=image
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
        image: str | None = None,
    ) -> dict[str, Any]:
        """Call both models at once — each with the conversation so far (``history[side]``:
        the user's messages and its own answers) and ``prompt`` — ``emit(side, delta)`` as
        their answers stream in, then (once ``stored`` says the battle is) store both answers
        as turn ``turn`` (attempt ``attempt``) and the battle's new status; returns
        ``{"status", "failure"}``. Cancelled (a stop), it stores what came of both answers,
        with the failure ``stopped``, and is cancelled. ``image``: a vision battle's image (a
        data: URL), on the conversation's first user message at every turn
        (:func:`~stablearena.endpoints.client.with_image`)."""
        sides = (("a", row["model_a"]), ("b", row["model_b"]))
        came: dict[str, list[str]] = {"a": [], "b": []}
        # the page is sent each answer as a person sees it (stablearena.visible), as the judges
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
            try:
                client = self.client(mid)
                messages = client.messages(prompt, (history or {}).get(side, ()))
                if image is not None:
                    messages = with_image(messages, image)
                res = await client.complete(messages, partial(heard, side))
                heard_all(side)
            except asyncio.CancelledError:  # stopped: the page gets all that came, as stored
                heard_all(side)
                raise
            except Exception as exc:  # noqa: BLE001 - a failed call, never a wedged battle
                log.exception("model %s: the call failed unexpectedly", mid)
                res = Failure(str(mid), "bad_response", f"{type(exc).__name__}: {exc}")
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

    def after_vote(self, battle_id: str) -> None:
        """A person's vote closed the battle: the judges (if any) judge its whole conversation."""
        self.convs.pop(battle_id, None)
        if self.judges:
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
        """Every judge judges a completed battle in both orders (stablearena.judges; orders
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

        from ..probes import DEFAULT_THRESHOLD, DEFAULT_Z

        with self.state.engine.connect() as conn:
            self.probe_counts = dict(Counter(r["judge"] for r in store.probes.probe_records(conn)))
            return store.probes.flagged_judges(conn, DEFAULT_THRESHOLD, DEFAULT_Z)

    async def probe_judges(
        self, judges: list[Any], prompt: str, battle_id: str, answers: list[str]
    ) -> int:
        """After a judged battle: each of ``judges`` gets a probe battle (stablearena.probes: one
        of this battle's answers against its cut copy, with a corpus note after the copy or, one
        probe in three, none) with the chance p/(1 − p) of share p, which keeps the probes
        at that share of its calls (a battle and a probe cost two calls each). Shown as a real
        battle is (the same prompt, frame and both orders); stored, never a vote; the judges
        the probes now flag are left out from here on. Returns the probes recorded."""
        from ..judge_notes import notes
        from ..probes import DEFAULT_CONTROL, is_control, probe

        p = self.probe_share
        if p <= 0 or not judges:
            return 0
        rng, chance, done = self.probe_rng, p / (1.0 - p), 0
        for jc in judges:
            if rng.random() >= chance:
                continue
            note = None
            k = self.probe_counts.get(jc.name, 0)
            self.probe_counts[jc.name] = k + 1
            if not is_control(k, DEFAULT_CONTROL):
                part = notes("all")
                note = part[int(rng.integers(len(part)))]
            answer = answers[int(rng.integers(len(answers)))]
            rec = await probe(jc, prompt, battle_id, answer, note, rng)
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
    """Clients of the serve config's ``[[judges]]`` (stablearena.judges), with its
    ``[injection]`` policy and classifier (one classifier shared by the judges)."""
    from ..judges import JudgeClient, injection_from_mapping, judges_from_toml

    policy, guard = injection_from_mapping(injection, "serve config: [injection]")
    if not entries:
        return []
    classifier = None
    if guard is not None:
        from ..endpoints import make_client
        from ..injection import InjectionClassifier

        classifier = InjectionClassifier(make_client(guard))
    return [
        JudgeClient(j, injection=policy, classifier=classifier)
        for j in judges_from_toml({"judges": entries}, "serve config")
    ]
