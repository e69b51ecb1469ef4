"""The interference guard on a real Hadoop 3.5.0 RM: while an interactive SLO (a latency probe,
here a local HTTP server the test steers) is violated, the batch queues' maximum-capacity goes
down step by step to their capacity; after the SLO holds for the hysteresis it comes back step by
step to what it was. Every step is a validated push, recorded as the tick's decision."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.yarn.actuator import Actuator
from app.yarn.client import RMClient
from tests.integration.conftest import YarnCluster
from tests.integration.sidecar_app import settings_for, sidecar

BATCH = ("root.etl", "root.adhoc")


class Probe:
    """A latency endpoint answering whatever ``latency_ms`` is set to."""

    def __init__(self, latency_ms: float) -> None:
        self.latency_ms = latency_ms
        probe = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = f"{probe.latency_ms}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/latency"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def probe() -> Iterator[Probe]:
    p = Probe(latency_ms=900)
    try:
        yield p
    finally:
        p.close()


def _in_order(seen: list[float], path: list[float]) -> bool:
    """Every value seen appears in ``path``, in the same order."""
    rest = iter(path)
    return all(any(v == p for p in rest) for v in seen)


async def _maxima(rm_url: str) -> dict[str, float]:
    async with RMClient([rm_url], timeout_s=30) as client:
        live = await Actuator(client).read_live("root")
    return {q: float(live.values[q]["maximum-capacity"]) for q in BATCH}


async def _watch(rm_url: str, until: Any, seen: list[dict[str, float]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = await _maxima(rm_url)
        if not seen or seen[-1] != now:
            seen.append(now)
        if until(now):
            return
        await asyncio.sleep(0.3)
    pytest.fail(f"maximum-capacity never got there: {seen}")


async def test_a_violated_slo_lowers_batch_maxima_step_by_step_and_recovery_restores_them(
    yarn_cluster: YarnCluster, tmp_path: Path, probe: Probe
) -> None:
    rm = yarn_cluster.rm_url
    before = await _maxima(rm)
    assert before == {"root.etl": 100.0, "root.adhoc": 100.0}
    guard = {
        "slos": [{"name": "web", "url": probe.url, "max_latency_ms": 200}],
        "batch_queues": list(BATCH),
        "step_pp": 40,
        "recover_ticks": 2,
    }
    settings = settings_for(
        yarn_cluster,
        tmp_path,
        "guard",
        mode="enforce",
        policy="ltrf",
        policy_interval_s=1,
        queue_floors={"*": 0},
        # capacities pinned where they are, so only the guard moves anything
        queue_bounds={
            "root.default": {"min": 40, "max": 40},
            **{q: {"min": 20, "max": 20} for q in (*BATCH, "root.deadline")},
        },
        interference_guard=guard,
    )
    seen: list[dict[str, float]] = []
    async with sidecar(settings) as client:
        # violated: 100 -> 60 -> 20 (their capacity, the floor of the guard)
        await _watch(rm, lambda m: m == {q: 20.0 for q in BATCH}, seen, 90)
        probe.latency_ms = 50
        await _watch(rm, lambda m: m == before, seen, 90)
        # the RM shows the last step as soon as it is applied; its decision is recorded as
        # pushed once the controller has read it back
        deadline = time.monotonic() + 30
        while True:
            decisions = (await client.get("/decisions", params={"limit": 100})).json()["items"]
            pushed = [d for d in decisions if d["kind"] == "queue" and d["status"] == "pushed"]
            if len(pushed) >= 4 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        details = [(await client.get(f"/decisions/{d['id']}")).json() for d in pushed]
    guards = [d["outputs"]["guard"] for d in reversed(details)]
    assert len(guards) == 4
    # step by step both ways, never past the capacity: each step is a pushed decision the
    # controller read back from the RM; sampling the RM can miss a step shorter than a sample
    steps = [g["targets_pp"] for g in guards]
    assert steps == [{q: v for q in BATCH} for v in (60.0, 20.0, 60.0, 100.0)]
    etl = [m["root.etl"] for m in seen]
    assert etl[0] == 100.0 and 20.0 in etl and etl[-1] == 100.0, seen
    assert _in_order(etl, [100.0, 60.0, 20.0, 60.0, 100.0]), seen
    assert [g["readings"][0]["violated"] for g in guards] == [True, True, False, False]
    assert guards[-1]["reason"] == "every SLO held: maximum-capacity restored"
    assert guards[-1]["state_after"] == {}
    # the calm tick before the first raise held the caps (hysteresis of two ticks)
    assert guards[2]["state_before"]["calm"] == 1
