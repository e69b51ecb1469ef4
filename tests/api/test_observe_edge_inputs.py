"""The operator's view at the edges of its inputs: a tiny application progress, a what-if period
longer than the history, queue names with JSON-path characters, a ledger longer than one answer,
and an unexpected error anywhere answering JSON."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest
from fastapi import FastAPI

from app.db import repo
from app.db.control_models import LedgerEntry
from app.db.models import Decision
from app.db.session import transaction
from app.main import create_app
from app.settings import Settings
from tests import operator_data as od
from tests.conftest import Db
from tests.factories import app, queue


def _api(db: Db) -> FastAPI:
    settings = Settings(
        database_url=db.url, cluster_name=od.CLUSTER, poll_interval_s=60, mode="observe"
    )
    return create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(od.RecordedRM()))


@pytest.fixture
async def client(db: Db) -> AsyncIterator[httpx.AsyncClient]:
    od.seed_history(db.sessions)
    od.seed_jobs(db.sessions)
    api = _api(db)
    async with api.router.lifespan_context(api):
        api.state.sidecar.controller.clock = lambda: od.NOW_MS
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as c:
            yield c


async def test_job_eta_of_a_tiny_progress_is_unknown(client: httpx.AsyncClient, db: Db) -> None:
    # an hour after it started the app reports 1e-7 % done: extrapolated, it would end in the
    # year 116,000, past any date; the ETA is unknown and the other jobs still get theirs
    started = od.NOW_MS - 3_600_000
    crawling = app("application_1700000000001_0005", queue="root.deadline", submitted_ms=started)
    with transaction(db.sessions) as s:
        cluster = repo.get_cluster(s, od.CLUSTER)
        assert cluster is not None
        repo.upsert_apps(s, cluster.id, [replace(crawling, progress=1e-7)], od.NOW_MS)
        job = s.get(od.Job, f"{4:032x}")
        assert job is not None
        job.app_id = crawling.app_id
    r = await client.get("/job-etas", params={"job_id": [f"{4:032x}", f"{0:032x}"]})
    assert r.status_code == 200, r.text
    assert r.json()[f"{4:032x}"] == {"progress": 1e-7, "eta": None, "app_state": "RUNNING"}
    assert r.json()[f"{0:032x}"]["eta"] is not None


async def test_unexpected_errors_answer_json_and_are_logged(
    db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    api = _api(db)

    def boom() -> None:
        raise RuntimeError("password=hunter2")

    api.add_api_route("/boom", boom)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as c:
        with caplog.at_level(logging.ERROR, logger="app.api.hardening"):
            r = await c.get("/boom")
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {"detail": "internal error"}
    logged = [rec for rec in caplog.records if rec.name == "app.api.hardening"]
    assert logged and "/boom" in logged[0].getMessage()
    assert logged[0].exc_info is not None and logged[0].exc_info[0] is RuntimeError


async def test_whatif_since_longer_than_the_epoch_replays_everything(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post(
        "/whatif",
        json={"policy": "ltrf", "since": "999999999w", "until": "2023-11-15T00:00:00Z"},
    )
    assert r.status_code == 202, r.text
    run_id = r.json()["id"]
    for _ in range(300):
        body = (await client.get(f"/whatif/{run_id}")).json()
        if body["status"] in ("done", "failed"):
            break
        await asyncio.sleep(0.1)
    assert body["status"] == "done", body
    assert body["result"]["since"] == "1970-01-01T00:00:00+00:00"
    assert body["result"]["jobs"] == 47  # the whole recorded history, as with since=null


ODD_NAMES = [
    "root.plain-1",
    'root.a"b',
    "root.back\\slash",
    "root.a{b}",
    "root.a,b",
    "root.a'b",
    "root.a$b[0]",
]


async def test_queue_series_of_queues_named_with_json_path_characters(db: Db) -> None:
    at = od.NOW_MS - 60_000
    with transaction(db.sessions) as s:
        cluster = repo.ensure_cluster(s, od.CLUSTER, ["http://rm:8088"], at)
        qs = [queue("root", capacity=100, leaf=False)] + [queue(n) for n in ODD_NAMES]
        repo.add_queue_samples(s, repo.upsert_queues(s, cluster.id, qs, at), qs, at)
        # one controller tick naming every queue, as the controller records it
        for i, ms in enumerate((at, at + 1000)):
            outputs = {
                "plan": {
                    "queues": {n: {"target_h": 2000 + 100 * k + i} for k, n in enumerate(ODD_NAMES)}
                },
                "policy": {"details": {"weights": {n: k + 0.5 for k, n in enumerate(ODD_NAMES)}}},
            }
            repo.add_decision(
                s,
                Decision(cluster_id=cluster.id, created_ms=ms, kind="queue", policy="ltrf",
                         mode="advise", status="advised", reason="", outputs=outputs),
            )  # fmt: skip
    api = _api(db)
    async with api.router.lifespan_context(api):
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as c:
            for k, name in enumerate(ODD_NAMES):
                r = await c.get(
                    "/queues/series",
                    params={"path": name, "since": "2023-11-14", "until": "2023-11-16"},
                )
                assert r.status_code == 200, (name, r.text)
                body = r.json()
                assert body["path"] == name and body["capacity"] == [25.0]
                assert body["desired"] == pytest.approx([20 + k, 20.01 + k]), name
                assert body["weight"] == [k + 0.5, k + 0.5], name


async def test_ledger_lists_the_newest_intervals_and_says_when_it_left_some_out(db: Db) -> None:
    queues, ticks, t0 = ("root.a", "root.b", "root.c"), 10, od.NOW_MS - 600_000
    with transaction(db.sessions) as s:
        cluster = repo.ensure_cluster(s, od.CLUSTER, ["http://rm:8088"], od.NOW_MS)
        s.add_all(
            LedgerEntry(cluster_id=cluster.id, queue=q, start_ms=t0 + i * 60_000,
                        end_ms=t0 + (i + 1) * 60_000, weight=1.0, entitlement=60.0, usage=50.0,
                        counted=50.0, debt=10.0 * (i + 1), total_usage=0.0, total_counted=0.0)
            for i in range(ticks) for q in queues
        )  # fmt: skip
    api = _api(db)
    async with api.router.lifespan_context(api):
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as c:
            body = (await c.get("/ledger", params={"limit": 12})).json()
            assert body["truncated"] is True
            assert [q["queue"] for q in body["queues"]] == list(queues)
            end = dt.datetime.fromtimestamp((t0 + ticks * 60_000) / 1000, dt.UTC)
            newest = end.strftime("%Y-%m-%dT%H:%M:%SZ")
            for q in body["queues"]:
                # the current debt, over the last four intervals, oldest first
                assert q["debt"] == 10.0 * ticks and len(q["points"]) == 4
                assert [p["debt"] for p in q["points"]] == [70.0, 80.0, 90.0, 100.0]
                assert q["points"][-1]["end"] == newest
                assert q["usage"] == 4 * 50.0
            whole = (await c.get("/ledger", params={"limit": 30})).json()
            assert whole["truncated"] is False
            assert [len(q["points"]) for q in whole["queues"]] == [10, 10, 10]
            one = (await c.get("/ledger", params={"limit": 10, "queue": "root.b"})).json()
            assert one["truncated"] is False and len(one["queues"][0]["points"]) == 10
