"""The statements of the battles the arena holds itself (docs/guides/arena-page.md): models'
endpoints, visitors, each held battle's prompt, state and answers, and the vote on it.

A held battle is stored in ``battles`` with ``expires_at = 0`` while its answers are being
generated, so that :func:`~.votes.record_vote` refuses a vote on it by any route (410) until
:func:`finish_held` marks it complete and gives it its lifetime; a failed battle keeps
``expires_at = 0`` and can never be voted on.
"""

from __future__ import annotations

import functools
import secrets
from dataclasses import replace
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .queries import bump_revision
from .tables import (
    annotators,
    answer_flags,
    battle_answers,
    battle_turns,
    battles,
    held_battles,
    images,
    model_endpoints,
    models,
    moderation_events,
    terms_acceptances,
    votes,
)
from .votes import VoteResult, cursor, insert_battles, record_vote

__all__ = [
    "set_endpoint",
    "drop_endpoint",
    "endpoint_rows",
    "set_auto_outage",
    "visitor_id",
    "annotator_by_id",
    "insert_held",
    "finish_held",
    "anonymous",
    "held_status",
    "accept_turn",
    "plan_turn",
    "plan_from",
    "accept_planned",
    "Turn",
    "TurnRefused",
    "stop_battle",
    "conversation",
    "judge_material",
    "open_held",
    "abandon_open",
    "closed_battles",
    "ENDED_BY_THE_PERSON",
    "ABANDONED",
    "record_page_vote",
    "OpenHeld",
    "held_columns",
    "conversations",
    "held_list",
    "judge_annotator",
    "record_judgement",
    "record_flags",
    "flag_counts",
    "non_anonymous_counts",
    "record_moderation",
    "moderation_counts",
    "accept_terms",
    "terms_accepted",
    "terms_count",
    "set_category",
]

#: The statuses of a held battle the person ended before a vote — stopped while it streamed
#: or left without a vote (*New battle*), or abandoned from the page (:func:`abandon_open`):
#: never votable, not counted, no longer open for the caps.
ENDED_BY_THE_PERSON = ("stopped", "abandoned")
#: The failure stored on a battle the person abandoned.
ABANDONED = "abandoned by the person"

#: The fields of an :class:`~stablearena.judging.endpoints.Answer` stored as they are (a
#: battle's turn, a chat's turn).
ANSWER_FIELDS = (
    "text",
    "ttft",
    "total_time",
    "prompt_tokens",
    "completion_tokens",
    "finish_reason",
)
#: The columns of a turn's answer (``battle_turns``) copied into the side's summary
#: (``battle_answers``: the last turn's answer; the style counts are the conversation's).
_SUMMARY = (*ANSWER_FIELDS, "failure", "failure_detail", "attempts")
_STYLE = ("style_tokens", "style_headers", "style_lists", "style_bold")
#: The per-side columns of ``battle_answers`` the export carries (besides the text).
ANSWER_COLUMNS = ("params", *_SUMMARY[1:], *_STYLE)


# ---------------------------------------------------------------------------------- endpoints
def set_endpoint(conn: Connection, name: str, config: str, now: float) -> bool:
    """Give model ``name`` the endpoint ``config`` (JSON, no key), creating the model when new;
    returns whether the model was created. Bumps the revision."""
    mid = conn.execute(sa.select(models.c.id).where(models.c.name == name)).scalar()
    created = mid is None
    if created:
        mid = conn.execute(
            models.insert().values(name=name, added_at=now).returning(models.c.id)
        ).scalar_one()
    old = conn.execute(
        sa.select(model_endpoints.c.config).where(model_endpoints.c.model_id == mid)
    ).scalar()
    if old is None:
        conn.execute(model_endpoints.insert().values(model_id=mid, config=config, updated_at=now))
    elif old != config:
        conn.execute(
            model_endpoints.update()
            .where(model_endpoints.c.model_id == mid)
            .values(config=config, updated_at=now)
        )
    else:
        return created
    bump_revision(conn)
    return created


def drop_endpoint(conn: Connection, model_id: int) -> bool:
    """Take the endpoint from a model (it stays a name); returns whether it had one."""
    n = conn.execute(model_endpoints.delete().where(model_endpoints.c.model_id == model_id))
    if n.rowcount:
        bump_revision(conn)
    return bool(n.rowcount)


def endpoint_rows(conn: Connection) -> list[Any]:
    """(model_id, name, config, auto_outage, outage, retired) of every model with an endpoint."""
    return conn.execute(
        sa.select(
            model_endpoints.c.model_id,
            models.c.name,
            model_endpoints.c.config,
            model_endpoints.c.auto_outage,
            models.c.outage,
            models.c.retired,
        )
        .join(models, models.c.id == model_endpoints.c.model_id)
        .order_by(model_endpoints.c.model_id)
    ).all()


def set_auto_outage(conn: Connection, model_id: int, on: bool) -> bool:
    """Put a model under outage (``on``) because its endpoint keeps failing, or lift an outage
    the breaker set (an outage an admin set stays). Returns whether anything changed."""
    row = conn.execute(
        sa.select(model_endpoints.c.auto_outage, models.c.outage)
        .join(models, models.c.id == model_endpoints.c.model_id)
        .where(model_endpoints.c.model_id == model_id)
    ).first()
    if row is None:
        return False
    auto, outage = bool(row[0]), bool(row[1])
    if not ((on and not outage) or (not on and auto)):  # already so, or an admin's outage
        return False
    conn.execute(models.update().where(models.c.id == model_id).values(outage=on))
    conn.execute(
        model_endpoints.update()
        .where(model_endpoints.c.model_id == model_id)
        .values(auto_outage=on)
    )
    bump_revision(conn)
    return True


# ---------------------------------------------------------------------------------- visitors
def visitor_id(engine: Engine, name: str, now: float, create: bool) -> int | None:
    """The id of the anonymous annotator (no key) ``name`` (``visitor-<hex>``); with
    ``create``, made when new (a visitor's row is made on its first battle, not when the page
    is opened: a crawler makes none). None: not stored (without ``create``)."""
    q = sa.select(annotators.c.id).where(annotators.c.name == name)
    with engine.connect() as conn:
        vid = conn.execute(q).scalar()
    if vid is None and create:
        try:
            with engine.begin() as conn:
                vid = conn.execute(
                    annotators.insert()
                    .values(name=name, role="annotator", created_at=now)
                    .returning(annotators.c.id)
                ).scalar_one()
        except sa.exc.IntegrityError:  # another worker made it a moment ago
            with engine.connect() as conn:
                vid = conn.execute(q).scalar_one()
    return None if vid is None else int(vid)


