"""Upgrades both ways (issue 44 item 5): an older host starts on a database a newer version
migrated while every change since its own head is additive (the newer version records the
oldest revision that may serve it), refuses with what to do otherwise, and `stablearena migrate
--to REV` rolls the schema back and forth."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from test_service import db_url, settings_for  # noqa: F401  (db_url: the fixture)

from stablearena.service import store
from stablearena.service.app import create_app
from stablearena.service.store.engine import (
    COMPATIBLE_KEY,
    SchemaTooNew,
    _script,
    compatible_floor,
    migrate_to,
)


def _pretend_newer(engine, floor: str | None) -> None:
    """The database as a newer version leaves it: a revision this one does not know, and the
    floor that version recorded."""
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099_from_the_future'"))
        conn.execute(store.tables.meta.delete().where(store.tables.meta.c.key == COMPATIBLE_KEY))
        if floor is not None:
            conn.execute(store.tables.meta.insert().values(key=COMPATIBLE_KEY, value=floor))


def test_an_older_host_serves_a_database_migrated_additively_by_a_newer_one(db_url):  # noqa: F811
    engine = store.make_engine(db_url)
    try:
        store.migrate(engine)
        head = _script().get_current_head()
        _pretend_newer(engine, head)  # the newer version's changes are all additive
        assert store.migrate(engine) is None  # starts, touches nothing
        with TestClient(create_app(settings_for(db_url))) as tc:
            assert tc.get("/healthz").status_code == 200
        _pretend_newer(engine, "0098_also_unknown")  # not additive down to this version
        with pytest.raises(SchemaTooNew, match="stablearena migrate --db URL --to"):
            store.migrate(engine)
        _pretend_newer(engine, None)  # a newer version that recorded nothing
        with pytest.raises(SchemaTooNew, match="made by a newer stablearena"):
            store.migrate(engine)
    finally:
        engine.dispose()


def test_the_schema_rolls_back_and_forth(db_url):  # noqa: F811
    engine = store.make_engine(db_url)
    try:
        store.migrate(engine)
        script = _script()
        head = script.get_current_head()
        prev = script.get_revision(head).down_revision
        assert migrate_to(engine, prev) == (head, prev)
        with engine.connect() as conn:
            floor = conn.execute(
                sa.select(store.tables.meta.c.value).where(
                    store.tables.meta.c.key == COMPATIBLE_KEY
                )
            ).scalar()
        assert floor == compatible_floor(script, prev)
        assert migrate_to(engine, "head") == (prev, head)
        from stablearena.service.store.engine import schema_differences

        assert schema_differences(engine) == []
        with pytest.raises(Exception, match="no such schema revision"):
            migrate_to(engine, "nope")
    finally:
        engine.dispose()


def test_every_migration_after_the_first_says_whether_it_only_adds():
    script = _script()
    revs = list(script.walk_revisions())
    assert all(hasattr(r.module, "ADDITIVE") for r in revs if r.down_revision is not None)
    assert compatible_floor(script, script.get_current_head()) == revs[-1].revision


def test_the_migrate_command_moves_the_schema(tmp_path, cli):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    engine = store.make_engine(url)
    store.migrate(engine)
    engine.dispose()
    script = _script()
    head = script.get_current_head()
    prev = script.get_revision(head).down_revision
    code, _, err = cli("migrate", "--db", url, "--to", prev)
    assert code == 0 and f"schema at {prev} (was {head})" in err, err
    code, _, err = cli("migrate", "--db", url)
    assert code == 0 and f"schema at {head} (was {prev})" in err, err
    code, _, err = cli("migrate", "--db", url, "--to", "0099_nope")
    assert code == 2 and "no such schema revision" in err


def test_the_migrate_command_makes_a_new_database(tmp_path, cli):
    """``stablearena migrate`` on a file that does not exist yet: the schema at head (before,
    an internal error: it read the ``meta`` table before any migration had made it)."""
    url = f"sqlite:///{tmp_path / 'new.db'}"
    head = _script().get_current_head()
    code, _, err = cli("migrate", "--db", url)
    assert code == 0 and f"schema at {head} (a new database)" in err, err
    code, _, err = cli("migrate", "--db", url)
    assert code == 0 and f"schema at {head} (unchanged)" in err, err


def _tables(engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def _at(engine) -> str:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def test_a_roll_back_past_additive_steps_keeps_their_tables(db_url):  # noqa: F811
    """``migrate --to`` an older revision past migrations that only add marks the schema there
    and keeps what they added: the newer hosts keep serving on it, an older version (even one
    from before the floor, which knows only its own revisions) finds its own head and starts,
    and the newer version starting again marks them without creating them. ``drop`` removes
    them. (Before, the roll back dropped the tables the newer hosts still used.)"""
    from stablearena.service.store.engine import kept_revision, schema_differences

    engine = store.make_engine(db_url)
    try:
        store.migrate(engine)
        head = _script().get_current_head()
        assert migrate_to(engine, "0011") == (head, "0011")
        assert _at(engine) == "0011" and kept_revision(engine) == head
        assert {"public_boards", "judge_probes", "serving_processes"} <= _tables(engine)
        assert schema_differences(engine) == []  # every table and column still there
        # the newer version starting (a host of it restarted mid roll back) leaves it so
        assert store.migrate(engine) is None
        assert _at(engine) == "0011" and kept_revision(engine) == head
        with TestClient(create_app(settings_for(db_url))) as tc:
            assert tc.get("/healthz").status_code == 200
        # forward again: marked, nothing created twice
        assert migrate_to(engine, "head") == ("0011", head)
        assert _at(engine) == head and kept_revision(engine) is None
        assert schema_differences(engine) == []
        # --drop: what 0012.. added is gone; then forward again creates it
        migrate_to(engine, "0011", drop=True)
        assert _at(engine) == "0011" and kept_revision(engine) is None
        assert "public_boards" not in _tables(engine) and "judge_probes" not in _tables(engine)
        migrate_to(engine, "head")
        assert schema_differences(engine) == []
    finally:
        engine.dispose()


def test_a_newer_version_adds_its_steps_to_a_rolled_back_schema(db_url):  # noqa: F811
    """A schema rolled back to 0011 that keeps the tables of 0013 (the version before this one
    rolled it back): this version's start marks 0013 and runs only what comes after it."""
    from stablearena.service.store.engine import kept_revision, schema_differences

    engine = store.make_engine(db_url)
    try:
        store.migrate(engine)
        migrate_to(engine, "0013", drop=True)  # as the version of 0013 left it …
        migrate_to(engine, "0011")  # … rolled back by it, keeping 0012 and 0013's tables
        assert kept_revision(engine) == "0013" and "public_boards" not in _tables(engine)
        assert store.migrate(engine) is None
        assert _at(engine) == _script().get_current_head() and kept_revision(engine) is None
        assert schema_differences(engine) == []
    finally:
        engine.dispose()
