"""``/jobs`` and ``/estimator`` through httpx.ASGITransport, lifespan included, on both engines.

The RM refuses connections here (submission to YARN is the service's job, tested in
``tests/unit/jobs`` and against the real RM in ``tests/integration/test_jobs.py``); what is
tested is the HTTP contract: validation naming the field, commit before the answer, idempotency,
listing, cancellation, and 500 concurrent submissions that lose and duplicate nothing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from app.db.jobs_models import Job, JobDecision
from app.main import create_app
from app.settings import Settings
from tests.conftest import Db

RUN = {"kind": "application", "command": "sleep 5"}
API = tuple[httpx.AsyncClient, FastAPI]


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


@pytest.fixture
async def api(db: Db) -> AsyncIterator[API]:
    settings = Settings(
        database_url=db.url,
        cluster_name="test",
        deadline_capacity_vcores=8,
        drop_threshold=1000,
        job_queues=("root.etl",),
    )
    fastapi_app = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(_refuse))
    async with fastapi_app.router.lifespan_context(fastapi_app):
        transport = httpx.ASGITransport(app=fastapi_app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://sidecar", timeout=120
        ) as client:
            yield client, fastapi_app


def body(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "report", "deadline": 120, "requested_tasks": 4, "run": RUN}
    base.update(kw)
    return base


async def test_submit_answers_202_with_the_committed_job_and_first_decision(
    api: API, db: Db
) -> None:
    client, _ = api
    r = await client.post("/jobs", json=body(tags=["Team-A"]))
    assert r.status_code == 202
    job = r.json()
    assert r.headers["location"] == f"/jobs/{job['id']}"
    assert (job["state"], job["queue"], job["granted_cpus"]) == ("admitted", "root.deadline", 4)
    assert job["decision"]["action"] == "admit"
    assert job["decision"]["numbers"]["capacity"] == 8
    assert job["deadline_s"] == pytest.approx(120, abs=0.01)
    with db.sessions() as s:
        stored = s.get(Job, job["id"])
        assert stored is not None and stored.state == "admitted"
    detail = (await client.get(f"/jobs/{job['id']}")).json()
    assert [d["action"] for d in detail["decisions"]] == ["admit"]
    assert detail["decisions"][0]["reason"] == "whole request of 4 CPUs fits"


async def test_absolute_deadline_input_bytes_and_queueing(api: API) -> None:
    client, _ = api
    at = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)).isoformat()
    r = await client.post(
        "/jobs",
        json=body(
            requested_tasks=None, input_bytes=10 * 128 * 1024 * 1024, deadline=at, queue="root.etl"
        ),
    )
    assert r.status_code == 202
    job = r.json()
    # 10 blocks of 128 MiB -> 10 tasks; maxCpus = min(10, 8) = 8 fits the empty cluster.
    assert (job["requested_tasks"], job["granted_cpus"], job["queue"]) == (10, 8, "root.etl")
    assert 590 < job["deadline_s"] <= 600
    queued = (await client.post("/jobs", json=body())).json()
    assert queued["state"] == "queued"
    assert queued["decision"]["reason"] == "request of 4 CPUs does not fit in 0 free"


async def test_names_and_tags_of_any_script_that_no_shell_reads_are_kept(api: API) -> None:
    client, _ = api
    name, tags = "Nächtlicher Lauf 2026-12-01 v1.2 (west)"[:-7], ["team:etl", "run=7", "a.b/c@d+e"]
    r = await client.post("/jobs", json=body(name=name, tags=tags))
    assert r.status_code == 202, r.text
    assert (r.json()["name"], r.json()["tags"][-3:]) == (name, tags)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"run": None}, "run"),
        ({"run": {"kind": "teleport"}}, "run"),
        ({"deadline": "tomorrow"}, "deadline"),
        ({"deadline": "60"}, "deadline"),
        ({"deadline": -5}, "deadline"),
        ({"deadline": True}, "deadline"),
        ({"deadline": "2001-01-01T00:00:00Z"}, "deadline"),
        ({"requested_tasks": 0}, "requested_tasks"),
        ({"input_bytes": 100}, "requested_tasks"),
        ({"requested_tasks": None}, "requested_tasks"),
        ({"tags": ["deadline:5"]}, "tags"),
        ({"tags": ["a,b"]}, "tags"),
        # what YARN would carry unescaped into the ApplicationMaster's launch script
        ({"name": 'nightly"; touch /tmp/x; echo "'}, "body.name"),
        ({"name": "n$(id)"}, "body.name"),
        ({"name": "n`id`"}, "body.name"),
        ({"name": "n\nm"}, "body.name"),
        ({"tags": ["$(id)"]}, "body.tags"),
        ({"tags": ["abc\n"]}, "body.tags"),
        ({"tags": ["timeline_flow_name_tag:x"]}, "body.tags"),
        ({"tags": ["TIMELINE_FLOW_RUN_ID_TAG:1"]}, "body.tags"),
        ({"name": ""}, "name"),
        ({"colour": "red"}, "colour"),
        ({"run": {"kind": "sleep", "seconds": 0}}, "seconds"),
        ({"run": {"kind": "sleep", "seconds": 5}}, "YARN_SIDECAR_DSHELL_HARNESS"),
    ],
)
async def test_invalid_requests_are_422_naming_the_field(
    api: API, change: dict[str, Any], field: str
) -> None:
    client, _ = api
    r = await client.post("/jobs", json=body(**change))
    assert r.status_code == 422
    assert field in r.text
    assert (await client.get("/jobs")).json()["items"] == []


async def test_idempotency_key_header_and_field(api: API, db: Db) -> None:
    client, _ = api
    first = await client.post("/jobs", json=body(), headers={"Idempotency-Key": "nightly-1"})
    again = await client.post("/jobs", json=body(), headers={"Idempotency-Key": "nightly-1"})
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["decision"]["action"] == "admit"
    by_field = await client.post("/jobs", json=body(idempotency_key="nightly-1"))
    assert by_field.status_code == 200 and by_field.json()["id"] == first.json()["id"]
    other = await client.post(
        "/jobs", json=body(requested_tasks=5), headers={"Idempotency-Key": "nightly-1"}
    )
    assert other.status_code == 409 and other.json()["detail"].startswith("idempotency_key:")
    clash = await client.post(
        "/jobs", json=body(idempotency_key="a"), headers={"Idempotency-Key": "b"}
    )
    assert clash.status_code == 422 and "idempotency_key" in clash.text
    with db.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Job)) == 1


async def test_list_filters_and_pages(api: API) -> None:
    client, _ = api
    ids = [(await client.post("/jobs", json=body(name=f"j{i}"))).json()["id"] for i in range(3)]
    page = (await client.get("/jobs", params={"limit": 2})).json()
    rest = (await client.get("/jobs", params={"limit": 2, "cursor": page["next_cursor"]})).json()
    seen = [j["id"] for j in page["items"] + rest["items"]]
    assert sorted(seen) == sorted(ids) and rest["next_cursor"] is None
    admitted = (await client.get("/jobs", params={"state": "admitted"})).json()["items"]
    assert len(admitted) == 2  # 4 + 4 vcores of 8; the third waits
    queued = (await client.get("/jobs", params={"state": "queued", "queue": "deadline"})).json()
    assert len(queued["items"]) == 1
    future = (await client.get("/jobs", params={"submitted_from": "2100-01-01T00:00:00Z"})).json()
    assert future["items"] == []
    bad = await client.get("/jobs", params={"state": "sleeping"})
    assert bad.status_code == 422 and bad.json()["detail"].startswith("state:")
    assert (await client.get("/jobs", params={"cursor": "zzz"})).status_code == 400
    assert (await client.get("/jobs/0123")).status_code == 404


async def test_cancel_is_idempotent(api: API) -> None:
    client, _ = api
    job = (await client.post("/jobs", json=body())).json()
    first = await client.delete(f"/jobs/{job['id']}")
    again = await client.delete(f"/jobs/{job['id']}")
    assert (first.status_code, again.status_code) == (200, 200)
    assert first.json()["state"] == again.json()["state"] == "cancelled"
    detail = (await client.get(f"/jobs/{job['id']}")).json()
    assert [d["action"] for d in detail["decisions"]] == ["admit", "cancel"]
    assert (await client.delete("/jobs/ffff")).status_code == 404


async def test_estimator_starts_empty(api: API) -> None:
    client, _ = api
    est = (await client.get("/estimator")).json()
    assert est["policy"] == "justice" and est["observations"] == 0
    assert est["min_cpu_frac"] is None and est["fraction"] is None
    assert est["correction"] == 0.0 and est["capacity_vcores"] == 8
    assert (await client.get("/estimator/observations")).json() == {"items": []}


async def test_500_concurrent_submissions_lose_and_duplicate_nothing(
    api: API, db: Db, db_url: str
) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("the load test runs against PostgreSQL")
    client, _ = api
    # 400 distinct jobs, plus 50 keys each sent twice at the same time (a client retry).
    requests: list[tuple[dict[str, Any], str | None]] = [
        (body(name=f"u{i}"), None) for i in range(400)
    ]
    for k in range(50):
        requests += [(body(name=f"k{k}"), f"key-{k}")] * 2

    async def send(payload: dict[str, Any], key: str | None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        return await client.post("/jobs", json=payload, headers=headers)

    responses = await asyncio.gather(*(send(p, k) for p, k in requests))
    codes = [r.status_code for r in responses]
    assert codes.count(202) == 450 and codes.count(200) == 50
    by_key: dict[str, set[str]] = {}
    for (_, key), r in zip(requests, responses, strict=True):
        if key:
            by_key.setdefault(key, set()).add(r.json()["id"])
    assert all(len(ids) == 1 for ids in by_key.values())
    answered = {r.json()["id"] for r in responses}
    with db.sessions() as s:
        stored = set(s.scalars(select(Job.id)))
        undecided = s.scalar(
            select(func.count()).select_from(Job).where(~Job.id.in_(select(JobDecision.job_id)))
        )
        granted = s.scalar(
            select(func.coalesce(func.sum(Job.granted_cpus), 0)).where(Job.state == "admitted")
        )
    assert stored == answered and len(stored) == 450
    assert undecided == 0
    assert granted == 8  # two 4-vcore jobs: admission never over-commits under concurrency


async def test_a_submission_round_decides_the_new_jobs_alone_until_capacity_frees(
    api: API,
) -> None:
    client, fastapi_app = api
    service = fastapi_app.state.sidecar.admission

    def numbers(job: dict[str, Any]) -> dict[str, Any]:
        return dict(job["decision"]["numbers"])

    first = (await client.post("/jobs", json=body(name="a", requested_tasks=6))).json()
    assert first["state"] == "admitted" and "evaluated" not in numbers(first)  # no mark yet
    # 2 of 8 free: the 4-task job waits; this round ranked it alone
    late = (await client.post("/jobs", json=body(name="b", deadline=1))).json()
    assert late["state"] == "queued" and numbers(late)["evaluated"] == 1
    await asyncio.sleep(1.2)  # b's deadline passes while it waits
    small = (await client.post("/jobs", json=body(name="c", requested_tasks=2))).json()
    # the new job alone, against the running ones: admitted on the 2 free, as a round over
    # every waiting job would; b, now past its deadline, is left to the next full round
    assert small["state"] == "admitted" and small["granted_cpus"] == 2
    # it read neither the waiting jobs nor their number (which ticks and full rounds record)
    assert numbers(small)["evaluated"] == 1 and "waiting" not in numbers(small)
    assert (await client.get(f"/jobs/{late['id']}")).json()["state"] == "queued"
    await asyncio.to_thread(service._round, service.clock(), "tick")
    assert (await client.get(f"/jobs/{late['id']}")).json()["state"] == "dropped"
    # a cancel frees 6: the next submission round ranks every waiting job again
    assert (await client.delete(f"/jobs/{first['id']}")).status_code == 200
    after = (await client.post("/jobs", json=body(name="d"))).json()
    assert after["state"] == "admitted" and "evaluated" not in numbers(after)
