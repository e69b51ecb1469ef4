"""The dashboard's JSON endpoints and the what-if runs over an hour of recorded data with real
controller ticks: ``/overview``, ``/queues/series``, ``/job-etas``, ``/whatif``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest
from fastapi import FastAPI

from app.db import repo
from app.db.session import transaction
from app.main import create_app
from app.settings import Settings
from tests import operator_data as od
from tests.conftest import Db
from tests.factories import app


@pytest.fixture
async def client(db: Db) -> AsyncIterator[httpx.AsyncClient]:
    od.seed_history(db.sessions)
    od.seed_jobs(db.sessions)
    settings = Settings(
        database_url=db.url, cluster_name=od.CLUSTER, poll_interval_s=60, mode="observe"
    )
    api: FastAPI = create_app(
        settings, run_loops=False, rm_transport=httpx.MockTransport(od.RecordedRM())
    )
    async with api.router.lifespan_context(api):
        api.state.sidecar.controller.clock = lambda: od.NOW_MS
        await od.run_ticks(api)
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as c:
            yield c


async def test_overview_shows_policy_queues_and_counts(client: httpx.AsyncClient) -> None:
    body = (await client.get("/overview")).json()
    assert (body["policy"], body["mode"]) == ("fawkes:TD", "enforce")
    queues = {q["path"]: q for q in body["queues"]}
    assert queues["root.default"]["configured"] == 40.0
    assert queues["root.etl"]["weight"] is not None and queues["root.etl"]["desired"] is not None
    assert body["jobs_by_state"]["finished"] == 6
    assert body["deadlines"] == {"met": 4, "missed": 2}


async def test_queue_series_holds_the_samples_thinned(client: httpx.AsyncClient) -> None:
    params = {
        "path": "root.etl",
        "since": "2023-11-14T22:00:00Z",
        "until": "2023-11-15T00:00:00Z",
        "points": 20,
    }
    body = (await client.get("/queues/series", params=params)).json()
    assert 10 <= len(body["t"]) <= 20  # 61 samples, every 4th
    assert len(body["capacity"]) == len(body["t"]) and body["decision_t"]
    assert len(body["debt"]) > 0  # the LTRF ticks integrated the ledger
    # weight and target are read out of the decision JSON by the database: the newest equal the
    # numbers /overview parses from the same record
    now = {q["path"]: q for q in (await client.get("/overview")).json()["queues"]}["root.etl"]
    assert body["weight"][-1] == pytest.approx(now["weight"])
    assert body["desired"][-1] == pytest.approx(now["desired"])
    assert all(w is not None for w in body["weight"])
    r = await client.get("/queues/series", params={**params, "path": "root.nope"})
    assert r.status_code == 404 and r.json()["detail"].startswith("path:")
    r = await client.get("/queues/series", params={**params, "since": params["until"]})
    assert r.status_code == 422 and r.json()["detail"].startswith("since:")


async def test_job_etas_extrapolate_progress(client: httpx.AsyncClient, db: Db) -> None:
    running = app("application_1700000000001_0005", queue="root.deadline", submitted_ms=1_000_000)
    running = replace(running, progress=25.0)
    with transaction(db.sessions) as s:
        cluster = repo.get_cluster(s, od.CLUSTER)
        assert cluster is not None
        repo.upsert_apps(s, cluster.id, [running], 1_060_000)
        job = s.get(od.Job, f"{4:032x}")
        assert job is not None
        job.app_id = running.app_id
    r = await client.get("/job-etas", params={"job_id": [f"{4:032x}", "nope"]})
    eta = r.json()[f"{4:032x}"]
    # started at 1 000 s, 25 % done when seen 60 s later: 240 s in all, ending at 1 240 s
    assert eta["progress"] == 25.0 and eta["eta"].startswith("1970-01-01T00:20:40")
    assert "nope" not in r.json()


async def test_whatif_runs_in_the_background_and_reports(client: httpx.AsyncClient) -> None:
    r = await client.post("/whatif", json={"policy": "nope"})
    assert r.status_code == 422 and r.json()["detail"].startswith("policy:")
    r = await client.post("/whatif", json={"policy": "fair", "since": "yesterday"})
    assert r.status_code == 422 and r.json()["detail"].startswith("since:")
    r = await client.post(
        "/whatif", json={"policy": "ltrf", "since": None, "until": "2023-11-15T00:00:00Z"}
    )
    assert r.status_code == 202
    run_id = r.json()["id"]
    for _ in range(300):
        body = (await client.get(f"/whatif/{run_id}")).json()
        if body["status"] in ("done", "failed"):
            break
        await asyncio.sleep(0.1)
    assert body["status"] == "done", body
    result = body["result"]
    # 40 recorded apps and 7 of the deadline jobs' apps (6 finished, 1 killed)
    assert result["jobs"] == 47 and result["capacity_vcores"] == od.NODE_VCORES
    queues = {q["queue"] for q in result["queues"]}
    assert queues == {"root.etl", "root.adhoc", "root.default", "root.deadline"}
    # finished 500 s, 600 s or 700 s after submission with a 600 s deadline; the killed one missed
    assert (result["actual"]["deadlines_met"], result["actual"]["deadlines_missed"]) == (4, 3)
    assert result["replay"]["deadlines_met"] + result["replay"]["deadlines_missed"] == 7
    assert result["actual"]["overall_slowdown"] >= 1.0
    assert 0 < result["replay"]["utilization"] <= 1
    report = await client.get(body["report_url"])
    assert report.headers["content-disposition"].startswith("attachment")
    assert "root.etl" in report.text and "<img" in report.text
    assert (await client.get("/whatif")).json()["items"][0]["id"] == run_id
    assert "ltrf" in (await client.get("/whatif/policies")).json()["policies"]


async def test_ui_is_served_without_third_parties(client: httpx.AsyncClient) -> None:
    r = await client.get("/ui")
    assert r.status_code == 200 and "default-src 'self'" in r.headers["content-security-policy"]
    assert "http://" not in r.text and "https://" not in r.text
    for asset in ("app.js", "charts.js", "style.css"):
        assert (await client.get(f"/ui/static/{asset}")).status_code == 200
    old = await client.get("/dashboard", follow_redirects=False)
    assert old.status_code == 308 and old.headers["location"] == "/ui"
