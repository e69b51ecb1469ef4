"""Pure wire -> domain mapping (docs/yarn.md s.3.1-3.7, s.13): queue tree, apps, nodes, metrics."""

from __future__ import annotations

from typing import Any

from app.domain import queue_acl
from app.domain.model import QueueState, Resources
from app.yarn import mapping, wire
from tests.unit.yarn.samples import (
    CLUSTER_INFO,
    CLUSTER_METRICS,
    app_json,
    finished_app_json,
    leaf,
    node_json,
    parent,
    recorded,
    scheduler_json,
)


def _queues(body: dict[str, Any]) -> dict[str, QueueState]:
    info = wire.parse(wire.SchedulerEnvelope, body).scheduler.schedulerInfo
    return {q.path: q for q in mapping.queues(info)}


def test_tree_without_queue_path_builds_full_paths() -> None:
    # 3.3-style: no queuePath, no queueType; parents carry no "type".
    body = scheduler_json([parent("a", [leaf("a1"), leaf("a2")]), leaf("b")])
    info = wire.parse(wire.SchedulerEnvelope, body).scheduler.schedulerInfo
    flat = mapping.queues(info)
    assert [q.path for q in flat] == ["root", "root.a", "root.a.a1", "root.a.a2", "root.b"]
    assert [q.parent for q in flat] == [None, "root", "root.a", "root.a", "root"]
    assert [q.is_leaf for q in flat] == [False, False, True, True, True]
    assert [q.name for q in flat] == ["root", "a", "a1", "a2", "b"]


def test_queue_path_is_preferred_and_queue_type_decides_leaves() -> None:
    # 3.4+: queuePath and queueType present; a leaf may even lack the legacy "type".
    child = leaf("x", path="root.p.x", queueType="leaf")
    del child["type"]
    body = scheduler_json([parent("p", [child], queuePath="root.p", queueType="parent")])
    body["scheduler"]["schedulerInfo"].update(queuePath="root", queueType="parent")
    queues = _queues(body)
    assert list(queues) == ["root", "root.p", "root.p.x"]
    assert queues["root.p.x"].is_leaf
    assert not queues["root.p"].is_leaf


def test_single_child_object_and_root_absolute_fallback() -> None:
    body = scheduler_json(leaf("default", capacity=100.0, absoluteCapacity=100.0))
    body["scheduler"]["schedulerInfo"]["usedCapacity"] = 37.5
    root, default = _queues(body).values()
    assert default.path == "root.default"
    # Root has no absolute* fields: it is the whole cluster, so relative == absolute.
    assert (root.absolute_capacity, root.absolute_used_capacity) == (100.0, 37.5)
    assert root.state == "RUNNING"


def test_used_and_pending_resources_from_default_partition() -> None:
    usage = {
        "resourceUsagesByPartition": [
            {"partitionName": "gpu", "used": {"memory": 9, "vCores": 9}, "pending": {"memory": 9}},
            {
                "partitionName": "",
                "used": {"memory": 1024, "vCores": 1},
                "pending": {"memory": 2048, "vCores": 2},
            },
        ]
    }
    with_total = leaf("a", resourcesUsed={"memory": 3072, "vCores": 3}, resources=usage)
    without_total = leaf("b", resources=usage)
    del without_total["resourcesUsed"]
    queues = _queues(scheduler_json([with_total, without_total]))
    assert queues["root.a"].used == Resources(vcores=3, memory_mb=3072)
    assert queues["root.a"].pending == Resources(vcores=2, memory_mb=2048)
    assert queues["root.b"].used == Resources(vcores=1, memory_mb=1024)


def test_parent_app_counts_are_sums_of_leaves() -> None:
    tree = parent(
        "a",
        [
            leaf("a1", numActiveApplications=2, numPendingApplications=1),
            leaf("a2", numActiveApplications=1, numPendingApplications=4),
        ],
    )
    queues = _queues(scheduler_json([tree]))
    a = queues["root.a"]
    assert (a.num_active_apps, a.num_pending_apps) == (3, 5)
    assert (queues["root"].num_active_apps, queues["root"].num_pending_apps) == (3, 5)


def test_weight_and_mode_defaults() -> None:
    queues = _queues(scheduler_json([leaf("w", weight=3.0, mode="weight"), leaf("p")]))
    assert (queues["root.w"].weight, queues["root.w"].mode) == (3.0, "weight")
    assert (queues["root.p"].weight, queues["root.p"].mode) == (-1.0, "percentage")


def test_non_capacity_scheduler_has_no_queues() -> None:
    body = {"scheduler": {"schedulerInfo": {"type": "fifoScheduler", "capacity": 1.0}}}
    info = wire.parse(wire.SchedulerEnvelope, body).scheduler.schedulerInfo
    assert mapping.queues(info) == ()


def test_running_app_record() -> None:
    record = mapping.app_record(wire.parse(wire.AppEnvelope, {"app": app_json()}).app)
    assert record.tags == ("sidecar", "deadline-42")
    assert record.allocated == Resources(vcores=2, memory_mb=2048)
    assert (record.submitted_ms, record.launched_ms, record.finished_ms) == (
        1476912700000,
        1476912701000,
        None,
    )
    assert not record.is_finished


