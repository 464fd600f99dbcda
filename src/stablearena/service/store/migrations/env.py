"""Alembic environment of the live arena's database (run programmatically by
:func:`stablearena.service.store.migrate`, which passes an open connection, and by
:func:`stablearena.service.store.new_migration`, which autogenerates a revision).

The target is :data:`stablearena.service.store.tables.metadata`, the single source of the
schema: a new migration is generated from it, and a test checks that upgrading a fresh database
to head gives exactly that schema (``alembic.autogenerate.compare_metadata`` finds nothing).
"""

from __future__ import annotations

from alembic import context

from stablearena.service.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only programmatic use is supported
    raise RuntimeError("run the migrations through stablearena.service.store.migrate(engine)")

context.configure(
    connection=connection, target_metadata=metadata, render_as_batch=True, compare_type=True
)
with context.begin_transaction():
    context.run_migrations()
