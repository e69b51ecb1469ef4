"""Sliced polls against a scaled fake RM: what happens between two visits of an app's slice.

A tick lists every pending app, the newest RUNNING ones, the finished window and one slice of the
rest by start instant. An app that finishes, starts running or vanishes while its slice is not
being listed must still be recorded as such on the next tick (or at its slice, for a vanished
one), with the RM's final counters.
"""

from __future__ import annotations

import httpx
from sqlalchemy import select

from app.db.models import Application
from app.services.poller import Poller, rm_ranges
from app.yarn.client import RMClient
from tests.conftest import Db
from tests.scaled_rm import ScaledCluster

URL = "http://rm:8088"


def _transport(cluster: ScaledCluster) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/ws/v1/cluster")
        body = cluster.body(path, request.url.query.decode())
        return httpx.Response(200 if body else 404, content=body or b"{}")

    return httpx.MockTransport(handle)


def _row(db: Db, app_id: str) -> Application:
    with db.sessions() as s:
        row = s.scalar(select(Application).where(Application.app_id == app_id))
        assert row is not None
        return row


async def test_changes_between_slice_visits_are_recorded_on_the_next_tick(db: Db) -> None:
    cluster = ScaledCluster(5, 3, 600, 0, churn=0.0, drop_fields=("resourceInfo",))
    async with RMClient([URL], transport=_transport(cluster)) as client:
        poller = Poller(client, db.sessions, cluster_name="c", rm_urls=(URL,), interval_s=10)
        assert (await poller.poll(cluster.now_ms)).ok  # lists everything
        cluster.advance()
        assert (await poller.poll(cluster.now_ms)).ok  # slice 0: the oldest starts
        # The oldest app was just listed; its slice does not come round for five more ticks.
        oldest = min(cluster.running.values(), key=lambda a: a["startedTime"])
        # It finishes with more resource-seconds than any tick saw.
        oldest["vcoreSeconds"] += 12_345
        cluster.advance()
        cluster._finish(oldest)
        final_vcore_s = cluster.finished[oldest["id"]]["vcoreSeconds"]
        # An app submitted long ago and pending since starts running.
        waiting = cluster._submit("ACCEPTED", age_ms=3 * 3600 * 1000)
        # A RUNNING app of the last slice (listed at the end of the pass) vanishes from the RM.
        by_start = sorted(
            (a for a in cluster.running.values() if a["id"] != waiting["id"]),
            key=lambda a: a["startedTime"],
        )
        newest_old = by_start[int(len(by_start) * 0.9)]
        assert (await poller.poll(cluster.now_ms)).ok
        assert _row(db, waiting["id"]).state == "ACCEPTED"
        cluster.advance()
        waiting.update(state="RUNNING", launchTime=cluster.now_ms - 500)
        del cluster.running[newest_old["id"]]
        assert (await poller.poll(cluster.now_ms)).ok

        done = _row(db, oldest["id"])
        assert done.state == "FINISHED" and done.vcore_seconds == final_vcore_s
        started = _row(db, waiting["id"])
        assert started.state == "RUNNING" and started.launched_ms == waiting["launchTime"]
        # Not yet: its slice has not been listed since it vanished.
        assert _row(db, newest_old["id"]).gone_ms is None
        for _ in range(poller.slices):
            cluster.advance()
            assert (await poller.poll(cluster.now_ms)).ok
    assert _row(db, newest_old["id"]).gone_ms is not None
    assert _row(db, oldest["id"]).state == "FINISHED"


async def test_an_idle_cluster_and_apps_without_a_start_instant_are_polled_in_slices(
    db: Db,
) -> None:
    """No running app (every slice boundary at 0) and a pending app whose start instant the RM
    has not set yet: the ranges asked for stay ones the RM accepts, and the app is still
    recorded when it runs."""
    cluster = ScaledCluster(3, 2, 0, 0, churn=0.0, drop_fields=("resourceInfo",))
    async with RMClient([URL], transport=_transport(cluster)) as client:
        poller = Poller(client, db.sessions, cluster_name="c", rm_urls=(URL,), interval_s=10)
        assert poller.slices > 1
        for _ in range(poller.slices + 1):
            summary = await poller.poll(cluster.now_ms)
            assert summary.ok, summary.error
            cluster.advance()
        waiting = cluster._submit("ACCEPTED", age_ms=1000)
        waiting["startedTime"] = 0
        summary = await poller.poll(cluster.now_ms)
        assert summary.ok, summary.error
        assert _row(db, waiting["id"]).state == "ACCEPTED"
        waiting.update(state="RUNNING", startedTime=cluster.now_ms - 500)
        for _ in range(poller.slices):
            summary = await poller.poll(cluster.now_ms)
            assert summary.ok, summary.error
            cluster.advance()
    assert _row(db, waiting["id"]).state == "RUNNING"


def test_ranges_the_rm_would_refuse_are_dropped_or_opened() -> None:
    assert rm_ranges([(None, -1), (0, 0), (-5, 10), (7, 3), (4, None)]) == [
        (0, 0),
        (None, 10),
        (4, None),
    ]
