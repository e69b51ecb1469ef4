"""A sidecar killed (SIGKILL) at any point of a scheduler-configuration push, on the real RM.

The sidecar runs as a real ``yarn-sidecar serve`` process in ``enforce`` mode and reaches the RM
through a forwarding proxy in this test, which holds the exchange at one point of the push and
tells the test, which then kills the sidecar there:

- ``before``: the PUT has left the sidecar but is held before the RM sees it;
- ``during``: the RM has applied the PUT, its answer is held before the sidecar reads it;
- ``after``: the sidecar has the RM's answer; its read-back of the result is held.

Each time the RM is wholly old or wholly new (every managed queue, and the configuration
version), the push's decision was written before the PUT, and once the sidecar is started again
on the same database the push and its decision say which (``not_applied`` or ``applied``).
"""

from __future__ import annotations

import asyncio
import http.server
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.yarn.actuator import Actuator
from app.yarn.client import RMClient

PARENT = "root"
SCHED_CONF = "/ws/v1/cluster/scheduler-conf"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HoldingProxy:
    """Forwards every request to the RM; in ``mode`` it holds one exchange of the push."""

    def __init__(self, rm_url: str) -> None:
        self.rm_url = rm_url
        self.mode = "pass"
        self.held = threading.Event()
        self.release = threading.Event()
        self._put_done = False
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                is_put = self.command == "PUT" and self.path.split("?")[0] == SCHED_CONF
                mode = proxy.mode
                if is_put and mode == "before":
                    proxy._hold()
                    return
                if mode == "after" and proxy._put_done and self.command == "GET":
                    proxy._hold()
                    return
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")
                }
                with httpx.Client(timeout=60) as client:
                    resp = client.request(
                        self.command, proxy.rm_url + self.path, content=body, headers=headers
                    )
                if is_put and mode == "during":
                    proxy._hold()
                    return
                if is_put:
                    proxy._put_done = True
                self.send_response(resp.status_code)
                ctype = resp.headers.get("content-type")
                if ctype:
                    self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(resp.content)))
                self.end_headers()
                self.wfile.write(resp.content)

            do_GET = do_PUT = do_POST = do_DELETE = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", _free_port()), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _hold(self) -> None:
        self.held.set()
        self.release.wait(120)
        # the connection is dropped: the process that sent the request is dead by now

    def arm(self, mode: str) -> None:
        self.mode, self._put_done = mode, False
        self.held.clear()
        self.release.clear()

    def pass_through(self) -> None:
        self.mode = "pass"
        self.release.set()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


@pytest.fixture
def proxy(rm_url: str) -> Iterator[HoldingProxy]:
    p = HoldingProxy(rm_url)
    try:
        yield p
    finally:
        p.close()


async def _live(rm_url: str) -> tuple[dict[str, str], int | None]:
    async with RMClient([rm_url], user="yarn-sidecar", timeout_s=30) as client:
        live = await Actuator(client).read_live(PARENT)
    return {q: str(v["capacity"]) for q, v in live.values.items()}, live.version


async def _restore(rm_url: str, capacities: dict[str, str]) -> None:
    async with RMClient([rm_url], user="yarn-sidecar", timeout_s=30) as client:
        actuator = Actuator(client)
        live = await actuator.read_live(PARENT)
        now = {q: str(v["capacity"]) for q, v in live.values.items()}
        if now != capacities:
            changes = {q: {"capacity": c} for q, c in capacities.items()}
            result = await actuator.push(PARENT, changes, live.values, live.version)
            assert result.applied, result


def _same(a: str, b: str) -> bool:
    return abs(float(a) - float(b)) < 0.005


