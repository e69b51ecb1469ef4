"""Queue controller push recovery: write-ahead of pushes, a
last PUT attempt that landed unanswered, restores that must not overwrite an operator's edit,
absolute live capacities under a percentage policy, and live values with more than 2 decimals.

Controller tests run on both database engines (``db`` fixture); expected capacities are hand
computations (Fawkes TD weights 30/40 and 10/40 -> 75/25, a 10-point step from the live values).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from app.control.drift import normalise
from app.control.plan import Limits, Plan, percent_plan
from app.db.control_models import ConfigPush
from app.db.models import Decision
from app.services.controller import Controller
from app.yarn.actuator import Actuator
from app.yarn.errors import RMUnavailable, RMUnreachable
from app.yarn.wire import SchedConfUpdate
from tests.conftest import Db
from tests.unit.control.fakes import FakeRM, no_sleep, two_queues
from tests.unit.services.test_controller import capacities, config, controller, polls

LOAD: dict[str, dict[str, int]] = {
    "a": {"pending": 30, "apps": 1},
    "b": {"pending": 10, "apps": 1},
}
CHANGES = {
    "root.a": {"capacity": "60.00", "maximum-capacity": "100.00"},
    "root.b": {"capacity": "40.00", "maximum-capacity": "100.00"},
}
PREVIOUS = {
    "root.a": {"capacity": "50", "maximum-capacity": "100"},
    "root.b": {"capacity": "50", "maximum-capacity": "100"},
}


def push_statuses(db: Db) -> list[str]:
    with db.sessions() as s:
        return list(s.scalars(select(ConfigPush.status).order_by(ConfigPush.id)))


def push_decisions(db: Db) -> list[tuple[str, str]]:
    """(status, reason) of each push's own decision, in push order."""
    with db.sessions() as s:
        rows = s.execute(
            select(Decision.status, Decision.reason)
            .join(ConfigPush, ConfigPush.decision_id == Decision.id)
            .order_by(ConfigPush.id)
        )
        return [(status, reason) for status, reason in rows]


# --- 3: write-ahead of the push ----------------------------------------------------------------


async def test_crash_between_push_and_commit_is_not_reported_as_operator_drift(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, **LOAD)
    assert (await controller(db, rm, config()).control(60_000)).status == "pushed"  # 60/40
    polls(db, rm, 70, 120, **LOAD)
    real_commit = Controller._commit

    def crash(self: Controller, work: Any, result: Any) -> Any:
        raise RuntimeError("database connection lost")

    monkeypatch.setattr(Controller, "_commit", crash)
    with pytest.raises(RuntimeError):
        await controller(db, rm, config()).control(120_000)
    assert capacities(rm) == {"root.a": "70.00", "root.b": "30.00"}  # the PUT landed
    assert push_statuses(db) == ["applied", "pending"]
    # the decision was written before the PUT: the audit trail has no hole while it is open
    assert [d[0] for d in push_decisions(db)] == ["pushed", "pushing"]
    monkeypatch.setattr(Controller, "_commit", real_commit)
    polls(db, rm, 130, 180, **LOAD)
    report = await controller(db, rm, config()).control(180_000)
    assert report.status == "pushed", (report.status, report.reason)
    assert capacities(rm) == {"root.a": "75.00", "root.b": "25.00"}
    assert push_statuses(db) == ["applied", "applied", "applied"]
    recovered = push_decisions(db)[1]
    assert recovered[0] == "pushed" and recovered[1].startswith("settled by a later tick")
    assert "holds the pushed values" in recovered[1]


async def test_a_pending_push_the_rm_does_not_hold_is_not_the_baseline(
    db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, **LOAD)
    assert (await controller(db, rm, config()).control(60_000)).status == "pushed"  # 60/40

    async def die(self: Controller, work: Any) -> Any:  # dies after the write-ahead, no PUT
        raise RuntimeError("killed")

    monkeypatch.setattr(Controller, "_actuate", die)
    polls(db, rm, 70, 120, **LOAD)
    with pytest.raises(RuntimeError):
        await controller(db, rm, config()).control(120_000)
    monkeypatch.undo()
    rm.hand_edit({"root.a": {"capacity": "20"}, "root.b": {"capacity": "80"}})
    polls(db, rm, 130, 180, **LOAD)
    report = await controller(db, rm, config()).control(180_000)
    # Compared with the last push that landed (60/40), 20/80 is an operator's edit.
    assert report.status == "drift", (report.status, report.reason)
    assert capacities(rm) == {"root.a": "20", "root.b": "80"}
    # the operator's edit moved the version: whether the dead tick's PUT landed cannot be told
    assert push_statuses(db) == ["applied", "unknown"]
    assert push_decisions(db)[1][0] == "unknown"


