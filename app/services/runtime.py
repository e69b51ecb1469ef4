"""The only module that imports APScheduler: it runs loop services' ticks on the event loop.

Each service becomes one interval job with ``max_instances=1`` (a slow tick is never overlapped
by the next) and ``coalesce=True`` (missed runs collapse into one), first run immediately.
The gated services' first runs usually come before the leader's first check has taken the lead,
so they are skipped; when the lead is taken, each gated service runs at once instead of an
interval later (until then the admission service has no round to build on, and the first
submission would pay for a full round over every waiting job).
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

    def __init__(self, services: Sequence[LoopService], leader: Leadership | None = None) -> None:
        """``leader`` first ticks before the others, which then run only while it leads."""
        self.services = ([leader] if leader is not None else []) + list(services)
        self._gated = list(services) if leader is not None else []
        if leader is not None:
            for service in services:
                service.gate = leader.leads
            leader.on_lead = self._run_gated_now
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

    def _run_gated_now(self) -> None:
        """Bring every gated service's next run forward to now (the lead was just taken)."""
        if not self._scheduler.running:
            return
        now = dt.datetime.now(dt.UTC)
        for service in self._gated:
            job = self._scheduler.get_job(service.name)
            if job is not None:
                job.modify(next_run_time=now)

    def shutdown(self) -> None:
        """Stop scheduling; a tick in flight is cancelled with the event loop's tasks."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        for service in self.services:
            service.stop()
