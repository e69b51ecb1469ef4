"""Immutable snapshots of ResourceManager state (the sidecar's view of YARN).

These mirror what the RM REST API reports (``docs/yarn.md`` sections 3.1 to 3.7) in a
shape the policies can consume without knowing about JSON or Jersey quirks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def leaf_name(queue: str) -> str:
    """A queue's leaf name (``deadline`` of ``root.deadline``)."""
    return queue.rsplit(".", 1)[-1]


def queue_names(queue: str) -> tuple[str, ...]:
    """The names an application row may give ``queue``: the RM reports an app's queue by its leaf
    name or by its full path, depending on the version; configuration and jobs use the path."""
    leaf = leaf_name(queue)
    return (queue,) if leaf == queue else (queue, leaf)


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of the two resources YARN schedules by default."""

    vcores: int = 0
    memory_mb: int = 0


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """``GET /ws/v1/cluster/info``: identity and HA state of one RM."""

    cluster_id: int
    started_on_ms: int
    state: str
    ha_state: str
    rm_version: str
    hadoop_version: str


@dataclass(frozen=True, slots=True)
class ClusterMetrics:
    """``GET /ws/v1/cluster/metrics``: cluster-wide totals."""

    apps_submitted: int
    apps_completed: int
    apps_pending: int
    apps_running: int
    total: Resources
    allocated: Resources
    available: Resources
    pending: Resources
    containers_allocated: int
    containers_pending: int
    active_nodes: int
    total_nodes: int


@dataclass(frozen=True, slots=True)
class QueueState:
    """One CapacityScheduler queue as the RM reports it in ``/ws/v1/cluster/scheduler``.

    Percentages are as the RM reports them: ``capacity``/``max_capacity`` relative to the parent,
    ``absolute_*`` relative to the whole cluster, all in 0..100.
    """

    path: str
    name: str
    parent: str | None
    is_leaf: bool
    state: str
    capacity: float
    max_capacity: float
    used_capacity: float
    absolute_capacity: float
    absolute_max_capacity: float
    absolute_used_capacity: float
    used: Resources
    pending: Resources
    num_applications: int
    num_active_apps: int
    num_pending_apps: int
    pending_containers: int
    allocated_containers: int
    weight: float = -1.0
    mode: str = "percentage"


@dataclass(frozen=True, slots=True)
class AppRecord:
    """One YARN application (``AppInfo``). Finished apps report ``-1`` allocations as 0 here."""

    app_id: str
    user: str
    queue: str
    name: str
    app_type: str
    tags: tuple[str, ...]
    state: str
    final_status: str
    progress: float
    submitted_ms: int | None
    started_ms: int | None
    launched_ms: int | None
    finished_ms: int | None
    elapsed_ms: int
    allocated: Resources
    vcore_seconds: int
    memory_seconds: int
    running_containers: int
    priority: int
    diagnostics: str = ""
    # The node label of the partition the app asked for ("" : the default partition).
    node_label: str = ""

    @property
    def is_finished(self) -> bool:
        """True once the RM has moved the app to a final state."""
        return self.state in FINAL_APP_STATES


FINAL_APP_STATES = frozenset({"FINISHED", "FAILED", "KILLED"})
# Accepted by the RM but its ApplicationMaster not yet running: an app YARN has not started.
UNSTARTED_APP_STATES = frozenset({"NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED"})

# How long after FINISHED a real RM keeps accruing an app's resource-seconds (its AM container is
# still exiting): long enough for that to be accounted, short enough to keep the query cheap. The
# poller re-reads finished apps this far back; the admission rounds wait this long for outcomes.
FINISHED_GRACE_MS = 120_000


@dataclass(frozen=True, slots=True)
class NodeState:
    """One NodeManager (``NodeInfo``)."""

    node_id: str
    host: str
    rack: str
    state: str
    labels: tuple[str, ...]
    capability: Resources
    used: Resources
    num_containers: int
    health_report: str = ""


@dataclass(frozen=True, slots=True)
class LiveContainer:
    """One container the RM lists for an application attempt (it lists running ones only)."""

    container_id: str
    elapsed_ms: int  # the RM's own clock: now (or its finish) less its start


TASK_CONTAINERS = "task_containers"
"""The run field by which a job says each of its tasks runs in a container of its own, which
ends with it: the RM's container list then times its first wave (``app.jobs.first_wave``), and
Promise ends a miss there and prices one up to there (``WaitingJob.timed``)."""


def times_tasks(run: Any) -> bool:
    """Whether a job's stored run sets ``TASK_CONTAINERS`` true (the run is JSON: anything)."""
    return isinstance(run, dict) and run.get(TASK_CONTAINERS) is True


@dataclass(frozen=True, slots=True)
class AttemptContainers:
    """An application's current attempt: its ApplicationMaster's container and the live ones."""

    attempt_id: str
    am_container_id: str
    containers: tuple[LiveContainer, ...]


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything one poll saw, at one instant (``taken_ms``, epoch milliseconds)."""

    taken_ms: int
    rm_url: str
    info: ClusterInfo
    metrics: ClusterMetrics
    queues: tuple[QueueState, ...]
    apps: tuple[AppRecord, ...]
    nodes: tuple[NodeState, ...]
    scheduler_type: str = "capacityScheduler"
    # False when this poll did not list the nodes (``nodes`` is empty; ``metrics`` has totals).
    nodes_read: bool = True
    extras: dict[str, str] = field(default_factory=dict)

    def leaf_queues(self) -> tuple[QueueState, ...]:
        """The queues applications can be submitted to."""
        return tuple(q for q in self.queues if q.is_leaf)


PREEMPTION_POLICY = "ProportionalCapacityPreemptionPolicy"


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    """What the RM's configuration says about preemption and the smallest container.

    ``None`` means the RM did not say (unreadable configuration): the controller then assumes no
    preemption and YARN's default minimum allocation. ``error`` says why it could not be read.
    """

    monitor_enabled: bool | None = None
    monitor_policies: tuple[str, ...] = ()
    observe_only: bool = False
    max_wait_before_kill_ms: int | None = None
    monitoring_interval_ms: int | None = None
    min_allocation_mb: int | None = None
    min_allocation_vcores: int | None = None
    error: str | None = None

    @property
    def preempts(self) -> bool:
        """True when the scheduling monitor runs the capacity preemption policy for real."""
        capacity_policy = any(p.endswith(PREEMPTION_POLICY) for p in self.monitor_policies)
        return bool(self.monitor_enabled) and capacity_policy and not self.observe_only

    def to_dict(self) -> dict[str, object]:
        """JSON form for the decision record."""
        return {
            "preempts": self.preempts,
            "monitor_enabled": self.monitor_enabled,
            "monitor_policies": list(self.monitor_policies),
            "observe_only": self.observe_only,
            "max_wait_before_kill_ms": self.max_wait_before_kill_ms,
            "monitoring_interval_ms": self.monitoring_interval_ms,
            "min_allocation_mb": self.min_allocation_mb,
            "min_allocation_vcores": self.min_allocation_vcores,
            "error": self.error,
        }
