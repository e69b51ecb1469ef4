"""Authentication and roles on the HTTP API: 401/403 bodies, who may do what, who did it."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.auth.principal import Role
from app.db import auth_repo
from app.db.session import transaction
from app.main import create_app
from app.settings import Settings, SettingsError, load_settings
from tests.api.test_control_api import RecordedRM
from tests.conftest import Db

RAW = {"kind": "application", "command": "sleep 5"}


@dataclass
class Served:
    app: FastAPI
    anon: httpx.AsyncClient
    tokens: dict[str, str]

    def as_(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


def _token(db: Db, name: str, role: Role, user: str | None = None, **kw: int) -> str:
    with transaction(db.sessions) as s:
        _, token = auth_repo.create_token(
            s, name=name, role=role, user=user, now_ms=int(time.time() * 1000), **kw
        )
    return token


async def _serve(db: Db, **extra: object) -> AsyncIterator[Served]:
    settings = Settings(
        database_url=db.url,
        cluster_name="test",
        policy="fawkes:TD",
        deadline_capacity_vcores=8,
        auth="token",
        allowed_hosts=("sidecar",),
        **extra,  # type: ignore[arg-type]
    )
    app = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(RecordedRM()))
    tokens = {
        "viewer": _token(db, "dash", Role.VIEWER),
        "alice": _token(db, "alice-ci", Role.SUBMITTER, user="alice"),
        "bob": _token(db, "bob", Role.SUBMITTER),
        "ops": _token(db, "ops", Role.OPERATOR, user="olga"),
        "scrape": _token(db, "prom", Role.SCRAPE),
    }
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            yield Served(app, client, tokens)


@pytest.fixture
async def served(db: Db) -> AsyncIterator[Served]:
    async for s in _serve(db):
        yield s


def _routes(app: FastAPI) -> list[tuple[str, str]]:
    out = []
    for path, item in app.openapi()["paths"].items():
        for method in item:
            out.append(
                (
                    method.upper(),
                    path.replace("{decision_id}", "1")
                    .replace("{job_id}", "x")
                    .replace("{app_id}", "application_1_0001"),
                )
            )
    return out


# Pages that carry no data themselves (the dashboard fetches its data with the user's token).
OPEN = {"/health", "/dashboard", "/ui"}


async def test_every_endpoint_but_health_needs_a_token(served: Served) -> None:
    routes = _routes(served.app)
    assert len(routes) >= 15
    for method, path in routes:
        r = await served.anon.request(method, path)
        if path in OPEN:
            assert r.status_code in (200, 307), (method, path)  # /dashboard redirects to /ui
            continue
        assert r.status_code == 401, (method, path, r.status_code)
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
        assert r.json() == {"detail": "Authorization: a bearer token is required"}
    bad = await served.anon.get("/queues", headers={"Authorization": "Bearer ysc_" + "x" * 43})
    assert bad.status_code == 401 and "invalid or expired" in bad.json()["detail"]


async def test_openapi_declares_the_bearer_scheme(served: Served) -> None:
    doc = served.app.openapi()
    assert doc["components"]["securitySchemes"]["BearerToken"]["scheme"] == "bearer"
    assert doc["paths"]["/policy"]["put"]["security"] == [{"BearerToken": []}]
    assert "security" not in doc["paths"]["/health"]["get"]
    assert "401" in doc["paths"]["/jobs"]["post"]["responses"]


async def test_roles(served: Served) -> None:
    put = {"mode": "enforce"}
    r = await served.anon.put("/policy", json=put, headers=served.as_("viewer"))
    assert r.status_code == 403
    assert r.json()["detail"] == "role: this endpoint needs the operator role"
    r = await served.anon.put("/policy", json=put, headers=served.as_("alice"))
    assert r.status_code == 403
    assert (await served.anon.get("/queues", headers=served.as_("viewer"))).status_code == 200
    assert (await served.anon.get("/queues", headers=served.as_("scrape"))).status_code == 403
    assert (await served.anon.get("/metrics", headers=served.as_("scrape"))).status_code == 200
    assert (await served.anon.get("/metrics")).status_code == 401
    # a submitter may not bring its own command
    job = {"name": "x", "deadline": 600, "requested_tasks": 2, "run": RAW}
    r = await served.anon.post("/jobs", json=job, headers=served.as_("alice"))
    assert r.status_code == 403 and "operator role" in r.json()["detail"]
    assert r.json()["detail"].startswith("role: run.kind 'application'")
    r = await served.anon.put("/policy", json=put, headers=served.as_("ops"))
    assert r.status_code == 200 and r.json()["mode"] == "enforce"


async def test_ready_shows_the_mode_put_policy_set(served: Served) -> None:
    r = await served.anon.put("/policy", json={"mode": "enforce"}, headers=served.as_("ops"))
    assert r.status_code == 200
    ready = await served.anon.get("/ready", headers=served.as_("viewer"))
    assert ready.json()["mode"] == "enforce"


async def test_who_did_it_is_on_the_record(served: Served) -> None:
    h = served.as_("ops")
    r = await served.anon.put("/policy", json={"policy": "ltrf"}, headers=h)
    assert r.status_code == 200
    items = (await served.anon.get("/decisions?kind=policy", headers=h)).json()["items"]
    detail = (await served.anon.get(f"/decisions/{items[0]['id']}", headers=h)).json()
    assert detail["principal"] == "olga (token ops)"
    job = {"name": "x", "deadline": 600, "requested_tasks": 2, "run": RAW}
    r = await served.anon.post("/jobs", json=job, headers=h)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["owner"] == "olga" and body["decision"]["principal"] == "olga (token ops)"
    # bob (a submitter) cannot cancel olga's job; olga can, and the cancellation names her
    r = await served.anon.delete(f"/jobs/{body['id']}", headers=served.as_("bob"))
    assert r.status_code == 403
    assert r.json()["detail"] == "role: cancelling another user's job needs the operator role"
    r = await served.anon.delete(f"/jobs/{body['id']}", headers=h)
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    steps = (await served.anon.get(f"/jobs/{body['id']}", headers=h)).json()["decisions"]
    assert [(d["action"], d["principal"]) for d in steps][-1] == ("cancel", "olga (token ops)")


async def test_revoked_and_expired_tokens_are_refused(served: Served, db: Db) -> None:
    now = int(time.time() * 1000)
    old = _token(db, "old", Role.VIEWER, expires_ms=now - 1)
    r = await served.anon.get("/queues", headers={"Authorization": f"Bearer {old}"})
    assert r.status_code == 401
    with transaction(db.sessions) as s:
        assert auth_repo.revoke_token(s, "dash", now)
    assert (await served.anon.get("/queues", headers=served.as_("viewer"))).status_code == 401


async def test_metrics_open_by_setting(db: Db) -> None:
    async for s in _serve(db, metrics_open=True):
        assert (await s.anon.get("/metrics")).status_code == 200
        assert (await s.anon.get("/queues")).status_code == 401


async def test_tokens_are_stored_hashed_and_never_logged(
    served: Served, db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await served.anon.get("/queues", headers=served.as_("viewer"))
    await served.anon.get("/queues", headers={"Authorization": "Bearer ysc_wrong_" + "y" * 30})
    with db.sessions() as s:
        hashes = {r.token_hash for r in auth_repo.list_tokens(s)}
    for token in served.tokens.values():
        assert token not in hashes and len(next(iter(hashes))) == 64
        assert token not in caplog.text


def test_auth_none_only_on_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARN_SIDECAR_AUTH", "none")
    assert load_settings(api_host="127.0.0.1").auth == "none"
    assert load_settings(api_host="::1").auth == "none"
    with pytest.raises(SettingsError, match="YARN_SIDECAR_AUTH: 'none' is only allowed"):
        load_settings(api_host="0.0.0.0")
    monkeypatch.delenv("YARN_SIDECAR_AUTH")
    assert load_settings(api_host="0.0.0.0").auth == "token"


async def test_auth_none_warns_at_start_up(db: Db, caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(Settings(database_url=db.url, auth="none"), run_loops=False)
    with caplog.at_level(logging.WARNING):
        async with app.router.lifespan_context(app):
            pass
    assert "authentication is OFF" in caplog.text


EXAMPLES = Path(__file__).parents[2] / "examples" / "job-templates.yaml"


async def test_submitters_run_templates_as_themselves(db: Db) -> None:
    async for s in _serve(db, job_templates=EXAMPLES):
        listed = (await s.anon.get("/templates", headers=s.as_("viewer"))).json()["items"]
        assert [t["name"] for t in listed] == [
            "distributed-shell",
            "mapreduce-example",
            "spark-submit",
        ]
        run = {
            "kind": "template",
            "template": "spark-submit",
            "parameters": {"main_class": "org.example.N"},
        }
        job = {"name": "n", "deadline": 600, "requested_tasks": 2, "run": run}
        r = await s.anon.post("/jobs", json=job, headers=s.as_("alice"))
        assert r.status_code == 202, r.text
        body = r.json()
        assert body["owner"] == "alice" and body["run"]["run_as"] == "alice"
        assert (
            body["run"]["template"] == "spark-submit"
            and "--class org.example.N" in body["run"]["command"]
        )
        bad = {**job, "run": {**run, "parameters": {"main_class": "org.example.N`id`"}}}
        r = await s.anon.post("/jobs", json=bad, headers=s.as_("alice"))
        assert r.status_code == 422 and r.json()["detail"].startswith("run.parameters.main_class")
        r = await s.anon.post("/jobs", json={**job, "queue": "root.etl"}, headers=s.as_("alice"))
        assert r.status_code == 422 and r.json()["detail"].startswith("queue: must be one of")
        # alice cancels her own job; bob may not
        r = await s.anon.delete(f"/jobs/{body['id']}", headers=s.as_("bob"))
        assert r.status_code == 403
        r = await s.anon.delete(f"/jobs/{body['id']}", headers=s.as_("alice"))
        assert r.status_code == 200


async def test_idempotency_keys_are_each_submitters_own(db: Db) -> None:
    """The same key from two users is two requests: neither replays nor reveals the other's."""
    async for s in _serve(db, job_templates=EXAMPLES):
        run = {
            "kind": "template",
            "template": "spark-submit",
            "parameters": {"main_class": "org.example.B"},
        }
        job = {"name": "n", "deadline": 600, "requested_tasks": 2, "run": run}
        key = {"Idempotency-Key": "nightly-1"}
        first = await s.anon.post("/jobs", json=job, headers={**s.as_("alice"), **key})
        assert first.status_code == 202, first.text
        theirs = await s.anon.post("/jobs", json=job, headers={**s.as_("bob"), **key})
        assert theirs.status_code == 202, theirs.text
        assert theirs.json()["id"] != first.json()["id"] and theirs.json()["owner"] != "alice"
        again = await s.anon.post("/jobs", json=job, headers={**s.as_("alice"), **key})
        assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])
        other = {**job, "requested_tasks": 3}
        conflict = await s.anon.post("/jobs", json=other, headers={**s.as_("bob"), **key})
        assert conflict.status_code == 409
        assert conflict.json()["detail"].startswith("idempotency_key:")
        assert first.json()["id"] not in conflict.text
        # lax validation would have read true as the integer 1
        flag = {**run, "parameters": {"main_class": "org.example.B", "executors": True}}
        r = await s.anon.post("/jobs", json={**job, "run": flag}, headers=s.as_("alice"))
        assert r.status_code == 422 and "executors: must be a number or a string" in r.text
        mine = (await s.anon.get("/jobs", headers=s.as_("ops"))).json()["items"]
        assert len(mine) == 2


