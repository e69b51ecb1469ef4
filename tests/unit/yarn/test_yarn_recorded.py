"""Recorded real-RM responses (``tests/fixtures/rm/``, Hadoop 3.5.0) through the client and mapping.

The recordings decide what the parser must accept. Expected values are read straight from the raw
JSON with plain dict access, independently of ``app.yarn.wire``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.domain.model import FINAL_APP_STATES, Resources
from app.yarn import RMClient, SchedConfUpdate
from app.yarn.errors import RMNotFound, RMRejected
from tests.unit.yarn.samples import recorded, recorded_text

RM = "http://rm:8088"


def replay(status: int, body: Any = None, text: str | None = None) -> RMClient:
    """A client whose every request gets the same recorded answer."""

    def handler(request: httpx.Request) -> httpx.Response:
        if text is not None:
            return httpx.Response(status, text=text)
        return httpx.Response(status, json=body)

    return RMClient([RM], transport=httpx.MockTransport(handler))


def raw_queues(queue: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Depth-first walk of the raw CapacityScheduler JSON."""
    yield queue
    children = (queue.get("queues") or {}).get("queue") or []
    for child in children if isinstance(children, list) else [children]:
        yield from raw_queues(child)


def raw_apps(body: dict[str, Any]) -> list[dict[str, Any]]:
    apps = (body.get("apps") or {}).get("app") or []
    return apps if isinstance(apps, list) else [apps]


async def test_info() -> None:
    raw = recorded("info.json")
    async with replay(200, raw) as client:
        info = await client.cluster_info()
    expected = raw["clusterInfo"]
    assert info.cluster_id == expected["id"]
    assert info.started_on_ms == expected["startedOn"]
    assert (info.state, info.ha_state) == ("STARTED", "ACTIVE")
    assert info.rm_version == expected["resourceManagerVersion"]
    assert info.hadoop_version == expected["hadoopVersion"]


@pytest.mark.parametrize("name", ["metrics.json", "metrics_idle.json"])
async def test_metrics(name: str) -> None:
    raw = recorded(name)
    async with replay(200, raw) as client:
        metrics = await client.metrics()
    m = raw["clusterMetrics"]
    assert metrics.total == Resources(vcores=m["totalVirtualCores"], memory_mb=m["totalMB"])
    assert metrics.allocated == Resources(
        vcores=m["allocatedVirtualCores"], memory_mb=m["allocatedMB"]
    )
    assert metrics.available == Resources(
        vcores=m["availableVirtualCores"], memory_mb=m["availableMB"]
    )
    assert (metrics.active_nodes, metrics.total_nodes) == (m["activeNodes"], m["totalNodes"])
    assert metrics.apps_submitted == m["appsSubmitted"]


def raw_default_pending(queue: dict[str, Any]) -> int:
    usages = (queue.get("resources") or {}).get("resourceUsagesByPartition") or []
    return sum(u["pending"]["memory"] for u in usages if u.get("partitionName", "") == "")


@pytest.mark.parametrize("name", ["scheduler.json", "scheduler_idle.json"])
async def test_scheduler_tree(name: str) -> None:
    raw = recorded(name)
    async with replay(200, raw) as client:
        queues = await client.scheduler()
    root_raw = raw["scheduler"]["schedulerInfo"]
    walked = list(raw_queues(root_raw))
    assert [q.path for q in queues] == [r["queuePath"] for r in walked]
    assert queues[0].path == "root" and queues[0].parent is None
    leaves = {r["queuePath"] for r in walked if r.get("type") == "capacitySchedulerLeafQueueInfo"}
    assert {q.path for q in queues if q.is_leaf} == leaves
    assert leaves
    for queue, r in zip(queues[1:], walked[1:], strict=True):
        assert queue.parent == queue.path.rsplit(".", 1)[0]
        assert queue.capacity == r["capacity"]
        assert queue.absolute_capacity == r["absoluteCapacity"]
        assert queue.used.memory_mb == r["resourcesUsed"]["memory"]
        assert queue.pending.memory_mb == raw_default_pending(r)
        assert queue.num_active_apps == r["numActiveApplications"]
    assert sum(q.capacity for q in queues if q.parent == "root") == pytest.approx(100.0)


async def test_running_apps() -> None:
    raw = recorded("apps_running.json")
    async with replay(200, raw) as client:
        apps = await client.apps(states=["RUNNING", "ACCEPTED"])
    expected = raw_apps(raw)
    assert [a.app_id for a in apps] == [r["id"] for r in expected]
    assert apps
    for app, r in zip(apps, expected, strict=True):
        assert not app.is_finished
        assert app.allocated == Resources(vcores=r["allocatedVCores"], memory_mb=r["allocatedMB"])
        assert app.tags == tuple(t for t in r["applicationTags"].split(",") if t)


async def test_finished_apps_minus_one_becomes_zero() -> None:
    raw = recorded("apps_finished.json")
    async with replay(200, raw) as client:
        apps = await client.apps(states=sorted(FINAL_APP_STATES))
    expected = raw_apps(raw)
    assert [a.app_id for a in apps] == [r["id"] for r in expected]
    # docs/yarn.md 3.4: finished apps report -1. The 3.5.0 recording also shows a FINISHED app still
    # holding its AM container (256 MB, 1 container) until the NM releases it: kept as is.
    assert any(r["allocatedMB"] == -1 for r in expected)
    for app, r in zip(apps, expected, strict=True):
        assert app.is_finished
        assert app.finished_ms == r["finishedTime"]
        assert app.allocated == Resources(
            vcores=max(r["allocatedVCores"], 0), memory_mb=max(r["allocatedMB"], 0)
        )
        assert app.running_containers == max(r["runningContainers"], 0)
        assert app.memory_seconds == r["memorySeconds"]


