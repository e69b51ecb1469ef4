"""``yarn-sidecar serve`` keeps an idle keep-alive connection open past the 5 s after which
clients' pools (httpx, requests) still reuse theirs: a request sent on it is answered instead of
failing on a connection the server is closing."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("keep_alive", "answered"), [(None, True), ("2", False)])
def test_an_idle_connection_is_still_served_after_clients_would_reuse_it(
    tmp_path: Path, keep_alive: str | None, answered: bool
) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "YARN_SIDECAR_DATA_DIR": str(tmp_path),
        "YARN_SIDECAR_API_PORT": str(port),
        "YARN_SIDECAR_RM_URLS": "http://127.0.0.1:9",
        "YARN_SIDECAR_AUTH": "none",
    }
    if keep_alive is not None:  # a short setting shows the test would see a closed connection
        env["YARN_SIDECAR_API_KEEP_ALIVE_S"] = keep_alive
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        for _ in range(150):
            try:
                conn.request("GET", "/health")
                first = conn.getresponse()
                first.read()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                conn.close()
                time.sleep(0.2)
        else:
            pytest.fail("the sidecar did not answer")
        assert first.status == 200 and not first.will_close
        time.sleep(6)  # idle longer than httpx's and uvicorn's default 5 s
        try:
            conn.request("GET", "/health")
            status: int | None = conn.getresponse().status
        except (http.client.RemoteDisconnected, ConnectionError):
            status = None
        assert (status == 200) is answered
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
