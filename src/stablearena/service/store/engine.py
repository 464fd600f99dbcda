"""Opening the live arena's database and migrating it (Alembic, ``migrations/``)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, select
from sqlalchemy.engine import Connection, Engine

from ...errors import InputError
from .tables import MIGRATION_LOCK, annotators, meta


def make_engine(url: str) -> Engine:
    """An engine for ``url``. SQLite: WAL, ``synchronous=FULL``, foreign keys, a 30 s busy
    timeout, a 64 MiB page cache, and explicit ``BEGIN`` (``BEGIN IMMEDIATE`` on write connections) instead of the
    driver's implicit transactions, so that reads inside a transaction see one snapshot."""
    if url.startswith("sqlite"):
        u = sa.engine.make_url(url)
        if not u.database or u.database == ":memory:":
            raise InputError(
                f"--db {url!r}: the live arena needs a database file, e.g. sqlite:///arena.db."
            )
        parent = Path(u.database).expanduser().resolve().parent
        if not parent.is_dir():
            raise InputError(f"--db {url!r}: the directory {parent} does not exist.")
        engine = sa.create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=8
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            # 64 MiB of page cache per connection (SQLite's default is 2 MiB): the B-tree pages a
            # vote touches on a large file stay in memory
            cur.execute("PRAGMA cache_size=-65536")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.info.get("immediate") else "BEGIN")

        return engine
    if url.startswith("postgresql"):
        return sa.create_engine(url, pool_size=8, max_overflow=16, pool_pre_ping=True)
    raise InputError(f"--db {url!r}: use sqlite:///FILE or postgresql+psycopg://… .")


def is_sqlite(engine: Engine | Connection) -> bool:
    return engine.dialect.name == "sqlite"


def write_conn(engine: Engine) -> Connection:
    conn = engine.connect()
    if is_sqlite(engine):
        conn.info["immediate"] = True
    return conn


def alembic_config() -> Any:
    """The Alembic configuration of the arena's migrations (``migrations/`` beside this module)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", "stablearena.service.store:migrations")
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the schema to ``revision`` (no admin key, no lock: tests and tools)."""
    from alembic import command

    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


#: ``meta`` key: the oldest schema revision whose code may serve a database at this one (every
#: migration after it is additive, its module's ``ADDITIVE``); written by each migration run.
COMPATIBLE_KEY = "schema_compatible_down_to"
#: ``meta`` key: after a roll back past additive migrations (:func:`migrate_to`), the newest
#: revision whose tables and columns the database still holds although ``alembic_version``
#: names an older one; absent otherwise.
KEPT_KEY = "schema_kept_up_to"


class SchemaTooNew(InputError):
    """The database was migrated by a newer stablearena beyond what this version can serve."""


def _script() -> Any:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def compatible_floor(script: Any, head: str) -> str:
    """The oldest revision whose code can run on a database at ``head``: down from ``head``
    while each migration is additive (its module's ``ADDITIVE`` is true)."""
    rev = head
    while True:
        sc = script.get_revision(rev)
        if sc.down_revision is None or not getattr(sc.module, "ADDITIVE", False):
            return rev
        rev = sc.down_revision


def _known(script: Any, rev: str) -> bool:
    try:
        return script.get_revision(rev) is not None
    except Exception:  # alembic's CommandError / ResolutionError: not in this version
        return False


def _too_new(conn: Connection, script: Any, current: str) -> bool:
    """Whether a database at ``current`` — a revision this version does not know, made by a newer
    one — is served as it is (True: every change since this version's head is additive, as
    the newer version recorded) or refused (:class:`SchemaTooNew`)."""
    floor = conn.execute(select(meta.c.value).where(meta.c.key == COMPATIBLE_KEY)).scalar()
    head = script.get_current_head()
    if floor is not None and _known(script, floor):
        return True
    raise SchemaTooNew(
        f"--db {conn.engine.url.render_as_string(hide_password=True)}: the schema is at revision "
        f"{current!r}, made by a newer stablearena; this version knows up to {head!r}"
        + (
            f" and the newer one can serve no version older than {floor!r}"
            if floor is not None
            else ""
        )
        + f". Run the newer version, or roll the schema back with it first: stablearena "
        f"migrate --db URL --to {head} (docs/guides/several-hosts.md, 'Upgrades')."
    )


