"""The queue controller keeps a queue at least at what the deadline jobs admitted there hold,
read from the jobs table at every tick (so a restart keeps it), while another queue's load
would otherwise move capacity away from it."""

from __future__ import annotations

from app.control.tick import managed_queue
from app.db import jobs_repo
from app.db.jobs_models import Job
from app.db.session import transaction
from tests.conftest import Db
from tests.unit.control.fakes import CLUSTER_VCORES, FakeRM
from tests.unit.services.test_controller import capacities, config, controller, decision, polls

LOAD = {"a": {"pending": 30, "apps": 1}, "b": {"pending": 10, "apps": 1}}


def three_queues() -> FakeRM:
    return FakeRM(
        {
            "root.a": {"capacity": "25", "maximum-capacity": "100"},
            "root.b": {"capacity": "25", "maximum-capacity": "100"},
            "root.deadline": {"capacity": "50", "maximum-capacity": "100"},
        }
    )


def admit(db: Db, job_id: str, queue: str, granted: int, state: str = "submitted") -> None:
    with transaction(db.sessions) as s:
        jobs_repo.add_job(
            s,
            Job(
                id=job_id * 32,
                name="etl-deadline",
                queue=queue,
                state=state,
                requested_tasks=granted,
                deadline_s=3600,
                deadline_ms=3_600_000,
                submitted_ms=0,
                request_hash=job_id * 64,
                granted_cpus=granted,
                admitted_ms=0,
                app_id=f"application_1_000{job_id}",
                app_state="RUNNING",
                updated_ms=0,
            ),
        )


async def ticks(
    db: Db, rm: FakeRM, count: int, *, first: int = 0, restart_each: bool = False
) -> list[int]:
    """``count`` enforce ticks (from the ``first``) with root.a and root.b loaded, one
    container's floor for every queue; the decisions' ids."""
    cfg = config(floors={"*": 1})
    ctl = controller(db, rm, cfg)
    ids = []
    for i in range(first, first + count):
        if restart_each:
            ctl = controller(db, rm, cfg)
        polls(db, rm, i * 70, i * 70 + 60, **LOAD)
        report = await ctl.control((i * 70 + 60) * 1000)
        assert report.decision_id is not None
        ids.append(report.decision_id)
    return ids


def deadline_vcores(rm: FakeRM) -> float:
    return float(capacities(rm)["root.deadline"]) / 100 * CLUSTER_VCORES


async def test_an_unreserved_deadline_queue_is_rebalanced_down(db: Db) -> None:
    """The control: with nothing admitted the loaded queues take capacity from it."""
    rm = three_queues()
    await ticks(db, rm, 4)
    assert deadline_vcores(rm) < 4


async def test_admitted_grants_and_their_app_masters_are_the_deadline_queues_floor(
    db: Db,
) -> None:
    rm = three_queues()
    admit(db, "1", "root.deadline", 3)
    admit(db, "2", "deadline", 1)  # named by its leaf, as a submission may
    admit(db, "3", "root.deadline", 9, state="finished")  # holds nothing any more
    ids = await ticks(db, rm, 4, restart_each=True)
    # 3 + 1 granted vcores and one AM container each: 6 containers of 1 vcore
    assert deadline_vcores(rm) == 6
    floors = decision(db, ids[-1]).outputs["floors"]["queues"]["root.deadline"]
    assert floors["admission_floor"] == 75.0
    assert floors["floor_resources"]["vcores"] == 6


async def test_the_floor_goes_when_the_jobs_end(db: Db) -> None:
    rm = three_queues()
    admit(db, "1", "root.deadline", 5)
    await ticks(db, rm, 2)
    with transaction(db.sessions) as s:
        assert jobs_repo.transition(s, "1" * 32, ["submitted"], 1, state="finished")
    ids = await ticks(db, rm, 1, first=2)
    assert (
        decision(db, ids[-1]).outputs["floors"]["queues"]["root.deadline"]["admission_floor"] == 0
    )


def test_a_leaf_name_means_the_one_managed_queue_it_ends() -> None:
    queues = ["root.a.deadline", "root.b", "root.c.b"]
    assert managed_queue("deadline", queues) == "root.a.deadline"
    assert managed_queue("root.b", queues) == "root.b"
    assert managed_queue("b", queues) is None  # two leaves are called b
    assert managed_queue("root.x", queues) is None
