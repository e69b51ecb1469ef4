"""The controller tick on both database engines against a constructed RM.

Samples are stored as the poller stores them; the RM is ``tests.unit.control.fakes.FakeRM``.
Expected capacities are hand computations (Fawkes TD weights, the 10-point step limit)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import func, select

from app.control.config import ControlConfig, resolve
from app.db import control_repo, history_repo, repo
from app.db.control_models import ConfigPush, LedgerEntry
from app.db.models import Decision
from app.db.session import transaction
from app.domain.model import NodeState, Resources
from app.services.controller import Controller
from app.yarn.actuator import Actuator
from tests.conftest import Db
from tests.db.test_history_repo import _wordcount
from tests.factories import app
from tests.unit.control.fakes import FakeRM, no_sleep, two_queues

POLL_S = 10


def config(**overrides: Any) -> ControlConfig:
    values: dict[str, Any] = {
        "policy": "fawkes:TD",
        "params": {},
        "mode": "enforce",
        "bounds": {},
        "weights": {},
        "max_step_pp": 10.0,
        "min_change_pp": 1.0,
        "allow_drift_overwrite": False,
        "managed_parent": "root",
        "interval_s": 60.0,
    }
    values.update(overrides)
    return resolve(**values)


def controller(db: Db, rm: FakeRM, cfg: ControlConfig) -> Controller:
    return Controller(
        Actuator(rm, sleep=no_sleep),
        db.sessions,
        defaults=cfg,
        cluster_name="test",
        rm_urls=("http://rm:8088",),
        poll_interval_s=POLL_S,
    )


def record_poll(db: Db, t_ms: int, rm: FakeRM, **queues: dict[str, int]) -> None:
    """One poll as the poller stores it: the RM's queue tree with the given usage."""
    states = []
    for q in rm.states():
        extra = queues.get(q.name, {})
        states.append(
            replace(
                q,
                used=Resources(extra.get("used", 0), extra.get("used", 0) * 1024),
                pending=Resources(extra.get("pending", 0), extra.get("pending", 0) * 1024),
                pending_containers=extra.get("pending", 0),
                num_active_apps=extra.get("apps", 0),
            )
        )
    node = NodeState("n1:1", "n1", "/r", "RUNNING", (), Resources(8, 8192), Resources(0, 0), 0)
    with transaction(db.sessions) as s:
        cluster = repo.ensure_cluster(s, "test", ["http://rm:8088"], t_ms)
        ids = repo.upsert_queues(s, cluster.id, states, t_ms)
        repo.add_queue_samples(s, ids, states, t_ms)
        repo.add_node_samples(s, cluster.id, [node], t_ms)
        cluster.last_good_poll_ms = t_ms


def polls(db: Db, rm: FakeRM, start_s: int, end_s: int, **queues: dict[str, int]) -> None:
    for t in range(start_s, end_s + 1, POLL_S):
        record_poll(db, t * 1000, rm, **queues)


def decision(db: Db, decision_id: int | None) -> Decision:
    assert decision_id is not None
    with db.sessions() as s:
        row = control_repo.get_decision(s, decision_id)
        assert row is not None
        return row


def capacities(rm: FakeRM) -> dict[str, str]:
    return {q: v["capacity"] for q, v in rm.conf.items()}


async def test_enforce_pushes_step_limited_fawkes_td_shares(db: Db) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, a={"pending": 30, "apps": 1}, b={"pending": 10, "apps": 1})
    report = await controller(db, rm, config()).control(60_000)
    # TD weights 30/40 and 10/40 -> target 75/25; step 10 points from 50/50 -> 60/40
    assert report.status == "pushed", report.reason
    assert capacities(rm) == {"root.a": "60.00", "root.b": "40.00"}
    assert len(rm.puts) == 1
    row = decision(db, report.decision_id)
    assert row.pushed == {
        "root.a": {"capacity": "60.00", "maximum-capacity": "100.00"},
        "root.b": {"capacity": "40.00", "maximum-capacity": "100.00"},
    }
    assert row.outputs["push"]["version_after"] == 2
    with db.sessions() as s:
        push = s.scalar(select(ConfigPush))
        assert push is not None and push.status == "applied" and push.decision_id == row.id


async def test_pushed_capacities_can_be_recomputed_by_hand_from_the_decision(db: Db) -> None:
    rm = two_queues("45", "55")
    polls(db, rm, 0, 60, a={"pending": 12, "apps": 1}, b={"pending": 4, "apps": 1})
    report = await controller(db, rm, config()).control(60_000)
    d = decision(db, report.decision_id)
    # The recomputation uses only the decision's JSON: the averaged pending containers (TD),
    # the live capacities, and the step limit from the parameters.
    queues = d.inputs["policy_inputs"]["queues"]
    y = {q: v["pending_containers"] for q, v in queues.items()}
    weights = {q: y[q] / sum(y.values()) for q in y}  # eq. 4; first decision: shares = weights
    target = {q: weights[q] * 100 for q in y}
    live = {q: float(v["capacity"]) for q, v in d.inputs["live"]["values"].items()}
    step = d.params["max_step_pp"]
    fraction = min(1.0, step / max(abs(target[q] - live[q]) for q in y))
    by_hand = {q: f"{live[q] + fraction * (target[q] - live[q]):.2f}" for q in y}
    assert {q: v["capacity"] for q, v in (d.pushed or {}).items()} == by_hand
    assert sum(float(v) for v in by_hand.values()) == 100.0
    assert d.outputs["policy"]["details"]["weights"] == weights


