"""A value from the RM that a database cannot keep as it is never fails the poll that carries it
(``app.db.poll_writes.storable_row``), and an unexpected error of a tick fails that tick only."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import func, select

from app.db.models import (
    Application,
    Cluster,
    ClusterSample,
    NodeSample,
    PollRecord,
    Queue,
    QueueSample,
)
from app.domain.model import ClusterSnapshot, Resources
from app.services.poller import Poller
from app.yarn import mapping, wire
from app.yarn.client import RunningSlice
from tests.conftest import Db
from tests.factories import app, queue, snapshot

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1


@dataclass
class ScriptedRM:
    """Replays snapshots or raises the scripted exceptions, one per tick."""

    script: list[ClusterSnapshot | Exception]
    active_url: str | None = "http://rm1:8088"
    asked: list[int] = field(default_factory=list)

    async def snapshot(
        self,
        now_ms: int,
        *,
        finished_since_ms: int | None,
        running: RunningSlice | None = None,
        nodes: bool = True,
    ) -> ClusterSnapshot:
        self.asked.append(now_ms)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def _odd_app(**fields: Any) -> Any:
    """A finished app parsed from RM JSON exactly as the client parses it."""
    body = {
        "id": "application_1_0009",
        "user": "bob",
        "queue": "root.etl",
        "state": "FINISHED",
        "finalStatus": "SUCCEEDED",
        "startedTime": 1000,
        "finishedTime": 5000,
        **fields,
    }
    data = orjson.loads(json.dumps({"apps": {"app": [body]}}))
    return mapping.app_record(wire.parse(wire.AppsEnvelope, data).items()[0])


def _count(db: Db, model: type) -> int:
    with db.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


async def test_values_no_database_keeps_are_stored_storable_and_the_poll_succeeds(db: Db) -> None:
    odd = _odd_app(
        name="etl\u0000nightly",
        diagnostics="AM exited\u0000 with code 1",
        appNodeLabelExpression="gpu" + "x" * 247,
        vcoreSeconds=2**63,
        memorySeconds=2**64 - 1,
        allocatedVCores=2**40,
    )
    odd_queue = dataclasses.replace(
        queue("root.etl\u0000"), used=Resources(2**40, 2**64), num_pending_apps=2**33
    )
    snap = snapshot(10_000, (app("application_1_0001"), odd), queues=(queue("root"), odd_queue))
    node = dataclasses.replace(
        snap.nodes[0], host="h" * 400, labels=("a\u0000b",), capability=Resources(2**35, 2**65)
    )
    snap = dataclasses.replace(snap, nodes=(node,))
    # A counter that passes BIGINT later, in the narrow counter update of a known app.
    grown = dataclasses.replace(odd, memory_seconds=2**80, vcore_seconds=2**64)
    rm = ScriptedRM([snap, dataclasses.replace(snapshot(20_000, (grown,)), nodes=(node,))])
    poller = Poller(rm, db.sessions, cluster_name="c", rm_urls=("http://rm1:8088",), interval_s=10)

    first = await poller.poll(10_000, force=True)
    assert first.ok, first.error
    with db.sessions() as s:
        row = s.get(Application, "application_1_0009")
        assert row is not None
        assert row.name == "etlnightly"
        assert row.diagnostics == "AM exited with code 1"
        assert row.node_label == ("gpu" + "x" * 247)[:200]
        assert row.vcore_seconds == INT64_MAX and row.memory_seconds == INT64_MAX
        assert row.allocated_vcores == INT32_MAX
        # The finished app moved the watermark: the next poll does not ask for it again.
        cluster = s.scalar(select(Cluster))
        assert cluster is not None and cluster.finished_watermark_ms == 5000
        assert s.scalar(select(Queue.path).where(Queue.name == "etl")) == "root.etl"
        sample = s.scalar(select(QueueSample).order_by(QueueSample.used_memory_mb.desc()))
        assert sample is not None
        assert (sample.used_vcores, sample.used_memory_mb) == (INT32_MAX, INT64_MAX)
        assert sample.pending_apps == INT32_MAX
        stored_node = s.scalar(select(NodeSample))
        assert stored_node is not None
        assert stored_node.host == "h" * 300 and stored_node.labels == "ab"
        assert stored_node.capability_vcores == INT32_MAX
        assert stored_node.capability_mb == INT64_MAX
    assert _count(db, ClusterSample) == 1

    second = await poller.poll(20_000, force=True)
    assert second.ok, second.error
    with db.sessions() as s:
        row = s.get(Application, "application_1_0009")
        assert row is not None and row.updated_ms == 20_000
        assert row.vcore_seconds == INT64_MAX and row.memory_seconds == INT64_MAX
    assert poller.failures == 0 and poller.last_good_poll_ms == 20_000
    assert _count(db, PollRecord) == 2


async def test_an_unexpected_error_fails_the_tick_with_back_off_and_a_record(db: Db) -> None:
    rm = ScriptedRM([OverflowError("Python int too large to convert to SQLite INTEGER")])
    poller = Poller(rm, db.sessions, cluster_name="c", rm_urls=("http://rm1:8088",), interval_s=10)

    summary = await poller.poll(10_000)

    assert not summary.ok and not summary.skipped
    assert summary.error is not None and "OverflowError" in summary.error
    assert poller.failures == 1 and poller.next_attempt_ms == 20_000
    assert poller.last_error == summary.error
    with db.sessions() as s:
        record = s.scalar(select(PollRecord))
        assert record is not None and not record.ok
        assert record.error is not None and "OverflowError" in record.error
        cluster = s.scalar(select(Cluster))
        assert cluster is not None and cluster.last_error == summary.error
    # Backing off: the next tick within the delay is skipped, not attempted.
    assert (await poller.poll(15_000)).skipped and rm.asked == [10_000]
