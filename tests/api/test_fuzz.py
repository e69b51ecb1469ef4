"""Schemathesis over a served sidecar, driven by the committed ``openapi.yaml``: generated
requests (valid and invalid) with an operator token never get a 5xx, and every response has a
documented status code, content type and a body matching its schema."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from schemathesis import checks

from app.auth.principal import Role
from app.db import auth_repo
from app.db.migrate import upgrade
from app.db.session import make_engine, make_session_factory, transaction
from app.main import create_app
from app.settings import Settings
from tests.api.test_control_api import RecordedRM

OPENAPI = Path(__file__).parents[2] / "openapi.yaml"
EXAMPLES = Path(__file__).parents[2] / "examples" / "job-templates.yaml"
# 60 per operation keeps CI near a minute; YARN_SIDECAR_FUZZ_EXAMPLES=500 for a deeper local run.
PER_OPERATION = int(os.environ.get("YARN_SIDECAR_FUZZ_EXAMPLES", "60"))


@schemathesis.check
def no_server_error(
    ctx: checks.CheckContext, response: checks.Response, case: schemathesis.Case
) -> bool:
    """No 5xx, except ``/ready``'s documented 503 (no RM poll in this test, by design)."""
    if response.status_code >= 500 and not (case.path == "/ready" and response.status_code == 503):
        raise AssertionError(f"{response.status_code} on {case.method} {case.path}")
    return True


CHECKS = [
    no_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('fuzz')}/sidecar.db"
    upgrade(url)
    engine = make_engine(url)
    with transaction(make_session_factory(engine)) as s:
        _, token = auth_repo.create_token(
            s, name="fuzz", role=Role.OPERATOR, user="fuzzer", now_ms=int(time.time() * 1000)
        )
    engine.dispose()
    port = _free_port()
    app = create_app(
        Settings(
            database_url=url,
            auth="token",
            allowed_hosts=("127.0.0.1",),
            api_port=port,
            job_templates=EXAMPLES,
            rm_retries=0,
        ),
        run_loops=False,
        rm_transport=httpx.MockTransport(RecordedRM()),
    )
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}", token
    finally:
        server.should_exit = True
        thread.join(10)


def test_generated_requests_get_documented_non_5xx_answers(served: tuple[str, str]) -> None:
    base_url, token = served
    schema = schemathesis.openapi.from_path(OPENAPI)
    headers = {"Authorization": f"Bearer {token}"}
    sent = 0
    operations = [op.ok() for op in schema.get_all_operations()]
    assert len(operations) >= 15
    with httpx.Client() as _:
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=PER_OPERATION,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def run(case: schemathesis.Case) -> None:
                nonlocal sent
                sent += 1
                case.call_and_validate(base_url=base_url, headers=headers, checks=CHECKS)

            run()
    print(f"schemathesis: {sent} requests over {len(operations)} operations")
    assert sent >= 1000
