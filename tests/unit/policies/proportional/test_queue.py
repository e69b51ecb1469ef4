"""The proportional policy in the live controller's tick (``app.policies.proportional.queue``):
stored polls -> the observation view -> shares -> ``control.plan`` -> a push to a fake RM."""

from __future__ import annotations

from tests.conftest import Db
from tests.unit.control.fakes import two_queues
from tests.unit.services.test_controller import capacities, config, controller, polls


async def test_controller_pushes_step_limited_proportional_shares(db: Db) -> None:
    rm = two_queues()
    polls(db, rm, 0, 60, a={"pending": 30, "apps": 1}, b={"pending": 10, "apps": 1})
    cfg = config(policy="proportional", params={"floor": 0.1})
    report = await controller(db, rm, cfg).control(60_000)
    # target 0.1 + 0.8 * 30/40 = 70% / 30%; the 10-point step limit from 50/50 -> 60/40
    assert report.status == "pushed", report.reason
    assert capacities(rm) == {"root.a": "60.00", "root.b": "40.00"}
