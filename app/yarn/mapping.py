"""Pure mapping from the RM's wire models to the domain snapshot (``docs/yarn.md`` sections 3.1-3.7,
13).

No I/O and no clock: every function is a total function of its wire input. Where the RM's shape
depends on the version (``queuePath`` only from 3.4.0, ``queueType`` only from 3.4.0, leaf counters
only on leaves) the fallbacks are written out next to the field they concern.
"""

from __future__ import annotations

from collections.abc import Iterator

from app.domain import queue_acl
from app.domain.model import (
    AppRecord,
    AttemptContainers,
    ClusterInfo,
    ClusterMetrics,
    LiveContainer,
    NodeState,
    QueueState,
    Resources,
    SchedulerSettings,
)
from app.yarn.wire import (
    AppAttemptWire,
    AppInfoWire,
    ClusterInfoWire,
    ClusterMetricsWire,
    ContainersEnvelope,
    NodeInfoWire,
    PartitionUsage,
    QueueWire,
    ResourceInfo,
    SchedulerInfoWire,
)

LEAF_QUEUE_TYPE = "capacitySchedulerLeafQueueInfo"
DEFAULT_PARTITION = ""


def cluster_info(wire: ClusterInfoWire) -> ClusterInfo:
    """``clusterInfo`` -> ``ClusterInfo``."""
    return ClusterInfo(
        cluster_id=wire.id,
        started_on_ms=wire.startedOn,
        state=wire.state,
        ha_state=wire.haState,
        rm_version=wire.resourceManagerVersion,
        hadoop_version=wire.hadoopVersion,
    )


def cluster_metrics(wire: ClusterMetricsWire) -> ClusterMetrics:
    """``clusterMetrics`` -> ``ClusterMetrics``."""
    return ClusterMetrics(
        apps_submitted=wire.appsSubmitted,
        apps_completed=wire.appsCompleted,
        apps_pending=wire.appsPending,
        apps_running=wire.appsRunning,
        total=Resources(vcores=wire.totalVirtualCores, memory_mb=wire.totalMB),
        allocated=Resources(vcores=wire.allocatedVirtualCores, memory_mb=wire.allocatedMB),
        available=Resources(vcores=wire.availableVirtualCores, memory_mb=wire.availableMB),
        pending=Resources(vcores=wire.pendingVirtualCores, memory_mb=wire.pendingMB),
        containers_allocated=wire.containersAllocated,
        containers_pending=wire.containersPending,
        active_nodes=wire.activeNodes,
        total_nodes=wire.totalNodes,
    )


# --- queues -----------------------------------------------------------------------------------


def queues(scheduler: SchedulerInfoWire) -> tuple[QueueState, ...]:
    """Flatten the CapacityScheduler tree, root first, depth-first in the RM's child order.

    A scheduler without a queue tree (FIFO, Fair) yields no queues.
    """
    if not scheduler.queueName:
        return ()
    return tuple(_walk(scheduler, parent=None))


def _walk(queue: QueueWire, parent: str | None) -> Iterator[QueueState]:
    path = queue_path(queue, parent)
    children = queue.children()
    yield _queue_state(queue, path, parent, children)
    for child in children:
        yield from _walk(child, path)


# The RM's names of the two ACLs that let a user into a queue, and their configuration keys.
_ACL_TYPES = {"SUBMIT_APP": "acl_submit_applications", "ADMINISTER_QUEUE": "acl_administer_queue"}


def queue_acl_conf(scheduler: SchedulerInfoWire) -> dict[str, str] | None:
    """The queue ACLs the RM reports in ``GET /scheduler`` (``queueAcls`` of each queue), as the
    scheduler-configuration properties ``queue_acl.submit_access`` reads: each queue's
    ``acl_submit_applications`` and ``acl_administer_queue`` and its ``queues`` list. These are
    the running scheduler's ACLs whatever store configured them (a file-based store has no
    ``GET /scheduler-conf``). None when no queue reports its ACLs (an RM that does not)."""
    if not scheduler.queueName:
        return None
    conf: dict[str, str] = {}
    reported = False
    todo: list[tuple[QueueWire, str | None]] = [(scheduler, None)]
    while todo:
        queue, parent = todo.pop()
        path = queue_path(queue, parent)
        children = queue.children()
        if children:
            names = ",".join(child.queueName for child in children)
            conf[f"{queue_acl.CS_PREFIX}{path}.queues"] = names
        for entry in queue.queueAcls.queueAcl if queue.queueAcls is not None else []:
            kind = _ACL_TYPES.get(entry.accessType)
            if kind is not None:
                conf[f"{queue_acl.CS_PREFIX}{path}.{kind}"] = entry.accessControlList
                reported = True
        todo.extend((child, path) for child in children)
    return conf if reported else None


