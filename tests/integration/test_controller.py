"""The queue controller against a real Hadoop 3.5.0 RM: real distributed-shell
apps keep ``root.etl`` and ``root.adhoc`` busy; enforce-mode LTRF and Fawkes TD change the
capacities the RM reports in ``/ws/v1/cluster/scheduler``; advise changes nothing; a hand edit is
reported as drift and kept; a failed push leaves the configuration wholly old. Each test restores
the queue configuration it found."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.control.config import resolve
from app.db import control_repo
from app.db.migrate import upgrade
from app.db.models import Decision
from app.db.session import make_engine, make_session_factory
from app.services.controller import Controller, TickReport
from app.services.poller import Poller
from app.yarn import workload
from app.yarn.actuator import Actuator
from app.yarn.client import RMClient
from app.yarn.wire import SchedConfUpdate

TAG = "it-controller"
PARENT = "root"
POLL_S = 1.0


@pytest.fixture(scope="module")
def busy_queues(rm_url: str, harness: workload.Harness) -> Iterator[list[str]]:
    """Long-running apps in etl and adhoc (more containers than the 8 vcores: some wait)."""

    async def start() -> list[str]:
        async with RMClient([rm_url], timeout_s=30) as rm:
            specs = [
                workload.AppSpec(queue="etl", sleep_s=240, num_containers=6, tags=(TAG,)),
                workload.AppSpec(queue="adhoc", sleep_s=240, num_containers=4, tags=(TAG,)),
            ]
            ids = await workload.submit_all(rm, specs, harness)
            await workload.wait_state(rm, ids, frozenset({"RUNNING"}), timeout_s=120)
            return ids

    async def stop() -> None:
        async with RMClient([rm_url], timeout_s=30) as rm:
            await workload.kill_unfinished(rm, tags=[TAG])

    ids = asyncio.run(start())
    try:
        yield ids
    finally:
        asyncio.run(stop())


async def _children(rm: RMClient) -> dict[str, dict[str, float]]:
    """Capacities of root's children as ``/ws/v1/cluster/scheduler`` reports them."""
    return {
        q.path: {"capacity": q.capacity, "maximum-capacity": q.max_capacity}
        for q in await rm.scheduler()
        if q.parent == PARENT
    }


@pytest.fixture
async def rm(rm_url: str, busy_queues: list[str]) -> AsyncIterator[RMClient]:
    """A client; afterwards the children of root get back the values they had before the test."""
    async with RMClient([rm_url], timeout_s=30) as client:
        before = (await Actuator(client).read_live(PARENT)).values
        yield client
        now = (await Actuator(client).read_live(PARENT)).values
        if now != before:
            await client.update_scheduler_conf(SchedConfUpdate(update_queues=before))


@dataclass
class Rig:
    poller: Poller
    controller: Controller
    sessions: sessionmaker[Session]

    def decision(self, report: TickReport) -> Decision:
        assert report.decision_id is not None
        with self.sessions() as session:
            row = control_repo.get_decision(session, report.decision_id)
        assert row is not None
        return row

    async def observe(self, polls: int = 3) -> None:
        for _ in range(polls):
            summary = await self.poller.poll(int(time.time() * 1000), force=True)
            assert summary.ok, summary.error
            await asyncio.sleep(POLL_S)

    async def tick(self) -> TickReport:
        return await self.controller.control(int(time.time() * 1000))


