"""HybridMR placement of observed jobs (``app/services/placement.py``) on both engines: Algorithm
2 per observed deadline app from its signature's runs, a move in enforce mode only, one decision
per app (also after a restart), failures recorded, and the sidecar's own apps left alone.

The RM authorises a move against the sidecar, not the app's owner, so an app is moved only when
its owner may submit to the target queue by the cluster's queue ACLs (``app.domain.queue_acl``)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import event, select

from app.db import observe_repo, repo
from app.db.models import Application, Decision
from app.db.session import transaction
from app.domain import queue_acl
from app.observability.prometheus import _history_metrics
from app.services.placement import DECIDED_KEEP_MS, ObservedPlacement
from app.yarn import mapping, wire
from app.yarn.errors import RMError, RMRejected, RMUnavailable
from tests.conftest import Db
from tests.factories import app
from tests.unit.yarn.samples import recorded, recorded_text

NOW = 1_000_000
# the signature's runs took 100 s on the shared partition
HISTORY = [
    app(f"application_1_{i:04d}", state="FINISHED", submitted_ms=10_000 * i,
        finished_ms=10_000 * i + 100_000, tags=("profile:etl",))
    for i in range(3)
]  # fmt: skip


CS = "yarn.scheduler.capacity."
ACLS_ON = {"yarn.acl.enable": "true"}
# Hadoop's usual lock-down: nobody by default at the root, the dedicated queue opened by name
LOCKED = {f"{CS}root.acl_submit_applications": " ", f"{CS}root.acl_administer_queue": " "}


class FakeRM:
    def __init__(
        self,
        fail: bool = False,
        down: int = 0,
        *,
        rm_values: dict[str, str] | None = None,
        conf: dict[str, str] | None = None,
        conf_down: int = 0,
        conf_error: RMError | None = None,
        reported: dict[str, str] | None = None,
    ) -> None:
        self.moves: list[tuple[str, str]] = []
        self.fail = fail
        self.down = down  # calls answered with RMUnavailable first
        # yarn-default.xml: ACLs off
        self.rm_values = {"yarn.acl.enable": "false"} if rm_values is None else rm_values
        self.conf = conf or {}
        self.conf_down = conf_down  # ACL reads answered with RMUnavailable first
        self.conf_error = conf_error
        # the queue ACLs GET /scheduler reports; None: an RM that reports none
        self.reported = reported
        self.reads: list[str] = []

    async def rm_conf(self, names: Sequence[str]) -> dict[str, str]:
        self.reads.append("rm_conf")
        if self.conf_down:
            self.conf_down -= 1
            raise RMUnavailable("connection refused")
        return {name: self.rm_values[name] for name in names if name in self.rm_values}

    async def queue_acls(self) -> dict[str, str] | None:
        self.reads.append("queue_acls")
        return None if self.reported is None else dict(self.reported)

    async def scheduler_conf(self) -> dict[str, str]:
        self.reads.append("scheduler_conf")
        if self.conf_error is not None:
            raise self.conf_error
        return dict(self.conf)

    async def move_application(self, app_id: str, queue: str) -> str:
        if self.down:
            self.down -= 1
            raise RMUnavailable("connection refused")
        if self.fail:
            raise RMError(f"http://sidecar:s3cr3t@rm:8088: rejected: queue {queue} is full")
        self.moves.append((app_id, queue))
        return queue


def _observed(
    app_id: str, deadline_after_s: int, *extra: str, queue: str = "etl", user: str = "alice"
) -> object:
    started = NOW - 10_000
    tags = ("profile:etl", f"deadline:{(started // 1000) + deadline_after_s}", *extra)
    return app(app_id, state="RUNNING", submitted_ms=started, tags=tags, queue=queue, user=user)


def _setup(db: Db, apps: list[object]) -> None:
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        repo.upsert_apps(s, cid, [*HISTORY, *apps], now_ms=NOW)  # type: ignore[list-item]


def _service(
    db: Db, rm: FakeRM, mode: str = "enforce", target: str = "root.fast"
) -> ObservedPlacement:
    return ObservedPlacement(
        rm, db.sessions, cluster_name="test", target_queue=target, interval_s=1,
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
    assert _placement_counts(db) == {"applied": 1, "decided": 1}


def _placement_counts(db: Db) -> dict[str, float]:
    """``/metrics``' placement decisions by status."""
    with db.sessions() as s:
        snap = observe_repo.snapshot(s, "test")
    (family,) = [m for m in _history_metrics(snap) if m.name.endswith("placement_decisions")]
    return {x.labels["status"]: x.value for x in family.samples}


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