def _newest_first(script: Any) -> list[str]:
    return [s.revision for s in script.walk_revisions()]


def _older(script: Any, a: str, b: str) -> bool:
    """Whether revision ``a`` comes before ``b`` (both known; the history is linear)."""
    walk = _newest_first(script)
    return walk.index(a) > walk.index(b)


def _kept(conn: Connection) -> str | None:
    if not sa.inspect(conn).has_table(meta.name):  # a new database: nothing kept
        return None
    return conn.execute(select(meta.c.value).where(meta.c.key == KEPT_KEY)).scalar()


def kept_revision(engine: Engine) -> str | None:
    """The newest revision whose tables a rolled-back database still holds (:data:`KEPT_KEY`;
    None: none kept)."""
    with engine.connect() as conn:
        return _kept(conn)


def _set_kept(conn: Connection, value: str | None) -> None:
    conn.execute(meta.delete().where(meta.c.key == KEPT_KEY))
    if value is not None:
        conn.execute(meta.insert().values(key=KEPT_KEY, value=value))


def migrate_to(engine: Engine, revision: str, drop: bool = False) -> tuple[str | None, str]:
    """Move the schema to ``revision`` — up or down (``stablearena migrate``; a rollback before
    running an older version) — and record the compatibility floor. Returns (before, after).

    Down past migrations that only add (each module's ``ADDITIVE``), the schema is only marked
    at ``revision``: the tables and columns they added stay, unused by the older code, and
    ``meta`` records the newest revision whose objects are still there (:data:`KEPT_KEY`) —
    so hosts of the newer version keep serving while the older one starts (even an older
    version that predates the floor, which knows only its own revisions). A later upgrade
    marks them again instead of creating them. ``drop`` (or a step that is not additive) runs
    the migrations' ``downgrade()`` instead."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    cfg = alembic_config()
    script = _script()
    if revision != "head" and not _known(script, revision):
        raise InputError(
            f"--to {revision!r}: no such schema revision in this version (it knows "
            f"{', '.join(sorted(s.revision for s in script.walk_revisions()))})."
        )
    with engine.begin() as conn:
        before = MigrationContext.configure(conn).get_current_revision()
        if before is not None and not _known(script, before):
            _too_new(conn, script, before)
            raise SchemaTooNew(
                f"the schema is at {before!r}, newer than this version: roll it back with the "
                "version that made it."
            )
        kept = _kept(conn)
        if kept is not None and not _known(script, kept):
            raise SchemaTooNew(
                f"the schema is at {before!r} but keeps the tables of revision {kept!r}, "
                "newer than this version: move it with the version that made it."
            )
        cfg.attributes["connection"] = conn
        target = script.get_current_head() if revision == "head" else revision
        present = kept or before  # the newest revision whose objects the database holds
        if present is not None and _older(script, target, present):
            if not drop and not _older(script, target, compatible_floor(script, present)):
                command.stamp(cfg, target)  # additive down to target: keep what they added
                _set_kept(conn, present)
            else:
                if kept is not None:
                    command.stamp(cfg, kept)  # the downgrades start from what is there
                command.downgrade(cfg, target)
                _set_kept(conn, None)
        elif kept is not None and not _older(script, kept, target):
            command.stamp(cfg, target)  # objects up to kept are there already
            _set_kept(conn, None if target == kept else kept)
        else:
            if kept is not None:
                command.stamp(cfg, kept)
                _set_kept(conn, None)
            command.upgrade(cfg, target)
        _record_floor(conn, script, target)
    return before, target


def _record_floor(conn: Connection, script: Any, head: str) -> None:
    conn.execute(meta.delete().where(meta.c.key == COMPATIBLE_KEY))
    conn.execute(meta.insert().values(key=COMPATIBLE_KEY, value=compatible_floor(script, head)))


def schema_differences(engine: Engine, target: sa.MetaData | None = None) -> list[Any]:
    """What differs between the database's schema and ``target`` (by default
    :data:`~.tables.metadata`): Alembic's ``compare_metadata``, empty when they agree."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from .tables import metadata

    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(ctx, metadata if target is None else target))


