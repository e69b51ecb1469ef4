"""``scripts/quickstart`` as a newcomer runs it: it starts the sidecar in the foreground and stops
it, and whatever it started, on SIGTERM as well as on Ctrl-C (a supervisor or ``timeout`` sends
SIGTERM, not SIGINT)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.processes import free_port, wait_healthy

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "quickstart"


# Replaces itself with ``argv[1:]`` once SIGINT is back at its default.
_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def _start(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("YARN_SIDECAR_")}
    env.update(
        # an RM URL given: the script starts no mini cluster; nothing answers there, which the
        # sidecar reports on /ready while /health and the API stay up
        YARN_SIDECAR_RM_URLS="http://127.0.0.1:9",
        YARN_SIDECAR_DATABASE_URL=f"sqlite:///{tmp_path}/sidecar.db",
        YARN_SIDECAR_API_PORT=str(port),
    )
    # Started with SIGINT at its default, as Ctrl-C in a terminal finds it: a shell cannot trap
    # a signal that was ignored when it started, and a test run started in the background of a
    # non-interactive shell (``cmd &``) passes SIGINT on ignored.
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _DEFAULT_SIGINT,
            str(SCRIPT),
            "--no-bootstrap",
            "--workdir",
            str(tmp_path / "work"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stuck(proc: subprocess.Popen[bytes]) -> str:
    """What is left of a script that did not stop, then its output (killing it to read that)."""
    ps = subprocess.run(
        ["ps", "-o", "pid,stat,etime,args", "-g", str(proc.pid)], capture_output=True, text=True
    ).stdout
    os.killpg(proc.pid, signal.SIGKILL)
    out = proc.communicate()[0].decode(errors="replace")
    return f"{ps}--- its output:\n{out[-4000:]}"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_quickstart_stops_its_sidecar_on_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    port = free_port()
    proc = _start(tmp_path, port)
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}", "quickstart's sidecar")
        token = (tmp_path / "work" / "operator.token").read_text().strip()
        assert token.startswith("ysc_")
        assert (tmp_path / "work" / "operator.token").stat().st_mode & 0o077 == 0
        proc.send_signal(sig)  # to the script only, as a supervisor would
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"quickstart still running 30 s after {sig.name}:\n{_stuck(proc)}")
        assert code == 128 + int(sig)
        # and the sidecar it started is gone with it: nothing answers on its port any more
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_quickstart_refuses_a_bad_argument(tmp_path: Path) -> None:
    r = subprocess.run(
        [str(SCRIPT), "--rm-port", "80a", "--no-bootstrap"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
    )
    assert r.returncode == 2 and "--rm-port must be a number" in r.stderr
    r = subprocess.run([str(SCRIPT), "--bogus"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown argument --bogus" in r.stderr
