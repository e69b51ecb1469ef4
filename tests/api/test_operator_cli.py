"""``yarn-sidecar decisions ...`` and ``jobs ...`` against the real app served in-process."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from app import operator_cli
from app.cli import main
from app.main import create_app
from app.settings import Settings
from tests.conftest import Db


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


@pytest.fixture
def served(db: Db, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    settings = Settings(database_url=db.url, cluster_name="test", deadline_capacity_vcores=8)
    app = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(_refuse))
    with TestClient(app) as client:
        monkeypatch.setattr(operator_cli, "_client", lambda url: contextlib.nullcontext(client))
        yield client


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_jobs_submit_list_show_cancel(
    served: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps(
            {
                "name": "nightly",
                "deadline": 600,
                "requested_tasks": 3,
                "run": {"kind": "application", "command": "sleep 5"},
            }
        )
    )
    code, out, err = _cli(capsys, "jobs", "submit", str(spec), "--idempotency-key", "k1")
    assert code == 0, err
    job_id, state, rest = out.split(maxsplit=2)
    assert state == "admitted" and rest.startswith("admit: whole request of 3 CPUs fits")
    # The same key again: the same job, not a second one.
    assert (
        _cli(capsys, "jobs", "submit", str(spec), "--idempotency-key", "k1")[1].split()[0] == job_id
    )
    code, out, _ = _cli(capsys, "jobs", "list")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "id", "name", "queue", "state", "cpus", "deadline", "outcome", "app", "why",
    ]
    listed = served.get("/jobs").json()["items"][0]
    deadline = operator_cli._short_time(listed["deadline_at"])
    assert deadline.endswith("Z") and deadline[:5] == listed["deadline_at"][5:10]
    assert len(lines) == 2 and lines[1].split()[:6] == [
        job_id,
        "nightly",
        "root.deadline",
        "admitted",
        "3",
        deadline,
    ]
    # admitted and not yet run: no outcome, no app; the why is the admission's reason
    assert lines[1].rstrip().endswith(listed["reason"][:60].rstrip())
    assert "met" not in lines[1].split() and "missed" not in lines[1].split()
    code, out, _ = _cli(capsys, "jobs", "show", job_id)
    assert code == 0 and "admit" in out and "whole request of 3 CPUs fits" in out
    code, out, _ = _cli(capsys, "jobs", "cancel", job_id)
    assert code == 0 and out.split() == [job_id, "cancelled"]


def test_decisions_list_and_show(served: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    r = served.put("/policy", json={"policy": "ltrf", "params": {"discount": 0.5}})
    assert r.status_code == 200, r.text
    code, out, err = _cli(capsys, "decisions", "list", "--kind", "policy")
    assert code == 0, err
    rows = out.splitlines()[1:]
    assert len(rows) == 1 and rows[0].split()[2:4] == ["policy", "ltrf"]
    decision_id = rows[0].split()[0]
    code, out, _ = _cli(capsys, "decisions", "show", decision_id)
    assert code == 0 and json.loads(out)["params"]["params"]["discount"] == 0.5


def test_errors_name_the_problem(
    served: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "jobs", "show", "nope")
    assert code == 1 and "404" in err and "nope" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",\n "deadline": }')
    code, _, err = _cli(capsys, "jobs", "submit", str(bad))
    assert code == 1 and f"{bad}:2:" in err
    invalid = tmp_path / "invalid.json"
    invalid.write_text(
        json.dumps(
            {
                "name": "x",
                "deadline": -5,
                "requested_tasks": 1,
                "run": {"kind": "application", "command": "true"},
            }
        )
    )
    code, _, err = _cli(capsys, "jobs", "submit", str(invalid))
    assert code == 1 and "422" in err and "deadline" in err


def test_unreachable_sidecar_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "decisions", "list", "--url", "http://127.0.0.1:9")
    assert code == 1 and "cannot reach the sidecar at http://127.0.0.1:9" in err


def test_an_unknown_filter_value_is_a_usage_error(
    served: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "decisions", "list", "--kind", "nope")
    assert code == 2
    assert "422: kind: must be one of queue, policy, admission, placement, got 'nope'" in err
    code, _, err = _cli(capsys, "jobs", "list", "--state", "nope")
    assert code == 2 and "422: state: must be one of" in err


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({}, "http://127.0.0.1:8000"),
        ({"YARN_SIDECAR_API_PORT": "9123"}, "http://127.0.0.1:9123"),
        ({"YARN_SIDECAR_API_HOST": "0.0.0.0", "YARN_SIDECAR_API_PORT": "9"}, "http://127.0.0.1:9"),
        ({"YARN_SIDECAR_API_HOST": "::1"}, "http://[::1]:8000"),
        (
            {"YARN_SIDECAR_API_HOST": "side.example", "YARN_SIDECAR_API_TLS_CERTFILE": "/c.pem"},
            "https://side.example:8000",
        ),
        ({"YARN_SIDECAR_URL": "https://x:1", "YARN_SIDECAR_API_PORT": "9"}, "https://x:1"),
    ],
)
def test_the_default_url_is_where_serve_listens(env: dict[str, str], url: str) -> None:
    assert operator_cli.default_url(env) == url