def queue_path(queue: QueueWire, parent: str | None) -> str:
    """``queuePath`` (3.4+) when present, else the parent's path plus the short name."""
    if queue.queuePath:
        return queue.queuePath
    return queue.queueName if parent is None else f"{parent}.{queue.queueName}"


def is_leaf(queue: QueueWire) -> bool:
    """``queueType`` (3.4+) decides; else the DAO ``type``; else having no children."""
    if queue.queueType:
        return queue.queueType == "leaf"
    if queue.type and queue.type != "capacityScheduler":
        return queue.type == LEAF_QUEUE_TYPE
    return not queue.children()


def _queue_state(
    queue: QueueWire, path: str, parent: str | None, children: list[QueueWire]
) -> QueueState:
    # Root reports no absolute* fields: relative to the cluster it is its own absolute value.
    active, pending_apps = _app_counts(queue)
    return QueueState(
        path=path,
        name=queue.queueName,
        parent=parent,
        is_leaf=is_leaf(queue),
        state=queue.state or "RUNNING",
        capacity=queue.capacity,
        max_capacity=queue.maxCapacity,
        used_capacity=queue.usedCapacity,
        absolute_capacity=_or(queue.absoluteCapacity, queue.capacity),
        absolute_max_capacity=_or(queue.absoluteMaxCapacity, queue.maxCapacity),
        absolute_used_capacity=_or(queue.absoluteUsedCapacity, queue.usedCapacity),
        used=_used(queue),
        pending=_resources(_default_partition(queue).pending),
        num_applications=queue.numApplications,
        num_active_apps=active,
        num_pending_apps=pending_apps,
        pending_containers=queue.pendingContainers,
        allocated_containers=queue.allocatedContainers,
        weight=queue.weight,
        mode=queue.mode or "percentage",
    )


def _or(value: float | None, fallback: float) -> float:
    return fallback if value is None else value


def _app_counts(queue: QueueWire) -> tuple[int, int]:
    """Leaves report active/pending apps; a parent's are the sums over its subtree."""
    if queue.numActiveApplications is not None or queue.numPendingApplications is not None:
        return queue.numActiveApplications or 0, queue.numPendingApplications or 0
    active = pending = 0
    for child in queue.children():
        child_active, child_pending = _app_counts(child)
        active += child_active
        pending += child_pending
    return active, pending


def _default_partition(queue: QueueWire) -> PartitionUsage:
    """Usage of the default partition (``partitionName == ""``); zeros when not reported."""
    if queue.resources is not None:
        for usage in queue.resources.resourceUsagesByPartition:
            if usage.partitionName == DEFAULT_PARTITION:
                return usage
    return PartitionUsage()


def _used(queue: QueueWire) -> Resources:
    """``resourcesUsed`` covers all partitions; fall back to the default partition's ``used``."""
    if queue.resourcesUsed is not None:
        return _resources(queue.resourcesUsed)
    return _resources(_default_partition(queue).used)


def _resources(wire: ResourceInfo) -> Resources:
    return Resources(vcores=max(wire.vCores, 0), memory_mb=max(wire.memory, 0))


# --- apps, nodes ------------------------------------------------------------------------------


def attempt_containers(attempt: AppAttemptWire, listed: ContainersEnvelope) -> AttemptContainers:
    """An attempt and its live containers -> ``AttemptContainers``."""
    return AttemptContainers(
        attempt_id=attempt.appAttemptId,
        am_container_id=attempt.containerId,
        containers=tuple(
            LiveContainer(c.containerId, max(c.elapsedTime, 0)) for c in listed.container
        ),
    )


