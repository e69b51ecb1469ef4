"""Integration fixtures: one real YARN RM + NodeManager per session (``docs/yarn.md`` section 9).

``rm_url`` starts ``hadoop-docker/minicluster/run`` once (free port, temp work dir), waits for its
READY line and stops it (SIGTERM, then the process group) at session end. With
``YARN_SIDECAR_TEST_RM_URL`` set it uses that RM instead and starts nothing; workload tests then
need ``YARN_SIDECAR_TEST_CLUSTER_JSON`` (the launcher's ``cluster.json``). Every test in this
directory is marked ``yarn``. Missing Java/Maven fail loudly; only ``YARN_SIDECAR_SKIP_YARN=1``
skips.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.yarn import workload
from app.yarn.client import RMClient
from tests.integration.rm_proxy import HoldingProxy, live_capacities, restore

REPO = Path(__file__).resolve().parents[2]
MINICLUSTER = REPO / "hadoop-docker" / "minicluster"
RUN_SCRIPT = MINICLUSTER / "run"
URL_ENV = "YARN_SIDECAR_TEST_RM_URL"
CLUSTER_JSON_ENV = "YARN_SIDECAR_TEST_CLUSTER_JSON"
SKIP_ENV = "YARN_SIDECAR_SKIP_YARN"
JAVA_HOME_DEFAULT = "/usr/lib/jvm/java-17-openjdk-amd64"
# A cold first start runs ./setup (Maven downloads); warm starts take ~10 s.
READY_TIMEOUT_S = float(os.environ.get("YARN_SIDECAR_TEST_RM_START_TIMEOUT", "600"))
STOP_TIMEOUT_S = 60.0
# Container logs of a finished app are deleted after this (YARN keeps them 3 h). Until they are,
# a NodeManager counts the app as live, and its stop waits about 7 s for such apps to end and
# then 10 s for the pending deletions: 17 s per NodeManager whenever a test's cluster stops.
LOG_RETENTION = ("-D", "yarn.nodemanager.log.retain-seconds=1")


@dataclass(frozen=True, slots=True)
class YarnCluster:
    """The RM the session uses; ``cluster_json`` is None for an external RM without one."""

    rm_url: str
    cluster_json: Path | None
    log_path: Path | None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything collected under tests/integration as ``yarn``; run the tests marked
    ``leaves_deadline_history`` last.

    Apps submitted straight to YARN with ``deadline:`` tags stay in the RM's finished-app history,
    and every later sidecar on the session RM learns from them; the learning tests expect a
    history without any (a first job bootstrapped, a tight job dropped for lack of time).
    """
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.yarn)
    items.sort(key=lambda item: item.get_closest_marker("leaves_deadline_history") is not None)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _require_tools() -> None:
    java_home = Path(os.environ.get("JAVA_HOME", JAVA_HOME_DEFAULT))
    if not (java_home / "bin" / "java").exists():
        pytest.fail(
            f"no Java at {java_home}/bin/java: install openjdk-17-jdk-headless (or set JAVA_HOME),"
            f" or set {SKIP_ENV}=1 to skip the YARN tests"
        )
    prepared = (MINICLUSTER / "target" / "classpath.txt").exists()
    if not prepared and shutil.which("mvn") is None:
        pytest.fail(
            "Maven not found and hadoop-docker/minicluster/setup has not run: install maven and"
            f" run hadoop-docker/minicluster/setup, or set {SKIP_ENV}=1"
        )


def _wait_ready(proc: subprocess.Popen[bytes], stdout: Path, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if "READY " in stdout.read_text(encoding="utf-8", errors="replace"):
            return
        if proc.poll() is not None:
            tail = log.read_text(encoding="utf-8", errors="replace")[-4000:]
            pytest.fail(f"mini cluster exited with {proc.returncode} before READY:\n{tail}")
        time.sleep(0.5)
    _stop(proc)
    pytest.fail(f"mini cluster not READY after {READY_TIMEOUT_S:.0f}s; see {log}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def yarn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[YarnCluster]:
    """The session's RM: external (``YARN_SIDECAR_TEST_RM_URL``) or a started mini cluster."""
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{SKIP_ENV}=1")
    external = os.environ.get(URL_ENV)
    if external:
        cluster_json = os.environ.get(CLUSTER_JSON_ENV)
        yield YarnCluster(external.rstrip("/"), Path(cluster_json) if cluster_json else None, None)
        return
    with started_cluster(tmp_path_factory.mktemp("yarn-it"), _free_port()) as cluster:
        yield cluster


@contextlib.contextmanager
def started_cluster(workdir: Path, port: int, *options: str) -> Iterator[YarnCluster]:
    """A mini cluster (``run --port PORT --workdir DIR OPTIONS``) from READY until stopped."""
    _require_tools()
    stdout, log = workdir / "run.stdout", workdir / "run.stderr"
    with stdout.open("wb") as out, log.open("wb") as err:
        # Own process group: a hung JVM can be killed with everything it started.
        proc = subprocess.Popen(
            [
                str(RUN_SCRIPT),
                "--port",
                str(port),
                "--workdir",
                str(workdir),
                *LOG_RETENTION,
                *options,
            ],
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    try:
        _wait_ready(proc, stdout, log)
        yield YarnCluster(f"http://127.0.0.1:{port}", workdir / "cluster.json", log)
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def rm_url(yarn_cluster: YarnCluster) -> str:
    """Base URL of the session's ResourceManager (``http://host:port``)."""
    return yarn_cluster.rm_url


@pytest.fixture(autouse=True)
def queues_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test on the session's RM leaves root's children with the capacities it found.

    A test whose sidecar runs in ``enforce`` mode may push (a deadline-queue floor, a step toward
    a baseline) in its last seconds; the next test must not start from that.
    """
    if "yarn_cluster" not in request.fixturenames:
        yield
        return
    url = request.getfixturevalue("yarn_cluster").rm_url
    before, _ = asyncio.run(live_capacities(url))
    yield
    asyncio.run(restore(url, before))


@pytest.fixture
async def rm_client(rm_url: str) -> AsyncIterator[RMClient]:
    """A fresh ``RMClient`` on the session's RM."""
    async with RMClient([rm_url], user="yarn-sidecar", timeout_s=30.0) as client:
        yield client


@pytest.fixture(scope="session")
def harness(yarn_cluster: YarnCluster) -> workload.Harness:
    """What ``app.yarn.workload`` needs to launch AMs on the session's cluster."""
    if yarn_cluster.cluster_json is None:
        pytest.fail(f"{URL_ENV} is set without {CLUSTER_JSON_ENV}: cannot launch workload AMs")
    return workload.Harness.from_cluster_json(yarn_cluster.cluster_json)


@pytest.fixture
def proxy(rm_url: str) -> Iterator[HoldingProxy]:
    """A proxy in front of the session's RM that can hold one exchange (``rm_proxy``)."""
    p = HoldingProxy(rm_url)
    try:
        yield p
    finally:
        p.close()
