"""The live arena's database: every table and every SQL statement of the service live here.

- :mod:`.tables`     the tables, in one SQLAlchemy ``metadata`` — the single source of the
  schema; the Alembic migrations (``migrations/``) are generated from it;
- :mod:`.engine`     opening the database (SQLite and PostgreSQL settings) and migrating it;
- :mod:`.writer`     the group-committing writer of one process;
- :mod:`.votes`      the hot path: battles served, votes recorded with their pair counts
  (plain SQL on the driver's cursor);
- :mod:`.queries`    the configuration and revision, the registry, the counts, the fits;
- :mod:`.admin`      models and keys added and changed, the export;
- :mod:`.dashboard`  the drawn pages and the admin sessions;
- :mod:`.imports`    ``serve --import LOG``;
- :mod:`.auto`       the automatic arena's journal (``stablearena auto --db``);
- :mod:`.limits`     the rate limits kept in the database (``limits = "database"``);
- :mod:`.probes`     the judges' probe battles and the judges they flag.

Everything is re-exported here: ``from stablearena.service import store; store.record_vote``.
"""

from __future__ import annotations

from . import arena as held  # the battles the arena holds (store/arena.py)
from . import (
    auto,  # the automatic arena's journal (store/auto.py)
    limits,  # the rate limits kept in the database (store/limits.py)
    modes,  # the page's other modes: share links, direct chats (store/modes.py)
    probes,  # the judges' probe battles (store/probes.py)
    serving,  # the serving processes and the battles a dead one left (store/serving.py)
)
from .admin import (
    add_model,
    annotator_list,
    change_model,
    delete_unvoted,
    revoke_key,
    set_key,
    vote_log,
    voted_battles,
)
from .dashboard import (
    close_session,
    count_battles,
    insert_boards,
    insert_view,
    newest_boards,
    newest_view,
    open_session,
    session_row,
    view_exists,
)
from .engine import is_sqlite, make_engine, migrate, write_conn
from .imports import import_votes
from .queries import (
    account_active_days,
    account_ages,
    bump_revision,
    fit_row,
    get_meta,
    judged_pairs_of,
    judged_rows,
    key_row,
    key_rows,
    latest_fit_row,
    load_config,
    model_rows,
    names_after,
    pair_totals,
    ping,
    poll,
    probe_write,
    publish_fit,
    read_count_rows,
    read_snapshot,
    release_refit_lock,
    set_meta,
    try_refit_lock,
    votes_after,
    watermark,
)
from .tables import (
    BOARDS_LOCK,
    EXPORT_LABELS,
    MIGRATION_LOCK,
    OUTCOMES,
    REFIT_LOCK,
    annotators,
    battles,
    dashboard_sessions,
    dashboard_views,
    fits,
    meta,
    metadata,
    models,
    pair_counts,
    votes,
)
from .votes import (
    VoteResult,
    add_counts,
    count_row,
    cursor,
    insert_battles,
    record_vote,
    registry_changed,
)
from .writer import Writer

_write_conn = write_conn  # the name the tests know

__all__ = [
    "held",
    "modes",
    "serving",
    "auto",
    "limits",
    "probes",
    "EXPORT_LABELS",
    "MIGRATION_LOCK",
    "OUTCOMES",
    "REFIT_LOCK",
    "BOARDS_LOCK",
    "VoteResult",
    "Writer",
    "add_counts",
    "add_model",
    "annotator_list",
    "annotators",
    "battles",
    "bump_revision",
    "change_model",
    "close_session",
    "count_battles",
    "count_row",
    "cursor",
    "dashboard_sessions",
    "dashboard_views",
    "fits",
    "get_meta",
    "import_votes",
    "insert_battles",
    "fit_row",
    "insert_view",
    "insert_boards",
    "newest_boards",
    "is_sqlite",
    "judged_pairs_of",
    "judged_rows",
    "key_row",
    "key_rows",
    "latest_fit_row",
    "load_config",
    "make_engine",
    "meta",
    "metadata",
    "migrate",
    "model_rows",
    "models",
    "newest_view",
    "open_session",
    "pair_counts",
    "pair_totals",
    "ping",
    "poll",
    "probe_write",
    "publish_fit",
    "read_count_rows",
    "read_snapshot",
    "names_after",
    "votes_after",
    "record_vote",
    "registry_changed",
    "release_refit_lock",
    "revoke_key",
    "session_row",
    "set_key",
    "set_meta",
    "try_refit_lock",
    "view_exists",
    "vote_log",
    "voted_battles",
    "delete_unvoted",
    "votes",
    "watermark",
    "account_active_days",
    "account_ages",
]
