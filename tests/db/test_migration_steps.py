"""Migrations carry data: every step up and down with rows in every table loses none of them
(SQLite's batch rebuilds must not fire foreign-key cascades), a migration that leaves an orphan
fails, and the indexes that let retention delete decisions cheaply are there."""

from __future__ import annotations

import sqlite3
from itertools import pairwise
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Column, Connection, Engine, MetaData, insert, inspect, select, text
from sqlalchemy import types as sqltypes
from sqlalchemy.exc import IntegrityError

from app.db.migrate import alembic_config, downgrade, upgrade
from app.db.session import make_engine


def _revisions(url: str) -> list[str]:
    """Every revision, oldest first."""
    script = ScriptDirectory.from_config(alembic_config(url))
    return [s.revision for s in reversed(list(script.walk_revisions()))]


def _value(column: Column[Any], n: int) -> Any:
    kind = column.type
    if isinstance(kind, sqltypes.Boolean):
        return True
    if isinstance(kind, sqltypes.Integer):
        return n
    if isinstance(kind, (sqltypes.Float, sqltypes.Numeric)):
        return 1.5
    if isinstance(kind, sqltypes.JSON):
        return {"a": 1}
    return f"v{n}"


def _populate(engine: Engine, n: int) -> None:
    """One more row in every table of the schema as it is now, each foreign key pointing at a
    row of its parent (parents are filled first)."""
    metadata = MetaData()
    metadata.reflect(engine)
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            if table.name == "alembic_version":
                continue
            single_int_key = len(table.primary_key.columns) == 1 and isinstance(
                next(iter(table.primary_key.columns)).type, sqltypes.Integer
            )
            row = {
                c.name: _value(c, n)
                for c in table.columns
                if not (c.primary_key and single_int_key)
            }
            for fk in table.foreign_keys:
                row[fk.parent.name] = conn.execute(select(fk.column).limit(1)).scalar()
            _insert_unless_taken(conn, table, row)


def _insert_unless_taken(conn: Connection, table: Any, row: dict[str, Any]) -> None:
    # A table with one row per parent (a unique foreign key) already has its row.
    try:
        with conn.begin_nested():
            conn.execute(insert(table).values(**row))
    except IntegrityError as exc:
        if "unique" not in str(exc).lower() and "duplicate" not in str(exc).lower():
            raise


def _counts(engine: Engine) -> dict[str, int]:
    """Rows per table, and rows whose foreign key is set per ``table.column``."""
    inspector = inspect(engine)  # foreign keys only: a full reflection per step is slow
    tables = [t for t in inspector.get_table_names() if t != "alembic_version"]
    foreign_keys = inspector.get_multi_foreign_keys()
    out: dict[str, int] = {}
    with engine.connect() as conn:
        for table in tables:
            out[table] = conn.scalar(text(f'SELECT COUNT(*) FROM "{table}"')) or 0
            for fk in foreign_keys[(None, table)]:
                for column in fk["constrained_columns"]:
                    query = f'SELECT COUNT(*) FROM "{table}" WHERE "{column}" IS NOT NULL'
                    out[f"{table}.{column}"] = conn.scalar(text(query)) or 0
    return out


def _lost(before: dict[str, int], after: dict[str, int]) -> dict[str, tuple[int, int]]:
    # A table or column the step dropped is gone by design; one still there keeps its rows.
    return {k: (before[k], after[k]) for k in before if k in after and after[k] < before[k]}


def test_every_step_up_and_down_keeps_every_row(db_url: str) -> None:
    revisions = _revisions(db_url)
    engine = make_engine(db_url)
    losses = []
    try:
        upgrade(db_url, revisions[0])
        for n, (older, newer) in enumerate(pairwise(revisions), 1):
            _populate(engine, n)
            before = _counts(engine)
            upgrade(db_url, newer)
            if lost := _lost(before, _counts(engine)):
                losses.append((f"{older} -> {newer}", lost))
        for n, (older, newer) in enumerate(reversed(list(pairwise(revisions))), 100):
            _populate(engine, n)
            before = _counts(engine)
            downgrade(db_url, older)
            if lost := _lost(before, _counts(engine)):
                losses.append((f"{newer} -> {older}", lost))
        assert losses == []
        upgrade(db_url)  # and back to head over all that data
    finally:
        engine.dispose()


def test_sqlite_enforces_foreign_keys_again_after_migrating(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    upgrade(url)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


def test_a_migration_that_leaves_an_orphan_fails(tmp_path: Any) -> None:
    """With enforcement off during migrations, ``PRAGMA foreign_key_check`` is the only guard: a
    step leaving a row whose parent is gone must fail, not pass silently."""
    path = tmp_path / "s.db"
    url = f"sqlite:///{path}"
    revisions = _revisions(url)
    upgrade(url, revisions[-2])
    raw = sqlite3.connect(path)  # foreign keys off: the state a faulty migration would leave
    raw.execute(
        "INSERT INTO job_decisions (job_id, created_ms, action, cpus, reason, numbers) "
        "VALUES ('no-such-job', 1, 'admit', 1, '', '{}')"
    )
    raw.commit()
    raw.close()
    with pytest.raises(CommandError, match=r"job_decisions -> jobs: 1 rows"):
        upgrade(url)


def _jobs_sharing_a_key(engine: Engine) -> None:
    row = (
        "INSERT INTO jobs (id, name, queue, state, requested_tasks, deadline_s, deadline_ms, "
        "submitted_ms, run, tags, idempotency_key, idempotency_owner, request_hash, timeout_set, "
        "reason, updated_ms, owner) VALUES (:id, 'n', 'q', 'finished', 1, 1, 1, :submitted, '{}', "
        "'[]', :key, :owner, 'h', false, '', 0, :owner)"
    )
    with engine.begin() as conn:
        for job_id, submitted, key, owner in (
            ("ff" * 16, 1, "same", "alice"),  # submitted first, the largest id
            ("00" * 16, 2, "same", "bob"),
            ("0a" * 16, 2, "same", "carol"),  # same time as bob's, larger id
            ("11" * 16, 3, "other", "bob"),
            ("aa" * 16, 4, None, "carol"),
        ):
            conn.execute(text(row), dict(id=job_id, submitted=submitted, key=key, owner=owner))


def test_downgrade_of_owner_scoped_keys_keeps_the_first_submitted(db_url: str) -> None:
    """Back to one key per database: of the jobs sharing a key, the first submitted keeps it (a
    retry of that request still replays the job it created), the others lose it."""
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        _jobs_sharing_a_key(engine)
        downgrade(db_url, "0014")
        with engine.connect() as conn:
            keys = dict(conn.execute(text("SELECT id, idempotency_key FROM jobs")).all())
        assert keys == {
            "ff" * 16: "same",
            "00" * 16: None,
            "0a" * 16: None,
            "11" * 16: "other",
            "aa" * 16: None,
        }
    finally:
        engine.dispose()


def test_retention_deletes_of_decisions_find_their_references_by_index(db_url: str) -> None:
    """Deleting a decision nulls ``job_decisions.round_id`` and ``config_pushes.decision_id``;
    without an index on each, every deleted decision scans the whole child table."""
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        inspector = inspect(engine)
        for table, column in (("job_decisions", "round_id"), ("config_pushes", "decision_id")):
            leading = [ix["column_names"][0] for ix in inspector.get_indexes(table)]
            assert column in leading, f"{table}.{column} has no index"
    finally:
        engine.dispose()
