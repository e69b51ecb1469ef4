"""``GET /admission`` and ``PUT /admission``: the admission policy switched at run time, with the
same role, validation, audit and persistence as ``PUT /policy``, and the next round running it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from app.db import jobs_repo
from app.main import create_app
from app.settings import Settings
from tests.api.test_auth import Served, _serve
from tests.conftest import Db

RAW = {"kind": "application", "command": "sleep 5"}


def _job(name: str, tasks: int = 2) -> dict[str, object]:
    return {"name": name, "deadline": 600, "requested_tasks": tasks, "run": RAW}


@pytest.fixture
async def served(db: Db) -> AsyncIterator[Served]:
    async for s in _serve(db):
        yield s


async def test_reading_needs_a_viewer_and_changing_an_operator(served: Served) -> None:
    put = {"policy": "pythia"}
    assert (await served.anon.get("/admission")).status_code == 401
    assert (await served.anon.put("/admission", json=put)).status_code == 401
    for who in ("viewer", "alice", "scrape"):
        r = await served.anon.put("/admission", json=put, headers=served.as_(who))
        assert r.status_code == 403, who
    assert (await served.anon.get("/admission", headers=served.as_("scrape"))).status_code == 403
    r = await served.anon.get("/admission", headers=served.as_("viewer"))
    assert r.status_code == 200
    body = r.json()
    assert (body["policy"], body["source"]) == ("justice", "settings")
    assert [p["name"] for p in body["policies"]] == ["justice", "promise", "pythia"]
    promise = next(p for p in body["policies"] if p["name"] == "promise")
    assert "quantile" in [p["name"] for p in promise["params"]]


@pytest.mark.parametrize(
    ("put", "field"),
    [
        ({"policy": "fawkes"}, "policy"),
        ({"policy": "nosuch"}, "policy"),
        ({"policy": "pythia", "params": {"alpha": 7}}, "params.alpha"),
        ({"policy": "justice", "params": {"smoothing": "median"}}, "params.smoothing"),
        ({"policy": "promise", "params": {"bogus": 1}}, "params.bogus"),
    ],
)
async def test_bad_input_is_a_422_naming_the_field(
    served: Served, put: dict[str, object], field: str
) -> None:
    r = await served.anon.put("/admission", json=put, headers=served.as_("ops"))
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith(f"{field}: ")
    # nothing was stored
    r = await served.anon.get("/admission", headers=served.as_("ops"))
    assert (r.json()["policy"], r.json()["source"]) == ("justice", "settings")


async def test_a_body_without_a_policy_is_refused(served: Served) -> None:
    r = await served.anon.put("/admission", json={"params": {}}, headers=served.as_("ops"))
    assert r.status_code == 422
    assert "policy" in r.text


async def test_the_choice_is_audited_and_survives_a_restart(db: Db) -> None:
    async for s in _serve(db):
        h = s.as_("ops")
        put = {"policy": "pythia", "params": {"drop_threshold": 50}}
        r = await s.anon.put("/admission", json=put, headers=h)
        assert r.status_code == 200, r.text
        assert (r.json()["policy"], r.json()["source"]) == ("pythia", "operator")
        assert r.json()["params"]["drop_threshold"] == 50
        items = (await s.anon.get("/decisions?kind=policy", headers=h)).json()["items"]
        detail = (await s.anon.get(f"/decisions/{items[0]['id']}", headers=h)).json()
        assert detail["policy"] == "pythia"
        assert detail["principal"] == "olga (token ops)"
        assert detail["inputs"]["previous"]["policy"] == "justice"
        assert detail["inputs"]["scope"] == "admission"
    # a new process over the same database (no tokens: it runs without authentication)
    settings = Settings(database_url=db.url, cluster_name="test", deadline_capacity_vcores=8)
    async with _unauthenticated(settings) as client:
        body = (await client.get("/admission")).json()
        assert (body["policy"], body["source"]) == ("pythia", "operator")
        assert body["params"]["drop_threshold"] == 50
        # and its rounds run it
        r = await client.post("/jobs", json=_job("after-restart"))
        assert r.json()["decision"]["policy"] == "pythia"


@asynccontextmanager
async def _unauthenticated(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a sidecar without tokens (and without loops) on ``settings``."""
    app = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(_refuse))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            yield client


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


async def test_the_next_round_runs_the_new_policy(served: Served) -> None:
    h = served.as_("ops")
    first = (await served.anon.post("/jobs", json=_job("a"), headers=h)).json()
    assert first["decision"]["policy"] == "justice"
    assert first.get("eta") is None
    r = await served.anon.put("/admission", json={"policy": "promise"}, headers=h)
    assert r.status_code == 200
    # what the request leaves out is the settings' (the live defaults: one AM container booked
    # per job, the 10 s start-up prior), not the simulator's 0 and 0
    assert (r.json()["params"]["am_containers"], r.json()["params"]["startup_s"]) == (1, 10.0)
    second = (await served.anon.post("/jobs", json=_job("b"), headers=h)).json()
    # Promise answers with its ETA and records its name on the decision and the round
    assert second["decision"]["policy"] == "promise"
    assert second["eta"] is not None and second["eta"]["action"] in ("admit", "queue")
    rounds = (await served.anon.get("/decisions?kind=admission", headers=h)).json()["items"]
    assert rounds[0]["policy"] == "promise"
    est = (await served.anon.get("/estimator", headers=h)).json()
    assert est["policy"] == "promise" and est["admitted_floor_vcores"] is not None
    r = await served.anon.put("/admission", json={"policy": "pythia"}, headers=h)
    assert r.status_code == 200
    third = (await served.anon.post("/jobs", json=_job("c"), headers=h)).json()
    assert third["decision"]["policy"] == "pythia"


async def test_a_choice_stored_before_a_parameter_existed_takes_the_settings_value(db: Db) -> None:
    # stored by an earlier version, which had no start-up prior
    with db.sessions.begin() as s:
        jobs_repo.save_admission_setting(s, "test", "promise", {"quantile": 0.9}, now_ms=1)
    settings = Settings(
        database_url=db.url, cluster_name="test", promise_startup_s=7.0, promise_am_containers=2
    )
    async with _unauthenticated(settings) as client:
        body = (await client.get("/admission")).json()
    assert (body["policy"], body["source"]) == ("promise", "operator")
    params = body["params"]
    assert (params["quantile"], params["startup_s"], params["am_containers"]) == (0.9, 7.0, 2)


async def test_a_reader_with_an_older_snapshot_leaves_the_policy_the_service_runs_alone(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reads of the stored choice outside the admission lock (a job, the policy, the estimator)
    # may come from a snapshot taken just before a ``PUT /admission`` committed; what the
    # service remembers as its policy (recorded on a cancellation, say) must stay the new one.
    h = served.as_("ops")
    r = await served.anon.put("/admission", json={"policy": "pythia"}, headers=h)
    assert r.status_code == 200
    job = (await served.anon.post("/jobs", json=_job("a"), headers=h)).json()
    assert job["decision"]["policy"] == "pythia"
    with monkeypatch.context() as m:
        m.setattr(jobs_repo, "admission_setting", lambda session, cluster: None)  # not yet stored
        for path in (f"/jobs/{job['id']}", "/admission", "/estimator"):
            assert (await served.anon.get(path, headers=h)).status_code == 200, path
    r = await served.anon.delete(f"/jobs/{job['id']}", headers=h)
    assert r.status_code in (200, 202), r.text
    steps = (await served.anon.get(f"/jobs/{job['id']}", headers=h)).json()["decisions"]
    assert [(s["action"], s["policy"]) for s in steps][-1] == ("cancel", "pythia")
