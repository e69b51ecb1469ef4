"""Hand-made RM JSON samples from ``docs/yarn.md`` (sections 3-5), plus the recorded-fixture loader.

The hand-made samples pin the documented quirks (empty ``apps``, single-object lists, numbers as
strings, ``-1`` allocations) independently of what one RM version happens to send; the recordings
in ``tests/fixtures/rm/`` (real Hadoop 3.5.0 output) decide what the parser must accept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rm"


def recorded(name: str) -> Any:
    """A recorded RM response (JSON decoded), or skip while the harness has not recorded it."""
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"fixture {name} not recorded yet")
    return json.loads(path.read_text())


def recorded_text(name: str) -> str:
    """A recorded non-JSON RM response body."""
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"fixture {name} not recorded yet")
    return path.read_text()


# docs/yarn.md 3.1, verbatim example values.
CLUSTER_INFO: dict[str, Any] = {
    "clusterInfo": {
        "id": 1476912658570,
        "startedOn": 1476912658570,
        "state": "STARTED",
        "haState": "ACTIVE",
        "rmStateStoreName": "NullRMStateStore",
        "resourceManagerVersion": "3.5.0",
        "hadoopVersion": "3.5.0",
        "haZooKeeperConnectionState": "ResourceManager HA is not enabled.",
    }
}

# docs/yarn.md 3.2: the documented fields; pending* come from the 3.x DAO.
CLUSTER_METRICS: dict[str, Any] = {
    "clusterMetrics": {
        "appsSubmitted": 7,
        "appsCompleted": 4,
        "appsPending": 1,
        "appsRunning": 2,
        "appsFailed": 1,
        "appsKilled": 0,
        "reservedMB": 0,
        "availableMB": 5120,
        "allocatedMB": 3072,
        "pendingMB": 1024,
        "totalMB": 8192,
        "reservedVirtualCores": 0,
        "availableVirtualCores": 13,
        "allocatedVirtualCores": 3,
        "pendingVirtualCores": 1,
        "totalVirtualCores": 16,
        "containersAllocated": 3,
        "containersReserved": 0,
        "containersPending": 1,
        "totalNodes": 2,
        "activeNodes": 2,
        "lostNodes": 0,
        "unhealthyNodes": 0,
        "decommissioningNodes": 0,
        "decommissionedNodes": 0,
        "rebootedNodes": 0,
        "shutdownNodes": 0,
    }
}


def app_json(**overrides: Any) -> dict[str, Any]:
    """One ``AppInfo`` (docs/yarn.md 3.4) of a running app; override any field."""
    app: dict[str, Any] = {
        "id": "application_1476912658570_0001",
        "user": "alice",
        "name": "sleep",
        "queue": "root.a",
        "state": "RUNNING",
        "finalStatus": "UNDEFINED",
        "progress": 10.0,
        "applicationType": "MAPREDUCE",
        "applicationTags": "sidecar,deadline-42",
        "priority": 0,
        "startedTime": 1476912700000,
        "launchTime": 1476912701000,
        "finishedTime": 0,
        "elapsedTime": 5000,
        "allocatedMB": 2048,
        "allocatedVCores": 2,
        "runningContainers": 2,
        "memorySeconds": 10240,
        "vcoreSeconds": 10,
        "diagnostics": "",
    }
    app.update(overrides)
    return app


def finished_app_json() -> dict[str, Any]:
    """A finished app: the RM reports ``-1`` for allocations (docs/yarn.md 3.4 table)."""
    return app_json(
        id="application_1476912658570_0002",
        state="FINISHED",
        finalStatus="SUCCEEDED",
        progress=100.0,
        finishedTime=1476912760000,
        elapsedTime=60000,
        allocatedMB=-1,
        allocatedVCores=-1,
        runningContainers=-1,
        applicationTags="",
    )


def leaf(name: str, path: str | None = None, **fields: Any) -> dict[str, Any]:
    """A ``capacitySchedulerLeafQueueInfo``; ``path`` adds the 3.4+ ``queuePath``."""
    queue: dict[str, Any] = {
        "type": "capacitySchedulerLeafQueueInfo",
        "queueName": name,
        "state": "RUNNING",
        "capacity": 50.0,
        "usedCapacity": 0.0,
        "maxCapacity": 100.0,
        "absoluteCapacity": 50.0,
        "absoluteMaxCapacity": 100.0,
        "absoluteUsedCapacity": 0.0,
        "numApplications": 0,
        "numActiveApplications": 0,
        "numPendingApplications": 0,
        "pendingContainers": 0,
        "allocatedContainers": 0,
        "resourcesUsed": {"memory": 0, "vCores": 0},
    }
    if path is not None:
        queue["queuePath"] = path
    queue.update(fields)
    return queue


def parent(name: str, children: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A parent queue (no ``type`` key in 3.x for parents) nesting ``queues.queue``."""
    queue: dict[str, Any] = {
        "queueName": name,
        "state": "RUNNING",
        "capacity": 50.0,
        "usedCapacity": 0.0,
        "maxCapacity": 100.0,
        "absoluteCapacity": 50.0,
        "absoluteMaxCapacity": 100.0,
        "absoluteUsedCapacity": 0.0,
        "numApplications": 0,
        "resourcesUsed": {"memory": 0, "vCores": 0},
        "queues": {"queue": children},
    }
    queue.update(fields)
    return queue


def scheduler_json(children: list[dict[str, Any]] | dict[str, Any]) -> dict[str, Any]:
    """``GET /scheduler`` with a CapacityScheduler root holding ``children``."""
    return {
        "scheduler": {
            "schedulerInfo": {
                "type": "capacityScheduler",
                "capacity": 100.0,
                "usedCapacity": 0.0,
                "maxCapacity": 100.0,
                "queueName": "root",
                "queues": {"queue": children},
            }
        }
    }


def node_json(**overrides: Any) -> dict[str, Any]:
    """One ``NodeInfo`` (docs/yarn.md 3.7)."""
    node: dict[str, Any] = {
        "rack": "/default-rack",
        "state": "RUNNING",
        "id": "host1:45454",
        "nodeHostName": "host1",
        "nodeHTTPAddress": "host1:8042",
        "healthReport": "",
        "numContainers": 2,
        "usedMemoryMB": 2048,
        "availMemoryMB": 2048,
        "usedVirtualCores": 2,
        "availableVirtualCores": 6,
    }
    node.update(overrides)
    return node
