"""The poller against a 30,000-application RM (recorded 3.5.0 answers, scaled) on both engines.

Before batching, one multi-row INSERT carried 24 bind parameters per app and failed past the
database's parameter limit (2,730 apps on PostgreSQL). This checks that a poll of that size
succeeds, that no statement's parameter count grows with the cluster, that the next poll writes
only the apps that changed, and that apps the RM stops listing are marked gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import event, func, select

from app.db.models import Application, ClusterSample, NodeSample
from app.services.poller import Poller
from app.yarn.client import RMClient
from tests.conftest import Db
from tests.scaled_rm import ScaledCluster

RUNNING = 30_000


@pytest.fixture
def cluster() -> ScaledCluster:
    return ScaledCluster(50, 10, RUNNING, 0, churn=0.01, drop_fields=("resourceInfo",))


def _transport(cluster: ScaledCluster, asked: list[str]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/ws/v1/cluster")
        asked.append(f"{path}?{request.url.query.decode()}")
        body = cluster.body(path, request.url.query.decode())
        return httpx.Response(200 if body else 404, content=body or b"{}")

    return httpx.MockTransport(handle)


@pytest.fixture
def max_params(db: Db) -> Iterator[list[int]]:
    """The largest bind-parameter count of any one statement (per row for executemany)."""
    seen = [0]

    def count(conn: Any, cursor: Any, stmt: str, params: Any, ctx: Any, many: bool) -> None:
        row = params
        if many and isinstance(params, list) and params:
            row = params[0]
        seen[0] = max(seen[0], len(row) if row else 0)

    event.listen(db.engine, "before_cursor_execute", count)
    yield seen
    event.remove(db.engine, "before_cursor_execute", count)


def _count(db: Db, *where: Any) -> int:
    with db.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(Application).where(*where)) or 0)


async def test_a_30000_app_cluster_polls_and_writes_only_changes(
    db: Db, cluster: ScaledCluster, max_params: list[int]
) -> None:
    asked: list[str] = []
    url = "http://rm:8088"
    async with RMClient([url], transport=_transport(cluster, asked)) as client:
        poller = Poller(client, db.sessions, cluster_name="big", rm_urls=(url,), interval_s=10)
        first = await poller.poll(cluster.now_ms)
        assert first.ok, first.error
        assert first.apps == RUNNING and _count(db) == RUNNING
        # The app list is asked without the fields the sidecar never reads.
        assert all("deSelects=resourceInfo" in a for a in asked if a.startswith("/apps?"))

        # One interval later: 1 % finished and were replaced (ACCEPTED first); a few vanished
        # from the RM.
        before = dict(cluster.running)
        cluster.advance()
        vanished = sorted(cluster.running)[:5]
        for app_id in vanished:
            del cluster.running[app_id]
        asked.clear()
        second = await poller.poll(cluster.now_ms)
        assert second.ok, second.error
        # A sliced tick: the running apps come as pending ones plus ranges of start instants,
        # never as the whole running list.
        running_all = "states=NEW%2CNEW_SAVING%2CSUBMITTED%2CACCEPTED%2CRUNNING"
        assert not any(running_all in a for a in asked)
        finished = [a for a in before if a not in cluster.running and a not in vanished]
        new = [a for a in cluster.running if a not in before]
        assert len(finished) == len(new) == RUNNING // 100
        # New and finished apps are written, and of the running apps whose counters moved only
        # some of this tick's slice (about a sixth of them), not all 30,000.
        refreshed = second.apps - len(new) - len(finished)
        assert 0 < refreshed < 0.22 * RUNNING
        assert _count(db, Application.state == "FINISHED") == len(finished)
        assert _count(db, Application.state == "ACCEPTED") == len(new)
        # One pass over the slices later every vanished app is marked gone, and the apps that
        # started running are recorded so; a running app's counters are rewritten when its
        # slice comes round and its refresh slot changed since the last write, so during the
        # second pass all of them are refreshed but the few that a shift of the slice boundaries
        # (apps come and go) moved to a slice already visited.
        started_at = cluster.now_ms
        for i in range(2 * poller.slices - 1):
            if i == poller.slices - 1:
                started_at = cluster.now_ms + 1
            cluster.advance()
            tick = await poller.poll(cluster.now_ms)
            assert tick.ok, tick.error
    params_seen = max_params[0]  # by the polls (the checks below bind many)
    assert _count(db) == cluster.next_app - 1  # every app the RM ever listed, once
    assert _count(db, Application.gone_ms.is_not(None)) == len(vanished)
    still = [a for a in before if a in cluster.running]
    with db.sessions() as s:
        stale = s.scalar(
            select(func.count())
            .select_from(Application)
            .where(Application.app_id.in_(still), Application.updated_ms < started_at)
        )
        assert stale is not None and stale < 0.05 * len(still)
        running = {a for a, v in cluster.running.items() if v["state"] == "RUNNING"}
        recorded = set(
            s.scalars(
                select(Application.app_id).where(
                    Application.state == "RUNNING", Application.gone_ms.is_(None)
                )
            )
        )
        assert recorded == running
    # Parameters per statement: a row of columns per executemany call; the ORM's flush of the 11
    # new queue rows is one statement (132 on PostgreSQL). The single INSERT of the 30,000 apps
    # carried 720,000.
    assert 0 < params_seen <= 200
    with db.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ClusterSample)) == 2 * poller.slices + 1
        # Raw node rows: all 50 once, then only those that changed (1 % of 50: none).
        assert s.scalar(select(func.count()).select_from(NodeSample)) == 50
