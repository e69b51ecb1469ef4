"""Engine and session factory. The caller owns the transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

# Threads that may each hold one pooled connection at a time: the API's worker threads (sync
# routes and ``run_in_threadpool``) and the loops' ``asyncio.to_thread`` executor. The pool has a
# connection for every one of them, so no thread ever waits for a connection held by a thread
# that is itself waiting (``app.main`` sizes both thread pools with these numbers).
API_THREADS = 24
LOOP_THREADS = 8
POOL_SIZE = API_THREADS + LOOP_THREADS
POOL_OVERFLOW = 4


def _normalise(url: str) -> str:
    # psycopg 3 is the driver we ship; a bare postgresql:// would ask for psycopg2.
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite gets WAL, foreign keys and a busy timeout so the API threads
    and the poller can share one file."""
    url = _normalise(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("connect_args", {"check_same_thread": False, "timeout": 30})
        if parsed.database and parsed.database != ":memory:" and "poolclass" not in kwargs:
            kwargs.setdefault("pool_size", POOL_SIZE)
            kwargs.setdefault("max_overflow", POOL_OVERFLOW)
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    if "poolclass" not in kwargs:
        kwargs.setdefault("pool_size", POOL_SIZE)
        kwargs.setdefault("max_overflow", POOL_OVERFLOW)
    return create_engine(url, **kwargs)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that do not expire objects on commit (API responses read them afterwards)."""
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error."""
    with factory() as session, session.begin():
        yield session
