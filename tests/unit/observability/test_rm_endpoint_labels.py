"""The RM request metrics' ``endpoint`` label does not grow with the applications the RM runs:
application, attempt and container ids in a path are templated (``endpoint_template``)."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry

from app.observability.prometheus import RMRequestMetrics
from app.yarn.client import RMClient, endpoint_template

APPS = 200


def _rm(request: httpx.Request) -> httpx.Response:
    path = request.url.path
    if path.endswith("/appattempts"):
        n = path.split("/")[-2].split("_", 1)[1]
        attempt = {
            "id": 1,
            "appAttemptId": f"appattempt_{n}_000001",
            "startTime": 1,
            "containerId": f"container_{n}_01_000001",
            "nodeHttpAddress": "h:1",
            "nodeId": "h:2",
            "logsLink": "",
        }
        return httpx.Response(200, json={"appAttempts": {"appAttempt": [attempt]}})
    if path.endswith("/containers"):
        return httpx.Response(200, json={"containers": {}})
    return httpx.Response(404, json={"RemoteException": {"message": "gone"}})


def _label_sets(registry: CollectorRegistry) -> set[tuple[str, str]]:
    return {
        (sample.labels["method"], sample.labels["endpoint"])
        for family in registry.collect()
        for sample in family.samples
        if sample.name.endswith("rm_request_duration_seconds_count")
    }


async def test_reading_many_apps_attempts_adds_no_label_set_per_app() -> None:
    registry = CollectorRegistry()
    metrics = RMRequestMetrics(registry)
    async with RMClient(
        ["http://rm:8088"], transport=httpx.MockTransport(_rm), observer=metrics.observe
    ) as client:
        for i in range(1, APPS + 1):
            await client.attempt_containers(f"application_1795315000000_{i:04d}")
    assert _label_sets(registry) == {
        ("GET", "/apps/{app_id}/appattempts"),
        ("GET", "/apps/{app_id}/appattempts/{attempt_id}/containers"),
    }


@pytest.mark.parametrize(
    ("path", "template"),
    [
        (
            "/apps/application_1795315000000_0001/appattempts/appattempt_1795315000000_0001_000001"
            "/containers",
            "/apps/{app_id}/appattempts/{attempt_id}/containers",
        ),
        (
            "/apps/application_1_0001/appattempts/appattempt_1_0001_000002/containers/"
            "container_e17_1_0001_02_000003",
            "/apps/{app_id}/appattempts/{attempt_id}/containers/{container_id}",
        ),
        ("/containers/container_1_0001_01_000001", "/containers/{container_id}"),
        ("/apps/application_1_0002/state?user.name=x", "/apps/{app_id}/state"),
        # a segment naming a member is templated whatever it holds (quoted by ``_seg``)
        ("/apps/not-an-id%2Fx/queue", "/apps/{app_id}/queue"),
        ("/nodes/host-17.example.com:8041", "/nodes/{node_id}"),
        # the collections themselves and their fixed members stay as they are
        ("/apps", "/apps"),
        ("/apps/new-application", "/apps/new-application"),
        ("/scheduler-conf/version", "/scheduler-conf/version"),
        ("/conf", "/conf"),
    ],
)
def test_id_bearing_segments_are_templated(path: str, template: str) -> None:
    assert endpoint_template(path) == template