# --- what a tick reads and remembers (a large cluster) ------------------------------------------


async def test_a_tick_reads_only_the_live_apps_with_a_deadline_tag(db: Db) -> None:
    untagged = [app(f"application_1_{i:04d}", tags=("profile:etl",)) for i in range(100, 140)]
    _setup(db, [*untagged, _observed("application_1_0010", 50)])
    loaded: list[str] = []

    def on_load(target: Application, _context: object) -> None:
        loaded.append(target.app_id)

    service = _service(db, FakeRM())
    event.listen(Application, "load", on_load)
    try:
        plans = service.plan(NOW)
    finally:
        event.remove(Application, "load", on_load)
    assert [plan.app_id for plan in plans] == ["application_1_0010"]
    # the profile book reads the finished runs; of the 41 live apps only the tagged one is read
    assert not set(loaded) & {a.app_id for a in untagged}
    assert "application_1_0010" in loaded


async def test_the_decided_set_forgets_an_app_a_day_after_it_ended(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50), _observed("application_1_0011", 500)])
    rm = FakeRM()
    service = _service(db, rm)
    await service.run_once(NOW)
    assert set(_records(db)) == {"application_1_0010", "application_1_0011"}
    with transaction(db.sessions) as s:  # 0010 ends; 0011 runs on
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        ended = app("application_1_0010", state="FINISHED", submitted_ms=NOW - 10_000,
                    finished_ms=NOW + 500, tags=("profile:etl", "deadline:1"))  # fmt: skip
        repo.upsert_apps(s, cid, [ended], now_ms=NOW + 1000)
    later = NOW + DECIDED_KEEP_MS + 2000
    await service.run_once(NOW + 2000)
    assert set(service._decided or {}) == {"application_1_0010", "application_1_0011"}
    await service.run_once(later)
    # the live app is still remembered (and not decided again); the ended one is forgotten
    assert set(service._decided or {}) == {"application_1_0011"}
    assert len(_records(db)) == 2 and rm.moves == [("application_1_0010", "root.fast")]


# --- the owner's queue ACLs (the RM checks only the sidecar's) -----------------------------------


async def test_with_acls_disabled_the_app_is_moved_without_reading_them(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50, user="mallory")])
    rm = FakeRM(conf=LOCKED)  # yarn.acl.enable false: the RM checks no queue ACL at all
    await _service(db, rm).run_once(NOW)
    assert rm.moves == [("application_1_0010", "root.fast")]
    assert rm.reads == ["rm_conf"]  # the scheduler configuration is not needed
    record = _records(db)["application_1_0010"]
    assert record.status == "applied" and record.inputs["user"] == "mallory"
    assert "owner mallory may submit to root.fast: yarn.acl.enable is false" in record.reason


async def test_an_owner_listed_in_the_queue_acl_is_moved(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50, user="alice")])
    conf = {**LOCKED, f"{CS}root.fast.acl_submit_applications": "bob,alice ops"}
    rm = FakeRM(rm_values=ACLS_ON, conf=conf)
    await _service(db, rm).run_once(NOW)
    assert rm.moves == [("application_1_0010", "root.fast")]
    assert rm.reads == ["rm_conf", "queue_acls", "scheduler_conf"]
    record = _records(db)["application_1_0010"]
    assert record.status == "applied"
    assert "acl_submit_applications of root.fast allows alice" in record.reason


async def test_acls_on_but_root_left_at_its_default_star_lets_everyone_move(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50, user="mallory")])
    # only the leaf is restricted; root's unset ACL is "*", which every queue below inherits
    conf = {f"{CS}root.queues": "fast", f"{CS}root.fast.acl_submit_applications": "alice"}
    rm = FakeRM(rm_values=ACLS_ON, conf=conf)
    await _service(db, rm).run_once(NOW)
    assert rm.moves == [("application_1_0010", "root.fast")]
    record = _records(db)["application_1_0010"]
    assert "acl_submit_applications of root allows everyone (*)" in record.reason


