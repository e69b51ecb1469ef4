"""TLS towards an ``https://`` RM: the CA bundle is trusted, a client certificate is presented
where the RM requires one, and an untrusted RM is refused. The RM side is a local HTTPS server
answering the recorded ``/ws/v1/cluster/info``."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from app.yarn.client import RMClient
from app.yarn.errors import RMUnavailable
from app.yarn.security import rm_tls

INFO = (Path(__file__).parents[2] / "fixtures" / "rm" / "info.json").read_bytes()


def _cert(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def _recorded_rm(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})  # fmt: skip
    await send({"type": "http.response.body", "body": INFO})


@pytest.fixture(scope="module")
def https_rm(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, Path, dict[str, Path]]]:
    d = tmp_path_factory.mktemp("tls")
    server_cert, server_key = _cert(d, "rm")
    client_cert, client_key = _cert(d, "sidecar")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(
        _recorded_rm,
        host="127.0.0.1",
        port=port,
        log_config=None,
        lifespan="off",
        ssl_certfile=str(server_cert),
        ssl_keyfile=str(server_key),
        ssl_ca_certs=str(client_cert),
        ssl_cert_reqs=ssl.CERT_REQUIRED,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    try:
        yield f"https://127.0.0.1:{port}", server_cert, {"cert": client_cert, "key": client_key}
    finally:
        server.should_exit = True
        thread.join(10)


async def test_trusted_rm_with_a_client_certificate(
    https_rm: tuple[str, Path, dict[str, Path]],
) -> None:
    url, ca, client = https_rm
    verify = rm_tls(ca, client["cert"], client["key"])
    async with RMClient((url,), verify=verify, retries=0) as rm:
        info = await rm.cluster_info()
    assert info.state == "STARTED"


async def test_without_the_client_certificate_or_the_ca_the_rm_is_unreachable(
    https_rm: tuple[str, Path, dict[str, Path]],
) -> None:
    url, ca, _ = https_rm
    async with RMClient((url,), verify=rm_tls(ca, None, None), retries=0) as rm:
        with pytest.raises(RMUnavailable):
            await rm.cluster_info()
    async with RMClient((url,), retries=0) as rm:  # system trust store: self-signed RM refused
        with pytest.raises(RMUnavailable, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            await rm.cluster_info()


def test_no_tls_files_means_the_system_trust_store() -> None:
    assert rm_tls(None, None, None) is True