def new_migration(message: str) -> Path:
    """Generate the next migration from :data:`~.tables.metadata` (Alembic autogenerate against a
    scratch SQLite database upgraded to the current head) into ``migrations/versions``; returns
    its path. Review it (and run the migration test) before committing. The revision id is the
    next number (``0003``, ``0004``, …)."""
    import tempfile

    from alembic import command
    from alembic.script import ScriptDirectory

    cfg = alembic_config()
    head = ScriptDirectory.from_config(cfg).get_current_head()
    rev_id = f"{int(head or 0) + 1:04d}"
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{tmp}/scratch.db")
        try:
            upgrade(engine)
            with engine.begin() as conn:
                cfg.attributes["connection"] = conn
                script = command.revision(cfg, message, autogenerate=True, rev_id=rev_id)
        finally:
            engine.dispose()
    return Path(script.path)  # type: ignore[union-attr]


class DamagedDatabase(InputError):
    """The SQLite file fails its integrity check: the server does not start on it."""


class ReadOnlyDatabase(InputError):
    """The SQLite file (or its directory) cannot be written: the arena records votes into it."""


def read_only_reason(path: Path) -> str | None:
    """Why SQLite cannot write the database file ``path`` (None when it can): the file must open
    for writing, and its directory must take the ``-wal`` / ``-shm`` files beside it. Tried, not
    read from permission bits (root ignores them; an immutable file or a read-only mount does
    not show in them)."""
    import errno
    import os
    import tempfile

    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return f"the file {path} is read-only ({exc.strerror})"
        return None
    try:
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".check")
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return (
                f"its directory {path.parent} is read-only ({exc.strerror}); SQLite keeps its "
                f"write-ahead log beside the file"
            )
        return None
    os.close(fd)
    os.unlink(probe)
    return None


def check_writable(engine: Engine) -> None:
    """SQLite: raise :class:`ReadOnlyDatabase` when the file exists and cannot be written."""
    if not is_sqlite(engine):
        return
    path = Path(str(engine.url.database))
    if not path.exists():
        return
    reason = read_only_reason(path)
    if reason is not None:
        engine.dispose()
        raise ReadOnlyDatabase(
            f"--db {engine.url}: {reason}. The file is not damaged, but the live arena writes "
            f"every vote into it, so it does not start on a read-only database. Make it "
            f"writable (chmod u+w / chattr -i on the file and its directory, or remount the "
            f"file system read-write), or work on a copy: cp {path} /tmp/arena.db and "
            f"--db sqlite:////tmp/arena.db."
        )


def check_integrity(engine: Engine) -> None:
    """SQLite: ``PRAGMA quick_check`` on the file (when it exists); a damaged file raises
    :class:`DamagedDatabase` naming what SQLite found and how to recover. It reads every page
    once (measured: docs/guides/live-arena-scaling.md). PostgreSQL checks its own pages."""
    if not is_sqlite(engine):
        return
    path = Path(str(engine.url.database))
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with engine.connect() as conn:
            found = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check(5)")]
    except sa.exc.DBAPIError as exc:
        found = [str(exc.orig)]
    if found != ["ok"]:
        engine.dispose()
        raise DamagedDatabase(
            f"--db {engine.url}: the database file is damaged (SQLite's quick_check: "
            f"{'; '.join(found)}). The server does not start on it, so that no vote is "
            f"recorded into a damaged file. Restore it from a backup, or recover what is "
            f"readable: sqlite3 {path} .recover | sqlite3 recovered.db"
        )


#: PostgreSQL: how long a migration waits for a table lock before it gives up and starts again
#: (below PostgreSQL's ``deadlock_timeout``, 1 s by default), and for how long in all it tries.
MIGRATION_LOCK_TIMEOUT_MS = 500
MIGRATION_RETRY_SECONDS = 300.0

#: SQLSTATEs of a migration that lost a lock race: deadlock_detected, lock_not_available.
_LOCK_RACE = ("40P01", "55P03")


class MigrationLocked(InputError):
    """The migration could not get its table locks while other hosts kept using the tables."""


