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
