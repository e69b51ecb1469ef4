"""The ``yarn-sidecar`` command line: help, schema export, database upgrade, error reporting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app import cli
from app.cli import build_parser, main, openapi_yaml
from app.main import schema_app

ROOT = Path(__file__).resolve().parents[2]


def test_committed_openapi_matches_the_running_apps_schema() -> None:
    committed = (ROOT / "openapi.yaml").read_text(encoding="utf-8")
    assert committed == openapi_yaml(schema_app().openapi()), (
        "openapi.yaml is stale: run `yarn-sidecar export-openapi -o openapi.yaml`"
    )
    paths = yaml.safe_load(committed)["paths"]
    assert {"/health", "/ready", "/queues", "/apps", "/apps/{app_id}"} <= set(paths)


def test_export_openapi_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export-openapi"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["info"]["title"] == "YARN Policy Sidecar"


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["serve", "--help"],
        ["db", "upgrade", "--help"],
        ["poll-once", "--help"],
        ["export-openapi", "--help"],
        ["policy", "run", "--help"],
        ["policy", "preview", "--help"],
        ["simulate", "--help"],
        ["simulate", "compare", "--help"],
        ["decisions", "list", "--help"],
        ["decisions", "show", "--help"],
        ["jobs", "list", "--help"],
        ["jobs", "submit", "--help"],
        ["jobs", "cancel", "--help"],
    ],
)
def test_every_command_has_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 0
    assert "usage: yarn-sidecar" in capsys.readouterr().out


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("YARN_SIDECAR_")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def test_db_upgrade_creates_sqlite_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/nested/dir/s.db"
    done = _run(["db", "upgrade"], {"YARN_SIDECAR_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    from app.db.migrate import head_revision

    assert f"database at {head_revision(url)}: " in done.stdout
    assert (tmp_path / "nested/dir/s.db").exists()


def test_bad_setting_stops_with_its_name(tmp_path: Path) -> None:
    done = _run(["db", "upgrade"], {"YARN_SIDECAR_MODE": "turbo"})
    assert done.returncode == 2
    assert "YARN_SIDECAR_MODE" in done.stderr


def test_poll_once_against_a_dead_rm_fails_cleanly(tmp_path: Path) -> None:
    done = _run(
        ["poll-once"],
        {
            "YARN_SIDECAR_DATABASE_URL": f"sqlite:///{tmp_path}/s.db",
            "YARN_SIDECAR_RM_URLS": "http://127.0.0.1:9",
            "YARN_SIDECAR_RM_RETRIES": "0",
            "YARN_SIDECAR_RM_TIMEOUT_S": "2",
        },
    )
    assert done.returncode == 1
    assert "poll failed" in done.stderr and "RMUnavailable" in done.stderr


def test_serve_freezes_the_startup_heap_before_serving(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import gc

    import uvicorn

    seen: list[int] = []

    def run(server: uvicorn.Server, **_: object) -> None:
        seen.append(gc.get_freeze_count())
        server.started = True

    monkeypatch.setattr(uvicorn.Server, "run", run)
    monkeypatch.setattr(cli, "_bind", lambda host, port: [])  # no port of this host taken
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", f"sqlite:///{tmp_path}/s.db")
    gc.unfreeze()
    try:
        assert main(["serve", "--no-migrate"]) == 0
    finally:
        gc.unfreeze()  # the rest of the test run collects as before
    # Modules, the app and its routes: left out of every later collection.
    assert seen and seen[0] > 10_000