def annotator_by_id(conn: Connection, annotator_id: int) -> Any:
    """The annotator record ``annotator_id`` or None."""
    return conn.execute(sa.select(annotators).where(annotators.c.id == annotator_id)).first()


# ---------------------------------------------------------------------------------- battles
def anonymous(answers: list[dict[str, Any]]) -> bool:
    """Whether a battle with these ``battle_answers`` rows stays anonymous: no answer
    ``named`` a model or its maker (the names found by stablearena.judging.anonymity)."""
    return not any(a.get("named") for a in answers)


class OpenHeld(NamedTuple):
    """:func:`insert_held` refused the battle: the annotator (``mine``) or its address
    (``there``) already holds as many battles without a vote as its cap allows."""

    mine: int
    there: int


def insert_held(
    conn: Connection,
    row: dict[str, Any],
    held: dict[str, Any],
    revision: int | None,
    open_caps: tuple[int, int, float] | None = None,
    image: dict[str, Any] | None = None,
) -> list[str] | None | OpenHeld:
    """Store a served battle (``row``, as for :func:`~.votes.insert_battles`, stored with
    ``expires_at = 0``) and its prompt (``held``: prompt_id, prompt, category, address,
    served_at, open_until and owner, the serving process generating it: :mod:`.serving`; and
    ``mode`` "named" for a side-by-side battle of models the visitor picked, stored with
    ``battles.anony`` false) with status ``served``; the result of ``insert_battles``. With ``open_caps`` = (annotator's cap,
    address's cap, now), the battle is first counted against the caps on battles without a
    vote (:func:`open_held`) in the same transaction — exact across workers — and refused with
    :class:`OpenHeld` when either is reached. ``image``: a vision battle's image (hash,
    media_type, width, height, data: :func:`store_image`), stored with it."""
    if open_caps is not None:
        cap_mine, cap_there, now = open_caps
        mine, there = open_held(conn, row["annotator_id"], held.get("address"), now)
        if mine >= cap_mine or there >= cap_there:
            return OpenHeld(mine, there)
    refused = insert_battles(conn, [{**row, "expires_at": 0.0}], revision)
    if refused:
        return refused
    if refused is None:
        return None
    if image is not None:
        store_image(conn, image, held["served_at"])
        held = {**held, "image_hash": image["hash"]}
    conn.execute(
        _HELD_INSERT,
        {"battle_id": row["id"], "status": "served", "annotator_id": row["annotator_id"], **held},
    )
    if held.get("mode") == "named":  # models the visitor picked: never on the default board
        conn.execute(battles.update().where(battles.c.id == row["id"]).values(anony=False))
    return []


# The statements on every battle's path, built once and run with their parameters by name
# (``p_…``): building one took 0.1–0.3 ms of the writer's time, and a battle needs several (the
# vote's own statements are raw SQL: votes._hot).
_HELD_INSERT = held_battles.insert()
# the held battles open at p_now of one annotator (p_key: its id), of one address (p_key)
_OPEN_MINE, _OPEN_THERE = (
    sa.select(sa.func.count())
    .select_from(held_battles)
    .where(column == sa.bindparam("p_key"), held_battles.c.open_until > sa.bindparam("p_now"))
    for column in (held_battles.c.annotator_id, held_battles.c.address)
)
_VOTED = (
    held_battles.update()
    .where(
        held_battles.c.battle_id == sa.bindparam("p_bid"), held_battles.c.open_until.is_not(None)
    )
    .values(open_until=None)
)
_VOTE_SEEN = (
    sa.select(battles.c.anony, held_battles.c.mode)
    .outerjoin(held_battles, held_battles.c.battle_id == battles.c.id)
    .where(battles.c.id == sa.bindparam("p_bid"))
)
#: by whether the battle's answers named a model (anony false from then on)
_EXPIRES = {
    named: battles.update()
    .where(battles.c.id == sa.bindparam("p_bid"))
    .values(expires_at=sa.bindparam("p_expires"), **({"anony": False} if named else {}))
    for named in (False, True)
}


@functools.cache
def _finish_statement(owned: bool, failed: bool) -> Any:
    """:func:`finish_held`'s update of the held row, for a turn with an ``owner`` or not and a
    failure or not."""
    hb = held_battles.c
    mine = [hb.battle_id == sa.bindparam("p_bid"), hb.status == "served"]
    if owned:
        mine.append(hb.owner == sa.bindparam("p_owner"))
    done: dict[str, Any] = {
        "status": sa.bindparam("p_status"),
        "failure": sa.bindparam("p_failure"),
        "completed_at": sa.bindparam("p_now"),
        "owner": None,
    }
    if failed:
        done["open_until"] = None
    return held_battles.update().where(*mine).values(**done)


def store_image(conn: Connection, image: dict[str, Any], now: float) -> None:
    """Store a cleaned image (``hash``, ``media_type``, ``width``, ``height``, ``data``:
    service/images.py) unless a row of its hash exists: one row per content, whatever number of
    battles refer to it (a race with another worker storing the same image is the writer's
    unique-key retry: this then sees that row)."""
    there = conn.execute(sa.select(images.c.hash).where(images.c.hash == image["hash"])).first()
    if there is None:
        conn.execute(
            images.insert().values(
                hash=image["hash"],
                media_type=image["media_type"],
                width=image["width"],
                height=image["height"],
                data=image["data"],
                stored_at=now,
            )
        )


def battle_image(conn: Connection, battle_id: str) -> dict[str, Any] | None:
    """A held battle's image (``hash``, ``media_type``, ``width``, ``height``, ``data``), or
    None for a battle without one."""
    r = conn.execute(
        sa.select(images)
        .join(held_battles, held_battles.c.image_hash == images.c.hash)
        .where(held_battles.c.battle_id == battle_id)
    ).first()
    return None if r is None else {k: v for k, v in r._mapping.items() if k != "stored_at"}


def image_files(engine: Engine) -> list[dict[str, Any]]:
    """Every stored image (``hash``, ``media_type``, ``data``), oldest first: the export's
    images folder."""
    with engine.connect() as conn:
        return [
            dict(r._mapping)
            for r in conn.execute(
                sa.select(images.c.hash, images.c.media_type, images.c.data).order_by(
                    images.c.stored_at, images.c.hash
                )
            )
        ]


