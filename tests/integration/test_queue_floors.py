"""Queue control as an operator sees it on a real Hadoop 3.5.0 RM: one queue is loaded until
Fawkes TD (or LTRF) moves capacity to it, then the load goes away. At every tick no queue is below
its floor, the deadline queue's guarantee holds an ApplicationMaster and a container, and on the
idle cluster the capacities walk back to the baseline within the step limit. Restores the queue
configuration it found."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path

import pytest

from app.control.config import resolve
from app.db.migrate import upgrade
from app.db.session import make_engine, make_session_factory
from app.services.controller import Controller
from app.services.poller import Poller
from app.yarn import workload
from app.yarn.actuator import Actuator
from app.yarn.client import RMClient
from app.yarn.wire import SchedConfUpdate

TAG = "it-queue-floors"
PARENT = "root"
POLL_S = 1.0
STEP = 10.0
# one container of the minimum allocation (1 vcore of 8) per queue, two for the deadline queue
FLOORS = {"*": 1, "root.deadline": 2}
FLOOR_PCT = {"root.default": 12.5, "root.etl": 12.5, "root.adhoc": 12.5, "root.deadline": 25.0}


@pytest.fixture
async def rm(rm_url: str) -> AsyncIterator[RMClient]:
    """A client; afterwards root's children get back the values they had, and our apps die."""
    async with RMClient([rm_url], timeout_s=30) as client:
        before = (await Actuator(client).read_live(PARENT)).values
        yield client
        await workload.kill_unfinished(client, tags=[TAG])
        if (await Actuator(client).read_live(PARENT)).values != before:
            await client.update_scheduler_conf(SchedConfUpdate(update_queues=before))


async def _capacities(rm: RMClient) -> dict[str, float]:
    return {q.path: q.capacity for q in await rm.scheduler() if q.parent == PARENT}


async def _wait_idle(rm: RMClient, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = await rm.metrics()
        if m.apps_running == 0 and m.apps_pending == 0 and m.containers_allocated == 0:
            return
        await asyncio.sleep(1.0)
    pytest.fail("the cluster did not become idle")


@pytest.mark.parametrize("policy", ["fawkes:TD", "ltrf"])
async def test_load_then_idle_keeps_floors_and_returns_to_the_baseline(
    rm: RMClient, rm_url: str, harness: workload.Harness, tmp_path: Path, policy: str
) -> None:
    await _wait_idle(rm)
    baseline = await _capacities(rm)
    # hadoop-docker/conf/capacity-scheduler.xml, as every test leaves it
    assert baseline == {"root.default": 40, "root.etl": 20, "root.adhoc": 20, "root.deadline": 20}
    db_url = f"sqlite:///{tmp_path}/sidecar.db"
    upgrade(db_url)
    engine = make_engine(db_url)
    cfg = resolve(
        policy=policy,
        params={},
        mode="enforce",
        bounds={},
        weights={},
        max_step_pp=STEP,
        min_change_pp=1.0,
        allow_drift_overwrite=False,
        managed_parent=PARENT,
        interval_s=3.0,
        floors=FLOORS,
    )
    sessions = make_session_factory(engine)
    poller = Poller(rm, sessions, cluster_name="it", rm_urls=(rm_url,), interval_s=POLL_S)
    ctl = Controller(
        Actuator(rm, retries=1, backoff_s=0.2),
        sessions,
        defaults=cfg,
        cluster_name="it",
        rm_urls=(rm_url,),
        poll_interval_s=POLL_S,
    )
    total_vcores = (await rm.metrics()).total.vcores
    seen: list[dict[str, float]] = [baseline]

    async def tick() -> str:
        for _ in range(4):
            summary = await poller.poll(int(time.time() * 1000), force=True)
            assert summary.ok, summary.error
            await asyncio.sleep(POLL_S)
        report = await ctl.control(int(time.time() * 1000))
        assert report.status in ("pushed", "no_change"), report
        now = await _capacities(rm)
        before = seen[-1]
        seen.append(now)
        why = f"{policy}: {before} -> {now} ({report.reason})"
        assert sum(now.values()) == pytest.approx(100.0, abs=0.01), why
        # a queue below its floor is lifted to it at once; the rest of the way is step-limited
        lift = sum(max(0.0, FLOOR_PCT[q] - before[q]) for q in before)
        assert all(abs(now[q] - before[q]) <= STEP + lift + 0.01 for q in now), why
        assert all(now[q] >= FLOOR_PCT[q] - 0.005 for q in now), why
        # the RM guarantees the deadline queue whole vcores for an AM and one container
        assert math.floor(now["root.deadline"] / 100 * total_vcores + 1e-6) >= 2, why
        return report.status

    try:
        load = workload.AppSpec(queue="etl", sleep_s=300, num_containers=12, tags=(TAG,))
        ids = await workload.submit_all(rm, [load], harness)
        await workload.wait_state(rm, ids, frozenset({"RUNNING"}), timeout_s=120)
        await asyncio.sleep(5)  # the AM asks for its containers
        for _ in range(6):
            await tick()
            if seen[-1]["root.etl"] >= 50.0 - 0.01:
                break
        # etl rebalanced up to everything the others' floors leave (100 - 12.5 - 12.5 - 25)
        assert seen[-1]["root.etl"] == pytest.approx(50.0, abs=0.01), seen
        assert seen[-1]["root.etl"] > baseline["root.etl"]
        await workload.kill_unfinished(rm, tags=[TAG])
        await _wait_idle(rm)
        # the baseline with the deadline queue raised to its floor, the 5 points taken from the
        # others in proportion: 40 - 2.5, 20 - 1.25, 20 - 1.25
        target = {"root.default": 37.5, "root.etl": 18.75, "root.adhoc": 18.75}
        target["root.deadline"] = 25.0
        distance = [max(abs(seen[-1][q] - target[q]) for q in target)]
        for _ in range(6):
            await tick()
            distance.append(max(abs(seen[-1][q] - target[q]) for q in target))
            if distance[-1] < 0.01:
                break
        assert all(b <= a + 1e-9 for a, b in pairwise(distance)), distance
        assert distance[-1] < 0.01, (distance, seen[-1])
        print(policy, "capacities per tick:", seen)
    finally:
        engine.dispose()
