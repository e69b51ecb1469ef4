"""ResourceManager HA for real: two RMs with a ZooKeeper elector, ZooKeeper RM state store and
ZooKeeper scheduler-configuration store (``run --ha``, an in-process ZooKeeper), a real sidecar
process given both RM addresses. The active RM is stopped (as if its host died) while the
sidecar polls, pushes and runs a deadline job; the sidecar follows the new active RM, reports
the failover, and neither loses nor duplicates a push or a submission."""

from __future__ import annotations

import itertools
import json
import random
import re
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.domain.tags import job_tag
from tests.integration.conftest import started_cluster
from tests.integration.rm_proxy import Sidecar, same


@dataclass
class HaCluster:
    urls: tuple[str, str]
    workdir: Path
    stdout: Path

    def fail_over(self) -> str:
        """Stop the active RM; returns the harness's ``FAILOVER from=.. to=..`` line."""
        before = self.stdout.read_text().count("FAILOVER")
        (self.workdir / "failover").touch()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            lines = [x for x in self.stdout.read_text().splitlines() if x.startswith("FAILOVER")]
            if len(lines) > before:
                return lines[-1]
            time.sleep(0.5)
        raise AssertionError("the harness did not fail over")


def _ports_free(base: int) -> bool:
    for port in (base, base + 1, *range(base + 100, base + 114)):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HaCluster]:
    base = next(p for p in (random.randrange(20000, 30000) for _ in range(50)) if _ports_free(p))
    workdir = tmp_path_factory.mktemp("yarn-ha")
    with started_cluster(workdir, base, "--ha"):
        yield HaCluster(
            (f"http://127.0.0.1:{base}", f"http://127.0.0.1:{base + 1}"),
            workdir,
            workdir / "run.stdout",
        )


def _ha_state(url: str) -> str | None:
    try:
        info = httpx.get(f"{url}/ws/v1/cluster/info", timeout=5).json()["clusterInfo"]
        return str(info["haState"])
    except (httpx.HTTPError, ValueError, KeyError):
        return None


def _capacities(url: str) -> dict[str, float]:
    body = httpx.get(f"{url}/ws/v1/cluster/scheduler", timeout=10).json()
    queues = body["scheduler"]["schedulerInfo"]["queues"]["queue"]
    return {f"root.{q['queueName']}": float(q["capacity"]) for q in queues}


def _apps_tagged(url: str, tag: str) -> list[str]:
    body = httpx.get(f"{url}/ws/v1/cluster/apps", params={"applicationTags": tag}, timeout=10)
    apps = (body.json().get("apps") or {}).get("app") or []
    return [a["id"] for a in apps if tag in (a.get("applicationTags") or "").split(",")]


