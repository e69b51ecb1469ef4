"""The MapReduce history through the API, on both engines: ``GET /apps/{id}``'s ``mapreduce``
section, ``/profiles``, ``POST /profiles/estimate``, and Fawkes' DD/TT/JS allowed at
``PUT /policy`` once a JobHistory server is configured."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import httpx
import pytest

from app.db import control_repo, history_repo, repo
from app.db.session import transaction
from app.main import create_app
from tests.api.test_control_api import RecordedRM, _client, _settings
from tests.conftest import Db
from tests.factories import app
from tests.unit.yarn.test_jobhistory import WORDCOUNT, client


@pytest.fixture
async def api(db: Db) -> AsyncIterator[httpx.AsyncClient]:
    settings = _settings(db, jobhistory_url="http://jhs:19888")
    fastapi_app = create_app(
        settings, run_loops=False, rm_transport=httpx.MockTransport(RecordedRM())
    )
    async for c in _client(fastapi_app):
        yield c


async def _seed(db: Db) -> None:
    async with client() as jhs:
        job = await jhs.job_of_app(WORDCOUNT)
    assert job is not None
    mr = [
        dataclasses.replace(
            app(f"application_1_000{k}", state="FINISHED", finished_ms=k * 1000),
            app_type="MAPREDUCE",
            tags=("profile:wc",),
        )
        for k in (1, 2)
    ]
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        repo.upsert_apps(s, cid, [*mr, app("application_1_0009")], now_ms=1)
        for k, a in enumerate(mr):
            # the same job read twice stands for two runs of one recurring signature
            history_repo.store_job(
                s, a.app_id, dataclasses.replace(job, finish_ms=(job.finish_ms or 0) + k), 16.0, 10
            )


async def test_app_detail_shows_phases_counters_and_tasks(api: httpx.AsyncClient, db: Db) -> None:
    await _seed(db)
    body = (await api.get("/apps/application_1_0001")).json()
    mr = body["mapreduce"]
    assert (mr["status"], mr["job_id"], mr["maps_completed"], mr["reduces_completed"]) == (
        "ok",
        "job_1795503910605_0002",
        3,
        1,
    )
    assert mr["phases"]["map"]["duration_ms"] == 5327
    assert mr["phases"]["reduce"]["avg_task_ms"] == {"shuffle": 1989, "merge": 21, "reduce": 71}
    assert mr["input_bytes"] == 3015609
    assert mr["counters"]["org.apache.hadoop.mapreduce.TaskCounter"]["CPU_MILLISECONDS"] == [
        2060,
        1770,
        290,
    ]
    assert [t["kind"] for t in mr["tasks"]] == ["MAP", "MAP", "MAP", "REDUCE"]
    other = (await api.get("/apps/application_1_0009")).json()
    assert other["mapreduce"] is None and other["app_id"] == "application_1_0009"


async def test_profiles_list_detail_and_estimate(api: httpx.AsyncClient, db: Db) -> None:
    await _seed(db)
    listed = (await api.get("/profiles")).json()["items"]
    assert [(p["signature"], p["runs"]) for p in listed] == [("p:wc", 2)]
    assert listed[0]["error"]["samples"] == 1
    detail = (await api.get("/profiles/p:wc")).json()
    assert detail["phases"]["map"]["peak_vcores"] == 3.0
    assert detail["phases"]["map"]["advice"] == {"vcores_per_container": 1}
    assert len(detail["recent_runs"]) == 2
    r = await api.post(
        "/profiles/estimate", json={"signature": "p:wc", "input_bytes": 6031218, "cluster_size": 16}
    )
    assert r.status_code == 200, r.text
    est = r.json()
    # one profiled input size: proportional to it, so twice the input takes twice as long
    assert est["rule"] == "data_size"
    assert est["total_s"] == pytest.approx(2 * 12.331, rel=1e-3)
    assert est["low_s"] <= est["total_s"] <= est["high_s"]


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("/profiles/p:none", None, 404, "signature: "),
        (
            "/profiles/estimate",
            {"signature": "p:none", "input_bytes": 1, "cluster_size": 1},
            404,
            "signature",
        ),
        (
            "/profiles/estimate",
            {"signature": "p:wc", "input_bytes": 0, "cluster_size": 1},
            422,
            "body.input_bytes: ",
        ),
        (
            "/profiles/estimate",
            {"signature": "p:wc", "input_bytes": 1, "cluster_size": 1, "x": 1},
            422,
            "body.x: ",
        ),
    ],
)
async def test_bad_profile_requests_name_the_field(
    api: httpx.AsyncClient,
    db: Db,
    path: str,
    body: dict[str, object] | None,
    status: int,
    field: str,
) -> None:
    await _seed(db)
    r = await (api.get(path) if body is None else api.post(path, json=body))
    assert r.status_code == status, r.text
    assert r.json()["detail"].startswith(field)


@pytest.mark.parametrize("weighting", ["DD", "TT", "JS"])
async def test_history_weightings_are_accepted_with_a_jobhistory_server(
    api: httpx.AsyncClient, weighting: str
) -> None:
    r = await api.put("/policy", json={"policy": f"fawkes:{weighting}"})
    assert r.status_code == 200, r.text
    assert r.json()["policy"] == f"fawkes:{weighting}"


async def test_metrics_show_the_history_collector_and_the_guard(
    api: httpx.AsyncClient, db: Db
) -> None:
    await _seed(db)
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        repo.upsert_apps(
            s,
            cid,
            [
                dataclasses.replace(
                    app("application_1_0005", state="FINISHED", finished_ms=9), app_type="MAPREDUCE"
                )
            ],
            2,
        )
        history_repo.record_miss(s, "application_1_0005", 20, "not known yet", max_attempts=10)
        state = {"baseline": {"root.etl": 10000}, "caps": {"root.etl": 6000}, "calm": 0}
        control_repo.save_policy_state(s, cid, "guard", state, 30)
    text = (await api.get("/metrics")).text
    assert 'yarn_sidecar_mapreduce_history_jobs{status="ok"} 2.0' in text
    assert 'yarn_sidecar_mapreduce_history_jobs{status="retry"} 1.0' in text
    assert "yarn_sidecar_guard_active 1.0" in text
    assert 'yarn_sidecar_guard_max_capacity_percent{queue="root.etl"} 60.0' in text