class Sidecar:
    """``yarn-sidecar serve`` as its own process group, killable with SIGKILL."""

    def __init__(self, db: Path, rm: str, log: Path) -> None:
        self.port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("YARN_SIDECAR_")}
        env.update(
            YARN_SIDECAR_DATABASE_URL=f"sqlite:///{db}",
            YARN_SIDECAR_RM_URLS=rm,
            YARN_SIDECAR_API_PORT=str(self.port),
            YARN_SIDECAR_AUTH="none",
            YARN_SIDECAR_POLL_INTERVAL_S="1",
            YARN_SIDECAR_POLICY_INTERVAL_S="2",
            YARN_SIDECAR_POLICY="fawkes:TD",
            YARN_SIDECAR_QUEUE_FLOORS='{"*": 0}',
            YARN_SIDECAR_RM_RETRIES="0",
        )
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "yarn-sidecar"), "serve"],
            env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert self.proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "sidecar did not start"
            time.sleep(0.3)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout=30)


def _pushes(db: Path) -> list[tuple[int, str, int | None, str | None, str | None]]:
    """(push id, push status, version_before, decision status, decision reason)."""
    with sqlite3.connect(db) as conn:
        return list(
            conn.execute(
                "SELECT p.id, p.status, p.version_before, d.status, d.reason FROM config_pushes p "
                "LEFT JOIN decisions d ON d.id = p.decision_id ORDER BY p.id"
            )
        )


def _wait(predicate: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.mark.parametrize(
    ("point", "rm_after", "settled"),
    [("before", "old", "not_applied"), ("during", "new", "applied"), ("after", "new", "applied")],
)
def test_a_kill_at_any_point_of_a_push_leaves_the_rm_whole_and_the_record_says_which(
    proxy: HoldingProxy, rm_url: str, tmp_path: Path, point: str, rm_after: str, settled: str
) -> None:
    initial, version0 = asyncio.run(_live(rm_url))
    # The cluster is idle, so the controller moves the queues toward the operator's baseline:
    # 6 points from root.etl to root.default (one push within the step limit), from wherever
    # earlier tests left the RM.
    shift = 6.0 if float(initial["root.etl"]) >= 6 else -6.0
    baseline = {q: float(c) for q, c in initial.items()}
    baseline["root.default"] += shift
    baseline["root.etl"] -= shift
    target_default = baseline["root.default"]
    db, log = tmp_path / "sidecar.db", tmp_path / "sidecar.log"
    proxy.arm(point)
    sidecar = Sidecar(db, proxy.url, log)
    try:
        body = {"mode": "enforce", "baseline": baseline}
        r = httpx.put(f"{sidecar.base}/policy", json=body, timeout=30)
        assert r.status_code == 200, r.text
        reached = proxy.held.wait(90)
        assert reached, f"the push never reached the {point} point: {log.read_text()[-3000:]}"
        sidecar.kill()
        # Killed: the RM holds the old or the new configuration, nothing in between.
        live, version = asyncio.run(_live(rm_url))
        (push,) = _pushes(db)
        push_id, status, version_before, decision_status, _ = push
        assert (status, decision_status) == ("pending", "pushing"), push
        assert version_before == version0
        if rm_after == "old":
            assert live == initial and version == version0, (live, initial)
        else:
            assert version == version0 + 1 if version0 is not None else True
            assert _same(live["root.default"], str(target_default)), live
            assert _same(live["root.etl"], str(baseline["root.etl"])), live
        proxy.pass_through()
        # Started again on the same database (straight to the RM): the push is settled by what
        # the RM's configuration version and values show, and its decision says so.
        again = Sidecar(db, rm_url, log)
        try:
            _wait(lambda: _pushes(db)[0][1] != "pending", "the dead push to be settled")
            first = _pushes(db)[0]
            assert first[0] == push_id and first[1] == settled, first
            assert first[3] == {"applied": "pushed", "not_applied": "not_applied"}[settled]
            assert first[4].startswith("settled by a later tick"), first
            listed = httpx.get(f"{again.base}/pushes", timeout=10).json()["items"]
            assert {p["id"]: p["status"] for p in listed}[push_id] == settled
        finally:
            again.kill(signal.SIGTERM)
    finally:
        sidecar.kill()
        proxy.pass_through()
        asyncio.run(_restore(rm_url, initial))