async def test_an_owner_no_acl_lets_in_is_refused_and_not_moved(db: Db) -> None:
    _setup(
        db,
        [
            _observed("application_1_0010", 50, user="mallory"),
            _observed("application_1_0011", 50, user="alice"),
        ],
    )
    conf = {**LOCKED, f"{CS}root.fast.acl_submit_applications": "alice"}
    rm = FakeRM(rm_values=ACLS_ON, conf=conf)
    await _service(db, rm).run_once(NOW)
    # the sidecar's own right to move apps there is no reason to move mallory's
    assert rm.moves == [("application_1_0011", "root.fast")]
    # once per tick, not once per app
    assert rm.reads == ["rm_conf", "queue_acls", "scheduler_conf"]
    record = _records(db)["application_1_0010"]
    assert (record.status, record.outputs["queue"]) == ("refused", "etl")
    assert "not moved: owner mallory may not submit to root.fast: " in record.reason
    assert "lists mallory or *" in record.reason
    # decided once: the next tick neither moves nor records it again
    await _service(db, rm).run_once(NOW + 1000)
    assert rm.moves == [("application_1_0011", "root.fast")] and len(_records(db)) == 2
    assert _placement_counts(db) == {"applied": 1, "refused": 1}


async def test_an_owner_only_a_group_could_let_in_is_refused_with_that_reason(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50, user="mallory")])
    # " ops": groups only (leading space); the sidecar cannot tell whether mallory is in ops
    conf = {**LOCKED, f"{CS}root.fast.acl_submit_applications": " ops"}
    rm = FakeRM(rm_values=ACLS_ON, conf=conf)
    await _service(db, rm).run_once(NOW)
    assert rm.moves == []
    record = _records(db)["application_1_0010"]
    assert record.status == "refused"
    assert "owner mallory may not submit to root.fast: only membership of group ops" in (
        record.reason
    )
    assert "does not know users' groups" in record.reason


async def test_an_ancestor_queue_acl_lets_the_owner_in(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50, user="alice")])
    conf = {
        **LOCKED,
        f"{CS}root.queues": "etl,hybrid",
        f"{CS}root.hybrid.queues": "fast",
        f"{CS}root.hybrid.acl_administer_queue": "alice",  # administering is enough
    }
    rm = FakeRM(rm_values=ACLS_ON, conf=conf)
    await _service(db, rm, target="root.hybrid.fast").run_once(NOW)
    assert rm.moves == [("application_1_0010", "root.hybrid.fast")]
    record = _records(db)["application_1_0010"]
    assert "acl_administer_queue of root.hybrid allows alice" in record.reason


async def test_a_leaf_name_target_is_resolved_to_its_path_for_the_acls(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50, user="mallory")])
    conf = {
        **LOCKED,
        f"{CS}root.queues": "hybrid",
        f"{CS}root.hybrid.queues": "fast",
        f"{CS}root.hybrid.acl_submit_applications": "alice",
    }
    rm = FakeRM(rm_values=ACLS_ON, conf=conf)
    await _service(db, rm, target="fast").run_once(NOW)
    assert rm.moves == []
    assert "no acl_submit_applications or acl_administer_queue of root.hybrid.fast" in (
        _records(db)["application_1_0010"].reason
    )


async def test_advise_mode_reads_no_acl_and_advises_as_before(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50, user="mallory")])
    rm = FakeRM(rm_values=ACLS_ON, conf=LOCKED)
    await _service(db, rm, mode="advise").run_once(NOW)
    assert rm.moves == [] and rm.reads == []
    record = _records(db)["application_1_0010"]
    assert (record.status, record.outputs["queue"]) == ("advised", "root.fast")
    assert record.reason.endswith("; advised only (advise mode)")


async def test_no_acl_is_read_when_no_app_is_to_move(db: Db) -> None:
    _setup(db, [_observed("application_1_0011", 500)])  # meets its deadline where it is
    rm = FakeRM(rm_values=ACLS_ON, conf=LOCKED)
    await _service(db, rm).run_once(NOW)
    assert rm.reads == [] and _records(db)["application_1_0011"].status == "decided"


async def test_an_unreachable_rm_for_the_acls_leaves_the_app_for_the_next_tick(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50), _observed("application_1_0011", 500)])
    rm = FakeRM(conf_down=1)
    service = _service(db, rm)
    await service.run_once(NOW)
    # the app that stays is decided; the one to move waits for ACLs that can be read
    assert rm.moves == [] and set(_records(db)) == {"application_1_0011"}
    await service.run_once(NOW + 1000)
    assert rm.moves == [("application_1_0010", "root.fast")]
    assert _records(db)["application_1_0010"].status == "applied"


