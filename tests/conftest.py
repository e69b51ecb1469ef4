"""Shared fixtures: databases on both engines (SQLite file, real PostgreSQL)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.db.migrate import upgrade
from app.db.session import make_engine, make_session_factory

PG_ENV = "YARN_SIDECAR_TEST_PG_URL"


def _pg_admin_url() -> str | None:
    url = os.environ.get(PG_ENV)
    if url:
        return url
    if os.environ.get("YARN_SIDECAR_REQUIRE_PG") == "1":
        pytest.fail(f"{PG_ENV} is not set but YARN_SIDECAR_REQUIRE_PG=1 (CI runs on PostgreSQL)")
    return None


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Iterator[str]:
    """A fresh, empty database URL on each engine: a temp SQLite file, or a new PostgreSQL
    database created for this test and dropped after it."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/sidecar.db"
        return
    with fresh_pg_database() as url:
        yield url


@contextlib.contextmanager
def fresh_pg_database() -> Iterator[str]:
    """A new, empty PostgreSQL database on the test server, dropped afterwards (skips the test
    when no server is configured)."""
    admin = _pg_admin_url()
    if admin is None:
        pytest.skip(f"{PG_ENV} not set (scripts/postgres-up prints one)")
    name = f"sidecar_t_{uuid.uuid4().hex[:12]}"
    admin_engine = create_engine(
        make_url(admin).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    with admin_engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin_engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin_engine.dispose()


@dataclass
class Db:
    url: str
    engine: Engine
    sessions: sessionmaker[Session]


@pytest.fixture
def db(db_url: str) -> Iterator[Db]:
    """A database migrated to head, with an engine and session factory."""
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        yield Db(db_url, engine, make_session_factory(engine))
    finally:
        engine.dispose()


@pytest.fixture(autouse=True)
def _local_api_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """Apps built by tests serve on loopback without authentication and answer any Host (the test
    clients use made-up host names). Authentication, roles and the Host check have their own tests,
    which pass ``auth="token"`` / ``allowed_hosts`` explicitly (keyword arguments beat the
    environment)."""
    monkeypatch.setenv("YARN_SIDECAR_AUTH", "none")
    monkeypatch.setenv("YARN_SIDECAR_ALLOWED_HOSTS", "*")
