"""The live arena's schema has one source, the SQLAlchemy metadata of
``stablearena.service.store.tables``: the Alembic migrations must build exactly it (on SQLite
and PostgreSQL), from a fresh database and from one made by an older revision."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from stablearena.service import store
from stablearena.service.store.engine import schema_differences, upgrade


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'arena.db'}"
    else:
        url = request.getfixturevalue("postgres").create_database("m" + uuid.uuid4().hex[:12])
    eng = store.make_engine(url)
    yield eng
    eng.dispose()


def test_the_migrations_build_exactly_the_metadata(engine):
    """A fresh database upgraded to head has the tables, columns, types, keys and constraints
    of the metadata, nothing more or less (Alembic's compare_metadata finds nothing)."""
    assert store.migrate(engine) is not None
    assert schema_differences(engine) == []
    with engine.connect() as conn:
        assert set(sa.inspect(conn).get_table_names()) >= set(store.metadata.tables)


def test_a_database_made_by_the_first_revision_upgrades_to_the_metadata(engine):
    """A database created by revision 0001 (before the dashboard) keeps its rows and upgrades
    to head: the schema is then the metadata's."""
    upgrade(engine, "0001")
    with engine.begin() as conn:
        conn.execute(store.models.insert().values(name="old-model", added_at=1.0))
    assert schema_differences(engine) != []  # the dashboard's tables are missing
    store.migrate(engine)
    assert schema_differences(engine) == []
    with engine.connect() as conn:
        names = conn.execute(sa.select(store.models.c.name)).scalars().all()
    assert names == ["old-model"]


def test_a_column_the_migrations_do_not_make_is_found(engine):
    """The comparison can fail: a metadata with a column no migration adds differs."""
    store.migrate(engine)
    planted = sa.MetaData()
    for table in store.metadata.tables.values():
        table.to_metadata(planted)
    planted.tables["models"].append_column(sa.Column("colour", sa.String(20)))
    diffs = schema_differences(engine, planted)
    assert [d[0] for d in diffs] == ["add_column"] and diffs[0][3].name == "colour"


def test_a_rolling_upgrade_migrates_beside_an_old_host_without_a_deadlock(postgres):
    """An old host's transaction has read ``battles`` and then writes it (takes ROW EXCLUSIVE)
    while a new host migrates 0007 → head on PostgreSQL: 0008 locks ``battles`` for
    ``battle_turns``'s foreign key, 0009 then alters ``battles`` and waits for the old
    transaction — which waits for the migration. The migration gives its locks up after
    ``MIGRATION_LOCK_TIMEOUT_MS`` (under PostgreSQL's 1 s ``deadlock_timeout``) and starts
    again: the old host's write goes through and the schema reaches head. Before, PostgreSQL
    found the deadlock and aborted one side (a host of the rolling upgrade exited on
    "deadlock detected")."""
    import threading
    import time

    from stablearena.service.store.engine import MIGRATION_LOCK_TIMEOUT_MS

    eng = store.make_engine(postgres.create_database("m" + uuid.uuid4().hex[:12]))
    try:
        upgrade(eng, "0007")
        old = eng.connect()
        txn = old.begin()
        old.execute(sa.text("SELECT count(*) FROM battles")).scalar()
        result: dict[str, object] = {}

        def new_host() -> None:
            try:
                result["key"] = store.migrate(eng)
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                result["error"] = exc

        t = threading.Thread(target=new_host)
        t.start()
        time.sleep(0.3)  # the migration now holds 0008's lock and waits for 0009's
        t0 = time.monotonic()
        old.execute(sa.text("LOCK TABLE battles IN ROW EXCLUSIVE MODE"))  # what an INSERT takes
        waited = time.monotonic() - t0
        txn.commit()
        old.close()
        t.join(60)
        assert "error" not in result, result
        assert result["key"] is not None
        assert schema_differences(eng) == []
        # the old host waited at most about one lock timeout
        assert waited < MIGRATION_LOCK_TIMEOUT_MS / 1000 + 0.5, waited
    finally:
        eng.dispose()
