"""The sidecar's RM client against a Kerberized ResourceManager (MiniKdc, SPNEGO on the RM's
web endpoints): it polls, pushes a capacity and runs an application with a ticket from its
keytab, and the RM refuses a request without one."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.yarn import workload
from app.yarn.client import RMClient
from app.yarn.security import RENEW_BEFORE_S, KerberosAuth
from app.yarn.wire import SchedConfUpdate
from tests.integration.conftest import _free_port, started_cluster

pytest.importorskip("gssapi")


@pytest.fixture(scope="module")
def kerberized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    workdir = tmp_path_factory.mktemp("yarn-krb")
    port = _free_port()
    with started_cluster(workdir, port, "--kerberos"):
        details = json.loads((workdir / "cluster.json").read_text())
        # The SPNEGO principal is HTTP/localhost: address the RM by that name.
        yield f"http://localhost:{port}", details


async def test_poll_push_and_submit_with_a_ticket(
    kerberized: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url, details = kerberized
    monkeypatch.setenv("KRB5_CONFIG", details["krb5_conf"])
    # Without a ticket the RM's SPNEGO filter refuses, reads included.
    anonymous = httpx.get(f"{url}/ws/v1/cluster/info", timeout=10)
    assert anonymous.status_code == 401
    assert anonymous.headers["WWW-Authenticate"].startswith("Negotiate")

    auth = KerberosAuth(details["sidecar_principal"], Path(details["sidecar_keytab"]))
    async with RMClient((url,), auth=auth, timeout_s=30) as rm:
        info = await rm.cluster_info()
        assert info.state == "STARTED"
        snap = await rm.snapshot(int(time.time() * 1000), finished_since_ms=None)
        assert {q.path for q in snap.queues} >= {"root.default", "root.deadline"}

        # a capacity push through the mutable scheduler configuration, read back
        change = SchedConfUpdate(
            update_queues={"root.default": {"capacity": "35"}, "root.etl": {"capacity": "25"}}
        )
        await rm.validate_scheduler_conf(change)
        await rm.update_scheduler_conf(change)
        conf = await rm.scheduler_conf()
        assert conf["yarn.scheduler.capacity.root.default.capacity"] == "35"

        # an application submitted and run to the end
        harness = workload.Harness.from_cluster_json(
            Path(details["workdir"]) / "cluster.json", tmp_path / "staging"
        )
        spec = workload.AppSpec(queue="root.deadline", sleep_s=1, name="kerberized")
        app_id = await workload.submit(rm, spec, harness)
        done = await workload.wait_final(rm, [app_id], timeout_s=240)
        assert done[app_id].final_status == "SUCCEEDED", done[app_id]

        # credentials about to expire are acquired again from the keytab before the next call
        first = auth.credentials()
        assert first.lifetime > RENEW_BEFORE_S
        auth._creds = _Expiring()
        assert (await rm.cluster_info()).state == "STARTED"
        assert auth.credentials() is not first and auth.credentials().lifetime > RENEW_BEFORE_S


class _Expiring:
    """Credentials with a minute left: inside the renewal window."""

    lifetime = 60