def finish_held(
    conn: Connection,
    battle_id: str,
    answers: list[dict[str, Any]],
    failure: str | None,
    now: float,
    ttl: float,
    turn: int = 1,
    attempt: int = 1,
    prompt: str | None = None,
    owner: str | None = None,
) -> bool:
    """Store both answers of a turn — rows of ``battle_turns`` (``turn``, ``attempt``, the
    user's message ``prompt``: the battle's own on turn 1) and the sides' summaries in
    ``battle_answers`` (the last turn's answer, style counts over the whole conversation) — and
    mark the battle ``complete``, votable for ``ttl`` seconds from now, or, with ``failure``,
    ``failed`` (never votable). A battle stopped meanwhile (:func:`stop_battle`) stays
    ``stopped``: its answers are kept, it never becomes votable. The one place where a turn's
    answers are finished (an answer check hooks in here or in its caller,
    ``BattleHolder.generate``). A turn with an answer that ``named`` a model
    (stablearena.judging.anonymity) makes the battle non-anonymous (``battles.anony`` false, never
    back): its vote will not be counted on the default board.

    With ``owner`` (the serving process that generated the turn: :mod:`.serving`), the turn is
    stored only while that process still owns the battle, or once the person ended it
    (``stopped``, ``abandoned``: what came is kept): a battle a live process closed meanwhile at
    its last complete turn, believing the owner dead (:func:`.serving.close_orphans`), keeps
    that turn as its last. Returns whether the turn was stored."""
    status = "failed" if failure else "complete"
    params = {"p_bid": battle_id, "p_status": status, "p_failure": failure, "p_now": now}
    if owner is not None:
        params["p_owner"] = owner
    stmt = _finish_statement(owner is not None, bool(failure))
    changed = conn.execute(stmt, params).rowcount
    if not changed and owner is not None:
        now_status = held_status(conn, battle_id)
        if now_status not in ENDED_BY_THE_PERSON:
            return False
    if prompt is None:
        prompt = conn.execute(
            sa.select(held_battles.c.prompt).where(held_battles.c.battle_id == battle_id)
        ).scalar_one()
    first = turn == 1 and attempt == 1
    rows = []
    for a in answers:  # every row with every column (one executemany)
        rows.append(
            {
                **dict.fromkeys(_SUMMARY + _STYLE),
                **{k: v for k, v in a.items() if k not in ("params", "named")},
                "battle_id": battle_id,
                "turn": turn,
                "attempt": attempt,
                "prompt": prompt,
                "asked_at": now,
            }
        )
    cur = cursor(conn)  # the driver's cursor: both inserts are on every battle's path
    if rows:
        cur.executemany(_insert_sql(conn, "battle_turns"), [_values(r, _TURN_COLS) for r in rows])
    if first and answers:
        cur.executemany(
            _insert_sql(conn, "battle_answers"),
            [_values({**a, "battle_id": battle_id}, _ANSWER_COLS) for a in answers],
        )
    for a in answers if not first else ():
        summary = {k: a.get(k) for k in _SUMMARY}
        if a.get("named"):  # the names the side said last (the admin view counts them)
            summary["named"] = a["named"]
        summary.update(_style_sums(conn, battle_id, a["side"]))
        done = conn.execute(
            battle_answers.update()
            .where(battle_answers.c.battle_id == battle_id, battle_answers.c.side == a["side"])
            .values(**summary)
        )
        if not done.rowcount:
            conn.execute(battle_answers.insert().values(**{**a, **summary, "battle_id": battle_id}))
    if changed and not failure:
        stmt = _EXPIRES[not anonymous(answers)]
        conn.execute(stmt, {"p_bid": battle_id, "p_expires": now + ttl})
    return True


_ANSWER_COLS = tuple(c.name for c in battle_answers.columns)
_TURN_COLS = tuple(c.name for c in battle_turns.columns)
_INSERTS: dict[tuple[str, str], str] = {}


def _insert_sql(conn: Connection, table: str) -> str:
    """``INSERT INTO table (every column) VALUES (…)`` in the driver's parameter style."""
    key = (conn.dialect.name, table)
    sql = _INSERTS.get(key)
    if sql is None:
        cols = _ANSWER_COLS if table == "battle_answers" else _TURN_COLS
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        sql = _INSERTS[key] = (
            f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join([mark] * len(cols))})"
        )
    return sql


def _values(row: dict[str, Any], cols: tuple[str, ...]) -> tuple[Any, ...]:
    unknown = set(row) - set(cols)
    if unknown:
        raise ValueError(f"not columns of the table: {sorted(unknown)}")
    return tuple(row.get(c) for c in cols)


def _current(rows: list[Any]) -> dict[tuple[int, str], Any]:
    """The current answer of each (turn, side): its highest attempt."""
    out: dict[tuple[int, str], Any] = {}
    for r in rows:
        got = out.get((r.turn, r.side))
        if got is None or r.attempt > got.attempt:
            out[(r.turn, r.side)] = r
    return out


def _style_sums(conn: Connection, battle_id: str, side: str) -> dict[str, int]:
    """The style counts of one side's whole conversation: summed over each turn's current
    answer (stablearena.data.style_features counts each answer; a conversation's are their sum)."""
    rows = conn.execute(
        sa.select(
            battle_turns.c.turn, battle_turns.c.attempt, battle_turns.c.side, *_style_cols()
        ).where(battle_turns.c.battle_id == battle_id, battle_turns.c.side == side)
    ).all()
    cur = _current(rows)
    return {c: sum(int(getattr(r, c) or 0) for r in cur.values()) for c in _STYLE}


def _style_cols() -> list[Any]:
    return [battle_turns.c[c] for c in _STYLE]


class Turn(NamedTuple):
    """A follow-up or a regenerated turn accepted by :func:`accept_turn`: its number, attempt
    and user message, and per side (``a``, ``b``) the conversation before it, as chat messages
    (``{"role": "user" | "assistant", "content"}``, that side's own answers)."""

    turn: int
    attempt: int
    prompt: str
    history: dict[str, list[dict[str, str]]]
    model_a: int
    model_b: int
    #: the battle's regenerations before this turn
    regenerated: int = 0


class TurnRefused(NamedTuple):
    """:func:`accept_turn` or :func:`stop_battle` refused: the HTTP status, the error code and
    a message that says why and what to do."""

    status: int
    code: str
    message: str


