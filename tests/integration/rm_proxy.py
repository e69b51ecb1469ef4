"""Real sidecar processes and a holding proxy in front of the RM, for tests that kill a sidecar
at a chosen point of its exchange with the RM (push, submission) and check what survives."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from app.yarn.actuator import Actuator
from app.yarn.client import RMClient
from tests.processes import free_port, wait_healthy

PARENT = "root"
SCHED_CONF = "/ws/v1/cluster/scheduler-conf"
SUBMIT = "/ws/v1/cluster/apps"


class HoldingProxy:
    """Forwards every request to the RM; in ``mode`` it holds one exchange of the push."""

    def __init__(self, rm_url: str) -> None:
        self.rm_url = rm_url
        self.mode = "pass"
        self.method, self.path = "PUT", SCHED_CONF
        self.writes: list[str] = []
        self.held = threading.Event()
        self.release = threading.Event()
        self._put_done = False
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                is_put = self.command == proxy.method and path == proxy.path
                if self.command != "GET":
                    proxy.writes.append(f"{self.command} {path}")
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

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _hold(self) -> None:
        self.held.set()
        self.release.wait(120)
        # the connection is dropped: the process that sent the request is dead by now

    def arm(self, mode: str, method: str = "PUT", path: str = SCHED_CONF) -> None:
        """Hold the next ``method path`` exchange (``before`` the RM, ``during``: after the RM
        answered, ``after``: the first GET once the answer was passed on)."""
        self.method, self.path = method, path
        self.mode, self._put_done = mode, False
        self.held.clear()
        self.release.clear()

    def pass_through(self) -> None:
        self.mode = "pass"
        self.release.set()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


async def live_capacities(rm_url: str) -> tuple[dict[str, str], int | None]:
    async with RMClient([rm_url], user="yarn-sidecar", timeout_s=30) as client:
        live = await Actuator(client).read_live(PARENT)
    return {q: str(v["capacity"]) for q, v in live.values.items()}, live.version


async def restore(rm_url: str, capacities: dict[str, str]) -> None:
    async with RMClient([rm_url], user="yarn-sidecar", timeout_s=30) as client:
        actuator = Actuator(client)
        live = await actuator.read_live(PARENT)
        now = {q: str(v["capacity"]) for q, v in live.values.items()}
        if now != capacities:
            changes = {q: {"capacity": c} for q, c in capacities.items()}
            result = await actuator.push(PARENT, changes, live.values, live.version)
            assert result.applied, result


def same(a: str, b: str) -> bool:
    return abs(float(a) - float(b)) < 0.005


class Sidecar:
    """``yarn-sidecar serve`` as its own process group, killable with SIGKILL."""

    def __init__(self, db: Path | str, rm: str, log: Path, **extra: str) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("YARN_SIDECAR_")}
        env.update(
            YARN_SIDECAR_DATABASE_URL=db if isinstance(db, str) else f"sqlite:///{db}",
            YARN_SIDECAR_RM_URLS=rm,
            YARN_SIDECAR_API_PORT=str(self.port),
            YARN_SIDECAR_AUTH="none",
            YARN_SIDECAR_POLL_INTERVAL_S="1",
            YARN_SIDECAR_POLICY_INTERVAL_S="2",
            YARN_SIDECAR_POLICY="fawkes:TD",
            YARN_SIDECAR_QUEUE_FLOORS='{"*": 0}',
            YARN_SIDECAR_RM_RETRIES="0",
        )
        env.update({f"YARN_SIDECAR_{k.upper()}": v for k, v in extra.items()})
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "yarn-sidecar"), "serve"],
            env=env,
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        tail = lambda: log.read_text()[-3000:]  # noqa: E731
        wait_healthy(self.proc, self.base, "the sidecar", timeout_s=60, output=tail)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout=30)


def shifted_baseline(initial: dict[str, str]) -> dict[str, float]:
    """``initial`` with 6 points moved from root.etl to root.default (or back, if root.etl has
    less than 6): on an idle cluster the controller pushes it in one step."""
    shift = 6.0 if float(initial["root.etl"]) >= 6 else -6.0
    baseline = {q: float(c) for q, c in initial.items()}
    baseline["root.default"] += shift
    baseline["root.etl"] -= shift
    return baseline