def migrate(engine: Engine) -> str | None:
    """Create or upgrade the tables (Alembic, ``stablearena/service/store/migrations``) under a lock,
    so that workers starting together migrate once. On the first start also create the admin
    key: returned once (only its hash is stored); ``None`` on later starts.

    On PostgreSQL hosts of the old version may be serving while a new one migrates (a rolling
    upgrade, docs/guides/several-hosts.md). A due migration first locks every arena table at
    once (:func:`_lock_tables_to_migrate`), waiting at most :data:`MIGRATION_LOCK_TIMEOUT_MS`;
    when it loses that race (a timeout, or a deadlock PostgreSQL broke on its side) it rolls
    back and starts again after a short random pause, for up to
    :data:`MIGRATION_RETRY_SECONDS`. So it never holds a lock one of their transactions waits
    for while it waits for theirs, and their requests wait at most that timeout plus the
    (short, additive) migration itself."""
    check_writable(engine)
    check_integrity(engine)
    if is_sqlite(engine):
        return _migrate_once(engine)
    deadline = time.monotonic() + MIGRATION_RETRY_SECONDS
    tries = 0
    while True:
        tries += 1
        try:
            return _migrate_once(engine)
        except sa.exc.OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) not in _LOCK_RACE:
                raise
            if time.monotonic() > deadline:
                raise MigrationLocked(
                    f"--db {engine.url.render_as_string(hide_password=True)}: the schema "
                    f"upgrade could not get its table locks in {tries} tries over "
                    f"{MIGRATION_RETRY_SECONDS:g} s while other hosts used the tables "
                    f"({type(exc.orig).__name__}). Start this host again, or stop the hosts of "
                    "the older version first."
                ) from None
            time.sleep(min(0.05 * 2 ** min(tries, 6), 2.0) * (0.5 + random.random()))


def _lock_tables_to_migrate(conn: Connection) -> None:
    """PostgreSQL, when a migration is due: every table of the arena's that exists, locked
    ACCESS EXCLUSIVE at once before the first step — the other hosts' transactions then wait
    for the (short) migration instead of interleaving with its steps, and a migration never
    waits for a lock while holding one of theirs. The wait times out after
    :data:`MIGRATION_LOCK_TIMEOUT_MS` (:func:`migrate` starts again). The advisory lock before
    this does not time out: it waits for another host's migration."""
    from .tables import metadata

    conn.execute(sa.text(f"SET LOCAL lock_timeout = {MIGRATION_LOCK_TIMEOUT_MS}"))
    present = set(sa.inspect(conn).get_table_names())
    names = [t for t in metadata.tables if t in present]
    if names:
        quoted = ", ".join(conn.dialect.identifier_preparer.quote(t) for t in names)
        conn.execute(sa.text(f"LOCK TABLE {quoted} IN ACCESS EXCLUSIVE MODE"))


def _migrate_once(engine: Engine) -> str | None:
    """One attempt of :func:`migrate`, in one transaction."""
    from alembic import command

    from ..security import new_key

    cfg = alembic_config()
    conn = write_conn(engine)
    try:
        with conn.begin():
            if not is_sqlite(engine):
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
            cfg.attributes["connection"] = conn
            from alembic.runtime.migration import MigrationContext

            script = _script()
            head = script.get_current_head()
            current = MigrationContext.configure(conn).get_current_revision()
            kept = _kept(conn) if current is not None else None
            if current is not None and not _known(script, current):
                _too_new(conn, script, current)  # raises unless the newer changes are additive
            elif kept is not None and (not _known(script, kept) or not _older(script, kept, head)):
                pass  # rolled back past additive steps: every table this version uses is there
            elif current != head:
                if not is_sqlite(engine):
                    _lock_tables_to_migrate(conn)
                if kept is not None:  # kept's tables are there: mark them, then add the rest
                    command.stamp(cfg, kept)
                    _set_kept(conn, None)
                command.upgrade(cfg, "head")
                _record_floor(conn, script, head)
            else:
                _record_floor(conn, script, head)
            admin = conn.execute(
                select(annotators.c.id).where(annotators.c.role == "admin")
            ).first()
            if admin is not None:
                return None
            key = new_key()
            conn.execute(
                annotators.insert().values(
                    name="admin",
                    role="admin",
                    key_id=key.key_id,
                    key_hash=key.key_hash,
                    created_at=time.time(),
                )
            )
            for k, v in (("revision", "0"), ("created_at", repr(time.time()))):
                conn.execute(meta.insert().values(key=k, value=v))
            return key.secret
    finally:
        conn.info.pop("immediate", None)
        conn.close()