def accept_turn(
    conn: Connection,
    battle_id: str,
    annotator_id: int,
    prompt: str | None,
    now: float,
    max_turns: int,
    max_regenerations: int,
    max_chars: int,
    owner: str | None = None,
) -> Turn | TurnRefused:
    """Accept a follow-up turn (``prompt``) or, with ``prompt`` None, a regeneration of the last
    turn (both answers sampled again; the old ones stay stored as an earlier attempt) on a
    complete held battle of ``annotator_id`` with no vote, within the limits
    (:func:`plan_turn`). The battle becomes ``served`` (not votable) until :func:`finish_held`
    stores the turn — in one statement, so two posts at once accept one turn; ``owner``: the
    serving process generating it (:mod:`.serving`). The one place in the store where a
    follow-up prompt is accepted (the first turn's: :func:`insert_held`)."""
    got = plan_turn(
        conn, battle_id, annotator_id, prompt, now, max_turns, max_regenerations, max_chars
    )
    if isinstance(got, TurnRefused):
        return got
    refused = _serve_turn(conn, battle_id, owner)
    return got if refused is None else refused


def accept_planned(
    conn: Connection,
    battle_id: str,
    annotator_id: int,
    turn: int,
    attempt: int,
    now: float,
    owner: str | None = None,
) -> TurnRefused | None:
    """Accept turn ``turn`` (attempt ``attempt``) that a worker planned from the conversation
    it generated itself (its limits checked there): refused unless the battle is a complete
    held battle of ``annotator_id`` with no vote, not expired, whose stored conversation is
    still the one planned on — ``turn - 1`` turns for a follow-up, ``attempt - 1`` attempts of
    turn ``turn`` for a regeneration (else 409 ``busy``: plan again, :func:`accept_turn`).
    Then, as :func:`accept_turn`, the battle becomes ``served`` (by ``owner``). None: accepted."""
    h = conn.execute(
        sa.select(held_battles.c.status, held_battles.c.annotator_id, battles.c.expires_at)
        .join(battles, battles.c.id == held_battles.c.battle_id)
        .where(held_battles.c.battle_id == battle_id)
    ).first()
    if h is None or h.annotator_id != annotator_id or h.status != "complete":
        return TurnRefused(409, "busy", "the battle changed meanwhile; try again")
    if now > h.expires_at:
        return TurnRefused(410, "expired", f"battle {battle_id} expired; start a new battle")
    top = conn.execute(
        sa.select(sa.func.max(battle_turns.c.turn)).where(battle_turns.c.battle_id == battle_id)
    ).scalar()
    tries = conn.execute(
        sa.select(sa.func.max(battle_turns.c.attempt)).where(
            battle_turns.c.battle_id == battle_id, battle_turns.c.turn == turn
        )
    ).scalar()
    stored = (top, tries) == ((turn - 1, None) if attempt == 1 else (turn, attempt - 1))
    voted = _has_vote(conn, battle_id)
    if voted or not stored:
        return TurnRefused(409, "busy", "the battle changed meanwhile; try again")
    return _serve_turn(conn, battle_id, owner)


def _has_vote(conn: Connection, battle_id: str) -> bool:
    """Whether battle ``battle_id`` has a vote (which ends it: no turn, no stop)."""
    return bool(
        conn.execute(sa.select(sa.exists().where(votes.c.battle_id == battle_id))).scalar_one()
    )


def _serve_turn(conn: Connection, battle_id: str, owner: str | None) -> TurnRefused | None:
    """A complete battle becomes ``served`` by ``owner`` (not votable, its lifetime 0) while its
    next turn generates — in one statement, so of two turns accepted at once one gets 409
    ``busy``."""
    changed = conn.execute(
        held_battles.update()
        .where(held_battles.c.battle_id == battle_id, held_battles.c.status == "complete")
        .values(status="served", owner=owner)
    ).rowcount
    if not changed:
        return TurnRefused(409, "busy", "another turn of this battle was just accepted; wait")
    conn.execute(battles.update().where(battles.c.id == battle_id).values(expires_at=0.0))
    return None


def plan_turn(
    conn: Connection,
    battle_id: str,
    annotator_id: int,
    prompt: str | None,
    now: float,
    max_turns: int,
    max_regenerations: int,
    max_chars: int,
) -> Turn | TurnRefused:
    """The turn :func:`accept_turn` would accept, read only (the worker starts both calls with
    it while the writer accepts it): the battle is a complete held battle of ``annotator_id``
    with no vote, not expired, and the turn is within the limits — at most ``max_turns`` turns,
    ``max_regenerations`` regenerations per battle, and ``max_chars`` characters in the
    conversation either model would be sent (the user's messages and its own answers)."""
    h = conn.execute(
        sa.select(
            held_battles.c.status,
            held_battles.c.annotator_id,
            battles.c.expires_at,
            battles.c.model_a,
            battles.c.model_b,
        )
        .join(battles, battles.c.id == held_battles.c.battle_id)
        .where(held_battles.c.battle_id == battle_id)
    ).first()
    if h is None:
        return TurnRefused(404, "not_found", f"no held battle {battle_id}")
    if h.annotator_id != annotator_id:
        return TurnRefused(403, "forbidden", f"battle {battle_id} was not served to you")
    voted = _has_vote(conn, battle_id)
    if voted:
        return TurnRefused(
            409, "voted", "this battle has its vote, so it is over; start a new battle"
        )
    why = {
        "served": ("busy", "the answers of the last turn are still coming; wait, or stop"),
        "failed": ("failed", "a model failed to answer; this battle is over, start a new one"),
        "stopped": ("stopped", "this battle was stopped; start a new battle"),
        "abandoned": ("abandoned", "this battle was abandoned; start a new battle"),
    }.get(h.status)
    if why is not None:
        return TurnRefused(409, why[0], why[1])
    if now > h.expires_at:
        return TurnRefused(410, "expired", f"battle {battle_id} expired; start a new battle")
    rows = conn.execute(
        sa.select(
            battle_turns.c.turn,
            battle_turns.c.attempt,
            battle_turns.c.side,
            battle_turns.c.prompt,
            battle_turns.c.text,
        ).where(battle_turns.c.battle_id == battle_id)
    ).all()
    cur = _current(rows)
    turns = max((t for t, _ in cur), default=0)
    conv: dict[str, list[dict[str, str]]] = {"a": [], "b": []}
    for t in range(1, turns + 1):
        for side in "ab":
            r = cur[(t, side)]
            conv[side].append({"role": "user", "content": r.prompt})
            conv[side].append({"role": "assistant", "content": r.text or ""})
    regenerated = sum(1 for r in rows if r.side == "a") - turns
    last = cur[(turns, "a")].attempt if turns else 0
    return plan_from(
        conv,
        regenerated,
        last,
        (int(h.model_a), int(h.model_b)),
        prompt,
        max_turns,
        max_regenerations,
        max_chars,
    )


