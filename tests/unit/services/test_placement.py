"""HybridMR placement of observed jobs (``app/services/placement.py``) on both engines: Algorithm
2 per observed deadline app from its signature's runs, a move in enforce mode only, one decision
per app (also after a restart), failures recorded, and the sidecar's own apps left alone."""

from __future__ import annotations

from sqlalchemy import select

from app.db import observe_repo, repo
from app.db.models import Decision
from app.db.session import transaction
from app.observability.prometheus import _history_metrics
from app.services.placement import ObservedPlacement
from app.yarn.errors import RMError, RMUnavailable
from tests.conftest import Db
from tests.factories import app

NOW = 1_000_000
# the signature's runs took 100 s on the shared partition
HISTORY = [
    app(f"application_1_{i:04d}", state="FINISHED", submitted_ms=10_000 * i,
        finished_ms=10_000 * i + 100_000, tags=("profile:etl",))
    for i in range(3)
]  # fmt: skip


class FakeRM:
    def __init__(self, fail: bool = False, down: int = 0) -> None:
        self.moves: list[tuple[str, str]] = []
        self.fail = fail
        self.down = down  # calls answered with RMUnavailable first

    async def move_application(self, app_id: str, queue: str) -> str:
        if self.down:
            self.down -= 1
            raise RMUnavailable("connection refused")
        if self.fail:
            raise RMError(f"http://sidecar:s3cr3t@rm:8088: rejected: queue {queue} is full")
        self.moves.append((app_id, queue))
        return queue


def _observed(app_id: str, deadline_after_s: int, *extra: str, queue: str = "etl") -> object:
    started = NOW - 10_000
    tags = ("profile:etl", f"deadline:{(started // 1000) + deadline_after_s}", *extra)
    return app(app_id, state="RUNNING", submitted_ms=started, tags=tags, queue=queue)


def _setup(db: Db, apps: list[object]) -> None:
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        repo.upsert_apps(s, cid, [*HISTORY, *apps], now_ms=NOW)  # type: ignore[list-item]


def _service(db: Db, rm: FakeRM, mode: str = "enforce") -> ObservedPlacement:
    return ObservedPlacement(
        rm, db.sessions, cluster_name="test", target_queue="root.fast", interval_s=1,
        mode=lambda: mode, clock=lambda: NOW,
    )  # fmt: skip


def _records(db: Db) -> dict[str, Decision]:
    with db.sessions() as s:
        rows = s.scalars(select(Decision).where(Decision.kind == "placement")).all()
        return {str(r.inputs["app_id"]): r for r in rows}


async def test_a_job_the_shared_partition_would_make_late_is_moved_once(db: Db) -> None:
    _setup(
        db,
        [
            _observed("application_1_0010", 50),  # 100 s on shared >= 50 s to its deadline
            _observed("application_1_0011", 500),  # meets it where it is
            _observed("application_1_0012", 50, "sidecar-job:abc"),  # the sidecar's own
            _observed("application_1_0013", 50, queue="fast"),  # already there
            app("application_1_0014", state="RUNNING", tags=("profile:etl",)),  # no deadline
        ],
    )
    rm = FakeRM()
    await _service(db, rm).run_once(NOW)
    assert rm.moves == [("application_1_0010", "root.fast")]
    records = _records(db)
    assert set(records) == {"application_1_0010", "application_1_0011"}
    moved, stays = records["application_1_0010"], records["application_1_0011"]
    assert (moved.status, moved.outputs["queue"], moved.inputs["partition"]) == (
        "applied",
        "root.fast",
        "native",
    )
    assert moved.inputs["estimate_s"] == 100.0 and moved.inputs["desired_s"] == 50.0
    assert (stays.status, stays.outputs["queue"], stays.inputs["partition"]) == (
        "decided",
        "etl",
        "virtual",
    )
    # decided once: neither the same loop nor a restarted one decides or moves them again
    await _service(db, rm).run_once(NOW + 1000)
    assert rm.moves == [("application_1_0010", "root.fast")] and len(_records(db)) == 2
    # /metrics counts them by status
    with db.sessions() as s:
        snap = observe_repo.snapshot(s, "test")
    (family,) = [m for m in _history_metrics(snap) if m.name.endswith("placement_decisions")]
    assert {x.labels["status"]: x.value for x in family.samples} == {"applied": 1, "decided": 1}


async def test_advise_mode_records_the_move_without_making_it(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50)])
    rm = FakeRM()
    await _service(db, rm, mode="advise").run_once(NOW)
    assert rm.moves == []
    record = _records(db)["application_1_0010"]
    assert record.status == "advised" and "advised only (advise mode)" in record.reason


async def test_a_refused_move_is_recorded_without_the_secret(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50)])
    await _service(db, FakeRM(fail=True)).run_once(NOW)
    record = _records(db)["application_1_0010"]
    assert record.status == "failed" and "queue root.fast is full" in record.reason
    assert "s3cr3t" not in record.reason


async def test_an_unreachable_rm_leaves_the_app_for_the_next_tick(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50)])
    rm = FakeRM(down=1)
    service = _service(db, rm)
    await service.run_once(NOW)
    assert rm.moves == [] and _records(db) == {}
    await service.run_once(NOW + 1000)
    assert rm.moves == [("application_1_0010", "root.fast")]
    assert _records(db)["application_1_0010"].status == "applied"
