"""Helpers for tests that run the sidecar as a real process (``serve`` from the checkout, a
wheel, a container, ``scripts/quickstart``): a free port, and waiting for ``/health``."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable

import httpx


def free_port() -> int:
    """A TCP port nothing listens on now (on loopback)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stdout(proc: subprocess.Popen[bytes]) -> str:
    return (proc.stdout.read() if proc.stdout else b"").decode(errors="replace")


def wait_healthy(
    proc: subprocess.Popen[bytes],
    base: str,
    what: str,
    *,
    timeout_s: float = 90,
    output: Callable[[], str] | None = None,
) -> None:
    """Wait until ``base/health`` answers 200; fail with the process's output if it exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited: {(output or (lambda: _stdout(proc)))()}")
        assert time.monotonic() < deadline, f"{what} did not answer /health in {timeout_s:.0f}s"
        time.sleep(0.3)
