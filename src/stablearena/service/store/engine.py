"""Opening the live arena's database and migrating it (Alembic, ``migrations/``)."""

from __future__ import annotations

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
    timeout, and explicit ``BEGIN`` (``BEGIN IMMEDIATE`` on write connections) instead of the
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


def migrate(engine: Engine) -> str | None:
    """Create or upgrade the tables (Alembic, ``stablearena/service/store/migrations``) under a lock,
    so that workers starting together migrate once. On the first start also create the admin
    key: returned once (only its hash is stored); ``None`` on later starts."""
    from alembic import command
    from alembic.config import Config

    from ..security import new_key

    cfg = Config()
    cfg.set_main_option("script_location", "stablearena.service.store:migrations")
    conn = write_conn(engine)
    try:
        with conn.begin():
            if not is_sqlite(engine):
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
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
