"""Installs the way operators install: a wheel built from this tree, installed into a fresh
virtualenv outside the repository, migrates a database and serves the API from the package alone
(the Alembic scripts and static assets must be inside what was installed, not found in a checkout).

The fresh virtualenv borrows the third-party packages of the running one through a path entry, so
no dependency is installed twice; the sidecar itself comes only from the wheel."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path

import httpx
import pytest

from tests.processes import free_port, wait_healthy

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin/`` directory of a fresh virtualenv with only the built wheel installed."""
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools writes build/ and egg-info next to the sources it builds.
    src = work / "src"
    for part in ("app", "migrations"):
        shutil.copytree(REPO / part, src / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / part, src / part)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(work / "dist"),
            str(src),
        ],
        check=True,
        cwd=work,
    )
    wheels = list((work / "dist").glob("yarn_policy_sidecar-*.whl"))
    assert len(wheels) == 1, wheels
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    # Third-party dependencies from the running environment; its editable hook for this repo is
    # a .pth file there, which a plain path entry does not execute.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "-q", str(wheels[0])],
        check=True,
        cwd=work,
    )
    return venv / "bin"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("YARN_SIDECAR_")}
    env["YARN_SIDECAR_DATABASE_URL"] = f"sqlite:///{tmp_path}/sidecar.db"
    env["PYTHONPATH"] = ""
    return env


def test_the_installed_package_is_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    out = subprocess.run(
        [str(installed / "python"), "-c", "import app; print(app.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path),
    ).stdout
    assert str(REPO) not in out and "site-packages" in out


def test_version_and_db_upgrade_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    version = subprocess.run(
        [str(installed / "yarn-sidecar"), "--version"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    assert version.strip().startswith("yarn-sidecar ")
    subprocess.run(
        [str(installed / "yarn-sidecar"), "db", "upgrade"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path),
    )
    with sqlite3.connect(tmp_path / "sidecar.db") as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        (head,) = db.execute("SELECT version_num FROM alembic_version").fetchone()
    assert {"applications", "decisions", "jobs", "alembic_version"} <= tables
    newest = max(p.name.split("_", 1)[0] for p in (REPO / "migrations" / "versions").glob("0*.py"))
    assert head == newest


def test_serve_from_the_wheel_answers_health_docs_and_the_dashboard(
    installed: Path, tmp_path: Path
) -> None:
    port = free_port()
    env = _env(tmp_path)
    # No RM is needed for these pages; authentication off is allowed on loopback only.
    env.update(
        YARN_SIDECAR_AUTH="none",
        YARN_SIDECAR_RM_URLS="http://127.0.0.1:9",
        YARN_SIDECAR_API_PORT=str(port),
    )
    proc = subprocess.Popen(
        [str(installed / "yarn-sidecar"), "serve"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(proc, base, "the sidecar installed from the wheel", timeout_s=60)
        assert httpx.get(f"{base}/docs", timeout=5).status_code == 200
        # the Swagger UI and ReDoc bundles are inside what was installed, not on a CDN
        for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
            r = httpx.get(f"{base}/docs/static/{asset}", timeout=5)
            assert r.status_code == 200 and len(r.content) > 100_000, asset
        # the operator CLI finds the sidecar from the same environment as `serve`
        listing = subprocess.run(
            [str(installed / "yarn-sidecar"), "decisions", "list"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
        )
        assert listing.returncode == 0, listing.stderr
        assert listing.stdout.split()[:3] == ["id", "time", "kind"]
        ui = httpx.get(f"{base}/ui", timeout=5)
        assert ui.status_code == 200
        assert httpx.get(f"{base}/ready", timeout=5).status_code in (200, 503)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
