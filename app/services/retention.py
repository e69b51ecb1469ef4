"""The retention loop: runs ``app.db.retention`` on the leader, a bounded step per transaction.

Each step deletes at most ``batch`` rows per table and commits, so the poller and the API are
never blocked behind one long delete; a run stops after ``budget_s`` and the next run goes on.
"""

from __future__ import annotations

import asyncio
import time

from sqlalchemy.orm import Session, sessionmaker

from app.db import retention
from app.db.session import transaction
from app.services.base import Clock, LoopService, wall_clock_ms


class RetentionService(LoopService):
    """Downsample and prune the recorded history (``app.db.retention``)."""

    name = "retention"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        windows: retention.Windows,
        *,
        interval_s: float,
        batch: int = 5000,
        budget_s: float = 30.0,
        clock: Clock = wall_clock_ms,
    ) -> None:
        super().__init__(interval_s, clock)
        self.sessions = sessions
        self.windows = windows
        self.batch = batch
        self.budget_s = budget_s
        self._since: dict[str, int] = {}
        self.last: retention.Pruned | None = None

    async def run_once(self, now_ms: int) -> None:
        self.last = await asyncio.to_thread(self.prune, now_ms)
        if self.last.total_rows:
            self.log.info(
                "retention: deleted %s, downsampled hours %s",
                self.last.deleted_rows,
                self.last.downsampled_hours,
            )

    def prune(self, now_ms: int) -> retention.Pruned:
        """Steps until nothing is left to do or the time budget is spent; the sum of them."""
        started = time.monotonic()
        total = retention.Pruned()
        while True:
            with transaction(self.sessions) as session:
                step = retention.prune_step(
                    session, self.windows, now_ms, batch=self.batch, since=self._since
                )
            for table, rows in step.deleted_rows.items():
                total.add(table, hours=step.downsampled_hours.get(table, 0), rows=rows)
            if not step.more or time.monotonic() - started > self.budget_s:
                total.more = step.more
                return total