def plan_from(
    conv: dict[str, list[dict[str, str]]],
    regenerated: int,
    attempt: int,
    models: tuple[int, int],
    prompt: str | None,
    max_turns: int,
    max_regenerations: int,
    max_chars: int,
) -> Turn | TurnRefused:
    """The next turn of conversation ``conv`` (per side, user and assistant messages; its last
    turn's current answer is attempt ``attempt``; ``regenerated`` regenerations so far): a
    follow-up ``prompt`` or, with None, the last turn again — within the limits, else why not
    (a 422 that names the limit and the value). The one check of the limits, for
    :func:`plan_turn` (a read of the stored battle) and for a worker's conversation in memory."""
    turns = len(conv["a"]) // 2
    if prompt is None:  # regenerate the last turn
        if regenerated >= max_regenerations:
            return TurnRefused(
                422,
                "limit",
                f"this battle was regenerated {regenerated} times, the most "
                f"arena_page.max_regenerations = {max_regenerations} allows; vote, or start a "
                "new battle",
            )
        turn, attempt = turns, attempt + 1
        prompt = conv["a"][-2]["content"]
        history = {side: conv[side][:-2] for side in "ab"}
    else:
        turn, attempt = turns + 1, 1
        if turn > max_turns:
            return TurnRefused(
                422,
                "limit",
                f"this battle has {turns} turns, the most arena_page.max_turns = {max_turns} "
                "allows; vote, or start a new battle",
            )
        history = {side: list(conv[side]) for side in "ab"}
    size = max(sum(len(m["content"]) for m in history[s]) for s in "ab") + len(prompt)
    if size > max_chars:
        return TurnRefused(
            422,
            "limit",
            f"the conversation would be {size} characters (the prompts and one model's "
            f"answers), more than arena_page.max_conversation_chars = {max_chars}; vote, or "
            "start a new battle",
        )
    return Turn(turn, attempt, prompt, history, models[0], models[1], regenerated)


def stop_battle(
    conn: Connection, battle_id: str, annotator_id: int, now: float
) -> str | TurnRefused:
    """Stop a held battle of ``annotator_id`` that has no vote: status ``stopped``, never
    votable, not counted, no longer open for the caps. Returns the battle's status after
    (``stopped``; ``failed`` stays failed) or why not."""
    h = conn.execute(
        sa.select(held_battles.c.status, held_battles.c.annotator_id).where(
            held_battles.c.battle_id == battle_id
        )
    ).first()
    if h is None:
        return TurnRefused(404, "not_found", f"no held battle {battle_id}")
    if h.annotator_id != annotator_id:
        return TurnRefused(403, "forbidden", f"battle {battle_id} was not served to you")
    voted = _has_vote(conn, battle_id)
    if voted:
        return TurnRefused(409, "voted", "this battle has its vote; it can no longer be stopped")
    if h.status == "failed" or h.status in ENDED_BY_THE_PERSON:
        return str(h.status)
    conn.execute(
        held_battles.update()
        .where(held_battles.c.battle_id == battle_id)
        .values(status="stopped", failure="stopped by the person", completed_at=now)
        .values(open_until=None, owner=None)
    )
    conn.execute(battles.update().where(battles.c.id == battle_id).values(expires_at=0.0))
    return "stopped"


def conversation(conn: Connection, battle_id: str, history: bool = False) -> dict[str, Any] | None:
    """A held battle's conversation per side, as FastChat's ``conversation_a`` /
    ``conversation_b``: ``{"a": [{"role": "user", "content"}, {"role": "assistant",
    "content"}, …], "b": […], "turns": n}`` — each turn's current answer (its last attempt;
    a failed or stopped answer as far as it came, ``""`` when nothing came). With ``history``,
    also ``"replaced"``: the older attempts of regenerated turns, ``[{"turn", "attempt",
    "a", "b"}]``. None: no such held battle. The one reader of a battle's conversation (the
    export, the judges and the style counts read it)."""
    rows = conn.execute(
        sa.select(
            battle_turns.c.turn,
            battle_turns.c.attempt,
            battle_turns.c.side,
            battle_turns.c.prompt,
            battle_turns.c.text,
        )
        .where(battle_turns.c.battle_id == battle_id)
        .order_by(battle_turns.c.turn, battle_turns.c.attempt)
    ).all()
    if not rows:
        prompt = conn.execute(
            sa.select(held_battles.c.prompt).where(held_battles.c.battle_id == battle_id)
        ).scalar()
        if prompt is None:
            return None
        return {"a": [], "b": [], "turns": 0, **({"replaced": []} if history else {})}
    return _conversation_of(rows, history)


def _conversation_of(rows: list[Any], history: bool = False) -> dict[str, Any]:
    """:func:`conversation` of one battle's ``battle_turns`` rows (turn, attempt, side, prompt,
    text), ordered by turn and attempt."""
    cur = _current(rows)
    turns = max(t for t, _ in cur)
    out: dict[str, Any] = {"a": [], "b": [], "turns": turns}
    for t in range(1, turns + 1):
        for side in "ab":
            r = cur.get((t, side))
            if r is None:
                continue
            out[side].append({"role": "user", "content": r.prompt})
            out[side].append({"role": "assistant", "content": r.text or ""})
    if history:
        old: dict[tuple[int, int], dict[str, Any]] = {}
        for r in rows:
            if cur.get((r.turn, r.side)) is not r:
                rec = old.setdefault((r.turn, r.attempt), {"turn": r.turn, "attempt": r.attempt})
                rec[r.side] = r.text or ""
        out["replaced"] = [old[k] for k in sorted(old)]
    return out


def judge_material(conn: Connection, battle_id: str) -> dict[str, Any] | None:
    """What the judges need of a complete held battle, read when its vote closes it: the
    battle's row (``battles`` columns and ``prompt_id``), its prompt and category, the sides'
    ``battle_answers`` rows, its ``battle_turns`` rows, its conversation
    (:func:`conversation`) and its image (:func:`battle_image`, None without one). None: not a
    complete held battle."""
    h = conn.execute(
        sa.select(
            held_battles.c.prompt,
            held_battles.c.prompt_id,
            held_battles.c.status,
            held_battles.c.image_hash,
        ).where(held_battles.c.battle_id == battle_id)
    ).first()
    if h is None or h.status != "complete":
        return None
    row = dict(conn.execute(sa.select(battles).where(battles.c.id == battle_id)).one()._mapping)
    row["prompt_id"] = h.prompt_id
    answers = [
        {k: v for k, v in r._mapping.items() if k != "battle_id"}
        for r in conn.execute(
            sa.select(battle_answers).where(battle_answers.c.battle_id == battle_id)
        )
    ]
    turns = [
        {k: v for k, v in r._mapping.items() if k != "battle_id"}
        for r in conn.execute(sa.select(battle_turns).where(battle_turns.c.battle_id == battle_id))
    ]
    return {
        "row": row,
        "prompt": h.prompt,
        "answers": answers,
        "turns": turns,
        "conversation": conversation(conn, battle_id),
        "image": battle_image(conn, battle_id) if h.image_hash else None,
    }