def _until(predicate: object, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _pushes(sidecar: Sidecar) -> list[dict[str, object]]:
    return list(httpx.get(f"{sidecar.base}/pushes", timeout=10).json()["items"])


def _freeze(sidecar: Sidecar) -> None:
    """Advise mode (the controller stops pushing), then wait until no push is in flight."""
    assert httpx.put(f"{sidecar.base}/policy", json={"mode": "advise"}).status_code == 200
    time.sleep(2.5)  # a tick that read the old mode finishes
    _until(lambda: all(p["status"] != "pending" for p in _pushes(sidecar)), "pushes settled")


def test_the_sidecar_follows_a_failover_and_loses_or_repeats_nothing(
    ha: HaCluster, tmp_path: Path
) -> None:
    first, second = ha.urls
    assert {_ha_state(first), _ha_state(second)} == {"ACTIVE", "STANDBY"}
    active = first if _ha_state(first) == "ACTIVE" else second
    standby = second if active == first else first
    initial = _capacities(active)
    # The standby is listed first: its RM (a MiniYARNCluster's) serves every path itself, without
    # the redirect a production standby sends, and would take a push the active never sees.
    sidecar = Sidecar(
        tmp_path / "sidecar.db",
        f"{standby},{active}",
        tmp_path / "sidecar.log",
        deadline_capacity_vcores="8",
        dshell_harness=str(ha.workdir / "cluster.json"),
        admission_interval_s="1",
        rm_retries="2",
    )
    try:
        # 1. a push and a deadline job on the first active RM
        baseline = dict(initial)
        baseline["root.default"] += 6
        baseline["root.etl"] -= 6
        r = httpx.put(f"{sidecar.base}/policy", json={"mode": "enforce", "baseline": baseline})
        assert r.status_code == 200, r.text
        job = {
            "name": "across",
            "deadline": 600,
            "requested_tasks": 1,
            "run": {"kind": "sleep", "seconds": 20, "container_memory_mb": 128},
        }
        created = httpx.post(f"{sidecar.base}/jobs", json=job, timeout=30)
        assert created.status_code == 202, created.text
        job_id = created.json()["id"]

        def app_of(jid: str) -> str | None:
            body = httpx.get(f"{sidecar.base}/jobs/{jid}", timeout=10).json()
            waiting = body["state"] in ("queued", "admitted", "submitting")
            return None if waiting else body["app_id"]

        _until(lambda: app_of(job_id) is not None, "the job's submission")
        app_id = app_of(job_id)
        _until(lambda: _pushes(sidecar) and _pushes(sidecar)[-1]["status"] == "applied", "a push")
        _freeze(sidecar)
        before = _capacities(active)

        # 2. the active RM goes away
        line = ha.fail_over()
        assert _ha_state(standby) == "ACTIVE", line

        # 3. the sidecar follows it and says so
        def follows() -> bool:
            ready = httpx.get(f"{sidecar.base}/ready", timeout=10).json()
            return bool(ready["ready"]) and ready["active_rm_url"] == standby

        _until(follows, "the sidecar to poll the new active RM")
        metrics = httpx.get(f"{sidecar.base}/metrics", timeout=10).text
        counted = re.search(r"^yarn_sidecar_rm_failovers_total (\d+)\.0$", metrics, re.M)
        assert counted and int(counted.group(1)) >= 1, metrics[-2000:]
        log = (tmp_path / "sidecar.log").read_text()
        assert f"ResourceManager failover: the active RM is now {standby}" in log

        # 4. nothing lost: the pushed capacities and the running job's app are on the new RM
        after_failover = _capacities(standby)
        assert all(same(str(after_failover[q]), str(c)) for q, c in before.items()), (
            before,
            after_failover,
        )
        assert _apps_tagged(standby, job_tag(job_id)) == [app_id]

        # 5. the new active RM takes new work: a push back to the initial baseline, a job
        pushes_before = len(_pushes(sidecar))
        r = httpx.put(f"{sidecar.base}/policy", json={"mode": "enforce", "baseline": initial})
        assert r.status_code == 200, r.text
        _until(lambda: len(_pushes(sidecar)) > pushes_before, "a push after the failover")
        second = {**job, "name": "after", "run": {**job["run"], "seconds": 2}}
        after = httpx.post(f"{sidecar.base}/jobs", json=second, timeout=30)
        assert after.status_code == 202, after.text
        _until(lambda: app_of(after.json()["id"]) is not None, "a submission to the new RM")
        _freeze(sidecar)
        assert len(_apps_tagged(standby, job_tag(after.json()["id"]))) == 1
        assert _apps_tagged(standby, job_tag(job_id)) == [app_id]
        newest = _pushes(sidecar)[0]["values"]
        assert isinstance(newest, dict)
        now = _capacities(standby)
        assert all(same(str(now[q]), str(v["capacity"])) for q, v in newest.items()), (newest, now)

        # 6. nothing repeated: every push applied once, each a change, each with its decision
        pushes = list(reversed(_pushes(sidecar)))
        assert all(p["status"] == "applied" for p in pushes), pushes
        assert all(a["values"] != b["values"] for a, b in itertools.pairwise(pushes))
        decisions = httpx.get(f"{sidecar.base}/decisions", params={"kind": "queue"}).json()
        pushed = {d["id"] for d in decisions["items"] if d["status"] == "pushed"}
        assert pushed == {p["decision_id"] for p in pushes}, json.dumps(decisions)[:2000]
    finally:
        sidecar.kill()