def app_record(wire: AppInfoWire) -> AppRecord:
    """``AppInfo`` -> ``AppRecord``.

    ``startedTime`` is when the RM accepted the submission (``RMAppImpl.startTime``), so it is both
    the submit and the start instant; ``launchTime`` is the AM launch. ``0`` means "not yet" and
    finished apps' ``-1`` allocations become 0.
    """
    return AppRecord(
        app_id=wire.id,
        user=wire.user,
        queue=wire.queue,
        name=wire.name,
        app_type=wire.applicationType,
        tags=split_tags(wire.applicationTags),
        state=wire.state,
        final_status=wire.finalStatus,
        progress=wire.progress,
        submitted_ms=instant(wire.startedTime),
        started_ms=instant(wire.startedTime),
        launched_ms=instant(wire.launchTime),
        finished_ms=instant(wire.finishedTime),
        elapsed_ms=max(wire.elapsedTime, 0),
        allocated=Resources(
            vcores=max(wire.allocatedVCores, 0), memory_mb=max(wire.allocatedMB, 0)
        ),
        vcore_seconds=max(wire.vcoreSeconds, 0),
        memory_seconds=max(wire.memorySeconds, 0),
        running_containers=max(wire.runningContainers, 0),
        priority=wire.priority,
        diagnostics=wire.diagnostics,
        node_label=wire.appNodeLabelExpression,
    )


def split_tags(tags: str) -> tuple[str, ...]:
    """``applicationTags`` is one comma-joined string; empty pieces are dropped."""
    return tuple(tag.strip() for tag in tags.split(",") if tag.strip())


def instant(ms: int) -> int | None:
    """An epoch-ms instant as Hadoop reports it; ``0`` or ``-1`` mean "not yet"."""
    return ms if ms > 0 else None


def node_state(wire: NodeInfoWire) -> NodeState:
    """``NodeInfo`` -> ``NodeState``; capability is ``totalResource`` or used + available."""
    if wire.totalResource is not None:
        capability = _resources(wire.totalResource)
    else:
        capability = Resources(
            vcores=wire.usedVirtualCores + wire.availableVirtualCores,
            memory_mb=wire.usedMemoryMB + wire.availMemoryMB,
        )
    return NodeState(
        node_id=wire.id,
        host=wire.nodeHostName,
        rack=wire.rack,
        state=wire.state,
        labels=tuple(wire.nodeLabels),
        capability=capability,
        used=Resources(vcores=wire.usedVirtualCores, memory_mb=wire.usedMemoryMB),
        num_containers=wire.numContainers,
        health_report=wire.healthReport,
    )


MONITOR_ENABLE = "yarn.resourcemanager.scheduler.monitor.enable"
MONITOR_POLICIES = "yarn.resourcemanager.scheduler.monitor.policies"
PREEMPTION_PREFIX = "yarn.resourcemanager.monitor.capacity.preemption."
MIN_ALLOCATION_MB = "yarn.scheduler.minimum-allocation-mb"
MIN_ALLOCATION_VCORES = "yarn.scheduler.minimum-allocation-vcores"
SCHEDULER_SETTING_KEYS = (
    MONITOR_ENABLE,
    MONITOR_POLICIES,
    f"{PREEMPTION_PREFIX}observe_only",
    f"{PREEMPTION_PREFIX}max_wait_before_kill",
    f"{PREEMPTION_PREFIX}monitoring_interval",
    MIN_ALLOCATION_MB,
    MIN_ALLOCATION_VCORES,
)


def _int(value: str | None) -> int | None:
    try:
        return int(value.strip()) if value is not None else None
    except ValueError:
        return None


def scheduler_settings(conf: dict[str, str]) -> SchedulerSettings:
    """The RM's ``/conf`` values of ``SCHEDULER_SETTING_KEYS`` as settings (missing: None)."""
    enabled = conf.get(MONITOR_ENABLE)
    policies = conf.get(MONITOR_POLICIES, "")
    return SchedulerSettings(
        monitor_enabled=enabled.strip().lower() == "true" if enabled is not None else None,
        monitor_policies=tuple(p.strip() for p in policies.split(",") if p.strip()),
        observe_only=conf.get(f"{PREEMPTION_PREFIX}observe_only", "").strip().lower() == "true",
        max_wait_before_kill_ms=_int(conf.get(f"{PREEMPTION_PREFIX}max_wait_before_kill")),
        monitoring_interval_ms=_int(conf.get(f"{PREEMPTION_PREFIX}monitoring_interval")),
        min_allocation_mb=_int(conf.get(MIN_ALLOCATION_MB)),
        min_allocation_vcores=_int(conf.get(MIN_ALLOCATION_VCORES)),
    )
