"""The HTTP API through httpx.ASGITransport, lifespan included, on both engines."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from app.api.state import SidecarState
from app.db import repo
from app.db.session import transaction
from app.main import create_app
from app.settings import Settings
from tests.conftest import Db
from tests.factories import app, queue


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


@pytest.fixture
async def api(db: Db) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    settings = Settings(database_url=db.url, cluster_name="test", poll_interval_s=10)
    fastapi_app = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(_refuse))
    async with fastapi_app.router.lifespan_context(fastapi_app):
        transport = httpx.ASGITransport(app=fastapi_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            yield client, fastapi_app


def _state(fastapi_app: FastAPI) -> SidecarState:
    state: SidecarState = fastapi_app.state.sidecar
    return state


def _seed(db: Db) -> None:
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        qs = [queue("root", capacity=100, leaf=False), queue("root.etl", used_vcores=2)]
        ids = repo.upsert_queues(s, cid, qs, 1_700_000_000_000)
        repo.add_queue_samples(s, ids, qs, 1_700_000_000_000)
        repo.upsert_apps(
            s,
            cid,
            [
                app(
                    "application_1_0001",
                    queue="root.etl",
                    submitted_ms=1_700_000_000_000,
                    tags=("deadline:1700000600",),
                ),
                app(
                    "application_1_0002",
                    queue="root.adhoc",
                    submitted_ms=1_700_000_100_000,
                    state="FINISHED",
                    finished_ms=1_700_000_200_000,
                    vcore_seconds=9,
                ),
            ],
            now_ms=1_700_000_300_000,
        )


async def test_health(api: tuple[httpx.AsyncClient, FastAPI]) -> None:
    client, _ = api
    r = await client.get("/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"


async def test_ready_reflects_rm_polls(api: tuple[httpx.AsyncClient, FastAPI], db: Db) -> None:
    client, fastapi_app = api
    r = await client.get("/ready")
    assert r.status_code == 503
    body = r.json()
    assert body["database"]["ok"] is True and body["resourcemanager"]["ok"] is False
    poller = _state(fastapi_app).poller
    assert poller is not None
    # A real poll against an RM that refuses connections: recorded as the reason.
    summary = await poller.poll(int(time.time() * 1000))
    assert not summary.ok
    r = await client.get("/ready")
    assert r.status_code == 503
    assert "RMUnavailable" in r.json()["resourcemanager"]["detail"]
    poller.last_good_poll_ms = int(time.time() * 1000) - 5_000
    r = await client.get("/ready")
    assert r.status_code == 200
    assert 4 <= r.json()["last_good_poll_age_s"] < 60
    poller.last_good_poll_ms = int(time.time() * 1000) - 31_000  # > 3 intervals of 10 s
    assert (await client.get("/ready")).status_code == 503


async def test_queues_latest_and_since(api: tuple[httpx.AsyncClient, FastAPI], db: Db) -> None:
    client, _ = api
    assert (await client.get("/queues")).json() == {"items": []}
    _seed(db)
    items = (await client.get("/queues")).json()["items"]
    etl = next(q for q in items if q["path"] == "root.etl")
    assert etl["used_vcores"] == 2 and etl["parent"] == "root" and etl["is_leaf"] is True
    hist = (await client.get("/queues", params={"since": "2023-11-14T22:00:00Z"})).json()["items"]
    assert len(hist) == 2
    later = (await client.get("/queues", params={"since": "2030-01-01T00:00:00Z"})).json()
    assert later["items"] == []
    bad = await client.get("/queues", params={"since": "yesterday"})
    assert bad.status_code == 422 and "since" in bad.text


async def test_apps_filters_pages_and_errors(
    api: tuple[httpx.AsyncClient, FastAPI], db: Db
) -> None:
    client, _ = api
    _seed(db)
    page = (await client.get("/apps", params={"limit": 1})).json()
    assert [a["app_id"] for a in page["items"]] == ["application_1_0002"]
    nxt = (await client.get("/apps", params={"limit": 1, "cursor": page["next_cursor"]})).json()
    assert [a["app_id"] for a in nxt["items"]] == ["application_1_0001"]
    assert nxt["next_cursor"] is None
    by_tag = (await client.get("/apps", params={"tag": "deadline:1700000600"})).json()["items"]
    assert [a["app_id"] for a in by_tag] == ["application_1_0001"]
    finished = (await client.get("/apps", params={"state": "finished"})).json()["items"]
    assert [a["vcore_seconds"] for a in finished] == [9]
    assert (await client.get("/apps", params={"queue": "etl"})).json()["items"][0][
        "queue"
    ] == "root.etl"
    one = await client.get("/apps/application_1_0002")
    assert one.status_code == 200 and one.json()["finished_at"].startswith("2023-11-14T22:16:40")
    missing = await client.get("/apps/application_9_9999")
    assert missing.status_code == 404 and "application_9_9999" in missing.json()["detail"]
    bad_state = await client.get("/apps", params={"state": "SLEEPING"})
    assert bad_state.status_code == 422 and bad_state.json()["detail"].startswith("state:")
    bad_cursor = await client.get("/apps", params={"cursor": "zzz"})
    assert bad_cursor.status_code == 400 and "cursor" in bad_cursor.json()["detail"]
    bad_limit = await client.get("/apps", params={"limit": 0})
    assert bad_limit.status_code == 422 and "limit" in bad_limit.text


async def test_docs_are_served(api: tuple[httpx.AsyncClient, FastAPI]) -> None:
    client, _ = api
    assert (await client.get("/docs")).status_code == 200
    assert "/apps/{app_id}" in (await client.get("/openapi.json")).json()["paths"]


async def test_metrics_expose_poller_and_queue_gauges(
    api: tuple[httpx.AsyncClient, FastAPI], db: Db
) -> None:
    client, _ = api
    _seed(db)
    r = await client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }
    assert samples[("yarn_sidecar_queue_used_vcores", (("queue", "root.etl"),))] == 2
    assert samples[("yarn_sidecar_applications", (("state", "FINISHED"),))] == 1


async def test_dashboard_page_reads_the_json_api(api: tuple[httpx.AsyncClient, FastAPI]) -> None:
    client, _ = api
    r = await client.get("/dashboard", follow_redirects=True)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    script = (await client.get("/ui/static/app.js")).text
    for path in ('api("/overview")', '"/queues/series?"', '"/jobs?"', '"/decisions?"'):
        assert path in script
