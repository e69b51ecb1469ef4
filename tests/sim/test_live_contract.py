"""Live controller vs the simulator's queue controller: one recorded observation sequence, the
same pushed capacities tick by tick (``docs/architecture.md``, "The tick").

The live side stores the polls as the poller does and runs ``Controller.control`` against a fake
RM on a real database; the simulator side feeds the same interval means to
``app.sim.queue_policies.ControllerPolicy``, which runs the controller's decide and plan step."""

from __future__ import annotations

from typing import Any

import pytest

from app.sim.queue_policies import ControllerPolicy
from app.sim.runner import QueueObservation
from tests.conftest import Db
from tests.unit.control.fakes import two_queues
from tests.unit.services.test_controller import capacities, config, controller, polls

CAPACITY = 8  # the fake RM's one node: 8 vcores, 8192 MB; containers of 1024 MB
# per tick: queue -> (used vcores, pending vcores, running apps)
SEQUENCE: list[dict[str, tuple[int, int, int]]] = [
    {"a": (4, 12, 2), "b": (4, 2, 1)},
    {"a": (6, 10, 2), "b": (2, 1, 1)},
    {"a": (6, 10, 2), "b": (2, 1, 1)},
    {"a": (2, 0, 1), "b": (6, 20, 3)},
    {"a": (0, 0, 0), "b": (8, 8, 2)},
    {"a": (0, 0, 0), "b": (8, 8, 2)},
]


def _observation(used: int, pending: int, apps: int) -> QueueObservation:
    return QueueObservation(
        waiting_jobs=0,
        waiting_tasks=float(pending),
        waiting_input_bytes=0.0,
        running_jobs=apps,
        used_vcores=float(used),
        used_fraction=used / CAPACITY,
        utilization=min(1.0, used / CAPACITY),
        completed_jobs=0,
        completed_tasks=0,
        demand_vcores=float(used + pending),
        slowdowns=(),
    )


@pytest.mark.parametrize(
    ("policy", "params"),
    [
        ("mlrf", {}),
        ("ltrf", {}),
        ("proportional", {"floor": 0.1}),
    ],
)
async def test_same_observations_same_pushes(db: Db, policy: str, params: dict[str, Any]) -> None:
    rm = two_queues()
    live = controller(db, rm, config(policy=policy, params=params))
    sim = ControllerPolicy(policy, ["root.a", "root.b"], params, interval_s=60.0)
    for k, tick in enumerate(SEQUENCE, start=1):
        now_s = 60 * k
        stored = {q: {"used": u, "pending": p, "apps": n} for q, (u, p, n) in tick.items()}
        polls(db, rm, now_s - 50, now_s, **stored)
        await live.control(now_s * 1000)
        observed = {f"root.{q}": _observation(*values) for q, values in tick.items()}
        sim.decide(float(now_s), observed, CAPACITY)
        simulated = {q: v["capacity"] for q, v in sim.live.items()}
        assert _same(capacities(rm), simulated), (k, capacities(rm), simulated)


def _same(live: dict[str, str], simulated: dict[str, str]) -> bool:
    # the fake RM keeps the strings it was sent; the initial "50" and "50.00" are the same value
    def norm(v: str) -> str:
        return v if v.startswith("[") else f"{float(v):.2f}"

    return {q: norm(v) for q, v in live.items()} == {q: norm(v) for q, v in simulated.items()}