class FailingPuts(httpx.AsyncBaseTransport):
    """The RM is unreachable for PUTs (connection refused), reachable for everything else."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "PUT":
            raise httpx.ConnectError("connection refused", request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def rig(
    rm_url: str,
    tmp_path: Path,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    **overrides: Any,
) -> AsyncIterator[Rig]:
    db_url = f"sqlite:///{tmp_path}/sidecar.db"
    upgrade(db_url)
    engine = make_engine(db_url)
    values: dict[str, Any] = {
        "policy": "ltrf",
        "params": {},
        "mode": "enforce",
        "bounds": {},
        "weights": {},
        "max_step_pp": 10.0,
        "min_change_pp": 1.0,
        "allow_drift_overwrite": False,
        "managed_parent": PARENT,
        "interval_s": 4.0,
        # floors off: these tests check the policies' moves and the push mechanics on 8 vcores,
        # where the default floor is 25 % per queue; test_queue_floors covers the floors
        "floors": {"*": 0},
    }
    values.update(overrides)
    try:
        async with RMClient([rm_url], timeout_s=30, retries=0, transport=transport) as client:
            sessions = make_session_factory(engine)
            urls = (rm_url,)
            poller = Poller(client, sessions, cluster_name="it", rm_urls=urls, interval_s=POLL_S)
            controller = Controller(
                Actuator(client, retries=1, backoff_s=0.2),
                sessions,
                defaults=resolve(**values),
                cluster_name="it",
                rm_urls=urls,
                poll_interval_s=POLL_S,
            )
            yield Rig(poller, controller, sessions)
    finally:
        engine.dispose()


def _capacities(children: dict[str, dict[str, float]]) -> dict[str, float]:
    return {q: v["capacity"] for q, v in children.items()}


async def _pushed_and_read_back(report: TickReport, rm: RMClient) -> dict[str, float]:
    assert report.status == "pushed", report
    assert report.pushed
    now = _capacities(await _children(rm))
    for queue, values in report.pushed.items():
        assert now[queue] == pytest.approx(float(values["capacity"]), abs=0.005)
    assert sum(now.values()) == pytest.approx(100.0, abs=0.01)
    return now


async def test_ltrf_enforce_changes_capacities_in_the_rm(
    rm: RMClient, rm_url: str, tmp_path: Path
) -> None:
    before = _capacities(await _children(rm))
    async with rig(rm_url, tmp_path, policy="ltrf") as r:
        await r.observe()
        report = await r.tick()
        row = r.decision(report)
    after = await _pushed_and_read_back(report, rm)
    plan = row.outputs["plan"]
    why = f"{before} -> {after}; live {row.inputs['live']['values']}; {plan['reason']}"
    print("ltrf capacities:", why)
    assert after != before
    # the idle queues give capacity to the busy ones, 10 points at most per push
    assert after["root.etl"] + after["root.adhoc"] > before["root.etl"] + before["root.adhoc"], why
    assert all(abs(after[q] - before[q]) <= 10.0 + 1e-5 for q in before), why


async def test_fawkes_td_enforce_changes_capacities_in_the_rm(
    rm: RMClient, rm_url: str, tmp_path: Path
) -> None:
    before = _capacities(await _children(rm))
    async with rig(rm_url, tmp_path, policy="fawkes:TD") as r:
        await r.observe()
        report = await r.tick()
        details = r.decision(report).outputs["policy"]["details"]
    after = await _pushed_and_read_back(report, rm)
    # Fawkes admitted the busy queues; the idle ones (default, deadline) lose capacity and the
    # queue with the largest TD weight (most waiting containers, or EQ) gains
    assert set(details["admitted"]) >= {"root.etl", "root.adhoc"}
    assert after["root.default"] < before["root.default"]
    print("fawkes TD weights:", details["weights"], "capacities:", before, "->", after)
    heaviest = max(details["weights"], key=details["weights"].get)
    assert after[heaviest] > before[heaviest], details["weights"]


async def test_rrf_enforce_pushes_absolute_capacities(
    rm: RMClient, rm_url: str, tmp_path: Path
) -> None:
    async with rig(rm_url, tmp_path, policy="rrf") as r:
        await r.observe()
        report = await r.tick()
    assert report.status == "pushed", report
    assert report.pushed
    conf = await rm.scheduler_conf()
    for queue, values in report.pushed.items():
        assert conf[f"yarn.scheduler.capacity.{queue}.capacity"] == values["capacity"]
        assert values["capacity"].startswith("[memory=")
    modes = {q.path: q.mode for q in await rm.scheduler() if q.parent == PARENT}
    assert set(modes.values()) == {"absolute"}, modes
    print("rrf pushed:", {q: v["capacity"] for q, v in report.pushed.items()})


async def test_advise_mode_changes_nothing(rm: RMClient, rm_url: str, tmp_path: Path) -> None:
    before = await _children(rm)
    version = await rm.scheduler_conf_version()
    async with rig(rm_url, tmp_path, policy="fawkes:TD", mode="advise") as r:
        await r.observe()
        report = await r.tick()
    assert report.status == "advised", report
    assert await _children(rm) == before
    assert await rm.scheduler_conf_version() == version


async def test_hand_edit_is_reported_as_drift_and_not_overwritten(
    rm: RMClient, rm_url: str, tmp_path: Path
) -> None:
    async with rig(rm_url, tmp_path, policy="ltrf") as r:
        await r.observe()
        first = await r.tick()
        assert first.status == "pushed", first
        pushed = _capacities(await _children(rm))
        # an operator moves 5 points from etl to deadline by hand
        hand = {
            "root.etl": {"capacity": f"{pushed['root.etl'] - 5:.2f}"},
            "root.deadline": {"capacity": f"{pushed['root.deadline'] + 5:.2f}"},
        }
        await rm.update_scheduler_conf(SchedConfUpdate(update_queues=hand))
        edited = await _children(rm)
        await r.observe(2)
        second = await r.tick()
    assert second.status == "drift", second
    assert "root.etl" in second.reason and "root.deadline" in second.reason
    assert await _children(rm) == edited


async def test_rejected_push_leaves_the_configuration_wholly_old(rm: RMClient) -> None:
    before = await _children(rm)
    version = await rm.scheduler_conf_version()
    live = await Actuator(rm).read_live(PARENT)
    # etl +30 points alone breaks the sum of root's children: the RM must refuse all of it
    broken = {
        "root.etl": {"capacity": f"{before['root.etl']['capacity'] + 30:.2f}"},
        "root.adhoc": {"maximum-capacity": "90.00"},
    }
    result = await Actuator(rm).push(PARENT, broken, live.values, version)
    assert result.status == "rejected", result
    assert "capacity" in result.message.lower()
    assert await _children(rm) == before
    assert await rm.scheduler_conf_version() == version


async def test_unreachable_rm_at_push_time_leaves_the_configuration_wholly_old(
    rm: RMClient, rm_url: str, tmp_path: Path
) -> None:
    before = await _children(rm)
    version = await rm.scheduler_conf_version()
    async with rig(rm_url, tmp_path, policy="ltrf", transport=FailingPuts()) as r:
        await r.observe()
        report = await r.tick()
    assert report.status == "failed", report
    assert await _children(rm) == before
    assert await rm.scheduler_conf_version() == version


def test_cli_policy_preview_asks_the_running_sidecar_and_pushes_nothing(
    rm_url: str,
    busy_queues: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import contextlib

    from fastapi.testclient import TestClient

    from app import operator_cli
    from app.cli import main
    from app.main import create_app
    from app.settings import Settings

    async def version() -> int:
        async with RMClient([rm_url], timeout_s=30) as client:
            return await client.scheduler_conf_version()

    before = asyncio.run(version())
    settings = Settings(
        rm_urls=[rm_url],
        database_url=f"sqlite:///{tmp_path}/cli.db",
        policy="ltrf",
        mode="advise",
        queue_floors={"*": 0},
        auth="none",
    )
    upgrade(settings.effective_database_url)
    app = create_app(settings, run_loops=False)
    with TestClient(app) as client:
        state = app.state.sidecar
        assert state.poller is not None
        client.portal.call(lambda: state.poller.poll(int(time.time() * 1000), force=True))
        monkeypatch.setattr(operator_cli, "_client", lambda url: contextlib.nullcontext(client))
        assert main(["policy", "preview", "--mode", "enforce"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith("ltrf in enforce mode: would_push:"), out
        assert out[1].split() == ["queue", "current", "proposed", "share", "change", "why"]
        rows = {line.split()[0]: line.split() for line in out[2:]}
        assert set(rows) >= {"root.etl", "root.adhoc", "root.deadline"}, out
        assert any(r[4] == "yes" for r in rows.values() if len(r) > 4), out
        assert main(["policy", "preview", "--mode", "enforce", "--json"]) == 0
        body = json.loads(capsys.readouterr().out)
        assert body["status"] == "would_push" and body["changes"], body
        for queue, values in body["changes"].items():
            assert rows[queue][2] == values["capacity"]
        assert main(["policy", "preview", "--policy", "nope"]) == 2
        assert "policy:" in capsys.readouterr().err
    assert asyncio.run(version()) == before