def held_status(conn: Connection, battle_id: str) -> str | None:
    """The status of a held battle (``served``, ``complete``, ``failed``, ``stopped``,
    ``abandoned``) or None."""
    return conn.execute(
        sa.select(held_battles.c.status).where(held_battles.c.battle_id == battle_id)
    ).scalar()


def open_held(
    conn: Connection, annotator_id: int, address: str | None, now: float
) -> tuple[int, int]:
    """Held battles open at ``now`` — served within their lifetime, not voted on from the page,
    not failed (``held_battles.open_until``) — of the annotator, and from ``address``. Each
    count reads only the open battles (an index on (annotator_id, open_until) and one on
    (address, open_until)), so it costs the same however many battles the arena holds."""
    mine = conn.execute(_OPEN_MINE, {"p_key": annotator_id, "p_now": now}).scalar_one()
    there = 0
    if address:
        there = conn.execute(_OPEN_THERE, {"p_key": address, "p_now": now}).scalar_one()
    return int(mine), int(there)


def abandon_open(conn: Connection, annotator_id: int, now: float) -> list[str]:
    """Abandon every held battle of ``annotator_id`` open at ``now`` (:func:`open_held`: the
    ones the visitor's cap counts) that has no vote — a page closed, a stream cut by a host
    that died, a battle the visitor cannot reach any more: status ``abandoned``
    (:data:`ABANDONED`), never votable, not counted, no longer open for the caps. A turn
    generating meanwhile on a live host keeps what came of its answers (:func:`finish_held`).
    Returns their ids, in the order they were served."""
    ids = list(
        conn.execute(
            sa.select(held_battles.c.battle_id)
            .where(held_battles.c.annotator_id == annotator_id, held_battles.c.open_until > now)
            .where(~sa.exists().where(votes.c.battle_id == held_battles.c.battle_id))
            .order_by(held_battles.c.served_at)
        ).scalars()
    )
    if not ids:
        return []
    conn.execute(
        held_battles.update()
        .where(held_battles.c.battle_id.in_(ids))
        .values(status="abandoned", failure=ABANDONED, completed_at=now)
        .values(open_until=None, owner=None)
    )
    conn.execute(battles.update().where(battles.c.id.in_(ids)).values(expires_at=0.0))
    return ids


def closed_battles(engine: Engine, ids: list[str]) -> set[str]:
    """The battles among ``ids`` no longer open for the caps on battles without a vote: with a
    vote, or held battles no longer open (voted from the page, failed, stopped, abandoned —
    through any worker or host). Read by index, only when a worker's own count is at a cap."""
    if not ids:
        return set()
    with engine.connect() as conn:
        voted = sa.select(votes.c.battle_id).where(votes.c.battle_id.in_(ids))
        shut = sa.select(held_battles.c.battle_id).where(
            held_battles.c.battle_id.in_(ids), held_battles.c.open_until.is_(None)
        )
        return set(conn.execute(sa.union(voted, shut)).scalars())


def record_page_vote(
    conn: Connection,
    battle_id: str,
    annotator_id: int,
    outcome: int,
    now: float,
    correction_window: float,
    revision: int | None = None,
) -> VoteResult:
    """:func:`~.votes.record_vote` for a vote from the page (nothing when the registry changed
    since ``revision``, e.g. the key revoked: ``stale``); once recorded, the battle no longer
    counts against the caps on battles without a vote (:func:`open_held`)."""
    res = record_vote(conn, battle_id, annotator_id, outcome, now, correction_window, revision)
    if res.kind in ("new", "replay", "corrected"):
        conn.execute(_VOTED, {"p_bid": battle_id})
        got = conn.execute(_VOTE_SEEN, {"p_bid": battle_id}).first()
        anony = None if got is None else got.anony
        res = replace(
            res,
            anony=None if anony is None else bool(anony),
            picked=got is not None and got.mode == "named",
        )
    return res


def held_columns(engine: Engine, texts: bool) -> dict[str, dict[str, Any]]:
    """Per held battle id, the columns the export adds: prompt_id, category, status, failure
    and, per side s in a/b, ``{column}_{s}`` for :data:`ANSWER_COLUMNS` (and, with ``texts``,
    ``prompt_text``, ``answer_a``/``answer_b`` and, for a judge's battle, ``judge_reasoning``:
    its replies to both orders as JSON text, ``[{"order", "winner", "reasoning"}, …]``). A
    vision battle adds ``image_hash``, and its conversations' first user message is FastChat's
    vision form ``{"role": "user", "content": [text, [image_hash]]}`` (the files:
    :func:`image_files`)."""
    from ...data.language import language_of

    with engine.connect() as conn:
        held = conn.execute(sa.select(held_battles)).all()
        answers = conn.execute(sa.select(battle_answers)).all()
        if texts:
            talks = conversations(conn)
        else:  # the number of turns only
            talks = {
                bid: {"turns": int(n)}
                for bid, n in conn.execute(
                    sa.select(battle_turns.c.battle_id, sa.func.max(battle_turns.c.turn)).group_by(
                        battle_turns.c.battle_id
                    )
                )
            }
    out: dict[str, dict[str, Any]] = {}
    for h in held:
        rec: dict[str, Any] = {
            "prompt_id": h.prompt_id,
            "category": h.category,
            "status": h.status,
            "failure": h.failure,
            "turn": max(1, talks.get(h.battle_id, {}).get("turns", 1)),
            "language": language_of(h.prompt),
        }
        if h.image_hash is not None:
            rec["image_hash"] = h.image_hash
        if texts:
            rec["prompt_text"] = h.prompt
            talk = talks.get(h.battle_id, {})
            for side in ("a", "b"):  # no answer stored: the prompt alone
                conv = talk.get(side) or [{"role": "user", "content": h.prompt}]
                if h.image_hash is not None:  # FastChat's vision schema: [text, [image hashes]]
                    first, *rest = conv
                    conv = [{**first, "content": [first["content"], [h.image_hash]]}, *rest]
                rec[f"conversation_{side}"] = conv
            if h.judge_reasoning is not None:  # a judge's battle: its replies to both orders
                rec["judge_reasoning"] = h.judge_reasoning  # JSON text (every format holds it)
        out[h.battle_id] = rec
    for a in answers:
        rec = out.setdefault(a.battle_id, {})
        for c in ANSWER_COLUMNS:
            rec[f"{c}_{a.side}"] = getattr(a, c)
        if texts:
            rec[f"answer_{a.side}"] = a.text
    return out


