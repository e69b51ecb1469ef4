"""RM latency and errors measured at the client's edge, by endpoint template and error kind."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry

from app.db.observe_repo import reason_template
from app.observability.prometheus import RMRequestMetrics
from app.yarn.client import RMClient, endpoint_template
from app.yarn.errors import RMNotFound, RMUnavailable


async def _no_sleep(_: float) -> None:
    return None


async def test_client_reports_latency_and_errors_by_endpoint() -> None:
    registry = CollectorRegistry()
    metrics = RMRequestMetrics(registry)

    def rm(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/metrics"):
            return httpx.Response(503, text="busy")
        return httpx.Response(404, json={"RemoteException": {"message": "gone"}})

    async with RMClient(
        ["http://rm:8088"],
        retries=1,
        transport=httpx.MockTransport(rm),
        observer=metrics.observe,
        sleep=_no_sleep,
    ) as client:
        with pytest.raises(RMUnavailable):
            await client.metrics()
        with pytest.raises(RMNotFound):
            await client.app("application_1700000000000_0042")

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value("yarn_sidecar_" + name, labels)

    assert value("rm_request_errors_total", method="GET", endpoint="/metrics", kind="server") == 2
    assert (
        value("rm_request_errors_total", method="GET", endpoint="/apps/{app_id}", kind="not_found")
        == 1
    )
    assert value("rm_request_duration_seconds_count", method="GET", endpoint="/metrics") == 2


def test_labels_are_bounded() -> None:
    assert endpoint_template("/apps/application_1_0002/state") == "/apps/{app_id}/state"
    assert reason_template("request of 12 CPUs does not fit in 3.5 free") == (
        "request of N CPUs does not fit in N free"
    )
    assert reason_template("") == "none"