async def test_raw_commands_checked_against_allow_lists_or_disabled(db: Db) -> None:
    async for s in _serve(db):
        h = s.as_("ops")
        base = {"name": "n", "deadline": 600, "requested_tasks": 2}
        evil = {**RAW, "environment": {"LD_PRELOAD": "/tmp/x.so"}}
        r = await s.anon.post("/jobs", json={**base, "run": evil}, headers=h)
        assert r.status_code == 422 and r.json()["detail"].startswith("run.environment.LD_PRELOAD")
        res = {"name": "s", "resource": "file:///etc/shadow", "size": 1, "timestamp": 1}
        r = await s.anon.post(
            "/jobs", json={**base, "run": {**RAW, "local_resources": [res]}}, headers=h
        )
        assert r.status_code == 422
        assert r.json()["detail"].startswith("run.local_resources.0.resource: must start with")


async def test_raw_commands_can_be_disabled(db: Db) -> None:
    async for s in _serve(db, raw_commands="disabled"):
        job = {"name": "n", "deadline": 600, "requested_tasks": 2, "run": RAW}
        r = await s.anon.post("/jobs", json=job, headers=s.as_("ops"))
        assert r.status_code == 403 and "disabled" in r.json()["detail"]


async def test_api_docs_are_open_pages_served_from_the_package(served: Served) -> None:
    """The docs pages carry no data (the schema is fetched like any call) and load nothing from
    a CDN: every script, stylesheet and icon they name is served by the sidecar itself."""
    for path in ("/docs", "/redoc"):
        page = await served.anon.get(path)
        assert page.status_code == 200, path
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert assets and all(a.startswith("/docs/static/") for a in assets), assets
        for asset in assets:
            r = await served.anon.get(asset)
            assert r.status_code == 200 and len(r.content) > 500, asset
    bundle = await served.anon.get("/docs/static/redoc.standalone.js")
    assert b"cdn.redoc.ly" not in bundle.content