def _file_store_acls() -> dict[str, str]:
    """The queue ACLs a Hadoop 3.5.0 RM with a file-based store reported (``GET /scheduler``):
    root.deadline open to alice and bob by name and group deadliners, root administered by
    yarn-sidecar and group admins, root.etl open to everyone."""
    body = recorded("scheduler_acls_file_store.json")
    acls = mapping.queue_acl_conf(wire.parse(wire.SchedulerEnvelope, body).scheduler.schedulerInfo)
    assert acls is not None
    return acls


async def test_a_file_based_store_is_judged_on_the_acls_the_scheduler_reports(db: Db) -> None:
    _setup(
        db,
        [
            _observed("application_1_0010", 50, user="alice"),
            _observed("application_1_0011", 50, user="mallory"),
        ],
    )
    # that RM's answer to GET /scheduler-conf: no mutable store to read
    refused = RMRejected(400, recorded_text("scheduler_conf_file_store_400.txt"))
    rm = FakeRM(rm_values=ACLS_ON, reported=_file_store_acls(), conf_error=refused)
    await _service(db, rm, target="root.deadline").run_once(NOW)
    assert rm.moves == [("application_1_0010", "root.deadline")]
    assert rm.reads == ["rm_conf", "queue_acls"]  # the store is not asked
    records = _records(db)
    assert records["application_1_0010"].status == "applied"
    assert "acl_submit_applications of root.deadline allows alice" in (
        records["application_1_0010"].reason
    )
    mallory = records["application_1_0011"]
    assert mallory.status == "refused"
    assert "only membership of one of the groups admins, deadliners" in mallory.reason


async def test_acls_the_rm_refuses_to_show_fail_the_move_closed(db: Db) -> None:
    _setup(db, [_observed("application_1_0010", 50)])
    # an RM that reports no queue ACLs in GET /scheduler and has no mutable store
    refused = RMRejected(400, "This API only supports to retrieve scheduler configuration")
    rm = FakeRM(rm_values=ACLS_ON, conf_error=refused)
    await _service(db, rm).run_once(NOW)
    assert rm.moves == []
    record = _records(db)["application_1_0010"]
    assert record.status == "failed"
    assert "not moved: the queue ACLs could not be read: RM rejected the request (400)" in (
        record.reason
    )


@pytest.mark.parametrize(
    ("acl", "expected"),
    [
        ("*", queue_acl.Access.ALLOWED),
        (" * ", queue_acl.Access.ALLOWED),  # either part trimming to "*" is everyone
        ("bob *", queue_acl.Access.ALLOWED),
        ("bob,\talice ", queue_acl.Access.ALLOWED),  # items are trimmed
        ("bob, alice", queue_acl.Access.UNKNOWN),  # the first space ends the users: a group
        ("bob,*", queue_acl.Access.DENIED),  # "*" among names is no wildcard
        (" ", queue_acl.Access.DENIED),  # nobody
        ("", queue_acl.Access.DENIED),
        (" alice", queue_acl.Access.UNKNOWN),  # leading space: "alice" is a group
        ("bob ops,etl", queue_acl.Access.UNKNOWN),
    ],
)
def test_acl_strings_are_read_like_hadoops_access_control_list(
    acl: str, expected: queue_acl.Access
) -> None:
    conf = {**LOCKED, f"{CS}root.fast.acl_submit_applications": acl}
    verdict = queue_acl.submit_access(
        "alice", "root.fast", acl_enable=" TRUE ", scheduler_conf=conf
    )
    assert verdict.access is expected, verdict.reason


def test_another_authorization_provider_is_unknown() -> None:
    verdict = queue_acl.submit_access(
        "alice",
        "root.fast",
        acl_enable="true",
        scheduler_conf={},  # root's "*" would allow: but Ranger, not this, decides
        authorization_provider="org.apache.ranger.authorization.yarn.authorizer.RangerYarnAuthorizer",
    )
    assert verdict.access is queue_acl.Access.UNKNOWN and not verdict.allowed
    assert "yarn.authorization-provider" in verdict.reason
