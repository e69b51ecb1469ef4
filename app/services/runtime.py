"""The only module that imports APScheduler: it runs loop services' ticks on the event loop.

Each service becomes one interval job with ``max_instances=1`` (a slow tick is never overlapped
by the next) and ``coalesce=True`` (missed runs collapse into one), first run immediately.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app.services.base import LoopService
from app.services.leader import Leadership

log = logging.getLogger(__name__)


class Runtime:
    """Starts and stops the periodic services for the server's lifespan."""

    def __init__(
        self, services: Sequence[LoopService], leader: Leadership | None = None
    ) -> None:
        """``leader`` first ticks before the others, which then run only while it leads."""
        self.services = ([leader] if leader is not None else []) + list(services)
        if leader is not None:
            for service in services:
                service.gate = leader.leads
        self._scheduler = AsyncIOScheduler(timezone=dt.UTC)

    def start(self) -> None:
        """Schedule every service's tick, the first one now."""
        now = dt.datetime.now(dt.UTC)
        for service in self.services:
            self._scheduler.add_job(
                service.tick,
                "interval",
                seconds=service.interval_s,
                id=service.name,
                max_instances=1,
                coalesce=True,
                next_run_time=now,
                misfire_grace_time=None,
            )
        self._scheduler.start()
        log.info("started %s", ", ".join(s.name for s in self.services))

    def shutdown(self) -> None:
        """Stop scheduling; a tick in flight is cancelled with the event loop's tasks."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        for service in self.services:
            service.stop()