async def test_advise_records_what_it_would_push_and_changes_nothing(db: Db) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, a={"pending": 30, "apps": 1}, b={"pending": 10, "apps": 1})
    report = await controller(db, rm, config(mode="advise")).control(60_000)
    assert report.status == "advised" and rm.puts == [] and rm.validations == 0
    row = decision(db, report.decision_id)
    assert row.pushed is None
    assert row.outputs["plan"]["changes"]["root.a"]["capacity"] == "60.00"


async def test_observe_records_nothing_and_static_records_a_skip(db: Db) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60)
    assert (await controller(db, rm, config(mode="observe")).control(60_000)).decision_id is None
    static = await controller(db, rm, config(policy="static")).control(60_000)
    assert static.status == "static"
    with db.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Decision)) == 1


async def test_stale_polls_and_unreachable_rm_push_nothing(db: Db) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, a={"pending": 30, "apps": 1})
    ctl = controller(db, rm, config())
    stale = await ctl.control(60_000 + 3 * POLL_S * 1000 + 1)
    assert stale.status == "stale" and rm.puts == []
    rm.down = True
    down = await ctl.control(61_000)
    assert down.status == "rm_error" and "refused" in down.reason


async def test_hand_edit_is_reported_as_drift_and_not_overwritten(db: Db) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, a={"pending": 30, "apps": 1}, b={"pending": 10, "apps": 1})
    ctl = controller(db, rm, config())
    assert (await ctl.control(60_000)).status == "pushed"
    rm.hand_edit({"root.a": {"capacity": "30"}, "root.b": {"capacity": "70"}})
    polls(db, rm, 70, 120, a={"pending": 30, "apps": 1}, b={"pending": 10, "apps": 1})
    report = await ctl.control(120_000)
    assert report.status == "drift" and "root.a" in report.reason
    assert capacities(rm) == {"root.a": "30", "root.b": "70"} and len(rm.puts) == 1
    drift = decision(db, report.decision_id).outputs["drift"]
    assert drift["queues"]["root.a"]["capacity"] == {"expected": "60.00", "live": "30"}
    assert (drift["baseline_version"], drift["live_version"]) == (2, 3)
    # The operator accepts the hand edit as the new baseline: the next tick plans from it.
    await ctl.set_policy({"accept_drift": True}, 121_000)
    polls(db, rm, 130, 130, a={"pending": 30, "apps": 1}, b={"pending": 10, "apps": 1})
    after = await ctl.control(130_000)
    assert after.status == "pushed" and capacities(rm)["root.a"] == "40.00"


async def test_drift_overwrite_when_the_operator_allows_it(db: Db) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, a={"pending": 30, "apps": 1}, b={"pending": 10, "apps": 1})
    ctl = controller(db, rm, config(allow_drift_overwrite=True))
    await ctl.control(60_000)
    rm.hand_edit({"root.a": {"capacity": "30"}, "root.b": {"capacity": "70"}})
    polls(db, rm, 70, 120, a={"pending": 30, "apps": 1}, b={"pending": 10, "apps": 1})
    report = await ctl.control(120_000)
    assert report.status == "pushed"
    assert decision(db, report.decision_id).outputs["drift_overwritten"] is True


async def test_rejected_push_is_recorded_with_the_rm_message(db: Db) -> None:
    rm = two_queues()
    rm.reject = "Illegal capacity of 150.0 for queue root.a"
    polls(db, rm, 0, 60, a={"pending": 30, "apps": 1}, b={"pending": 10, "apps": 1})
    report = await controller(db, rm, config()).control(60_000)
    assert report.status == "rejected" and rm.puts == []
    row = decision(db, report.decision_id)
    assert row.rm_response is not None and "Illegal capacity of 150.0" in row.rm_response
    assert capacities(rm) == {"root.a": "50", "root.b": "50"}


