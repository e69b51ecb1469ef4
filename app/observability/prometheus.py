"""Prometheus metrics of the sidecar with ``prometheus_client``, named after the peers' conventions
(Kueue's ``kueue_cluster_queue_*``, Volcano's ``volcano_queue_*``, Armada's ``armada_scheduler_*``)
under the ``yarn_sidecar_`` prefix: base units in the name (``_seconds``, ``_percent``), ``_total``
for counters, one ``queue`` label carrying the full CapacityScheduler path.

Two sources, each at its edge:

* the RM client tells ``RMRequestMetrics`` about every exchange (latency, errors by endpoint);
* ``SidecarCollector`` reads the recorded history at scrape time (``app.db.observe_repo``): queue
  capacities, policy numbers, pushes, admissions, jobs, estimator, polls. Counters derived from
  append-only tables (decisions, pushes, polls) only grow, as Prometheus expects, and survive a
  restart because they are the database's own counts; rows retention prunes stay counted through
  the tallies it keeps of them (``observe_repo.retire``). The per-queue series are those of the
  queues the latest successful poll reported: a queue deleted on the RM leaves ``/metrics`` at
  the next poll (Prometheus marks its series stale), an idle one stays with its zeros.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session, sessionmaker

import app as app_pkg
from app.db import observe_repo
from app.db.observe_repo import POLL_BUCKETS, Snapshot

P = "yarn_sidecar_"
RM_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class RMRequestMetrics:
    """Latency and errors of the RM REST calls, fed by ``RMClient(observer=...)``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.latency = Histogram(
            P + "rm_request_duration_seconds",
            "Time of one HTTP exchange with a ResourceManager, by method and endpoint.",
            ["method", "endpoint"],
            buckets=RM_BUCKETS,
            registry=registry,
        )
        self.failovers = Counter(
            P + "rm_failovers",
            "Times another ResourceManager than the last active one answered as active.",
            registry=registry,
        )
        self.errors = Counter(
            P + "rm_request_errors",
            "Failed exchanges with a ResourceManager by endpoint and kind "
            "(connect, transport, standby, server, rejected, not_found).",
            ["method", "endpoint", "kind"],
            registry=registry,
        )

    def failover(self, before: str, after: str) -> None:
        """The RM client's ``on_failover``: another RM than the last active one answered."""
        self.failovers.inc()

    def observe(self, method: str, endpoint: str, seconds: float, error: str | None) -> None:
        """The ``RequestObserver`` the RM client calls after each exchange."""
        self.latency.labels(method, endpoint).observe(seconds)
        if error is not None:
            self.errors.labels(method, endpoint, error).inc()


PolicyInfo = Callable[[], tuple[str, str]]


