"""``yarn-sidecar decisions ...`` and ``jobs ...`` against the real app served in-process, and
against a transport that records what the CLI sends (paths, headers) or answers as another
server."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
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
        "id",
        "name",
        "queue",
        "state",
        "cpus",
        "deadline",
        "outcome",
        "app",
        "why",
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


def _recording(
    monkeypatch: pytest.MonkeyPatch, answer: Callable[[httpx.Request], httpx.Response]
) -> list[httpx.Request]:
    """Route the CLI's requests to ``answer`` and keep each one as sent."""
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answer(request)

    monkeypatch.setattr(
        operator_cli,
        "_client",
        lambda url: httpx.Client(base_url=url, transport=httpx.MockTransport(handle)),
    )
    return sent


def test_a_password_in_the_url_is_never_shown(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "decisions", "list", "--url", "http://admin:hunter2@127.0.0.1:9")
    assert code == 1 and "hunter2" not in err
    assert "cannot reach the sidecar at http://admin:***@127.0.0.1:9" in err


def test_a_token_is_stripped_and_refused_with_control_characters(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sent = _recording(monkeypatch, lambda _: httpx.Response(200, json={"items": []}))
    # what `--token "$(cat tok)"` passes for a file saved with Windows line ends
    assert _cli(capsys, "decisions", "list", "--token", "ysc_secret\r")[0] == 0
    monkeypatch.setenv("YARN_SIDECAR_TOKEN", "  ysc_fromenv\n")
    assert _cli(capsys, "jobs", "list")[0] == 0
    assert [r.headers["Authorization"] for r in sent] == ["Bearer ysc_secret", "Bearer ysc_fromenv"]
    for bad in ("ysc_sec\rret", "ysc_sec\x1bret", "ysc_secrét"):
        code, out, err = _cli(capsys, "decisions", "list", "--token", bad)
        assert code == 2 and "--token" in err and "control or non-ASCII" in err
        assert "ysc_sec" not in out + err and len(err.strip().splitlines()) == 1
    assert len(sent) == 2  # refused before any request


def test_an_error_quoting_the_request_never_shows_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.LocalProtocolError(f"Illegal header value {request.headers['Authorization']}")

    _recording(monkeypatch, refuse)
    code, _, err = _cli(capsys, "jobs", "list", "--token", "ysc_secret")
    assert code == 1 and "ysc_secret" not in err
    assert err.startswith("error: cannot send GET /jobs to http://127.0.0.1:")


def test_ids_are_one_path_segment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sent = _recording(monkeypatch, lambda _: httpx.Response(404, json={"detail": "no such job"}))
    for argv in (
        ("jobs", "cancel", "../decisions/1"),
        ("jobs", "show", "../decisions"),
        ("jobs", "show", "x?state=bogus"),
        ("jobs", "show", ".."),
        ("jobs", "show", "a#b"),
    ):
        assert _cli(capsys, *argv)[0] == 1
    assert [(r.method, r.url.raw_path, r.url.query) for r in sent] == [
        ("DELETE", b"/jobs/..%2Fdecisions%2F1", b""),
        ("GET", b"/jobs/..%2Fdecisions", b""),
        ("GET", b"/jobs/x%3Fstate%3Dbogus", b""),
        ("GET", b"/jobs/%2E%2E", b""),
        ("GET", b"/jobs/a%23b", b""),
    ]
    with pytest.raises(SystemExit) as empty:
        main(["jobs", "show", ""])
    assert empty.value.code == 2 and "a job id is not empty" in capsys.readouterr().err


def test_ids_that_look_like_paths_reach_no_other_resource(
    served: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert served.put("/policy", json={"policy": "ltrf"}).status_code == 200
    decision = served.get("/decisions").json()["items"][0]["id"]
    code, _, err = _cli(capsys, "jobs", "cancel", f"../decisions/{decision}")
    assert code == 1 and "404" in err and "Traceback" not in err
    code, _, err = _cli(capsys, "jobs", "show", "../decisions")
    assert code == 1 and "404" in err
    code, _, err = _cli(capsys, "jobs", "show", "x?state=bogus")
    assert code == 1 and "404: job_id: no job 'x?state=bogus'" in err
    assert served.get(f"/decisions/{decision}").status_code == 200


def test_nan_and_infinity_are_refused_naming_the_option_or_file(
    served: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for params in ('{"discount": NaN}', '{"discount": 1e999}', '{"discount": -Infinity}'):
        code, _, err = _cli(capsys, "policy", "preview", "--params", params)
        assert code == 2 and err.startswith("error: --params: invalid JSON: ")
        assert len(err.strip().splitlines()) == 1
    code, _, err = _cli(capsys, "admission", "set", "promise", "--params", '{"quantile": NaN}')
    assert code == 2 and err == "error: --params: invalid JSON: NaN is not a JSON number\n"
    assert served.get("/admission").json()["policy"] == "justice"
    spec = tmp_path / "nan.json"
    spec.write_text(
        '{"name": "n", "deadline": NaN, "requested_tasks": 1,'
        ' "run": {"kind": "application", "command": "true"}}'
    )
    code, _, err = _cli(capsys, "jobs", "submit", str(spec))
    assert code == 1 and err == f"error: {spec}: invalid JSON: NaN is not a JSON number\n"
    binary = tmp_path / "bin.json"
    binary.write_bytes(b'{"name": "\xff"}')
    code, _, err = _cli(capsys, "jobs", "submit", str(binary))
    assert code == 1 and err == f"error: {binary}: not UTF-8 text (byte 10)\n"
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    code, _, err = _cli(capsys, "jobs", "submit", str(listed))
    assert code == 1 and err == f"error: {listed}: a job is a JSON object\n"
    assert served.get("/jobs").json()["items"] == []


def test_any_idempotency_key_is_sent_in_the_body(
    served: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.json"
    job = {
        "name": "nightly",
        "deadline": 600,
        "requested_tasks": 1,
        "run": {"kind": "application", "command": "true"},
    }
    spec.write_text(json.dumps(job))
    code, out, err = _cli(capsys, "jobs", "submit", str(spec), "--idempotency-key", "clé-ü")
    assert code == 0, err
    job_id = out.split()[0]
    code, out, err = _cli(capsys, "jobs", "submit", str(spec), "--idempotency-key", "clé-ü")
    assert code == 0 and out.split()[0] == job_id
    assert len(served.get("/jobs").json()["items"]) == 1
    spec.write_text(json.dumps({**job, "idempotency_key": "other"}))
    code, _, err = _cli(capsys, "jobs", "submit", str(spec), "--idempotency-key", "clé-ü")
    assert code == 2 and "--idempotency-key: differs from the idempotency_key in" in err


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, text="<html>a web page</html>"),
        httpx.Response(200, json={"items": 5}),
        httpx.Response(200, json=[1, 2]),
        httpx.Response(404, text="<html>\n<body>Not Found</body>\n</html>"),
    ],
)
def test_a_server_that_is_not_the_sidecar_is_named(
    answer: httpx.Response, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _recording(monkeypatch, lambda _: answer)
    for argv in (("jobs", "list"), ("jobs", "show", "j1"), ("decisions", "list")):
        code, _, err = _cli(capsys, *argv, "--url", "http://u:pw@127.0.0.1:8080")
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        assert "http://u:***@127.0.0.1:8080 does not answer as the sidecar" in err
        assert "check --url" in err


def test_a_url_that_is_not_http_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "jobs", "list", "--url", "localhost:8000")
    assert code == 2 and "--url: localhost:8000 is not an http(s) URL" in err
