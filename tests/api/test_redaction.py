"""Credentials in the RM URL never reach a log line or a response."""

from __future__ import annotations

import logging
import time

import httpx
import pytest

from app.auth.principal import Role
from app.db import auth_repo
from app.db.session import transaction
from app.main import create_app
from app.redact import redact_text
from app.settings import Settings
from tests.conftest import Db

SECRET = "hunter2-s3cret"


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError(f"connection refused to {request.url}", request=request)


def test_redact_text_masks_url_passwords_and_secret_parameters() -> None:
    assert redact_text("GET http://u:pw@rm:8088/x failed") == "GET http://u:***@rm:8088/x failed"
    assert redact_text("postgresql+psycopg://a:b%40c@db/x") == "postgresql+psycopg://a:***@db/x"
    assert redact_text("http://rm/x?token=abc&y=1") == "http://rm/x?token=***&y=1"
    assert redact_text("http://rm:8088/ws") == "http://rm:8088/ws"


async def test_no_endpoint_and_no_log_line_shows_the_rm_password(
    db: Db, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = Settings(
        database_url=db.url,
        cluster_name="test",
        rm_urls=(f"http://sidecar:{SECRET}@rm.example:8088",),
        rm_retries=0,
        auth="token",
        allowed_hosts=("sidecar",),
    )
    app = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(_refuse))
    with transaction(db.sessions) as s:
        _, token = auth_repo.create_token(
            s, name="ops", role=Role.OPERATOR, user=None, now_ms=int(time.time() * 1000)
        )
    headers = {"Authorization": f"Bearer {token}"}
    async with app.router.lifespan_context(app):
        state = app.state.sidecar
        await state.poller.poll(int(time.time() * 1000), force=True)
        assert state.poller.last_error and "rm.example" in state.poller.last_error
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            await client.post("/policy/preview", headers=headers)
            await client.put("/policy", json={"mode": "enforce"}, headers=headers)
            bodies = []
            for path, item in app.openapi()["paths"].items():
                if "get" in item and "{" not in path:
                    r = await client.get(path, headers=headers)
                    assert r.status_code < 500 or path == "/ready", (path, r.text)
                    bodies.append(r.text)
            decisions = (await client.get("/decisions", headers=headers)).json()["items"]
            for d in decisions:
                bodies.append((await client.get(f"/decisions/{d['id']}", headers=headers)).text)
    ready = next(b for b in bodies if '"resourcemanager"' in b)
    assert "sidecar:***@rm.example" in ready  # shown, masked
    for body in bodies:
        assert SECRET not in body
    assert "rm.example" in caplog.text and SECRET not in caplog.text
    for record in caplog.records:
        assert SECRET not in record.getMessage()