class SidecarCollector(Collector):
    """Everything that is a fact of the recorded history, read at each scrape."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        cluster_name: str,
        *,
        policy_info: PolicyInfo | None = None,
        leader: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sessions = sessions
        self._cluster = cluster_name
        self._policy_info = policy_info
        self._leader = leader
        self._clock = clock

    def describe(self) -> Iterable[Metric]:
        """Nothing up front: registering must not query a database that may not be migrated."""
        return []

    def collect(self) -> Iterable[Metric]:
        with self._sessions() as session:
            snap = observe_repo.snapshot(session, self._cluster)
        yield from self._process()
        yield from _queue_metrics(snap)
        yield from _control_metrics(snap)
        yield from _admission_metrics(snap)
        yield from _unstarted_metrics(snap, self._clock())
        yield from _poll_metrics(snap, self._clock())
        yield from _history_metrics(snap)

    def _process(self) -> Iterable[Metric]:
        info = GaugeMetricFamily(
            P + "build_info", "The sidecar's version (always 1).", labels=["version"]
        )
        info.add_metric([app_pkg.__version__], 1)
        yield info
        leader = GaugeMetricFamily(
            P + "leader", "1 when this replica runs the control loops (the leader), else 0."
        )
        leader.add_metric([], 1.0 if self._leader() else 0.0)
        yield leader
        if self._policy_info is not None:
            policy, mode = self._policy_info()
            active = GaugeMetricFamily(
                P + "policy_info",
                "The active queue policy and mode (always 1).",
                labels=["policy", "mode"],
            )
            active.add_metric([policy, mode], 1)
            yield active


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(P + name, doc, labels=labels)


_QUEUE_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("queue_configured_capacity_percent", "configured", "Capacity the RM holds, % of the parent."),
    (
        "queue_desired_capacity_percent",
        "desired",
        "Capacity the policy asked for at its last decision (before step limits), % of parent.",
    ),
    (
        "queue_pushed_capacity_percent",
        "pushed",
        "Capacity the sidecar last wrote to the RM (or accepted as baseline), % of the parent.",
    ),
    ("queue_policy_weight", "weight", "The queue's weight in the active policy's last decision."),
    (
        "queue_measured_share",
        "share",
        "The queue's measured dominant share of the cluster over the last interval (0-1).",
    ),
    ("queue_ltrf_debt_vcore_seconds", "debt", "LTRF ledger debt (vcore-seconds owed to it)."),
    ("queue_fawkes_discrimination", "discrimination", "Fawkes discrimination D_i of the queue."),
    ("queue_used_capacity_percent", "used_capacity", "% of the queue's own capacity in use."),
    ("queue_absolute_used_capacity_percent", "absolute_used", "% of the cluster the queue uses."),
    ("queue_used_vcores", "used_vcores", "Vcores allocated to the queue."),
    ("queue_pending_containers", "pending_containers", "Containers asked for, not allocated."),
    ("queue_running_apps", "running_apps", "Active applications in the queue."),
    ("queue_pending_apps", "pending_apps", "Applications waiting to be activated."),
)


def _queue_metrics(snap: Snapshot) -> Iterable[Metric]:
    for name, attr, doc in _QUEUE_GAUGES:
        family = _gauge(name, doc, ["queue"])
        for q in snap.queues:
            value = getattr(q, attr)
            if value is not None:
                family.add_metric([q.path], float(value))
        yield family
    drift = _gauge(
        "queue_drift",
        "1 when the queue's live configuration differs from our last push.",
        ["queue"],
    )
    for q in snap.queues:
        if q.is_leaf:
            drift.add_metric([q.path], 1.0 if q.drift else 0.0)
    yield drift
    apps = _gauge(
        "applications", "YARN applications the RM lists now (as last polled), by state.", ["state"]
    )
    for state, n in sorted(snap.apps_by_state.items()):
        apps.add_metric([state], n)
    yield apps


def _counter(name: str, doc: str, labels: list[str], values: dict[Any, int]) -> Metric:
    family = CounterMetricFamily(P + name, doc, labels=labels)
    for key, n in sorted(values.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key], n)
    return family


# Statuses a row leaves once a later tick settles it: counted by a gauge, not a counter, whose
# series would go down when the row moves on (Prometheus reads any decrease as a reset).
UNSETTLED_DECISIONS = frozenset({"pushing", "pushed_unverified"})
UNSETTLED_PUSHES = frozenset({"pending", "pushing"})


def _split(values: dict[str, int], unsettled: frozenset[str]) -> tuple[dict[str, int], int]:
    """``values`` without the ``unsettled`` statuses, and how many rows those hold."""
    settled = {k: n for k, n in values.items() if k not in unsettled}
    return settled, sum(n for k, n in values.items() if k in unsettled)


def _control_metrics(snap: Snapshot) -> Iterable[Metric]:
    decisions, unsettled = _split(snap.control_by_status, UNSETTLED_DECISIONS)
    yield _counter(
        "controller_decisions",
        "Controller ticks recorded, by status (pushed, advised, no_change, drift, rejected, ...); "
        "a tick whose push is not settled yet counts once it is.",
        ["status"],
        decisions,
    )
    pending = _gauge(
        "controller_decisions_unsettled",
        "Controller ticks whose push a later tick has still to settle (pushing, "
        "pushed_unverified).",
        [],
    )
    pending.add_metric([], unsettled)
    yield pending
    pushes, in_flight = _split(snap.pushes_by_outcome, UNSETTLED_PUSHES)
    yield _counter(
        "config_pushes",
        "Scheduler-configuration PUTs, by outcome once known (applied, rejected, reverted, "
        "not_applied, ...).",
        ["outcome"],
        pushes,
    )
    flight = _gauge(
        "config_pushes_pending",
        "Scheduler-configuration PUTs whose outcome is not known yet (in flight, or sent and not "
        "answered: a later tick settles them).",
        [],
    )
    flight.add_metric([], in_flight)
    yield flight
    last = _gauge("last_decision_timestamp_seconds", "When the controller last ran a policy.", [])
    if snap.last_decision_ms is not None:
        last.add_metric([], snap.last_decision_ms / 1000)
    yield last


def _admission_metrics(snap: Snapshot) -> Iterable[Metric]:
    yield _counter(
        "admission_decisions",
        "Job decisions and lifecycle steps by action (admit, queue, drop, kill, submit, ...) and "
        "reason (numbers replaced by N).",
        ["action", "reason"],
        snap.admission,
    )
    jobs = _gauge("jobs", "Deadline jobs by sidecar state.", ["state"])
    for state, n in sorted(snap.jobs_by_state.items()):
        jobs.add_metric([state], n)
    yield jobs
    yield _counter(
        "job_deadlines",
        "Finished deadline jobs by outcome (met, missed).",
        ["outcome"],
        snap.deadlines,
    )
    est = snap.estimator
    fraction = _gauge(
        "estimator_fraction",
        "The Justice/PYTHIA estimator's CPU fraction (min, max = CPUFrac, last).",
        ["kind"],
    )
    for kind in ("min", "max", "last"):
        value = est.get(f"{kind}_frac")
        if isinstance(value, int | float):
            fraction.add_metric([kind], float(value))
    yield fraction
    error = _gauge(
        "estimator_fraction_error",
        "The estimator's error on finished jobs, needed minus granted CPU fraction (its ETA "
        "error: > 0 means jobs got too few CPUs to meet the deadline); mean and EWMA.",
        ["kind"],
    )
    completed = est.get("completed")
    if isinstance(completed, int) and completed > 0:
        error.add_metric(["mean"], float(est.get("error_sum", 0.0)) / completed)
    ewma = est.get("error_ewma")
    if isinstance(ewma, int | float):
        error.add_metric(["ewma"], float(ewma))
    yield error
    learned = CounterMetricFamily(P + "estimator_observations", "Finished jobs learned from.")
    learned.add_metric([], float(completed) if isinstance(completed, int) else 0.0)
    yield learned


def _unstarted_metrics(snap: Snapshot, now_s: float) -> Iterable[Metric]:
    unstarted = _gauge(
        "jobs_unstarted",
        "Deadline jobs submitted to YARN that it has not started yet (no ApplicationMaster "
        "running): admission books only what YARN can give, so these should start within a "
        "poll interval.",
        [],
    )
    unstarted.add_metric([], snap.unstarted_jobs)
    yield unstarted
    waited = _gauge(
        "jobs_unstarted_oldest_seconds",
        "Seconds the longest-waiting of them has waited since its submission to YARN; 0 when "
        "none waits.",
        [],
    )
    since = snap.unstarted_since_ms
    waited.add_metric([], 0.0 if since is None else max(0.0, now_s - since / 1000))
    yield waited


def _history_metrics(snap: Snapshot) -> Iterable[Metric]:
    jobs = _gauge(
        "mapreduce_history_jobs",
        "Finished MapReduce jobs the history collector asked the JobHistory server about, by "
        "status (ok, retry, missing).",
        ["status"],
    )
    for status, n in sorted(snap.history_jobs.items()):
        jobs.add_metric([status], float(n))
    yield jobs
    active = _gauge(
        "guard_active", "1 while the interference guard holds batch queues' maxima down.", []
    )
    active.add_metric([], 1.0 if snap.guard_caps else 0.0)
    yield active
    caps = _gauge(
        "guard_max_capacity_percent",
        "The interference guard's maximum-capacity for a batch queue, % of the parent.",
        ["queue"],
    )
    for queue, cap in sorted(snap.guard_caps.items()):
        caps.add_metric([queue], cap)
    yield caps
    yield _counter(
        "placement_decisions",
        "HybridMR placement of observed jobs by status (applied: moved to the labelled queue, "
        "advised, decided: stays, refused: its owner may not submit to the queue, failed).",
        ["status"],
        snap.placements_by_status,
    )


def _poll_metrics(snap: Snapshot, now_s: float) -> Iterable[Metric]:
    yield _counter("polls", "RM polls by outcome (ok, error).", ["outcome"], snap.polls_by_outcome)
    hist = HistogramMetricFamily(P + "poll_duration_seconds", "Duration of one RM poll.")
    if snap.poll_buckets:
        buckets = [(str(b), float(n)) for b, n in zip(POLL_BUCKETS, snap.poll_buckets, strict=True)]
        buckets.append(("+Inf", float(snap.poll_count)))
        hist.add_metric([], buckets, sum_value=snap.poll_sum_s)
    yield hist
    age = _gauge(
        "last_good_poll_age_seconds",
        "Seconds since the last successful RM poll (stale poller).",
        [],
    )
    if snap.last_good_poll_ms is not None:
        age.add_metric([], max(0.0, now_s - snap.last_good_poll_ms / 1000))
    yield age
