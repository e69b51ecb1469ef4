"""Latency probes of the interference guard: the answers understood, and every failure an
unknown reading with its reason (never a number made up)."""

from __future__ import annotations

import httpx
import pytest

from app.control.guard import Slo
from app.services.slo import probe

SLO = Slo("web", 200.0, url="http://probe.local/latency")


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        (httpx.Response(200, text="123.5"), 123.5),
        (httpx.Response(200, json={"latency_ms": 250}), 250.0),
        (httpx.Response(200, json={"p99": 1}), None),
        (httpx.Response(200, text="NaN"), None),
        (httpx.Response(200, text="true"), None),
        (httpx.Response(503, text="down"), None),
    ],
)
async def test_probe_answers(answer: httpx.Response, value: float | None) -> None:
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: answer)) as http:
        reading = await probe(http, SLO)
    assert reading.value == value
    assert reading.violated is (None if value is None else value > 200)
    if value is None:
        assert reading.detail.startswith("http://probe.local/latency")


async def test_an_unreachable_probe_is_unknown() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as http:
        reading = await probe(http, SLO)
    assert (reading.value, reading.detail) == (None, "http://probe.local/latency: ConnectError")
