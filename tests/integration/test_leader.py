"""Two sidecar processes on one PostgreSQL database and the real RM: exactly one leads; when the
leader is killed (SIGKILL) in the middle of a push or of a submission, the follower takes over
within two intervals, settles what the dead leader left in flight and repeats nothing.

The leader reaches the RM through a holding proxy (``rm_proxy``): it is killed while the RM has
applied its PUT (or accepted its submission) but before it could read the answer, the moment a
naive failover would act twice."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from app.domain.tags import job_tag
from app.yarn.client import RMClient
from tests.conftest import fresh_pg_database
from tests.integration.conftest import YarnCluster
from tests.integration.rm_proxy import (
    SUBMIT,
    HoldingProxy,
    Sidecar,
    live_capacities,
    restore,
    same,
    shifted_baseline,
)

INTERVAL_S = 1.0  # the poll interval, also the leadership check's


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_pg_database() as url:
        yield url


def _leadership(sidecar: Sidecar) -> dict[str, object]:
    body = httpx.get(f"{sidecar.base}/ready", timeout=10).json()
    leadership = body["leadership"]
    assert isinstance(leadership, dict), body
    return leadership


def _until(predicate: object, what: str, timeout: float = 60, step: float = 0.1) -> float:
    """Wait for ``predicate()``; returns the seconds it took."""
    started = time.monotonic()
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() - started < timeout, f"timed out waiting for {what}"
        time.sleep(step)
    return time.monotonic() - started


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def _pair(
    pg_url: str, proxy: HoldingProxy, rm_url: str, tmp_path: Path, **extra: str
) -> tuple[Sidecar, Sidecar]:
    """A (through the proxy) leads, B (straight to the RM) follows."""
    a = Sidecar(pg_url, proxy.url, tmp_path / "a.log", **extra)
    _until(lambda: _leadership(a)["role"] == "leader", "A to lead")
    b = Sidecar(pg_url, rm_url, tmp_path / "b.log", **extra)
    time.sleep(3 * INTERVAL_S)  # B tries the lock a few times meanwhile
    lb, la = _leadership(b), _leadership(a)
    assert (la["role"], lb["role"]) == ("leader", "follower"), (la, lb)
    assert lb["leader"] == la["self"] and lb["leader_epoch"] == la["epoch"] == 1
    metrics = httpx.get(f"{b.base}/metrics", timeout=10).text
    assert "yarn_sidecar_leader 0.0" in metrics
    return a, b


def _takeover(a: Sidecar, b: Sidecar) -> float:
    a.kill()
    took = _until(lambda: _leadership(b)["role"] == "leader", "B to take the lead", 30)
    assert _leadership(b)["epoch"] == 2
    return took


def test_a_follower_takes_over_a_push_in_flight_and_does_not_repeat_it(
    proxy: HoldingProxy, rm_url: str, pg_url: str, tmp_path: Path
) -> None:
    initial, version0 = asyncio.run(live_capacities(rm_url))
    baseline = shifted_baseline(initial)
    a, b = _pair(pg_url, proxy, rm_url, tmp_path)
    try:
        proxy.arm("during")
        # the operator talks to the follower: the change is stored, the leader acts on it
        r = httpx.put(f"{b.base}/policy", json={"mode": "enforce", "baseline": baseline})
        assert r.status_code == 200, r.text
        assert proxy.held.wait(60), (tmp_path / "a.log").read_text()[-3000:]
        took = _takeover(a, b)
        assert took <= 2 * INTERVAL_S + 0.5, f"takeover took {took:.2f}s"
        proxy.pass_through()
        _until(
            lambda: _rows(pg_url, "SELECT status FROM config_pushes")[0][0] != "pending",
            "the new leader to settle the dead leader's push",
            step=0.5,
        )
        ((status, inputs, decision_status),) = _rows(
            pg_url,
            "SELECT p.status, d.inputs, d.status FROM config_pushes p "
            "JOIN decisions d ON d.id = p.decision_id",
        )
        assert (status, decision_status) == ("applied", "pushed")
        made_under = inputs if isinstance(inputs, dict) else json.loads(str(inputs))
        assert made_under["leader_epoch"] == 1
        # several of the new leader's ticks later: the RM changed exactly once, no second push
        time.sleep(3 * 2.0)
        live, version = asyncio.run(live_capacities(rm_url))
        assert same(live["root.default"], str(baseline["root.default"])), live
        assert version == (version0 + 1 if version0 is not None else None)
        assert len(_rows(pg_url, "SELECT id FROM config_pushes")) == 1
    finally:
        a.kill()
        b.kill()
        proxy.pass_through()
        asyncio.run(restore(rm_url, initial))


def test_a_follower_finishes_a_submission_the_dead_leader_started_exactly_once(
    proxy: HoldingProxy,
    rm_url: str,
    pg_url: str,
    tmp_path: Path,
    yarn_cluster: YarnCluster,
) -> None:
    assert yarn_cluster.cluster_json is not None
    extra = {
        "deadline_capacity_vcores": "8",
        "dshell_harness": str(yarn_cluster.cluster_json),
        "admission_interval_s": "1",
        "mode": "enforce",
    }
    a, b = _pair(pg_url, proxy, rm_url, tmp_path, **extra)
    try:
        proxy.arm("during", "POST", SUBMIT)
        job = {
            "name": "failover",
            "deadline": 300,
            "requested_tasks": 1,
            "run": {"kind": "sleep", "seconds": 3, "container_memory_mb": 128},
        }
        # accepted by the follower: committed before its answer; the leader submits it
        r = httpx.post(f"{b.base}/jobs", json=job, timeout=30)
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        assert proxy.held.wait(60), (tmp_path / "a.log").read_text()[-3000:]
        _takeover(a, b)
        proxy.pass_through()

        def submitted() -> bool:
            state = httpx.get(f"{b.base}/jobs/{job_id}", timeout=10).json()["state"]
            return state not in ("queued", "admitted", "submitting")

        _until(submitted, "the new leader to finish the submission", step=0.5)
        detail = httpx.get(f"{b.base}/jobs/{job_id}", timeout=10).json()

        async def tagged() -> list[str]:
            async with RMClient([rm_url], timeout_s=30) as rm:
                tag = job_tag(job_id)
                return [x.app_id for x in await rm.apps(tags=[tag]) if tag in x.tags]

        apps = asyncio.run(tagged())
        assert apps == [detail["app_id"]], (apps, detail["app_id"])  # one app, never two
        steps = {d["action"]: d for d in detail["decisions"]}
        assert steps["reserve"]["numbers"]["leader_epoch"] == 1
        assert "adopt" in steps, [d["action"] for d in detail["decisions"]]
    finally:
        a.kill()
        b.kill()
        proxy.pass_through()
