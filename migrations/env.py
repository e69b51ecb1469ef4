"""Alembic environment: the sidecar's models are the target metadata; on SQLite, migrations run
with foreign keys unenforced (a batch rebuild would cascade) and checked afterwards."""

from __future__ import annotations

from collections import Counter

from alembic import context, util
from sqlalchemy import Connection, pool

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
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode rebuilds a SQLite table by copy, drop and rename; with foreign keys
            # enforced the DROP fires the children's ON DELETE CASCADE / SET NULL and takes their
            # rows or references with it. SQLite ignores this pragma inside a transaction, so it
            # is set (and committed) before Alembic begins one.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        applied: list[object] = []
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=sqlite,
            compare_type=True,
            on_version_apply=lambda **step: applied.append(step),
        )
        with context.begin_transaction():
            if connection.dialect.name == "postgresql":
                # Two sidecars started together (a rolling restart, two replicas) both migrate
                # at start-up: the second waits here until the first commits, then finds the
                # database at head. Released with the transaction.
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
            context.run_migrations()
        if sqlite and applied:
            # Only after a step ran: the check reads every child row, too slow for each start.
            _check_foreign_keys(connection)
    engine.dispose()


def _check_foreign_keys(connection: Connection) -> None:
    """Fail the migration when, with enforcement off, it left a row pointing at no parent: the
    sidecar would run on with foreign keys that no longer hold."""
    violations = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
    connection.commit()
    if not violations:
        return
    counts = Counter(f"{table} -> {parent}" for table, _rowid, parent, _fkid in violations)
    listed = ", ".join(f"{pair}: {n} rows" for pair, n in sorted(counts.items()))
    raise util.CommandError(f"after migrating, rows point at no parent row ({listed})")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
