"""Alembic's entry point: migrate the connection app.history.schema.migrate hands over."""

from __future__ import annotations

from alembic import context

from app.history.schema import in_metadata, metadata

context.configure(
    connection=context.config.attributes["connection"],
    target_metadata=metadata,
    # SQLite alters a table by copying it; batch mode does that for later revisions.
    render_as_batch=True,
    include_name=in_metadata,
)
with context.begin_transaction():
    context.run_migrations()
