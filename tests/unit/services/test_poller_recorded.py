"""The poller through the real RMClient on responses recorded from a Hadoop 3.5.0 RM.

Two polls: four apps running, then the same apps finished. The history must hold each app once,
in its final form with the RM's vcoreSeconds, and the watermark must follow the finish times.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from sqlalchemy import func, select

from app.db.models import Application, Queue
from app.domain.model import FINISHED_GRACE_MS
from app.services.poller import FINISHED_MARGIN_MS, Poller
from app.yarn.client import RMClient
from tests.conftest import Db

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rm"


def _load(name: str) -> object:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


class RecordedRM:
    """Serves recorded bodies; ``phase`` selects whether the apps are running or finished."""

    def __init__(self) -> None:
        self.phase = "running"
        self.finished_begin: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/cluster/info"):
            return httpx.Response(200, json=_load("info.json"))
        if path.endswith("/cluster/metrics"):
            return httpx.Response(200, json=_load("metrics.json"))
        if path.endswith("/cluster/scheduler"):
            return httpx.Response(200, json=_load("scheduler.json"))
        if path.endswith("/cluster/nodes"):
            return httpx.Response(200, json=_load("nodes.json"))
        if path.endswith("/cluster/apps"):
            states = request.url.params.get("states", "")
            if "FINISHED" in states:
                self.finished_begin.append(request.url.params.get("finishedTimeBegin"))
                name = "apps_finished.json" if self.phase == "finished" else "apps_empty.json"
            else:
                name = "apps_running.json" if self.phase == "running" else "apps_empty.json"
            return httpx.Response(200, json=_load(name))
        return httpx.Response(404, json={"RemoteException": {"message": f"no {path}"}})


async def test_poller_records_recorded_rm_apps_through_their_life(db: Db) -> None:
    rm = RecordedRM()
    finished = _load("apps_finished.json")
    assert isinstance(finished, dict)
    finish_times = [a["finishedTime"] for a in finished["apps"]["app"]]
    async with RMClient(["http://rm:8088"], transport=httpx.MockTransport(rm)) as client:
        poller = Poller(
            client, db.sessions, cluster_name="c", rm_urls=("http://rm:8088",), interval_s=10
        )
        first = await poller.poll(1_000)
        rm.phase = "finished"
        second = await poller.poll(2_000)
        third = await poller.poll(3_000)
    assert first.ok and second.ok and third.ok, (first, second, third)
    # The finished window starts at the watermark: 0, 0, then (a sliced tick) the newest finish
    # less a short margin, and a band from the newest finish less the grace up to the settled.
    newest = max(finish_times)
    assert rm.finished_begin[:2] == ["0", "0"]
    assert sorted(rm.finished_begin[2:]) == sorted(
        [str(newest - FINISHED_MARGIN_MS), str(newest - FINISHED_GRACE_MS)]
    )
    with db.sessions() as s:
        rows = list(s.scalars(select(Application).order_by(Application.app_id)))
        assert len(rows) == len(finish_times) == 4
        assert {r.state for r in rows} == {"FINISHED"}
        assert all(r.vcore_seconds > 0 and r.memory_seconds > 0 for r in rows)
        # Written when each app finished (second poll); the third saw no change and wrote nothing.
        assert all(r.first_seen_ms == 1_000 and r.updated_ms == 2_000 for r in rows)
        leaves = set(s.scalars(select(Queue.path).where(Queue.is_leaf)))
        assert leaves == {"root.default", "root.etl", "root.adhoc", "root.deadline"}
        assert s.scalar(select(func.count()).select_from(Queue)) == 5
