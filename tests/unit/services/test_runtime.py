"""The runtime's schedule: gated services run as soon as this process takes the lead, not an
interval after their first (skipped) run."""

from __future__ import annotations

import asyncio
import time

from app.services.base import LoopService
from app.services.leader import Leadership
from app.services.runtime import Runtime
from tests.conftest import Db


class Counting(LoopService):
    name = "counting"

    def __init__(self) -> None:
        super().__init__(interval_s=3600)
        self.runs: list[float] = []

    async def run_once(self, now_ms: int) -> None:
        self.runs.append(time.monotonic())


class SlowToLead(Leadership):
    """Takes the lead a moment after its first check starts, as the real check (a database
    round trip, and on PostgreSQL an advisory lock) does, so the gated services' first runs
    find no leader."""

    def check(self, now_ms: int) -> bool:
        time.sleep(0.3)
        return super().check(now_ms)


def test_gated_services_run_once_the_lead_is_taken(db: Db) -> None:
    leader = SlowToLead(db.url, db.sessions, interval_s=3600)
    service = Counting()

    async def scenario() -> tuple[float, list[float]]:
        runtime = Runtime([service], leader)
        started = time.monotonic()
        runtime.start()
        try:
            for _ in range(100):
                if service.runs:
                    break
                await asyncio.sleep(0.05)
        finally:
            runtime.shutdown()
        return started, service.runs

    started, runs = asyncio.run(scenario())
    assert leader.epoch is not None  # it took the lead (shutting down gave it up again)
    # one run, within seconds of the lead: not the hour its interval would have made it wait
    assert len(runs) == 1 and runs[0] - started < 3.0