def test_finished_app_minus_one_becomes_zero() -> None:
    record = mapping.app_record(wire.parse(wire.AppEnvelope, {"app": finished_app_json()}).app)
    assert record.allocated == Resources(vcores=0, memory_mb=0)
    assert record.running_containers == 0
    assert record.tags == ()
    assert record.finished_ms == 1476912760000
    assert record.is_finished


def test_split_tags_ignores_blanks() -> None:
    assert mapping.split_tags("a, b,,c ") == ("a", "b", "c")
    assert mapping.split_tags("") == ()


def test_node_capability_from_used_plus_available_or_total() -> None:
    plain = mapping.node_state(wire.NodeInfoWire.model_validate(node_json()))
    assert plain.capability == Resources(vcores=8, memory_mb=4096)
    assert plain.used == Resources(vcores=2, memory_mb=2048)
    total = node_json(totalResource={"memory": 6144, "vCores": 4}, nodeLabels=["x", "y"])
    node = mapping.node_state(wire.NodeInfoWire.model_validate(total))
    assert (node.capability, node.labels) == (Resources(vcores=4, memory_mb=6144), ("x", "y"))


def test_cluster_info_and_metrics() -> None:
    info = mapping.cluster_info(wire.parse(wire.ClusterInfoEnvelope, CLUSTER_INFO).clusterInfo)
    assert (info.cluster_id, info.ha_state, info.rm_version) == (1476912658570, "ACTIVE", "3.5.0")
    metrics = mapping.cluster_metrics(
        wire.parse(wire.ClusterMetricsEnvelope, CLUSTER_METRICS).clusterMetrics
    )
    assert metrics.total == Resources(vcores=16, memory_mb=8192)
    assert metrics.allocated == Resources(vcores=3, memory_mb=3072)
    assert metrics.available == Resources(vcores=13, memory_mb=5120)
    assert metrics.pending == Resources(vcores=1, memory_mb=1024)
    assert (metrics.containers_pending, metrics.active_nodes, metrics.total_nodes) == (1, 2, 2)


def test_the_apps_node_label_expression_is_its_partition() -> None:
    base = {
        "id": "application_1_0001",
        "user": "u",
        "name": "n",
        "queue": "root.deadline",
        "state": "RUNNING",
        "finalStatus": "UNDEFINED",
        "applicationType": "YARN",
    }
    labelled = mapping.app_record(
        wire.AppInfoWire.model_validate({**base, "appNodeLabelExpression": "fast"})
    )
    assert labelled.node_label == "fast"
    assert mapping.app_record(wire.AppInfoWire.model_validate(base)).node_label == ""


# --- queue ACLs (GET /scheduler's queueAcls) ---------------------------------------------------

ACL_KEY = "yarn.scheduler.capacity.{}.acl_{}"


def _acl_conf(body: dict[str, Any]) -> dict[str, str] | None:
    info = wire.parse(wire.SchedulerEnvelope, body).scheduler.schedulerInfo
    return mapping.queue_acl_conf(info)


def test_queue_acls_of_a_file_store_rm_read_as_configuration() -> None:
    # Hadoop 3.5.0, yarn.acl.enable true, file store, capacity-scheduler.xml setting root's
    # submit ACL " ", its administer ACL "yarn-sidecar admins", deadline's "alice,bob deadliners"
    # and etl's "*" (the other ACLs unset: " " below root)
    conf = _acl_conf(recorded("scheduler_acls_file_store.json"))
    assert conf is not None
    assert conf[ACL_KEY.format("root", "submit_applications")] == " "
    assert conf[ACL_KEY.format("root", "administer_queue")] == "yarn-sidecar admins"
    assert conf[ACL_KEY.format("root.deadline", "submit_applications")] == "alice,bob deadliners"
    assert conf[ACL_KEY.format("root.etl", "submit_applications")] == "*"
    assert conf[ACL_KEY.format("root.adhoc", "administer_queue")] == " "
    # APPLICATION_MAX_PRIORITY lets no one into a queue: not carried over
    assert not any("priority" in key.lower() for key in conf)
    children = conf["yarn.scheduler.capacity.root.queues"].split(",")
    assert sorted(children) == ["adhoc", "deadline", "default", "etl"]
    # the same questions the RM asks, answered from what it reported
    for user, queue, access in [
        ("alice", "root.deadline", queue_acl.Access.ALLOWED),
        ("mallory", "deadline", queue_acl.Access.UNKNOWN),  # groups deadliners, admins
        ("mallory", "root.etl", queue_acl.Access.ALLOWED),
        ("yarn-sidecar", "root.adhoc", queue_acl.Access.ALLOWED),  # administers root
    ]:
        verdict = queue_acl.submit_access(user, queue, acl_enable="true", scheduler_conf=conf)
        assert verdict.access is access, (user, queue, verdict.reason)


def test_queue_acls_without_queue_path_and_an_rm_reporting_none() -> None:
    # 3.3-style tree (no queuePath): paths built from the names
    acls = {"queueAcl": [{"accessType": "SUBMIT_APP", "accessControlList": "bob"}]}
    body = scheduler_json([parent("a", [leaf("a1", queueAcls=acls)])])
    assert _acl_conf(body) == {
        "yarn.scheduler.capacity.root.queues": "a",
        "yarn.scheduler.capacity.root.a.queues": "a1",
        ACL_KEY.format("root.a.a1", "submit_applications"): "bob",
    }
    # no queue reports its ACLs: None, so the caller reads the mutable store instead
    assert _acl_conf(scheduler_json([leaf("b")])) is None