# --- 4: the last PUT attempt ---------------------------------------------------------------------


class LastAttemptLands(FakeRM):
    """After the first push: 3 PUTs reach no RM; the 4th is applied, its answer lost."""

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        if len(self.puts) == 0:
            return await super().update_scheduler_conf(update)
        self.puts.append({q: dict(v) for q, v in update.update_queues.items()})
        if len(self.puts) < 5:
            raise RMUnreachable("connect timeout")
        self.conf = self._merged(update)
        self.version += 1
        raise RMUnavailable("read timeout after sending")


async def test_last_put_attempt_applied_but_unanswered(db: Db) -> None:
    rm = LastAttemptLands(two_queues().conf)
    polls(db, rm, 0, 60, **LOAD)
    ctl = controller(db, rm, config())
    assert (await ctl.control(60_000)).status == "pushed"
    polls(db, rm, 70, 120, **LOAD)
    first = await ctl.control(120_000)
    assert first.status == "pushed", (first.status, first.reason)
    assert capacities(rm) == {"root.a": "70.00", "root.b": "30.00"} and len(rm.puts) == 5
    polls(db, rm, 130, 180, **LOAD)
    second = await ctl.control(180_000)
    assert second.status == "pushed", (second.status, second.reason)


class DownAfterPut(FakeRM):
    """The PUT is sent and not answered, and the RM cannot be read after it."""

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        self.puts.append({q: dict(v) for q, v in update.update_queues.items()})
        self.down = True
        raise RMUnavailable("read timeout")


async def test_put_unanswered_and_unreadable_is_unverified_and_not_resent() -> None:
    rm = DownAfterPut(two_queues().conf)
    result = await Actuator(rm, retries=2, sleep=no_sleep).push("root", CHANGES, PREVIOUS, 1)
    assert result.status == "unverified" and result.attempts == 1 and len(rm.puts) == 1


class UnreadableAfterLostPut(FakeRM):
    """While ``failing``: a PUT is sent but never answered nor applied, and the RM cannot be
    read after it."""

    failing = False

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        if not self.failing:
            return await super().update_scheduler_conf(update)
        self.puts.append({q: dict(v) for q, v in update.update_queues.items()})
        self.down = True
        raise RMUnavailable("read timeout")


async def test_an_unverified_push_that_did_not_land_is_not_drift_later(db: Db) -> None:
    rm = UnreadableAfterLostPut(two_queues().conf)
    polls(db, rm, 0, 60, **LOAD)
    ctl = controller(db, rm, config())
    assert (await ctl.control(60_000)).status == "pushed"  # 60/40
    polls(db, rm, 70, 120, **LOAD)
    rm.failing = True
    assert (await ctl.control(120_000)).status == "pushed_unverified"
    assert push_statuses(db) == ["applied", "pending"]
    rm.failing, rm.down = False, False
    polls(db, rm, 130, 180, **LOAD)
    report = await ctl.control(180_000)
    # The RM still holds 60/40, the last push that landed: no drift; 70/30 is pushed now.
    assert report.status == "pushed", (report.status, report.reason)
    assert capacities(rm) == {"root.a": "70.00", "root.b": "30.00"}
    # the RM's configuration version did not move: the lost PUTs provably never landed
    assert push_statuses(db) == ["applied", "not_applied", "applied"]
    status, reason = push_decisions(db)[1]
    assert status == "not_applied" and "never landed" in reason


# --- 5 and 9: restores -------------------------------------------------------------------------


class OperatorRacesUs(FakeRM):
    """An operator's PUT lands right after the sidecar's, before its read-back."""

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        answer = await super().update_scheduler_conf(update)
        if len(self.puts) == 1:
            self.hand_edit({"root.a": {"capacity": "20"}, "root.b": {"capacity": "80"}})
        return answer


async def test_readback_restore_does_not_overwrite_a_concurrent_operator_edit(db: Db) -> None:
    rm = OperatorRacesUs(two_queues().conf)
    polls(db, rm, 0, 60, **LOAD)
    ctl = controller(db, rm, config())
    report = await ctl.control(60_000)
    assert report.status == "drift" and len(rm.puts) == 1, (report.status, report.reason)
    assert capacities(rm) == {"root.a": "20", "root.b": "80"}
    assert push_statuses(db) == ["superseded"]
    polls(db, rm, 70, 120, **LOAD)
    # Our 60/40 landed, the operator's 20/80 followed: drift, not overwritten on the next tick.
    assert (await ctl.control(120_000)).status == "drift"
    assert capacities(rm) == {"root.a": "20", "root.b": "80"} and len(rm.puts) == 1


class RestoreDoesNotStick(FakeRM):
    """Both the push and the restore leave root.a at another value than was sent."""

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        self.corrupt = {"root.a": "55"}
        return await super().update_scheduler_conf(update)