async def test_restart_continues_policy_state_and_never_double_counts_the_ledger(db: Db) -> None:
    rm = two_queues()
    busy = {"a": {"used": 4, "pending": 30, "apps": 1}, "b": {"used": 2, "pending": 10, "apps": 1}}
    polls(db, rm, 0, 60, **busy)
    first = controller(db, rm, config(policy="ltrf"))
    await first.control(60_000)
    await first.control(60_000)  # same instant again: no new interval to integrate
    polls(db, rm, 70, 120, **busy)
    restarted = controller(db, rm, config(policy="ltrf"))  # a new process, same database
    await restarted.control(120_000)
    with db.sessions() as s:
        rows = list(
            s.scalars(select(LedgerEntry).order_by(LedgerEntry.start_ms, LedgerEntry.queue))
        )
    assert [(r.queue, r.start_ms, r.end_ms) for r in rows] == [
        ("root.a", 0, 60_000),
        ("root.b", 0, 60_000),
        ("root.a", 60_000, 120_000),
        ("root.b", 60_000, 120_000),
    ]
    # 4 vcores for 120 s and 2 vcores for 120 s, each second counted once
    assert rows[-2].total_usage == 480 and rows[-1].total_usage == 240
    # entitled 8/2 = 4 each: a used exactly its share; b's 2 unused vcores went to nobody,
    # so nothing was lent (seed 002, 9.4.2: lending is what another queue used)
    assert rows[-2].debt == 0 and rows[-1].debt == 0
    assert rows[-1].lent == 0 and rows[-1].borrowed == 0


async def test_fawkes_state_survives_a_restart(db: Db) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, a={"pending": 30, "apps": 1, "used": 6}, b={"pending": 10, "apps": 1})
    await controller(db, rm, config(mode="advise")).control(60_000)
    polls(db, rm, 70, 120, a={"pending": 30, "apps": 1, "used": 6}, b={"pending": 10, "apps": 1})
    report = await controller(db, rm, config(mode="advise")).control(120_000)
    row = decision(db, report.decision_id)
    before = row.inputs["policy_state_before"]
    assert before["last_t"] == 60.0 and before["admitted"] == ["root.a", "root.b"]
    # D_a grows by (c_a - w_a) * 60 s = (6/8 - 0.75) * 60 = 0; D_b by (0 - 0.25) * 60 = -15
    assert row.outputs["policy"]["details"]["discrimination"] == {"root.a": 0.0, "root.b": -15.0}


async def test_bounds_limit_the_plan_and_are_explained(db: Db) -> None:
    rm = two_queues()
    # LTRF: only a has demand (30 vcores > R = 8): alloc a 8 -> share 1 -> target 100/0;
    # a <= 55 gives b the other 45
    polls(db, rm, 0, 60, a={"pending": 30, "apps": 1})
    cfg = config(policy="ltrf", bounds={"root.a": {"max": 55}}, max_step_pp=50)
    report = await controller(db, rm, cfg).control(60_000)
    assert capacities(rm) == {"root.a": "55.00", "root.b": "45.00"}
    line = decision(db, report.decision_id).outputs["plan"]["queues"]["root.a"]
    assert line["bounded_h"] == 5500 and any("bound" in r for r in line["reasons"])


async def test_a_history_stored_after_a_tick_read_counts_in_the_next_tick_once(db: Db) -> None:
    job = await _wordcount()  # 4 tasks
    rm = two_queues()
    polls(db, rm, 0, 60, a={"pending": 4, "apps": 1}, b={"pending": 4, "apps": 1})
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        repo.upsert_apps(s, cid, [app("application_1_0001", queue="a", state="FINISHED")], 1)
    ctl = controller(db, rm, config(policy="fawkes:TT", mode="advise"))
    ctl.history = True

    def counted(report_id: int | None) -> float:
        inputs = decision(db, report_id).inputs["policy_inputs"]["queues"]
        return float(inputs["root.a"]["completed_tasks"])

    first = await ctl.control(60_000)
    # The collector stamped the fetch at 59 s and committed after the 60 s tick had read: the
    # 60-120 s interval does not contain that stamp, and the tasks still count, once.
    with transaction(db.sessions) as s:
        history_repo.store_job(s, "application_1_0001", job, 8.0, 59_000)
    polls(db, rm, 70, 180, a={"pending": 4, "apps": 1}, b={"pending": 4, "apps": 1})
    second = await ctl.control(120_000)
    third = await ctl.control(180_000)
    assert [counted(r.decision_id) for r in (first, second, third)] == [0.0, 4.0, 0.0]


async def test_an_app_seen_ending_after_a_tick_read_counts_in_the_next_tick_once(db: Db) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, a={"pending": 4, "apps": 1}, b={"pending": 4, "apps": 1})
    ctl = controller(db, rm, config(policy="fawkes:JT", mode="advise"))

    def counted(report_id: int | None) -> int:
        queues = decision(db, report_id).inputs["policy_inputs"]["queues"]
        return int(queues["root.a"]["completed_apps"])

    first = await ctl.control(60_000)
    # The app ended at 59.5 s on the RM's clock; the first poll that saw it ended was taken at
    # 61 s, after the 60 s tick had read. A window of finish times (60 s, 120 s] misses it.
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        done = app("application_1_0001", queue="a", state="FINISHED", finished_ms=59_500)
        repo.upsert_apps(s, cid, [done], 61_000)
    polls(db, rm, 70, 180, a={"pending": 4, "apps": 1}, b={"pending": 4, "apps": 1})
    second = await ctl.control(120_000)
    third = await ctl.control(180_000)
    assert [counted(r.decision_id) for r in (first, second, third)] == [0, 1, 0]
