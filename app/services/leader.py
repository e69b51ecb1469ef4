"""Leader election among sidecar processes that share one PostgreSQL database.

Exactly one process leads: the one holding a session-level advisory lock on a dedicated
connection (not from the pool, so no request ever returns it or runs on it). PostgreSQL releases
the lock when that connection ends, for whatever reason (the process dies, the network drops),
so a crashed leader needs no lease to expire. The leader re-checks its connection every tick and
steps down the moment it cannot; followers try to take the lock every tick.

Only the leader runs the poller, the controller and the admission loop (``Runtime`` gates their
ticks on ``leads``); every process serves reads and accepts ``POST /jobs``, which commits the job
before answering, so the leader picks it up. Taking the lead increments the epoch
(``app.db.leader_repo``); pushes and submissions record it and are fenced by it.

SQLite cannot be shared between hosts: a SQLite sidecar is a single process and always leads.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, create_engine, pool, text
from sqlalchemy.orm import Session, sessionmaker

from app.db import leader_repo
from app.db.session import _normalise, transaction
from app.services.base import Clock, LoopService, wall_clock_ms

log = logging.getLogger(__name__)

# Advisory-lock key of leadership (distinct from the migrations' lock).
LEADER_LOCK = 0x5953_4C44  # "YSLD"


def identity() -> str:
    """host:pid of this process, as the leadership record and ``/ready`` show it."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Leadership(LoopService):
    """Takes, keeps and loses the lead; ``leads()`` says whether this process may act."""

    name = "leader"

    def __init__(
        self,
        database_url: str,
        sessions: sessionmaker[Session],
        *,
        interval_s: float,
        clock: Clock = wall_clock_ms,
    ) -> None:
        super().__init__(interval_s, clock)
        self.sessions = sessions
        self.holder = identity()
        self.single_process = not _normalise(database_url).startswith("postgresql")
        self._engine: Engine | None = None
        if not self.single_process:
            # Keepalives and a statement timeout: on a silent network partition the check fails
            # within seconds instead of hanging on TCP's own timeout while another process may
            # already have been granted the lock.
            self._engine = create_engine(
                _normalise(database_url),
                poolclass=pool.NullPool,
                connect_args={
                    "keepalives": 1,
                    "keepalives_idle": 5,
                    "keepalives_interval": 2,
                    "keepalives_count": 3,
                    "connect_timeout": 5,
                    "options": "-c statement_timeout=5000",
                },
            )
        self._conn: Any = None
        self.is_leader = False
        self.epoch: int | None = None
        self.changes = 0
        # Called on the event loop each time this process takes the lead (``Runtime``).
        self.on_lead: Callable[[], None] | None = None

    def leads(self) -> bool:
        """Whether this process runs the control loops now."""
        return self.is_leader

    async def run_once(self, now_ms: int) -> None:
        led = self.is_leader
        await asyncio.to_thread(self.check, now_ms)
        if self.is_leader and not led and self.on_lead is not None:
            self.on_lead()

    def check(self, now_ms: int) -> bool:
        """Keep or take the lead; returns whether this process leads."""
        if self.single_process:
            if not self.is_leader:
                self._became_leader(now_ms)
            return True
        if self.is_leader:
            if self._still_held():
                return True
            self._lost("the lock's connection to PostgreSQL failed")
        if self._try_take():
            self._became_leader(now_ms)
        return self.is_leader

    def _still_held(self) -> bool:
        try:
            self._conn.execute(text("SELECT 1")).scalar_one()
            return True
        except Exception:  # any failure of the dedicated connection means the lock may be gone
            log.warning("leader lock connection failed", exc_info=True)
            self._close()
            return False

    def _try_take(self) -> bool:
        assert self._engine is not None
        try:
            if self._conn is None:
                self._conn = self._engine.connect()
            got = self._conn.execute(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": LEADER_LOCK}
            ).scalar_one()
            # a session lock lives outside transactions: end the implicit one
            self._conn.commit()
            return bool(got)
        except Exception:
            log.warning("cannot reach PostgreSQL to take the lead", exc_info=True)
            self._close()
            return False

    def _became_leader(self, now_ms: int) -> None:
        with transaction(self.sessions) as session:
            self.epoch = leader_repo.take_lead(session, self.holder, now_ms)
        self.is_leader = True
        self.changes += 1
        how = "single process (SQLite)" if self.single_process else "advisory lock held"
        log.info("this sidecar (%s) leads, epoch %d: %s", self.holder, self.epoch, how)

    def _lost(self, why: str) -> None:
        self.is_leader = False
        self.changes += 1
        log.warning("%s stopped leading (epoch %s): %s", self.holder, self.epoch, why)

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                log.debug("closing the lock connection failed", exc_info=True)
            self._conn = None

    def stop(self) -> None:
        """Give the lead up at shutdown (closing the connection releases the lock at once)."""
        super().stop()
        self._close()
        self.is_leader = False
        if self._engine is not None:
            self._engine.dispose()

    def status(self) -> dict[str, Any]:
        """For ``/ready`` and ``/metrics``: this process's role and the current leader."""
        with self.sessions() as session:
            row = leader_repo.current(session)
        return {
            "role": "leader" if self.is_leader else "follower",
            "self": self.holder,
            "epoch": self.epoch if self.is_leader else None,
            "leader": row.holder if row is not None else None,
            "leader_epoch": row.epoch if row is not None else None,
            "single_process": self.single_process,
        }
