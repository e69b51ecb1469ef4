"""Alembic environment: the sidecar's models are the target metadata."""

from __future__ import annotations

from alembic import context
from sqlalchemy import pool

from app.db.models import Base
from app.db.session import make_engine

config = context.config
# Advisory-lock key for migrations (any constant other locks in this database do not use).
MIGRATION_LOCK = 0x5953_4D49  # "YSMI"
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url")
    assert url is not None
    engine = make_engine(url, poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            if connection.dialect.name == "postgresql":
                # Two sidecars started together (a rolling restart, two replicas) both migrate
                # at start-up: the second waits here until the first commits, then finds the
                # database at head. Released with the transaction.
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