async def test_a_restore_is_read_back_before_it_is_reported() -> None:
    rm = RestoreDoesNotStick(two_queues().conf)
    result = await Actuator(rm, sleep=no_sleep).push("root", CHANGES, PREVIOUS, 1)
    assert result.status == "revert_failed" and len(rm.puts) == 2
    assert "restore read back differently" in result.message


# --- 6 and 7: the plan -------------------------------------------------------------------------


def effective(live: dict[str, dict[str, str]], plan: Plan) -> dict[str, dict[str, str]]:
    merged = {q: dict(v) for q, v in live.items()}
    for q, v in plan.changes().items():
        merged[q].update(v)
    return merged


def test_switch_from_absolute_to_percent_respects_max_step() -> None:
    # RRF left a at 30 % and b at 70 % of a 102400 MB / 100 vcore cluster; target 90/10 is
    # 60 points away from a, so a 10-point step moves 1/6 of the way: 40/60.
    whole = "[memory=102400,vcores=100]"
    live = {
        "root.a": {"capacity": "[memory=30720,vcores=30]", "maximum-capacity": whole},
        "root.b": {"capacity": "[memory=71680,vcores=70]", "maximum-capacity": whole},
    }
    cluster = {"vcores": 100.0, "memory": 102400.0}
    limits = Limits(max_step_h=1000, min_change_h=100)
    plan = percent_plan({"root.a": 0.9, "root.b": 0.1}, live, limits, cluster)
    assert plan.push
    assert plan.changes() == {
        "root.a": {"capacity": "40.00", "maximum-capacity": "100.00"},
        "root.b": {"capacity": "60.00", "maximum-capacity": "100.00"},
    }


def test_absolute_live_values_without_cluster_totals_are_shares_of_the_siblings() -> None:
    live = {
        "root.a": {"capacity": "[memory=51200,vcores=50]", "maximum-capacity": "100"},
        "root.b": {"capacity": "[memory=51200,vcores=50]", "maximum-capacity": "100"},
    }
    plan = percent_plan({"root.a": 0.9, "root.b": 0.1}, live, Limits(max_step_h=1000))
    assert {q: v["capacity"] for q, v in plan.changes().items()} == {
        "root.a": "60.00",
        "root.b": "40.00",
    }


def test_zero_share_queue_does_not_keep_its_absolute_value_next_to_percent_siblings() -> None:
    live = {
        "root.a": {"capacity": "[memory=51200,vcores=50]", "maximum-capacity": "100"},
        "root.b": {"capacity": "[memory=51200,vcores=50]", "maximum-capacity": "100"},
        "root.c": {"capacity": "[memory=0,vcores=0]", "maximum-capacity": "100"},
    }
    plan = percent_plan({"root.a": 0.6, "root.b": 0.4, "root.c": 0.0}, live, Limits())
    after = effective(live, plan)
    assert {q: v["capacity"] for q, v in after.items()} == {
        "root.a": "60.00",
        "root.b": "40.00",
        "root.c": "0.00",
    }
    assert all(isinstance(normalise(v["capacity"]), int) for v in after.values())


def test_three_decimal_live_values_keep_the_pushed_sum_at_100() -> None:
    # 1/3, 1/2, 1/6 -> 3333.33, 5000, 1666.67 hundredths -> largest remainder 33.33/50.00/16.67;
    # the live values sum to 99.99 in hundredths, so the step limit is waived.
    live = {
        "root.a": {"capacity": "33.333", "maximum-capacity": "100"},
        "root.b": {"capacity": "33.333", "maximum-capacity": "100"},
        "root.c": {"capacity": "33.334", "maximum-capacity": "100"},
    }
    plan = percent_plan({"root.a": 1 / 3, "root.b": 0.5, "root.c": 1 / 6}, live, Limits())
    after = effective(live, plan)
    assert {q: v["capacity"] for q, v in after.items()} == {
        "root.a": "33.33",
        "root.b": "50.00",
        "root.c": "16.67",
    }


def test_a_value_written_differently_but_read_alike_is_not_sent() -> None:
    # root.a stays at 50 (its "-1" maximum reads as 100): only b and c move, by 10 points each.
    live = {
        "root.a": {"capacity": "50", "maximum-capacity": "-1"},
        "root.b": {"capacity": "30", "maximum-capacity": "100"},
        "root.c": {"capacity": "20", "maximum-capacity": "100"},
    }
    plan = percent_plan({"root.a": 0.5, "root.b": 0.2, "root.c": 0.3}, live, Limits())
    assert plan.push and plan.changes() == {
        "root.b": {"capacity": "20.00", "maximum-capacity": "100.00"},
        "root.c": {"capacity": "30.00", "maximum-capacity": "100.00"},
    }
