"""Live controller vs the simulator's queue controller: one recorded observation sequence, the
same pushed capacities tick by tick (``docs/architecture.md``, "The tick").

The live side stores the polls as the poller does and runs ``Controller.control`` against a fake
RM on a real database; the simulator side feeds the same interval means to
``app.sim.queue_policies.ControllerPolicy``, which runs the controller's decide and plan step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.policies.fawkes import core as fawkes_core
from app.sim.queue_policies import ControllerPolicy
from app.sim.runner import QueueObservation
from tests.conftest import Db
from tests.unit.control.fakes import FakeRM, two_queues
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


def _observation(used: int, pending: int, apps: int, capacity: str) -> QueueObservation:
    # what the live view reads from the same polls: the RM reports no input bytes, completed
    # tasks or slowdowns, and utilisation is of the capacity the queue holds (capped at 1)
    guaranteed = _fraction(capacity) * CAPACITY
    return QueueObservation(
        waiting_jobs=0,
        waiting_tasks=float(pending),
        waiting_input_bytes=0.0,
        running_jobs=apps,
        used_vcores=float(used),
        used_fraction=used / CAPACITY,
        utilization=min(1.0, used / guaranteed) if guaranteed > 0 else 0.0,
        completed_jobs=0,
        completed_tasks=0,
        demand_vcores=float(used + pending),
        slowdowns=(),
    )


def _fraction(capacity: str) -> float:
    if capacity.startswith("["):
        return int(capacity.split("vcores=")[1].rstrip("]")) / CAPACITY
    return float(capacity) / 100


FAWKES = [(f"fawkes:{w}", {}) for w in fawkes_core.WEIGHTINGS]
# Fawkes' minimum shares are the operator's minimum bounds, given to both sides alike.
MINIMUMS = {"root.a": {"min": 20}, "root.b": {"min": 20}}


@pytest.mark.parametrize(
    ("policy", "params"),
    [
        ("mlrf", {}),
        ("ltrf", {}),
        ("ltrf", {"discount": 0.5, "lending": "entitlement"}),
        ("proportional", {"floor": 0.1}),
        ("rrf", {}),
        ("rrf", {"algorithm": "wdrf"}),
        *FAWKES,
    ],
)
async def test_same_observations_same_pushes(db: Db, policy: str, params: dict[str, Any]) -> None:
    rm = two_queues()
    # the scheduler's minimum allocation (the queues' floor) is the simulated container
    rm.settings = replace(rm.settings, min_allocation_mb=1024)
    bounds = MINIMUMS if policy.startswith("fawkes") else {}
    live = controller(db, rm, config(policy=policy, params=params, bounds=bounds))
    sim = ControllerPolicy(policy, ["root.a", "root.b"], params, interval_s=60.0, bounds=bounds)
    pushed = 0
    for k, tick in enumerate(SEQUENCE, start=1):
        now_s = 60 * k
        stored = {q: {"used": u, "pending": p, "apps": n} for q, (u, p, n) in tick.items()}
        holding = {q: v["capacity"] for q, v in sim.live.items()}
        polls(db, rm, now_s - 50, now_s, **stored)
        report = await live.control(now_s * 1000)
        pushed += report.status == "pushed"
        observed = {
            f"root.{q}": _observation(*values, holding[f"root.{q}"]) for q, values in tick.items()
        }
        sim.decide(float(now_s), observed, CAPACITY)
        simulated = {q: v["capacity"] for q, v in sim.live.items()}
        assert _same(capacities(rm), simulated), (k, capacities(rm), simulated)
        assert _maxima(rm) == _maxima_of(sim.live), (k, _maxima(rm), sim.live)
    # a contract over sequences where nothing moves would hold vacuously
    assert pushed > 0


def _maxima(rm: FakeRM) -> dict[str, str]:
    return _maxima_of(rm.conf)


def _maxima_of(values: dict[str, dict[str, str]]) -> dict[str, str]:
    out = {}
    for q, v in values.items():
        m = v.get("maximum-capacity", "100")
        out[q] = m if m.startswith("[") else f"{float(m):.2f}"
    return out


def _same(live: dict[str, str], simulated: dict[str, str]) -> bool:
    # the fake RM keeps the strings it was sent; the initial "50" and "50.00" are the same value
    def norm(v: str) -> str:
        return v if v.startswith("[") else f"{float(v):.2f}"

    return {q: norm(v) for q, v in live.items()} == {q: norm(v) for q, v in simulated.items()}
