"""``RMClient`` against a real ResourceManager (``docs/yarn.md`` s.3-5; harness fixture ``rm_url``).

Every read method once, a scheduler-conf mutation that bumps the version (restored afterwards),
validation of an invalid configuration, and the submit -> timeout -> kill path of a ``sleep`` AM.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from app.domain.model import QueueState
from app.yarn import RMClient, SchedConfUpdate
from app.yarn.errors import RMNotFound, RMRejected

pytestmark = pytest.mark.yarn

CS_PREFIX = "yarn.scheduler.capacity."


@pytest.fixture
async def rm(rm_url: str) -> AsyncIterator[RMClient]:
    async with RMClient([rm_url], user="sidecar-it", timeout_s=30.0) as client:
        yield client


async def _a_leaf(rm: RMClient) -> QueueState:
    leaves = [q for q in await rm.scheduler() if q.is_leaf and q.state == "RUNNING"]
    assert leaves, "the test RM has no running leaf queue"
    return leaves[0]


async def test_cluster_info_metrics_nodes(rm: RMClient) -> None:
    info = await rm.cluster_info()
    assert (info.state, info.ha_state) == ("STARTED", "ACTIVE")
    assert info.rm_version
    metrics = await rm.metrics()
    assert metrics.active_nodes >= 1
    assert metrics.total.memory_mb > 0
    nodes = await rm.nodes()
    assert len(nodes) == metrics.total_nodes
    assert all(n.capability.memory_mb > 0 for n in nodes if n.state == "RUNNING")
    assert await rm.nodes(states=["LOST"]) == ()


async def test_scheduler_tree(rm: RMClient) -> None:
    queues = await rm.scheduler()
    root = queues[0]
    assert (root.path, root.parent, root.is_leaf) == ("root", None, False)
    paths = {q.path for q in queues}
    for queue in queues[1:]:
        assert queue.parent in paths
        assert queue.path == f"{queue.parent}.{queue.name}"
    assert any(q.is_leaf for q in queues)


async def test_apps_and_app_not_found(rm: RMClient) -> None:
    apps = await rm.apps()
    assert all(a.app_id.startswith("application_") for a in apps)
    assert await rm.apps(states=["FINISHED"], tags=["no-such-tag-anywhere"]) == ()
    with pytest.raises(RMNotFound, match="not found"):
        await rm.app("application_1000000000000_9999")


async def test_scheduler_conf_read(rm: RMClient) -> None:
    conf = await rm.scheduler_conf()
    assert CS_PREFIX + "root.queues" in conf
    assert await rm.scheduler_conf_version() >= 1


async def test_update_bumps_version_and_is_restored(rm: RMClient) -> None:
    leaf = await _a_leaf(rm)
    key = "maximum-application-lifetime"
    before = (await rm.scheduler_conf()).get(f"{CS_PREFIX}{leaf.path}.{key}", "")
    version = await rm.scheduler_conf_version()
    change = SchedConfUpdate(update_queues={leaf.path: {key: "86400"}})
    try:
        text = await rm.update_scheduler_conf(change)
        assert "successfully" in text
        assert await rm.scheduler_conf_version() == version + 1
        assert (await rm.scheduler_conf())[f"{CS_PREFIX}{leaf.path}.{key}"] == "86400"
    finally:
        await rm.update_scheduler_conf(SchedConfUpdate(update_queues={leaf.path: {key: before}}))
    assert (await rm.scheduler_conf()).get(f"{CS_PREFIX}{leaf.path}.{key}", "") == before


async def test_invalid_config_is_rejected_by_validate_and_update(rm: RMClient) -> None:
    leaf = await _a_leaf(rm)
    invalid = SchedConfUpdate(update_queues={leaf.path: {"capacity": "150"}})
    version = await rm.scheduler_conf_version()
    with pytest.raises(RMRejected) as by_validate:
        await rm.validate_scheduler_conf(invalid)
    assert by_validate.value.status == 400
    assert by_validate.value.message
    with pytest.raises(RMRejected) as by_update:
        await rm.update_scheduler_conf(invalid)
    assert by_update.value.status == 400
    assert by_update.value.message
    conf = await rm.scheduler_conf()
    assert conf.get(f"{CS_PREFIX}{leaf.path}.capacity") != "150"
    assert await rm.scheduler_conf_version() >= version


async def _wait_for_state(rm: RMClient, app_id: str, states: set[str], limit_s: float) -> str:
    state = ""
    for _ in range(int(limit_s / 0.5)):
        state = (await rm.app(app_id)).state
        if state in states:
            return state
        await asyncio.sleep(0.5)
    return state


async def test_submit_timeout_and_kill_a_sleep_am(rm: RMClient) -> None:
    leaf = await _a_leaf(rm)
    new = await rm.new_application()
    assert new.app_id.startswith("application_")
    assert new.max_resources.memory_mb > 0
    await rm.submit_application(
        {
            "application-id": new.app_id,
            "application-name": "sidecar-it-kill",
            "queue": leaf.name,
            "max-app-attempts": 1,
            "application-type": "YARN",
            "application-tags": {"tag": ["sidecar-it", "Kill-Me"]},
            "resource": {"memory": 256, "vCores": 1},
            "am-container-spec": {"commands": {"command": "sleep 60"}},
        }
    )
    state = await _wait_for_state(rm, new.app_id, {"ACCEPTED", "RUNNING"}, limit_s=30)
    assert state in {"ACCEPTED", "RUNNING"}
    app = await rm.app(new.app_id)
    assert set(app.tags) == {"sidecar-it", "kill-me"}  # lower-cased by the RM (docs/yarn.md 4.2)
    assert app.submitted_ms is not None
    await rm.set_application_timeout(new.app_id, int(time.time() * 1000) + 3_600_000)
    tagged = await rm.apps(tags=["sidecar-it"], states=["ACCEPTED", "RUNNING"])
    assert new.app_id in {a.app_id for a in tagged}
    final = await rm.kill_application(new.app_id, diagnostics="sidecar integration test")
    assert final == "KILLED"
    killed = await rm.app(new.app_id)
    assert killed.state == "KILLED"
    assert killed.finished_ms is not None
    assert killed.allocated.memory_mb == 0


async def test_snapshot(rm: RMClient) -> None:
    now_ms = int(time.time() * 1000)
    snap = await rm.snapshot(now_ms, finished_since_ms=None)
    assert snap.taken_ms == now_ms
    assert snap.info.ha_state == "ACTIVE"
    assert snap.queues[0].path == "root"
    assert snap.scheduler_type == "capacityScheduler"
    assert len(snap.nodes) >= 1
