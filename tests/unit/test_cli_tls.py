"""``yarn-sidecar serve`` over HTTPS (uvicorn's TLS) with a certificate made for the test."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_speaks_https_with_the_configured_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    trust = ssl.create_default_context(cafile=str(cert))
    port = _free_port()
    env = {
        **os.environ,
        "YARN_SIDECAR_DATA_DIR": str(tmp_path),
        "YARN_SIDECAR_API_PORT": str(port),
        "YARN_SIDECAR_API_TLS_CERTFILE": str(cert),
        "YARN_SIDECAR_API_TLS_KEYFILE": str(key),
        "YARN_SIDECAR_RM_URLS": "http://127.0.0.1:9",
        "YARN_SIDECAR_AUTH": "token",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(150):
            try:
                r = httpx.get(f"https://127.0.0.1:{port}/health", verify=trust, timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        else:
            pytest.fail("the sidecar did not answer over HTTPS")
        assert r.status_code == 200 and r.json()["status"] == "ok"
        denied = httpx.get(f"https://127.0.0.1:{port}/queues", verify=trust, timeout=5)
        assert denied.status_code == 401
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
        with pytest.raises(httpx.ConnectError):  # not trusted without the CA
            httpx.get(f"https://127.0.0.1:{port}/health", timeout=2)
    finally:
        proc.terminate()
        proc.wait(10)