def conversations(conn: Connection) -> dict[str, dict[str, Any]]:
    """:func:`conversation` of every held battle with answers, by battle id, read in one
    query (the export's reader: ``conversation_a``/``conversation_b`` and ``turn`` of FastChat's
    public battle schema)."""
    rows = conn.execute(
        sa.select(
            battle_turns.c.battle_id,
            battle_turns.c.turn,
            battle_turns.c.attempt,
            battle_turns.c.side,
            battle_turns.c.prompt,
            battle_turns.c.text,
        ).order_by(battle_turns.c.battle_id, battle_turns.c.turn, battle_turns.c.attempt)
    ).all()
    by: dict[str, list[Any]] = {}
    for r in rows:
        by.setdefault(r.battle_id, []).append(r)
    return {bid: _conversation_of(rs) for bid, rs in by.items()}


def held_list(engine: Engine, status: str | None, limit: int) -> list[dict[str, Any]]:
    """The newest held battles (of ``status`` when given): id, models, status, failure, times,
    whether voted."""
    ma, mb = models.alias("ma"), models.alias("mb")
    q = (
        sa.select(
            held_battles.c.battle_id,
            held_battles.c.status,
            held_battles.c.failure,
            held_battles.c.category,
            held_battles.c.served_at,
            held_battles.c.completed_at,
            ma.c.name.label("model_a"),
            mb.c.name.label("model_b"),
            sa.exists().where(votes.c.battle_id == held_battles.c.battle_id).label("voted"),
        )
        .join(battles, battles.c.id == held_battles.c.battle_id)
        .join(ma, ma.c.id == battles.c.model_a)
        .join(mb, mb.c.id == battles.c.model_b)
        .order_by(held_battles.c.served_at.desc())
        .limit(limit)
    )
    if status:
        q = q.where(held_battles.c.status == status)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(q).all()]


def arena_secret(engine: Engine) -> bytes:
    """The key that signs visitors' cookies (made on first use, kept in ``meta``, shared by
    every worker)."""
    from .queries import get_meta, set_meta

    for _ in range(3):
        with engine.begin() as conn:
            got = get_meta(conn, "arena_secret")
            if got is None:
                try:
                    set_meta(conn, "arena_secret", secrets.token_hex(32))
                except sa.exc.IntegrityError:  # another worker made it first
                    continue
                got = get_meta(conn, "arena_secret")
        return bytes.fromhex(got)
    raise RuntimeError("could not create the arena's cookie key")


def judge_annotator(conn: Connection, name: str, now: float) -> int:
    """The id of the annotator ``name`` (a judge), created (without a key) when new."""
    aid = conn.execute(sa.select(annotators.c.id).where(annotators.c.name == name)).scalar()
    if aid is None:
        aid = conn.execute(
            annotators.insert()
            .values(name=name, role="annotator", created_at=now)
            .returning(annotators.c.id)
        ).scalar_one()
    return int(aid)


def record_judgement(
    conn: Connection,
    row: dict[str, Any],
    judge_id: int,
    verdict: str,
    now: float,
    ttl: float,
    held: dict[str, Any],
    answers: list[dict[str, Any]],
    turns: list[dict[str, Any]] | None = None,
) -> VoteResult:
    """A judge's vote on a completed held battle: a battle of the same pair served to the judge
    (``row``: the held battle's row with a new id), stored complete
    with its prompt (``held``) and the judged ``answers``, and the vote — the judgement's
    ``verdict`` (``"x"``: model A, ``"y"``: model B, ``"tie"``) — in one transaction."""
    insert_battles(
        conn, [{**row, "annotator_id": judge_id, "served_at": now, "expires_at": now + ttl}]
    )
    if not anonymous(answers):  # the judge read a name too: its vote is left out alike
        conn.execute(battles.update().where(battles.c.id == row["id"]).values(anony=False))
    conn.execute(held_battles.insert().values(battle_id=row["id"], **held))
    for a in answers:  # the same answers as the battle judged
        conn.execute(battle_answers.insert().values(battle_id=row["id"], **a))
    if turns:  # and the same conversation, turn by turn
        conn.execute(battle_turns.insert(), [{**t, "battle_id": row["id"]} for t in turns])
    outcome = {"x": 0, "y": 1, "tie": 2}[verdict]  # codes of tables.OUTCOMES
    return record_vote(conn, row["id"], judge_id, outcome, now, 0.0)


def record_flags(
    conn: Connection,
    battle_id: str,
    answers: list[dict[str, Any]],
    report: dict[str, Any],
    now: float,
) -> int:
    """The answers of held battle ``battle_id`` that talked to the judge: ``report`` is a
    judgement's injection report (``{"x": rules, "y": rules, "action"}``, side a = x), one row
    per flagged answer. Returns the rows written (none twice: a battle is flagged once)."""
    model = {a["side"]: a["model_id"] for a in answers}
    rows = [
        {
            "battle_id": battle_id,
            "side": side,
            "model_id": model[side],
            "rules": ",".join(report[key]),
            "action": str(report["action"]),
            "flagged_at": now,
        }
        for side, key in (("a", "x"), ("b", "y"))
        if report.get(key) and side in model
    ]
    if not rows:
        return 0
    seen = conn.execute(
        sa.select(sa.func.count())
        .select_from(answer_flags)
        .where(answer_flags.c.battle_id == battle_id)
    ).scalar()
    if seen:
        return 0
    conn.execute(answer_flags.insert(), rows)
    return len(rows)