async def test_every_response_forbids_framing_and_sniffing(served: Served) -> None:
    """Pages that set their own policy keep it; every other answer, errors included, gets one
    that forbids framing (the dashboard has a token field and a PUT /policy form)."""
    for path, who, status in [
        ("/ui", None, 200),
        ("/docs/oauth2-redirect", None, 200),
        ("/health", None, 200),
        ("/queues", "viewer", 200),
        ("/queues", None, 401),
        ("/no-such-page", "viewer", 404),
    ]:
        r = await served.anon.get(path, headers=served.as_(who) if who else {})
        assert r.status_code == status, path
        assert r.headers["X-Content-Type-Options"] == "nosniff", path
        assert r.headers["X-Frame-Options"] == "DENY", path
        assert r.headers["Referrer-Policy"] == "no-referrer", path
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"], path
    page = await served.anon.get("/ui")
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]


async def test_the_dashboard_page_is_served_only_with_its_policy(served: Served) -> None:
    assert (await served.anon.get("/ui/static/app.js")).status_code == 200
    for path in ("/ui/static/index.html", "/ui/static/INDEX.HTM", "/ui/static/index.html?x=1"):
        assert (await served.anon.get(path)).status_code == 404, path


async def test_floors_and_baseline_are_capped_like_the_other_per_queue_maps(
    served: Served,
) -> None:
    many = {f"root.q{i}": 1 for i in range(1001)}
    for body in ({"floors": many}, {"baseline": {q: 0.1 for q in many}}):
        for method, path, who in (("POST", "/policy/preview", "viewer"), ("PUT", "/policy", "ops")):
            r = await served.anon.request(method, path, json=body, headers=served.as_(who))
            assert r.status_code == 422, (path, r.text[:200])
            field = next(iter(body))
            assert r.json()["detail"].startswith(f"body.{field}: "), r.json()
