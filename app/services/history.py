"""The history collector: reads finished MapReduce jobs from the JobHistory server into the
database (``app.db.history_models``), with their tasks, phase timings and counters.

Its work list is the database itself: finished MapReduce apps the poller stored that have no
history row yet, oldest first, at most ``batch`` per tick. That makes it incremental, idempotent
and restart-safe without a watermark of its own: whatever was not stored before a restart is
still on the list after it. A job the JobHistory server does not know yet (it moves a finished
job's files into its done directory with a delay) is asked about again after ``retry_after_s``,
up to ``max_attempts`` times, then recorded as missing. When the server is unreachable the tick
stops at the first failure and the rest waits for the next tick.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.db import control_repo, history_repo, repo
from app.db.session import transaction
from app.domain.history import MapReduceJob
from app.redact import redact_text
from app.services.base import Clock, LoopService, wall_clock_ms
from app.yarn.errors import RMError, RMUnavailable

BATCH = 50
RETRY_AFTER_S = 30.0
MAX_ATTEMPTS = 10
MAX_ERROR_CHARS = 500


class HistorySource(Protocol):
    """What the collector needs of the JobHistory client."""

    async def job_of_app(self, app_id: str) -> MapReduceJob | None: ...


class HistoryCollector(LoopService):
    """Stores each finished MapReduce app's job history once."""

    name = "history"

    def __init__(
        self,
        source: HistorySource,
        sessions: sessionmaker[Session],
        *,
        cluster_name: str,
        interval_s: float,
        batch: int = BATCH,
        retry_after_s: float = RETRY_AFTER_S,
        max_attempts: int = MAX_ATTEMPTS,
        clock: Clock = wall_clock_ms,
    ) -> None:
        super().__init__(interval_s, clock)
        self.source = source
        self.sessions = sessions
        self.cluster_name = cluster_name
        self.batch = batch
        self.retry_after_ms = int(retry_after_s * 1000)
        self.max_attempts = max_attempts
        self.stored = 0
        self.last_error: str | None = None

    async def run_once(self, now_ms: int) -> None:
        """Ask about up to ``batch`` apps and store what the server knows."""
        todo, cluster_vcores = await asyncio.to_thread(self._todo, now_ms)
        for app_id in todo:
            try:
                job = await self.source.job_of_app(app_id)
            except RMUnavailable as exc:
                self.last_error = redact_text(exc.message)[:MAX_ERROR_CHARS]
                self.log.warning("JobHistory server unavailable: %s", self.last_error)
                return
            except RMError as exc:
                await asyncio.to_thread(self._miss, app_id, now_ms, exc.message)
                continue
            if job is None:
                await asyncio.to_thread(
                    self._miss, app_id, now_ms, "the JobHistory server does not know this job"
                )
                continue
            await asyncio.to_thread(self._store, app_id, job, cluster_vcores, now_ms)
            self.stored += 1
        self.last_error = None

    def _todo(self, now_ms: int) -> tuple[list[str], float]:
        """The apps to ask about this tick, and the cluster's size to record with them."""
        with self.sessions() as session:
            cluster = repo.get_cluster(session, self.cluster_name)
            if cluster is None:
                return [], 0.0
            todo = history_repo.to_collect(
                session, cluster.id, now_ms, limit=self.batch, retry_after_ms=self.retry_after_ms
            )
            totals = control_repo.latest_totals(session, cluster.id, now_ms) if todo else None
            return todo, totals.vcores if totals else 0.0

    def _store(self, app_id: str, job: MapReduceJob, cluster_vcores: float, now_ms: int) -> None:
        with transaction(self.sessions) as session:
            history_repo.store_job(session, app_id, job, cluster_vcores, now_ms)

    def _miss(self, app_id: str, now_ms: int, error: str) -> None:
        with transaction(self.sessions) as session:
            history_repo.record_miss(
                session,
                app_id,
                now_ms,
                redact_text(error)[:MAX_ERROR_CHARS],
                max_attempts=self.max_attempts,
            )
