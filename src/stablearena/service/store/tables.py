"""The live arena's tables: one SQLAlchemy :data:`metadata`, the single source of the schema
(the Alembic migrations under ``migrations/`` are generated from it, and a test checks that they
agree).

Durable state: the vote log (``votes``, each referring to a served ``battles`` row) and, updated
in the same transaction as each vote, ``pair_counts`` — per (pair i < j of model ids,
annotator) the numbers of wins of i, wins of j, ties and both-bad ties, the sufficient
statistic every fit reads. A correction keeps the old vote (``superseded``) and moves one count
from its outcome to the new one. Published fits are rows of ``fits``; ``meta`` holds the
arena's configuration and a revision number that tells other workers to reload models and keys.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    true,
)

#: API outcome labels, in :class:`stablearena.Outcome` code order.
OUTCOMES: tuple[str, ...] = ("model_a", "model_b", "tie", "both_bad")
#: Labels written by the export (FastChat's, read back by ``stablearena rank``).
EXPORT_LABELS: tuple[str, ...] = ("model_a", "model_b", "tie", "tie (bothbad)")

metadata = MetaData()

models = Table(
    "models",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("retired", Boolean, nullable=False, server_default=false()),
    Column("outage", Boolean, nullable=False, server_default=false()),
    Column("boost", Float, nullable=False, server_default="1"),
    Column("boost_until", Integer, nullable=False, server_default="0"),
    Column("added_at", Float, nullable=False),
)
annotators = Table(
    "annotators",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("role", String(16), nullable=False),  # annotator | admin | imported
    Column("key_id", String(32), unique=True),
    Column("key_hash", String(64)),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
)
battles = Table(
    "battles",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("model_a", Integer, ForeignKey("models.id"), nullable=False),
    Column("model_b", Integer, ForeignKey("models.id"), nullable=False),
    Column("strategy", String(40), nullable=False),
    Column("propensity", Float),
    Column("served_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    # false: an answer of the battle named a model or its maker (stablearena.judging.anonymity); its
    # votes are kept in the log but not in pair_counts (the default board leaves them out)
    Column("anony", Boolean, nullable=False, server_default=true()),
)
votes = Table(
    "votes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("battle_id", String(32), ForeignKey("battles.id"), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("outcome", SmallInteger, nullable=False),
    Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("model_a", Integer, nullable=False),
    Column("model_b", Integer, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("first_at", Float, nullable=False),
    Column("superseded", Boolean, nullable=False, server_default=false()),
    UniqueConstraint("battle_id", "revision", name="uq_votes_battle_revision"),
)
pair_counts = Table(
    "pair_counts",
    metadata,
    Column("i", Integer, primary_key=True),
    Column("j", Integer, primary_key=True),
    Column("annotator_id", Integer, primary_key=True),
    Column("wins", Float, nullable=False, server_default="0"),
    Column("losses", Float, nullable=False, server_default="0"),
    Column("ties", Float, nullable=False, server_default="0"),
    Column("ties_both_bad", Float, nullable=False, server_default="0"),
)
fits = Table(
    "fits",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("method", String(40), nullable=False),
    Column("as_of_vote", Integer, nullable=False),
    Column("fitted_at", Float, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("payload", Text, nullable=False),
)
meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
# The dashboard (migration 0002): the pages drawn for a published fit (gzip-compressed HTML,
# written by the render process, served by every worker) and the admin logins (the SHA-256
# of each session token; the token itself lives only in the browser's cookie).
dashboard_views = Table(
    "dashboard_views",
    metadata,
    Column("fit_id", Integer, primary_key=True, autoincrement=False),
    Column("as_of_vote", Integer, nullable=False),
    Column("fitted_at", Float, nullable=False),
    Column("rendered_at", Float, nullable=False),
    Column("info", Text, nullable=False),
    Column("page", LargeBinary, nullable=False),
    Column("main", LargeBinary, nullable=False),
    Column("admin", LargeBinary, nullable=False),
)
# The public leaderboard page's boards per published fit (migration 0016; docs/guides/
# several-hosts.md): every tab of /leaderboard, raw and style-controlled, as gzip-compressed JSON
# ({"plain": {tab: [payload or null, note]}, "style": {…}}), drawn once by one worker and read
# by every worker of every host, which renders the page from it (service.public_boards).
public_boards = Table(
    "public_boards",
    metadata,
    Column("fit_id", Integer, primary_key=True, autoincrement=False),
    Column("as_of_vote", Integer, nullable=False),
    Column("fitted_at", Float, nullable=False),
    Column("drawn_at", Float, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("boards", LargeBinary, nullable=False),
)
dashboard_sessions = Table(
    "dashboard_sessions",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("key_id", String(32), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)

# Battles the arena holds itself (docs/guides/arena-page.md): a model's endpoint (the
# configuration of stablearena.judging.endpoints.ModelEndpoint as JSON — never a key, only the name of
# the environment variable holding it; ``auto_outage``: the outage was set by the circuit
# breaker, and is lifted when the model answers again), the prompt and state of each battle
# held (``served`` until both answers are in, then ``complete`` or ``failed``; only a complete
# one can be voted on) and each side's answer with how it was made and its style counts.
model_endpoints = Table(
    "model_endpoints",
    metadata,
    Column("model_id", Integer, ForeignKey("models.id"), primary_key=True, autoincrement=False),
    Column("config", Text, nullable=False),
    Column("auto_outage", Boolean, nullable=False, server_default=false()),
    Column("updated_at", Float, nullable=False),
)
held_battles = Table(
    "held_battles",
    metadata,
    Column("battle_id", String(32), ForeignKey("battles.id"), primary_key=True),
    Column("prompt_id", String(200)),
    Column("prompt", Text, nullable=False),
    Column("category", String(100)),
    Column("status", String(16), nullable=False),  # served|complete|failed|stopped|abandoned
    Column("failure", Text),
    Column("address", String(64)),
    Column("served_at", Float, nullable=False),
    Column("completed_at", Float),
    # a judge's battle: its replies to both orders (JSON list of {"order", "winner", "reasoning"})
    Column("judge_reasoning", Text),
    # the caps on battles without a vote count the open ones (store.arena.open_held): a battle
    # is open, for its annotator and its address, until open_until (served_at + battle_ttl);
    # NULL once voted on from the page or failed, and for a judge's battle
    Column("annotator_id", Integer),
    Column("open_until", Float),
    # the serving process generating the battle's current turn (serving_processes.id; NULL
    # for a battle served before migration 0012): a battle left ``served`` by a process that
    # died is closed by a live one (store.serving.close_orphans); NULL again once the turn ends
    Column("owner", String(32)),
    # how the page served it (migration 0014; docs/guides/arena-page.md, "Modes"): NULL, an
    # anonymous battle drawn by the serving rule; "named", a side-by-side battle of two models
    # the visitor picked by name (battles.anony false from the start: never on the default board)
    Column("mode", String(16)),
    # a vision battle's image (images.hash, migration 0015), attached to its first prompt;
    # NULL for a battle without one
    Column("image_hash", String(64)),
    Index("ix_held_battles_served_at", "served_at"),
    Index("ix_held_battles_open_annotator", "annotator_id", "open_until"),
    Index("ix_held_battles_open_address", "address", "open_until"),
    Index("ix_held_battles_owner", "owner"),  # the battles in flight (cleared when a turn ends)
)
# The images of vision battles (migration 0015; service/images.py): each cleaned file once
# (re-encoded, without its metadata), named by the SHA-256 of its bytes, whichever battles and
# judges' copies refer to it (held_battles.image_hash)
images = Table(
    "images",
    metadata,
    Column("hash", String(64), primary_key=True),
    Column("media_type", String(32), nullable=False),
    Column("width", Integer, nullable=False),
    Column("height", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("stored_at", Float, nullable=False),
)
# The processes serving held battles (migration 0012; docs/guides/live-arena.md, "A crash
# mid-battle"): one row per `serve` worker, its heartbeat renewed every BEAT_SECONDS. A process
# is dead when its heartbeat is stale or, on its own machine (host: hostname, boot id and PID
# namespace), when its pid is gone; a live one then closes the battles it left mid-turn.
serving_processes = Table(
    "serving_processes",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("host", String(300), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("beat_at", Float, nullable=False),
)
battle_answers = Table(
    "battle_answers",
    metadata,
    Column("battle_id", String(32), ForeignKey("battles.id"), primary_key=True),
    Column("side", String(1), primary_key=True),  # a | b
    Column("model_id", Integer, ForeignKey("models.id"), nullable=False),
    Column("text", Text),
    Column("params", Text, nullable=False),
    Column("ttft", Float),
    Column("total_time", Float),
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("finish_reason", String(40)),
    Column("failure", String(40)),
    Column("failure_detail", Text),
    Column("attempts", Integer),
    Column("style_tokens", Integer),
    Column("style_headers", Integer),
    Column("style_lists", Integer),
    Column("style_bold", Integer),
    # the model or maker names the answer mentions, comma-separated (stablearena.judging.anonymity)
    Column("named", Text),
)

# A held battle's conversation, turn by turn (migration 0008; docs/guides/arena-page.md,
# "Conversations"): one row per (turn, attempt, side) — turn 1 is held_battles.prompt's; a
# regenerated turn keeps its older attempts (the current one is the highest attempt). Each row
# holds the user's message of its turn and the side's answer (or its failure; "stopped" when the
# person stopped the battle while it streamed). battle_answers keeps, per side, the last turn's
# answer and timings, with style counts summed over the whole conversation's current answers.
# The one reader: store.arena.conversation.
battle_turns = Table(
    "battle_turns",
    metadata,
    Column("battle_id", String(32), ForeignKey("battles.id"), primary_key=True),
    Column("turn", Integer, primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("side", String(1), primary_key=True),  # a | b
    Column("model_id", Integer, ForeignKey("models.id"), nullable=False),
    Column("prompt", Text, nullable=False),
    Column("text", Text),
    Column("ttft", Float),
    Column("total_time", Float),
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("finish_reason", String(40)),
    Column("failure", String(40)),
    Column("failure_detail", Text),
    Column("attempts", Integer),
    Column("style_tokens", Integer),
    Column("style_headers", Integer),
    Column("style_lists", Integer),
    Column("style_bold", Integer),
    Column("asked_at", Float),
)

# A finished battle's share link (migration 0014; docs/guides/arena-page.md, "Share a battle"):
# made by its voter after the vote, an unguessable token that opens a read-only view of the
# conversation and the verdict at /share/{token} — with nothing of the voter in it.
battle_shares = Table(
    "battle_shares",
    metadata,
    Column("token", String(32), primary_key=True),
    Column("battle_id", String(32), ForeignKey("battles.id"), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
)

# Direct chats (migration 0014; docs/guides/arena-page.md, "Direct chat"): a conversation of a
# page identity with one model it picked by name — never a battle, never a vote, on no board
# and not in the battle export. ``status``: served while a turn generates, then complete or
# failed (a failed chat takes no more turns); one row of ``chat_turns`` per turn.
chats = Table(
    "chats",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("annotator_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("model_id", Integer, ForeignKey("models.id"), nullable=False),
    Column("status", String(16), nullable=False),  # served | complete | failed
    Column("turns", Integer, nullable=False),  # the turns stored
    Column("started_at", Float, nullable=False),
    Index("ix_chats_annotator", "annotator_id"),
)
chat_turns = Table(
    "chat_turns",
    metadata,
    Column("chat_id", String(32), ForeignKey("chats.id"), primary_key=True),
    Column("turn", Integer, primary_key=True),
    Column("prompt", Text, nullable=False),
    Column("text", Text),
    Column("ttft", Float),
    Column("total_time", Float),
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("finish_reason", String(40)),
    Column("failure", Text),
    Column("asked_at", Float, nullable=False),
)

# Answers of held battles that talked to the judge (stablearena.judging.injection; the [injection]
# policy of the serve config): one row per flagged answer, counted per model in the admin view
answer_flags = Table(
    "answer_flags",
    metadata,
    Column("battle_id", String(32), ForeignKey("battles.id"), primary_key=True),
    Column("side", String(1), primary_key=True),  # a | b
    Column("model_id", Integer, ForeignKey("models.id"), nullable=False),
    Column("rules", Text, nullable=False),  # the rules that matched, comma-separated
    Column("action", String(16), nullable=False),  # forfeit | cut | drop | keep
    Column("flagged_at", Float, nullable=False),
    Index("ix_answer_flags_model", "model_id"),
)

# The judges' probe battles (stablearena.judging.probes): a real answer of a held battle against a cut
# copy of it, with a note to the judge after the copy (note: the corpus note's id) or none (a
# control), judged in both orders; picked: what each answered order chose (worse | better |
# tie, comma-separated). Never votes: a judge these flag has its votes left out of every fit.
judge_probes = Table(
    "judge_probes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("judge_id", Integer, ForeignKey("annotators.id"), nullable=False),
    Column("battle_id", String(32), nullable=False),
    Column("note", String(120)),
    Column("picked", String(40), nullable=False),
    Column("calls", Integer, nullable=False),
    Column("at", Float, nullable=False),
    Index("ix_judge_probes_judge", "judge_id"),
)

# A public arena's duties (service/duties.py; docs/guides/live-arena-security.md): the
# prompts refused by the [moderation] step — only when, why and by what, never the text (a
# refused prompt is not stored) — and those let through unchecked when the endpoint failed
# open; and each identity's acceptance of the [terms] of use, per version of their text.
moderation_events = Table(
    "moderation_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("source", String(16), nullable=False),  # rules | endpoint | unavailable | unchecked
    Column("reasons", String(300), nullable=False),
    Column("annotator_id", Integer),
    Index("ix_moderation_events_at", "at"),
)
terms_acceptances = Table(
    "terms_acceptances",
    metadata,
    Column("annotator_id", Integer, ForeignKey("annotators.id"), primary_key=True),
    Column("version", String(16), primary_key=True),
    Column("accepted_at", Float, nullable=False),
)

# The automatic arena's journal (migration 0004; ``stablearena auto --db``,
# docs/guides/models-and-judges.md): every record of the run (``run``: its models and judges;
# ``answer``: a model's answer to a prompt, generated once and reused; ``judgement``: a battle
# judged in both orders, with the verdicts and reasoning) as JSON, oldest first, so a killed
# run resumes. A judgement's record is written in the same transaction as its battles and
# votes (or its failed battle), ``battle_id`` naming the first of them.
auto_journal = Table(
    "auto_journal",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),  # run | answer | judgement
    Column("record", Text, nullable=False),
    Column("battle_id", String(32), ForeignKey("battles.id")),
    Column("created_at", Float, nullable=False),
)

# The rate limits kept in the database, so that every ``serve`` host on one database enforces
# one limit (settings ``limits = "database"``; store/limits.py): a token bucket per name
# (``<table>:<who>``, e.g. ``keys:12`` or ``page_addresses:203.0.113.9``) with its tokens at
# ``at`` (the database's clock, seconds since the epoch), the time it is full again
# (``full_at``: a bucket full by now is the same as no row, and is swept) and the tokens the
# last check took (``taken``: a host may take a few at once, see store/limits.py)
rate_buckets = Table(
    "rate_buckets",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("tokens", Float, nullable=False),
    Column("at", Float, nullable=False),
    Column("full_at", Float, nullable=False),
    Column("taken", Integer, nullable=False),
    Index("ix_rate_buckets_full_at", "full_at"),
)

#: pg_advisory lock keys (arbitrary constants): migrations, and "one refitter at a time".
MIGRATION_LOCK = 0x5AB1E_0001
REFIT_LOCK = 0x5AB1E_0002
#: one worker at a time draws the public leaderboard's boards (service.public_boards)
BOARDS_LOCK = 0x5AB1E_0003
