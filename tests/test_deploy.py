"""The ways operators deploy the sidecar besides a wheel: the container image (built for real
with buildah, daemonless, on a Debian base made by mmdebstrap, then run) and the systemd unit
(rated by ``systemd-analyze security``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.processes import free_port, wait_healthy

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "deploy" / "systemd" / "yarn-sidecar.service"
BUILDAH = ["buildah", "--storage-driver", "vfs"]
TAG = "localhost/yarn-sidecar:test"


def _instructions(text: str) -> list[tuple[str, str]]:
    """Dockerfile instructions (continuations joined, comments dropped)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_the_dockerfile_runs_unprivileged_checks_ready_and_copies_only_the_package() -> None:
    steps = _instructions((REPO / "Dockerfile").read_text())
    final = steps[max(i for i, (w, _) in enumerate(steps) if w == "FROM") :]
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1].split(":")[0].isdigit() and int(users[-1].split(":")[0]) > 0
    (health,) = [rest for word, rest in final if word == "HEALTHCHECK"]
    assert "/ready" in health and "--interval" in health
    assert [rest for word, rest in final if word == "ENTRYPOINT"] == ['["yarn-sidecar"]']
    assert not [rest for word, rest in steps if word == "ADD"]  # no remote or auto-extracted input
    copied = {
        part
        for word, rest in steps
        if word == "COPY" and not rest.startswith("--from")
        for part in rest.split()[:-1]
    }
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    assert ignore[ignore.index("*")] == "*" and copied == allowed == {
        "pyproject.toml",
        "README.md",
        "app",
        "migrations",
    }


def test_the_systemd_unit_is_hardened() -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "scripts/bootstrap installs systemd (systemd-analyze)"
    rated = subprocess.run(
        [analyze, "security", "--offline=true", "--threshold=20", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # exposure is printed 0.0 to 10.0; the threshold is in tenths: fail above 2.0
    assert rated.returncode == 0, rated.stdout[-2000:] + rated.stderr
    level = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", rated.stdout)
    assert level and float(level.group(1)) <= 2.0, rated.stdout[-500:]
    checked = subprocess.run(
        [analyze, "verify", str(UNIT)], capture_output=True, text=True, timeout=60
    )
    # only the executable of an installation this machine does not have may be reported
    problems = [
        line
        for line in checked.stderr.splitlines()
        if line.strip() and "/opt/yarn-sidecar/bin/yarn-sidecar" not in line
    ]
    assert problems == [], checked.stderr


@pytest.fixture(scope="module")
def image() -> Iterator[dict[str, object]]:
    if os.geteuid() != 0 or not shutil.which("buildah") or not shutil.which("mmdebstrap"):
        pytest.fail("the image build needs root, buildah and mmdebstrap (scripts/bootstrap)")
    subprocess.run(
        [str(REPO / "scripts" / "build-image"), "--debian-base", "--tag", TAG],
        check=True,
        timeout=900,
    )
    inspected = subprocess.run(
        [*BUILDAH, "inspect", "--type", "image", TAG],
        check=True,
        capture_output=True,
        text=True,
    )
    yield json.loads(inspected.stdout)["Docker"]["config"]


@pytest.fixture
def container(image: dict[str, object]) -> Iterator[str]:
    ctr = subprocess.run(
        [*BUILDAH, "from", TAG], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        yield ctr
    finally:
        subprocess.run([*BUILDAH, "rm", ctr], capture_output=True)


def _run(ctr: str, *argv: str, env: dict[str, str] | None = None) -> list[str]:
    flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
    return [*BUILDAH, "run", "--isolation", "chroot", *flags, ctr, "--", *argv]


def test_the_image_builds_and_serves_as_an_unprivileged_user(
    image: dict[str, object], container: str
) -> None:
    assert image["User"] == "10001:10001"
    assert image["Entrypoint"] == ["yarn-sidecar"] and image["Cmd"] == ["serve"]
    check = image["Healthcheck"]
    assert isinstance(check, dict) and any("/ready" in part for part in check["Test"])
    ident = subprocess.run(_run(container, "id", "-u"), check=True, capture_output=True, text=True)
    assert ident.stdout.strip() == "10001"
    version = subprocess.run(
        _run(container, "yarn-sidecar", "--version"), check=True, capture_output=True, text=True
    )
    assert version.stdout.startswith("yarn-sidecar ")

    port = free_port()
    env = {
        "YARN_SIDECAR_API_HOST": "127.0.0.1",
        "YARN_SIDECAR_API_PORT": str(port),
        "YARN_SIDECAR_AUTH": "none",
        "YARN_SIDECAR_RM_URLS": "http://127.0.0.1:9",  # no RM: /ready must say not ready
    }
    served = subprocess.Popen(
        _run(container, "yarn-sidecar", "serve", env=env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(served, base, "the container's sidecar")
        assert httpx.get(f"{base}/docs/static/swagger-ui-bundle.js", timeout=5).status_code == 200
        # the image's own health check, run inside it: unhealthy while the RM is unreachable
        probe = check["Test"][1:]
        healthy = subprocess.run(
            _run(container, *probe, env={"YARN_SIDECAR_API_PORT": str(port)}),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert healthy.returncode != 0 and "503" in healthy.stderr, healthy.stderr[-500:]
    finally:
        os.killpg(served.pid, signal.SIGTERM)
        try:
            served.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(served.pid, signal.SIGKILL)
            served.wait()
