"""Poller behaviour: idempotent history across restarts, watermark, outage and back-off."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
from sqlalchemy import func, select

from app.db.models import Application, Cluster, ClusterSample, NodeSample, PollRecord, QueueSample
from app.domain.model import FINISHED_GRACE_MS, ClusterSnapshot
from app.services.poller import FINISHED_MARGIN_MS, SETTLE_MS, Poller
from app.yarn.client import RunningSlice
from app.yarn.errors import RMProtocolError, RMUnavailable
from tests.conftest import Db
from tests.factories import app, snapshot


@dataclass
class ScriptedRM:
    """A snapshot source that replays a script of snapshots or errors and records the asks."""

    script: list[ClusterSnapshot | Exception]
    asked_since: list[int | None] = field(default_factory=list)
    asked_running: list[RunningSlice | None] = field(default_factory=list)
    asked_nodes: list[bool] = field(default_factory=list)
    active_url: str | None = "http://rm1:8088"

    async def snapshot(
        self,
        now_ms: int,
        *,
        finished_since_ms: int | None,
        running: RunningSlice | None = None,
        nodes: bool = True,
    ) -> ClusterSnapshot:
        self.asked_since.append(finished_since_ms)
        self.asked_running.append(running)
        self.asked_nodes.append(nodes)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item


def _poller(db: Db, source: ScriptedRM, interval_s: float = 10.0) -> Poller:
    return Poller(
        source, db.sessions, cluster_name="c", rm_urls=("http://rm1:8088",), interval_s=interval_s
    )


def _count(db: Db, model: type) -> int:
    with db.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


async def test_repeated_polls_and_restart_never_duplicate_and_never_miss(db: Db) -> None:
    a1 = app("application_1_0001")
    a2 = app("application_1_0002")
    a1_done = app("application_1_0001", state="FINISHED", finished_ms=500_000, vcore_seconds=7)
    # The RM's accounting of a1 grows once more while its AM container exits.
    a1_settled = app("application_1_0001", state="FINISHED", finished_ms=500_000, vcore_seconds=8)
    first = ScriptedRM([snapshot(10_000, (a1, a2)), snapshot(20_000, (a1, a2))])
    poller = _poller(db, first)
    await poller.poll(10_000)
    await poller.poll(20_000)
    assert first.asked_since == [0, 0]
    # The sidecar restarts; meanwhile a1 finished. A new poller (fresh process state) asks for
    # apps finished since the stored watermark and records a1's end.
    second = ScriptedRM([snapshot(600_000, (a2, a1_done)), snapshot(700_000, (a2, a1_settled))])
    restarted = _poller(db, second)
    s1 = await restarted.poll(600_000)
    s2 = await restarted.poll(700_000)
    # A restarted process first lists everything (here: no watermark yet, so all finished apps)
    # behind the watermark included; the next (sliced) tick reads back a short margin, plus the
    # band of apps that ended long enough ago to have settled.
    assert second.asked_since == [0, 500_000 - FINISHED_MARGIN_MS]
    sliced = second.asked_running[1]
    assert second.asked_running[0] is None and sliced is not None
    assert sliced.settled == (500_000 - FINISHED_GRACE_MS, 500_000 - SETTLE_MS)
    assert s1.ok and s2.ok and s2.watermark_ms == 500_000
    assert _count(db, Application) == 2
    with db.sessions() as s:
        row = s.get(Application, "application_1_0001")
        assert row is not None and row.state == "FINISHED" and row.vcore_seconds == 8
    # Samples are history: one per queue per poll, cluster totals per poll; a raw node row only
    # when the node is new to this process or changed (here: once per poller start).
    assert _count(db, QueueSample) == 4 * 5
    assert _count(db, ClusterSample) == 4
    assert _count(db, NodeSample) == 2


async def test_outage_backs_off_records_and_recovers(db: Db) -> None:
    rm = ScriptedRM(
        [
            RMUnavailable("connection refused by every RM"),
            RMProtocolError("garbage"),
            snapshot(100_000, (app("application_1_0001"),)),
        ]
    )
    poller = _poller(db, rm, interval_s=10)
    bad1 = await poller.poll(0)
    assert not bad1.ok and poller.failures == 1 and poller.next_attempt_ms == 10_000
    skipped = await poller.poll(5_000)  # still backing off: the RM is not even asked
    assert skipped.skipped and len(rm.asked_since) == 1
    bad2 = await poller.poll(10_000)
    assert not bad2.ok and poller.failures == 2 and poller.next_attempt_ms == 30_000
    assert poller.last_error is not None and "garbage" in poller.last_error
    good = await poller.poll(30_000)
    assert good.ok and poller.failures == 0 and poller.last_good_poll_ms == 30_000
    with db.sessions() as s:
        polls = list(s.scalars(select(PollRecord).order_by(PollRecord.started_ms)))
        assert [p.ok for p in polls] == [False, False, True]
        cluster = s.scalar(select(Cluster))
        assert cluster is not None and cluster.last_error is None
        assert cluster.last_good_poll_ms == 30_000


def test_backoff_is_capped() -> None:
    poller = Poller.__new__(Poller)
    poller.interval_s = 10
    poller.max_backoff_s = 60
    for failures, expected in ((0, 0), (1, 10), (2, 20), (3, 40), (4, 60), (9, 60)):
        poller.failures = failures
        assert poller.backoff_s() == expected


async def test_loop_keeps_running_when_a_tick_raises(
    db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    class Exploding(ScriptedRM):
        async def snapshot(
            self,
            now_ms: int,
            *,
            finished_since_ms: int | None,
            running: RunningSlice | None = None,
            nodes: bool = True,
        ) -> ClusterSnapshot:
            raise RuntimeError("bug in a dependency")

    poller = _poller(db, Exploding([]), interval_s=0.01)
    await poller.start(loops=3)
    assert poller.ticks == 3
    # The poll itself fails (recorded, backed off) instead of escaping to the loop.
    assert poller.failures >= 1 and "RuntimeError: bug in a dependency" in caplog.text
    assert "poller tick failed" not in caplog.text


async def test_nodes_are_listed_once_a_minute_and_after_the_node_counts_change(db: Db) -> None:
    grown = snapshot(0)
    grown = dataclasses.replace(
        grown, metrics=dataclasses.replace(grown.metrics, active_nodes=2, total_nodes=2)
    )
    without = dataclasses.replace(snapshot(0), nodes=(), nodes_read=False)
    source = ScriptedRM(
        [
            snapshot(0),
            without,
            without,
            dataclasses.replace(grown, nodes=(), nodes_read=False),
            snapshot(0),
            without,
        ]
    )
    poller = _poller(db, source)
    for t in (1_000, 11_000, 21_000, 31_000, 41_000, 101_000):
        assert (await poller.poll(t)).ok
    # first tick; then not; a change in the counts (at 31 s) -> the next tick lists them; and
    # 60 s after the last listing (41 s -> 101 s)
    assert source.asked_nodes == [True, False, False, False, True, True]
    with db.sessions() as s:
        samples = s.scalars(select(ClusterSample).order_by(ClusterSample.taken_ms)).all()
        node_rows = s.scalar(select(func.count()).select_from(NodeSample))
    # every tick has its totals, from /metrics when the nodes were not listed
    assert [c.running_nodes for c in samples] == [1, 1, 1, 2, 1, 1]
    assert {c.capability_vcores for c in samples} == {8}
    assert node_rows == 1  # the one node never changed: one raw row
