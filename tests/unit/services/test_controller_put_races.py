"""Queue controller ticks whose PUT races something: a PUT the RM applies after the client gave
up on it, and an operator's edit landing between the tick's read and its PUT (or just before the
PUT is applied). Runs on both database engines (``db`` fixture)."""

from __future__ import annotations

from sqlalchemy import select

from app.db.control_models import ConfigPush
from app.db.models import Decision
from app.yarn.wire import SchedConfUpdate
from tests.conftest import Db
from tests.unit.control.fakes import FakeRM, LateRM, two_queues
from tests.unit.services.test_controller import capacities, config, controller, decision, polls

LOAD = {"a": {"pending": 30, "apps": 1}, "b": {"pending": 10, "apps": 1}}
OPERATOR = {"root.a": {"capacity": "20"}, "root.b": {"capacity": "80"}}


def pushes(db: Db) -> list[tuple[str, int | None]]:
    with db.sessions() as s:
        rows = s.execute(
            select(ConfigPush.status, ConfigPush.version_after).order_by(ConfigPush.id)
        )
        return [(status, version) for status, version in rows]


def push_decision(db: Db, index: int) -> Decision:
    with db.sessions() as s:
        push_ids = list(s.scalars(select(ConfigPush.id).order_by(ConfigPush.id)))
        row = s.get(ConfigPush, push_ids[index])
        assert row is not None and row.decision_id is not None
    return decision(db, row.decision_id)


async def test_a_put_that_lands_after_its_timeout_is_settled_as_ours_not_drift(db: Db) -> None:
    rm = LateRM(two_queues().conf)
    polls(db, rm, 0, 60, **LOAD)
    ctl = controller(db, rm, config())
    assert (await ctl.control(60_000)).status == "pushed"  # 60/40
    polls(db, rm, 70, 120, **LOAD)
    rm.slow = True
    timed_out = await ctl.control(120_000)
    assert timed_out.status == "pushed_unverified", (timed_out.status, timed_out.reason)
    assert len(rm.puts) == 2  # the unanswered PUT was not sent again
    assert pushes(db) == [("applied", 2), ("pending", None)]
    rm.land_late()
    assert capacities(rm) == {"root.a": "70.00", "root.b": "30.00"}
    polls(db, rm, 130, 180, **LOAD)
    after = await ctl.control(180_000)
    assert after.status == "pushed", (after.status, after.reason)
    assert capacities(rm) == {"root.a": "75.00", "root.b": "25.00"}
    assert pushes(db) == [("applied", 2), ("applied", 3), ("applied", 4)]
    settled = push_decision(db, 1)
    assert settled.status == "pushed" and "holds the pushed values" in settled.reason


class OperatorEditsBeforeOurPut(FakeRM):
    """The operator's PUT lands after the tick's read of the RM, before the sidecar's PUT."""

    raced = False

    async def validate_scheduler_conf(self, update: SchedConfUpdate) -> None:
        await super().validate_scheduler_conf(update)
        if not self.raced:
            self.raced = True
            self.hand_edit(OPERATOR)


async def test_an_edit_between_the_ticks_read_and_its_put_is_reported_not_overwritten(
    db: Db,
) -> None:
    rm = OperatorEditsBeforeOurPut(two_queues().conf)
    polls(db, rm, 0, 60, **LOAD)
    report = await controller(db, rm, config()).control(60_000)
    assert report.status == "drift" and "moved from 1 to 2" in report.reason, report
    assert rm.puts == [] and capacities(rm) == {"root.a": "20", "root.b": "80"}
    assert pushes(db) == [("conflict", None)]
    assert decision(db, report.decision_id).outputs["push"]["status"] == "conflict"


class OperatorEditsJustBeforeOurPutLands(FakeRM):
    """The operator's PUT lands after the actuator's last version check, just before its own."""

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        if not self.puts:
            self.hand_edit(OPERATOR)
        return await super().update_scheduler_conf(update)


async def test_an_edit_in_the_remaining_window_is_recorded_with_the_push(db: Db) -> None:
    rm = OperatorEditsJustBeforeOurPutLands(two_queues().conf)
    polls(db, rm, 0, 60, **LOAD)
    ctl = controller(db, rm, config())
    report = await ctl.control(60_000)
    assert report.status == "pushed_concurrent", (report.status, report.reason)
    assert "another write landed" in report.reason
    push = decision(db, report.decision_id).outputs["push"]
    assert (push["version_before"], push["version_after"]) == (1, 3)
    # The RM holds our values at version 3: that is the baseline, so no false drift follows.
    assert pushes(db) == [("applied", 3)]
    polls(db, rm, 70, 120, **LOAD)
    assert (await ctl.control(120_000)).status == "pushed"