def flag_counts(engine: Engine) -> list[dict[str, Any]]:
    """Per model, the held battles in which its answer talked to the judge, by action, newest
    first: ``{"model", "battles", "actions": {action: n}, "last"}``, most flagged first."""
    q = (
        sa.select(
            models.c.name,
            answer_flags.c.action,
            sa.func.count().label("n"),
            sa.func.max(answer_flags.c.flagged_at).label("last"),
        )
        .join(models, models.c.id == answer_flags.c.model_id)
        .group_by(models.c.name, answer_flags.c.action)
    )
    out: dict[str, dict[str, Any]] = {}
    with engine.connect() as conn:
        for name, action, n, last in conn.execute(q):
            row = out.setdefault(name, {"model": name, "battles": 0, "actions": {}, "last": 0.0})
            row["battles"] += int(n)
            row["actions"][action] = int(n)
            row["last"] = max(row["last"], float(last))
    return sorted(out.values(), key=lambda r: (-r["battles"], r["model"]))


def judge_votes(engine: Engine) -> list[dict[str, Any]]:
    """The LLM judges' current votes on held battles (battles of strategy ``judge``) as
    judgement records — ``judge``, ``x`` (model A), ``y`` (model B), ``outcome`` x/y/tie
    (both-bad counts as a tie) — for :func:`stablearena.judging.injection.judge_disagreement`."""
    a = models.alias("ma")
    b = models.alias("mb")
    q = (
        sa.select(annotators.c.name, a.c.name, b.c.name, votes.c.outcome)
        .select_from(votes)
        .join(battles, battles.c.id == votes.c.battle_id)
        .join(annotators, annotators.c.id == votes.c.annotator_id)
        .join(a, a.c.id == votes.c.model_a)
        .join(b, b.c.id == votes.c.model_b)
        .where(battles.c.strategy == "judge", votes.c.superseded == sa.false())
    )
    code = {0: "x", 1: "y", 2: "tie", 3: "tie"}
    with engine.connect() as conn:
        return [
            {"judge": j, "x": x, "y": y, "outcome": code.get(int(o))}
            for j, x, y, o in conn.execute(q)
        ]


def non_anonymous_counts(engine: Engine) -> list[dict[str, Any]]:
    """Per model, the held battles in which its own answer named a model or its maker
    (``battle_answers.named``; stablearena.judging.anonymity) — ``battles``, the names said most
    often (``names``: {name: n}) — and the current votes on non-anonymous battles it took
    part in (``votes_left_out``: in the log and the export with ``anony`` false, not on the
    default board); most first. People's battles only (a judge's copy is not counted twice)."""
    judged = battles.c.strategy == "judge"
    named = (
        sa.select(models.c.name, battle_answers.c.named)
        .join(models, models.c.id == battle_answers.c.model_id)
        .join(battles, battles.c.id == battle_answers.c.battle_id)
        .where(battle_answers.c.named.is_not(None), ~judged)
    )
    left_out = (
        sa.select(models.c.name, sa.func.count())
        .select_from(votes)
        .join(battles, battles.c.id == votes.c.battle_id)
        .join(models, sa.or_(models.c.id == votes.c.model_a, models.c.id == votes.c.model_b))
        .where(battles.c.anony == sa.false(), votes.c.superseded == sa.false())
        .group_by(models.c.name)
    )
    out: dict[str, dict[str, Any]] = {}

    def row(name: str) -> dict[str, Any]:
        return out.setdefault(name, {"model": name, "battles": 0, "names": {}, "votes_left_out": 0})

    with engine.connect() as conn:
        for name, said in conn.execute(named):
            r = row(name)
            r["battles"] += 1
            for n in said.split(","):
                r["names"][n] = r["names"].get(n, 0) + 1
        for name, n in conn.execute(left_out):
            row(name)["votes_left_out"] = int(n)
    return sorted(out.values(), key=lambda r: (-r["battles"], -r["votes_left_out"], r["model"]))


# ---------------------------------------------------------------------------------- duties
def record_moderation(
    conn: Connection, at: float, source: str, reasons: str, annotator_id: int | None
) -> None:
    """A prompt refused by the [moderation] step, or let through unchecked (never its text)."""
    conn.execute(
        moderation_events.insert().values(
            at=at, source=source, reasons=reasons[:300], annotator_id=annotator_id
        )
    )


def moderation_counts(engine: Engine) -> dict[str, Any]:
    """The [moderation] step's events by source (``rules``, ``endpoint``, ``unavailable``:
    refused; ``unchecked``: let through when the endpoint failed open), the reasons of the
    refusals (most frequent first, at most 20) and the time of the last event."""
    t = moderation_events
    with engine.connect() as conn:
        by = {
            s: int(n)
            for s, n in conn.execute(sa.select(t.c.source, sa.func.count()).group_by(t.c.source))
        }
        reasons = conn.execute(
            sa.select(t.c.reasons, sa.func.count().label("n"))
            .where(t.c.source != "unchecked")
            .group_by(t.c.reasons)
            .order_by(sa.desc("n"), t.c.reasons)
            .limit(20)
        ).all()
        last = conn.execute(sa.select(sa.func.max(t.c.at))).scalar()
    return {
        "refused": sum(n for s, n in by.items() if s != "unchecked"),
        "unchecked": by.get("unchecked", 0),
        "by_source": by,
        "reasons": [{"reasons": r, "prompts": int(n)} for r, n in reasons],
        "last": last,
    }


def accept_terms(conn: Connection, annotator_id: int, version: str, now: float) -> float:
    """Store that ``annotator_id`` accepted the terms ``version`` (once: the first time is
    kept); returns the time of acceptance."""
    t = terms_acceptances
    where = (t.c.annotator_id == annotator_id) & (t.c.version == version)
    seen = conn.execute(sa.select(t.c.accepted_at).where(where)).scalar()
    if seen is not None:
        return float(seen)
    conn.execute(t.insert().values(annotator_id=annotator_id, version=version, accepted_at=now))
    return now


def terms_accepted(engine: Engine, annotator_id: int, version: str) -> float | None:
    """When ``annotator_id`` accepted the terms ``version`` (None: not yet)."""
    t = terms_acceptances
    with engine.connect() as conn:
        got = conn.execute(
            sa.select(t.c.accepted_at).where(
                (t.c.annotator_id == annotator_id) & (t.c.version == version)
            )
        ).scalar()
    return None if got is None else float(got)


def terms_count(engine: Engine, version: str) -> int:
    """Identities that accepted the terms ``version``."""
    t = terms_acceptances
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).select_from(t).where(t.c.version == version)
            ).scalar()
        )


def set_category(conn: Connection, battle_id: str, category: str) -> None:
    """The held battle's category, from the classifier (replacing the rules' one)."""
    conn.execute(
        held_battles.update().where(held_battles.c.battle_id == battle_id).values(category=category)
    )
