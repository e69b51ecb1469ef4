"""Hostile input answers a 4xx naming the field (never a 500), in the API's one error shape."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.state import SidecarState
from app.db.session import make_engine, make_session_factory
from app.main import create_app
from app.settings import Settings
from tests.api.test_control_api import RecordedRM
from tests.conftest import Db

RAW = {"kind": "application", "command": "sleep 5"}
API = tuple[httpx.AsyncClient, FastAPI]


@pytest.fixture
async def api(db: Db) -> AsyncIterator[API]:
    settings = Settings(
        database_url=db.url, cluster_name="test", policy="fawkes:TD", deadline_capacity_vcores=8
    )
    app = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(RecordedRM()))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            yield client, app


def job(**kw: Any) -> dict[str, Any]:
    return {"name": "j", "deadline": 600, "requested_tasks": 2, "run": RAW, **kw}


def raw_job(**kw: str) -> str:
    """A POST /jobs body with some values written as raw JSON text."""
    body = {"name": '"j"', "deadline": "600", "requested_tasks": "2", "run": json.dumps(RAW), **kw}
    return "{" + ",".join(f'"{k}": {v}' for k, v in body.items()) + "}"


async def _post(
    client: httpx.AsyncClient, path: str, text: str, method: str = "POST"
) -> httpx.Response:
    return await client.request(
        method,
        path,
        content=text.encode("utf-8", "surrogatepass"),
        headers={"Content-Type": "application/json"},
    )


def _refused(r: httpx.Response, status: int, field: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert list(body) == ["detail"] and isinstance(body["detail"], str)
    assert body["detail"].startswith(field), body["detail"]


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"deadline": "NaN"}, "body.deadline: NaN"),
        ({"deadline": "Infinity"}, "body.deadline: Infinity"),
        ({"requested_tasks": "-Infinity"}, "body.requested_tasks"),
        ({"requested_tasks": "null", "input_bytes": str(2**63)}, "body.input_bytes: integer"),
        (
            {"requested_tasks": "null", "input_bytes": "1", "block_size": str(2**64)},
            "body.block_size",
        ),
        ({"name": '"\\ud800"'}, "body.name: contains a lone UTF-16 surrogate"),
        ({"run": '{"kind": "application", "command": "x\\udfff"}'}, "body.run.command"),
    ],
)
async def test_numbers_and_strings_json_allows_but_we_cannot_keep(
    api: API, values: dict[str, str], field: str
) -> None:
    client, _ = api
    _refused(await _post(client, "/jobs", raw_job(**values)), 422, field)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # 2^63-1 bytes would be 68,719,476,736 tasks: the task cap applies to input_bytes too
        ({"requested_tasks": None, "input_bytes": 2**63 - 1}, "input_bytes: 68719476736 tasks"),
        ({"deadline": "9999-12-31T00:00:00Z"}, "deadline: more than"),
        ({"deadline": 1e-300}, "body.deadline: seconds must be >= 1"),
        ({"name": "n" * 1_000}, "body.name: String should have at most 200 characters"),
    ],
)
async def test_job_limits_name_the_field(api: API, body: dict[str, Any], field: str) -> None:
    client, _ = api
    r = await client.post("/jobs", json=job(**body))
    _refused(r, 422, field)
    assert len(r.text) < 400  # the input is never echoed


async def test_surrogate_weights_are_refused_and_never_stored(api: API) -> None:
    client, _ = api
    text = '{"weights": {"\\ud800": 1}}'
    _refused(await _post(client, "/policy", text, "PUT"), 422, "body.weights: a key contains")
    _refused(await _post(client, "/policy/preview", text), 422, "body.weights: a key contains")
    assert (await client.post("/policy/preview")).status_code in (200, 503)
    assert (await client.get("/policy")).json()["weights"] == {}


async def test_size_limits(api: API) -> None:
    client, _ = api
    weights = {f"root.q{i}": 1 for i in range(400_000)}
    _refused(await client.put("/policy", json={"weights": weights}), 413, "body: larger than")
    many = {f"root.q{i}": 1 for i in range(1_001)}
    _refused(await client.put("/policy", json={"weights": many}), 422, "body.weights: Dictionary")


async def test_unreadable_bodies_are_400_naming_the_body(api: API) -> None:
    client, _ = api
    r = await client.post(
        "/jobs", content=b'{"name": "\xff"}', headers={"Content-Type": "application/json"}
    )
    _refused(r, 400, "body: not valid UTF-8")
    deep = "[" * 5000 + "]" * 5000
    _refused(await _post(client, "/jobs", deep), 400, "body: nested deeper than")
    _refused(await _post(client, "/jobs", '{"name": '), 422, "body: invalid JSON")


async def test_huge_ids_and_cursors(api: API) -> None:
    client, _ = api
    _refused(await client.get("/decisions/9223372036854775808"), 422, "path.decision_id")
    huge = base64.urlsafe_b64encode(json.dumps([2**70, "x"]).encode()).decode()
    for path in ("/apps", "/jobs", "/decisions"):
        _refused(await client.get(path, params={"cursor": huge}), 400, "cursor:")


async def test_every_validation_error_has_one_shape(api: API) -> None:
    client, _ = api
    _refused(await client.get("/apps", params={"limit": 0}), 422, "query.limit")
    _refused(await client.get("/jobs", params={"limit": "x"}), 422, "query.limit")
    _refused(await client.put("/policy", json={"mode": 3}), 422, "body.mode")
    _refused(await client.get("/decisions", params={"kind": "nope"}), 422, "kind: must be one of")
    doc = (await client.get("/openapi.json")).json()
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    ref = doc["paths"]["/apps"]["get"]["responses"]["422"]["content"]["application/json"]
    assert ref["schema"] == {"$ref": "#/components/schemas/ErrorOut"}


async def test_like_wildcards_are_literal(api: API) -> None:
    client, _ = api
    assert (await client.post("/jobs", json=job())).status_code == 202
    for q in ("%", "%25", "_"):
        assert (await client.get("/jobs", params={"queue": q})).json()["items"] == []
    assert len((await client.get("/jobs", params={"queue": "deadline"})).json()["items"]) == 1
    assert (await client.get("/apps", params={"queue": "%"})).json()["items"] == []


async def test_host_must_be_allowed(db: Db) -> None:
    app = create_app(
        Settings(database_url=db.url, allowed_hosts=("localhost", "127.0.0.1")), run_loops=False
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://evil.example") as c:
            _refused(await c.get("/health"), 400, "Host: not an allowed host")
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
            assert (await c.get("/health")).status_code == 200


async def test_database_down_is_a_json_503_logged_once(
    api: API, caplog: pytest.LogCaptureFixture
) -> None:
    client, app = api
    state: SidecarState = app.state.sidecar
    dead = make_engine("postgresql://sidecar:s3cret@127.0.0.1:9/none")
    state.engine, state.sessions = dead, make_session_factory(dead)
    assert state.controller is not None and state.admission is not None
    state.controller.sessions = state.sessions
    caplog.set_level(logging.INFO)
    for path in (
        "/queues",
        "/apps",
        "/jobs",
        "/decisions",
        "/decisions/1",
        "/ledger",
        "/policy",
        "/estimator",
        "/metrics",
    ):
        r = await client.get(path)
        assert r.status_code == 503, (path, r.text)
        assert r.headers["Retry-After"] == "5"
        assert r.json() == {"detail": "database: unavailable, retry later"}
    assert (await client.get("/ready")).status_code == 503
    errors = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert len(errors) == 1 and "Traceback" not in caplog.text
    assert "s3cret" not in caplog.text
    dead.dispose()


async def test_nul_characters_are_refused_wherever_they_come_from(api: API) -> None:
    """PostgreSQL keeps no NUL in text: a NUL anywhere is the caller's 422 on both databases,
    not a 500 on one and a stored job on the other."""
    client, _ = api
    _refused(
        await _post(client, "/jobs", raw_job(name='"a\\u0000b"')), 422, "body.name: contains a NUL"
    )
    key = raw_job(idempotency_key='"k\\u0000"')
    _refused(await _post(client, "/jobs", key), 422, "body.idempotency_key: contains a NUL")
    weights = '{"weights": {"root.a\\u0000": 1}}'
    _refused(await _post(client, "/policy", weights, "PUT"), 422, "body.weights: a key contains")
    for path, params in (
        ("/jobs", {"queue": "a\x00"}),
        ("/apps", {"user": "\x00"}),
        ("/decisions", {"policy": "x\x00y"}),
        ("/job-etas", {"job_id": "\x00"}),
    ):
        name = next(iter(params))
        _refused(await client.get(path, params=params), 422, f"query.{name}: contains a NUL")
    _refused(await client.get("/jobs/a%00b"), 422, "path: contains a NUL")
    _refused(await client.delete("/apps/a%00b"), 422, "path: contains a NUL")
    # a cursor whose values hold a NUL was not issued here either
    nul = base64.urlsafe_b64encode(json.dumps([1, "a\x00"]).encode()).decode()
    _refused(await client.get("/jobs", params={"cursor": nul}), 400, "cursor:")
    assert (await client.get("/jobs")).json()["items"] == []


async def test_out_of_range_numbers_however_written(api: API) -> None:
    client, _ = api
    # past Python's 4,300-digit limit for int(): still "outside the 64-bit range", not unparsable
    long = raw_job(requested_tasks="null", input_bytes="9" * 5000)
    _refused(await _post(client, "/jobs", long), 422, "body.input_bytes: integer outside")
    r = await client.get("/pushes", params={"before": str(2**63)})
    _refused(r, 422, "query.before")
    assert (await client.get("/pushes", params={"before": str(2**63 - 1)})).status_code == 200
    # a duration's milliseconds must fit the database's 64-bit integers
    for since, field in (("9" * 5000 + "d", "body.since"), ("9" * 10 + "w", "since: expected")):
        r = await client.post("/whatif", json={"policy": "ltrf", "since": since})
        _refused(r, 422, field)
    assert (
        await client.post("/whatif", json={"policy": "ltrf", "since": "9" * 9 + "w"})
    ).status_code == 202
    # a cursor of nested arrays deep enough to exhaust the JSON decoder's recursion
    deep = base64.urlsafe_b64encode(b"[" * 5000).decode().rstrip("=")
    for path in ("/apps", "/jobs", "/decisions"):
        _refused(await client.get(path, params={"cursor": deep}), 400, "cursor:")