async def test_empty_apps() -> None:
    raw = recorded("apps_empty.json")
    async with replay(200, raw) as client:
        assert await client.apps(tags=["none"]) == ()


@pytest.mark.parametrize("name", ["app_running.json", "app.json"])
async def test_single_app(name: str) -> None:
    raw = recorded(name)
    async with replay(200, raw) as client:
        app = await client.app(raw["app"]["id"])
    assert (app.app_id, app.queue, app.state) == (
        raw["app"]["id"],
        raw["app"]["queue"],
        raw["app"]["state"],
    )
    assert app.submitted_ms == raw["app"]["startedTime"]


async def test_attempt_containers_asks_for_the_latest_attempt_and_lists_its_containers() -> None:
    attempts, listed = recorded("app_attempts_running.json"), recorded("attempt_containers.json")
    attempt = attempts["appAttempts"]["appAttempt"][-1]
    app_id = attempt["containerId"].replace("container_", "application_").rsplit("_", 2)[0]
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(
            200, json=listed if request.url.path.endswith("/containers") else attempts
        )

    async with RMClient([RM], transport=httpx.MockTransport(handler)) as client:
        got = await client.attempt_containers(app_id)
    assert seen == [
        f"/ws/v1/cluster/apps/{app_id}/appattempts",
        f"/ws/v1/cluster/apps/{app_id}/appattempts/{attempt['appAttemptId']}/containers",
    ]
    assert got is not None and got.attempt_id == attempt["appAttemptId"]
    assert got.am_container_id == attempt["containerId"]
    assert [(c.container_id, c.elapsed_ms) for c in got.containers] == [
        (c["containerId"], c["elapsedTime"]) for c in listed["container"]
    ]


async def test_attempt_containers_before_any_attempt() -> None:
    async with replay(200, {"appAttempts": {}}) as client:
        assert await client.attempt_containers("application_1_0001") is None


async def test_app_not_found() -> None:
    raw = recorded("app_not_found_404.json")
    async with replay(404, raw) as client:
        with pytest.raises(RMNotFound) as caught:
            await client.app("application_1_9999")
    assert caught.value.message == raw["RemoteException"]["message"]


async def test_nodes() -> None:
    raw = recorded("nodes.json")
    async with replay(200, raw) as client:
        nodes = await client.nodes()
    expected = raw["nodes"]["node"]
    expected = expected if isinstance(expected, list) else [expected]
    assert [n.node_id for n in nodes] == [r["id"] for r in expected]
    for node, r in zip(nodes, expected, strict=True):
        assert node.capability == Resources(
            vcores=r["usedVirtualCores"] + r["availableVirtualCores"],
            memory_mb=r["usedMemoryMB"] + r["availMemoryMB"],
        )
        assert node.state == r["state"]


async def test_scheduler_conf() -> None:
    raw = recorded("scheduler_conf.json")
    async with replay(200, raw) as client:
        conf = await client.scheduler_conf()
    assert conf == {p["name"]: p.get("value") or "" for p in raw["property"]}
    assert "yarn.scheduler.capacity.root.queues" in conf


@pytest.mark.parametrize(
    "name", ["scheduler_conf_version.json", "scheduler_conf_version_after_put.json"]
)
async def test_scheduler_conf_version(name: str) -> None:
    raw = recorded(name)
    version = raw["configversion"]["versionID"] if "configversion" in raw else raw["versionID"]
    async with replay(200, raw) as client:
        assert await client.scheduler_conf_version() == int(version)


async def test_scheduler_conf_rejection_text() -> None:
    text = recorded_text("scheduler_conf_rejected_400.txt")
    async with replay(400, text=text) as client:
        with pytest.raises(RMRejected) as caught:
            await client.update_scheduler_conf(SchedConfUpdate(update_queues={"root.a": {}}))
    assert caught.value.status == 400
    assert caught.value.message == text.strip()


async def test_scheduler_conf_success_text() -> None:
    text = recorded_text("scheduler_conf_put_200.txt")
    async with replay(200, text=text) as client:
        answer = await client.update_scheduler_conf(SchedConfUpdate(update_queues={"root.a": {}}))
    assert answer == "Configuration change successfully applied."


async def test_new_application() -> None:
    raw = recorded("new_application.json")
    async with replay(200, raw) as client:
        new = await client.new_application()
    assert new.app_id == raw["application-id"]
    cap = raw["maximum-resource-capability"]
    assert new.max_resources == Resources(vcores=cap["vCores"], memory_mb=cap["memory"])


async def test_scheduler_settings_from_the_conf_servlet() -> None:
    """Each setting is one ``/conf?name=`` request; an undefined name (404) is left out."""
    answers = {
        "yarn.resourcemanager.scheduler.monitor.enable": recorded("conf_monitor_enable.json"),
        "yarn.scheduler.minimum-allocation-mb": recorded("conf_min_allocation_mb.json"),
    }
    paths = set()

    def handler(request: httpx.Request) -> httpx.Response:
        paths.add(request.url.path)
        body = answers.get(request.url.params["name"])
        return httpx.Response(200, json=body) if body else httpx.Response(404)

    async with RMClient([RM], transport=httpx.MockTransport(handler)) as client:
        settings = await client.scheduler_settings()
    assert paths == {"/conf"}
    monitor = answers["yarn.resourcemanager.scheduler.monitor.enable"]["property"]["value"]
    assert settings.monitor_enabled is (monitor == "true")
    mb = answers["yarn.scheduler.minimum-allocation-mb"]["property"]["value"]
    assert settings.min_allocation_mb == int(mb)
    assert settings.min_allocation_vcores is None and settings.monitor_policies == ()
    assert settings.preempts is False
