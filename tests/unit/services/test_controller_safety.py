"""Controller ticks that must not push what the operator did not ask for, nor lose a tick from
the audit: the guard's steps across ticks that pushed nothing, a tick that fails unexpectedly,
a poll with no running NodeManager, a restart with another mode in the settings, and entries
keyed by no managed queue. Against a constructed RM on both database engines."""

from __future__ import annotations

import math
from dataclasses import replace

import httpx
import pytest
from sqlalchemy import select

from app.control.guard import GuardConfig
from app.db import repo
from app.db.models import Decision
from app.db.session import transaction
from app.domain.outcome import PolicyOutcome
from app.services import controller as controller_module
from app.services.controller import Controller
from app.yarn.actuator import Actuator
from tests.conftest import Db
from tests.unit.control.fakes import FakeRM, no_sleep, two_queues
from tests.unit.services.test_controller import (
    POLL_S,
    capacities,
    config,
    controller,
    decision,
    polls,
)

LOAD = {"a": {"pending": 30, "apps": 1}, "b": {"pending": 10, "apps": 1}}


def queue_decisions(db: Db) -> list[Decision]:
    with db.sessions() as s:
        return list(s.scalars(select(Decision).where(Decision.kind == "queue")))


async def test_guard_steps_once_per_push_after_ticks_that_pushed_nothing(db: Db) -> None:
    rm = two_queues()
    guard = GuardConfig.from_dict(
        {
            "slos": [{"name": "web", "url": "http://probe/p99", "max_latency_ms": 200}],
            "batch_queues": ["root.b"],
            "step_pp": 10,
        }
    )
    probe = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda _: httpx.Response(200, text="900"))
    )
    ctl = Controller(
        Actuator(rm, sleep=no_sleep),
        db.sessions,
        defaults=config(mode="advise"),
        cluster_name="test",
        rm_urls=("http://rm:8088",),
        poll_interval_s=POLL_S,
        guard=guard,
        probe_http=probe,
    )
    t = 0
    for _ in range(3):  # the SLO is violated on every tick; advise pushes nothing
        polls(db, rm, t, t + 60, **LOAD)
        report = await ctl.control((t + 60) * 1000)
        assert report.status == "advised"
        t += 70
    await ctl.set_policy({"mode": "enforce"}, (t - 5) * 1000)
    polls(db, rm, t, t + 60, **LOAD)
    report = await ctl.control((t + 60) * 1000)
    assert report.status == "pushed", report.reason
    assert rm.conf["root.b"]["maximum-capacity"] == "90.00"  # one step of 10 from 100


async def test_an_unexpected_error_in_a_tick_is_recorded_as_a_failed_decision(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, **LOAD)

    def broken(*_: object, **__: object) -> PolicyOutcome:
        raise RuntimeError("policy crashed")

    monkeypatch.setattr(controller_module, "run_policy", broken)
    report = await controller(db, rm, config()).control(60_000)
    assert report.status == "failed" and "RuntimeError: policy crashed" in report.reason
    assert [(d.status, d.reason) for d in queue_decisions(db)] == [("failed", report.reason)]
    assert rm.puts == []


async def test_nan_amounts_are_recorded_as_a_policy_error(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, **LOAD)
    nan = {"root.a": {"vcores": math.nan, "memory": 1.0}, "root.b": {"vcores": 4.0, "memory": 1.0}}
    monkeypatch.setattr(controller_module, "run_policy", lambda *_: PolicyOutcome(amounts=nan))
    report = await controller(db, rm, config(policy="rrf")).control(60_000)
    assert report.status == "policy_error" and "amounts.root.a.vcores" in report.reason
    assert [d.status for d in queue_decisions(db)] == ["policy_error"] and rm.puts == []


def poll_without_nodes(db: Db, rm: FakeRM, t_ms: int) -> None:
    """A poll as stored right after an RM restart: the queues are seen, no NodeManager yet."""
    states = [
        replace(q, pending_containers=LOAD.get(q.name, {}).get("pending", 0), num_active_apps=1)
        for q in rm.states()
    ]
    with transaction(db.sessions) as s:
        cluster = repo.ensure_cluster(s, "test", ["http://rm:8088"], t_ms)
        ids = repo.upsert_queues(s, cluster.id, states, t_ms)
        repo.add_queue_samples(s, ids, states, t_ms)
        repo.add_node_samples(s, cluster.id, [], t_ms)
        cluster.last_good_poll_ms = t_ms


async def test_no_push_while_no_nodemanager_is_running(db: Db) -> None:
    rm = two_queues("75", "25")  # root.b at its floor of 2 containers (25 % of 8 vcores)
    ctl = controller(db, rm, config(policy="proportional"))
    load = {"a": {"pending": 30, "apps": 1}, "b": {"pending": 0, "apps": 1}}
    for t in (0, 70):
        polls(db, rm, t, t + 50, **load)
        poll_without_nodes(db, rm, (t + 60) * 1000)
        report = await ctl.control((t + 60) * 1000)
        assert report.status == "no_change"
        assert "cluster size unknown" in report.reason
    assert capacities(rm) == {"root.a": "75", "root.b": "25"} and rm.puts == []


async def test_a_restart_in_observe_mode_pushes_nothing_after_a_put_of_params(db: Db) -> None:
    rm = two_queues()
    first = controller(db, rm, config(mode="enforce"))
    await first.set_policy({"params": {"tau": 5}}, 1_000)
    restarted = controller(db, rm, config(mode="observe"))
    polls(db, rm, 0, 60, **LOAD)
    report = await restarted.control(60_000)
    assert report.status == "observe" and rm.puts == []
    effective = restarted.current(60_000)
    assert effective.cfg.mode == "observe" and effective.cfg.params["tau"] == 5
    # a mode the operator did set is kept across a restart
    await restarted.set_policy({"mode": "advise"}, 61_000)
    assert controller(db, rm, config(mode="observe")).current(62_000).cfg.mode == "advise"


async def test_a_bound_keyed_by_no_managed_queue_is_named_in_every_decision(db: Db) -> None:
    rm = two_queues()
    ctl = controller(db, rm, config(policy="proportional", bounds={"a": {"min": 45}}))
    polls(db, rm, 0, 60, b={"pending": 30, "apps": 1})
    report = await ctl.control(60_000)
    note = "bounds.a names no queue under root: ignored (did you mean root.a?)"
    assert note in report.reason
    assert decision(db, report.decision_id).outputs["unmatched_queue_keys"] == [note]
