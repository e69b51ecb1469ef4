"""Migrations: one head, empty -> head on both engines, models match, downgrade with data."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from app.db.migrate import alembic_config, current_revision, downgrade, head_revision, upgrade
from app.db.models import Base
from app.db.session import make_engine


def test_single_head() -> None:
    heads = ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads()
    assert len(heads) == 1


def test_upgrade_empty_database_to_head_and_models_agree(db_url: str) -> None:
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        assert current_revision(engine) == head_revision(db_url)
        tables = set(inspect(engine).get_table_names())
        assert set(Base.metadata.tables) <= tables
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, Base.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
    finally:
        engine.dispose()


def test_downgrade_with_data_then_upgrade_again(db_url: str) -> None:
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO clusters (name, rm_urls, finished_watermark_ms, first_seen_ms) "
                    "VALUES ('c', 'http://rm:8088', 0, 1)"
                )
            )
        downgrade(db_url, "base")
        assert "clusters" not in inspect(engine).get_table_names()
        upgrade(db_url)
        assert current_revision(engine) == head_revision(db_url)
    finally:
        engine.dispose()


def test_sidecars_starting_together_on_postgresql_both_migrate(db_url: str) -> None:
    """Two processes' ``serve`` migrate at once (a rolling restart): one waits for the other's
    transaction, then finds the database at head; neither fails on a table the other created."""
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite is single-process: one sidecar migrates it")
    import subprocess
    import sys

    # Processes, as in production (Alembic's context is per process, not per thread).
    code = "import sys; from app.db.migrate import upgrade; upgrade(sys.argv[1])"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, db_url], stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    engine = make_engine(db_url)
    try:
        assert current_revision(engine) == head_revision(db_url)
    finally:
        engine.dispose()
