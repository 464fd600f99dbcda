"""Alembic environment of the live arena's database (run programmatically by
:func:`stablearena.service.store.migrate`, which passes an open connection)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only programmatic use is supported
    raise RuntimeError("run the migrations through stablearena.service.store.migrate(engine)")

context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
