"""What one poll writes, at any cluster size (the poll's write path).

A poll of a large cluster lists tens of thousands of applications and a thousand NodeManagers,
almost all unchanged since the previous poll. Three rules keep the write small and its cost
independent of the database's bind-parameter limit:

* **Fixed-size statements.** Rows go out as ``executemany`` of one compiled statement in batches
  of ``BATCH`` rows, never as one INSERT whose parameter count grows with the cluster.
* **Only what changed.** ``PollMemory`` remembers, in process memory, what the previous good poll
  wrote. An app is rewritten when it is new, when a lifecycle field changed (state, queue,
  allocation, ...), when it reached a final state, or when its running counters (progress,
  elapsed time, resource-seconds) changed and its refresh slot came round: once per
  ``refresh_ms``, at a phase drawn from its id, so the refreshes of thousands of apps first seen
  together are spread evenly over the window instead of all falling on one poll. A
  not-final app that the RM stops listing gets ``gone_ms``. After a restart the memory is empty
  and the first poll writes everything once.
* **Totals per poll, raw rows on change.** Each poll appends one ``ClusterSample`` (what the
  controller and admission read); a ``NodeSample`` row is written only for a node that is new or
  differs from its previous row.
"""

from __future__ import annotations

import operator
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table, bindparam, func, insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import Application, ClusterSample, NodeSample
from app.domain.model import FINAL_APP_STATES, AppRecord, ClusterSnapshot, NodeState

# Rows per executemany call: bounded memory per statement, far below any parameter limit.
BATCH = 1000

_APPS: Table = Application.__table__  # type: ignore[assignment]
_NODES: Table = NodeSample.__table__  # type: ignore[assignment]
_TOTALS: Table = ClusterSample.__table__  # type: ignore[assignment]

AppKey = tuple[Any, ...]
NodeKey = tuple[Any, ...]


@dataclass
class PollMemory:
    """What the database holds as of the previous good poll (per process, rebuilt on restart).

    ``apps``: app id -> (lifecycle key, counters key, refresh slot of the last write).
    ``nodes``: node id -> the key of its last written row. ``primed`` once a poll committed.
    """

    apps: dict[str, tuple[AppKey, AppKey, int]] = field(default_factory=dict)
    nodes: dict[str, NodeKey] = field(default_factory=dict)
    primed: bool = False


@dataclass(frozen=True, slots=True)
class PollWrites:
    """One poll's writes, decided before the transaction; ``memory`` replaces the poller's
    memory only once they committed."""

    app_rows: list[dict[str, Any]]
    gone: list[str]
    node_rows: list[NodeState]
    memory: PollMemory
    counter_rows: list[dict[str, Any]] = field(default_factory=list)


# Where the state and the start instant sit in a lifecycle key (``_lifecycle`` below).
LIFE_STATE = 0
LIFE_STARTED = 9
LIFE_FINISHED = 11

# Attribute getters run in C: building these keys for every listed app is most of ``plan``.
_lifecycle = operator.attrgetter(
    "state",
    "final_status",
    "queue",
    "user",
    "name",
    "app_type",
    "tags",
    "priority",
    "submitted_ms",
    "started_ms",
    "launched_ms",
    "finished_ms",
    "allocated.vcores",
    "allocated.memory_mb",
    "running_containers",
    "diagnostics",
)
_counters = operator.attrgetter("progress", "elapsed_ms", "vcore_seconds", "memory_seconds")
_node_key = operator.attrgetter(
    "host",
    "rack",
    "state",
    "labels",
    "capability.vcores",
    "capability.memory_mb",
    "used.vcores",
    "used.memory_mb",
    "num_containers",
)


def plan(
    memory: PollMemory,
    cluster_id: int,
    apps: Iterable[AppRecord],
    nodes: Sequence[NodeState] | None,
    now_ms: int,
    refresh_ms: int,
    covered: Callable[[AppKey], bool] | None = None,
) -> PollWrites:
    """Decide what this poll writes (pure: no I/O).

    ``covered`` is ``None`` when ``apps`` is every app the RM lists. Otherwise the poll asked for
    part of them: ``covered(lifecycle key)`` says whether a not-final app known from before
    would have been listed if the RM still had it in that form; one that is covered and not
    listed is gone, one that is not covered stays as it was; a final app that is covered and
    not listed is forgotten. ``nodes`` is None when the poll did not list the nodes: no node
    rows, and the nodes known stay as they were."""
    prev_apps = memory.apps
    new_apps: dict[str, tuple[AppKey, AppKey, int]] = {}
    rows: list[dict[str, Any]] = []
    counter_rows: list[dict[str, Any]] = []
    refresh_ms = max(1, refresh_ms)
    for app in apps:
        if app.app_id in new_apps:
            continue  # listed twice (running and finished windows overlap): first one wins
        life: AppKey = _lifecycle(app)
        counters: AppKey = _counters(app)
        prev = prev_apps.get(app.app_id)
        slot = (now_ms + zlib.crc32(app.app_id.encode()) % refresh_ms) // refresh_ms
        if prev is None or prev[0] != life:
            rows.append(app_row(cluster_id, app, now_ms))
        elif prev[1] != counters and (app.state in FINAL_APP_STATES or slot != prev[2]):
            # Only the counters moved: a narrow UPDATE, a fraction of an upsert's parameters.
            counter_rows.append(
                {
                    "b_app_id": app.app_id,
                    "b_progress": app.progress,
                    "b_elapsed_ms": app.elapsed_ms,
                    "b_vcore_seconds": app.vcore_seconds,
                    "b_memory_seconds": app.memory_seconds,
                    "b_updated_ms": now_ms,
                }
            )
        else:
            # Unchanged, or only counters moved within the refresh slot: the stored row stays.
            counters, slot = prev[1], prev[2]
        new_apps[app.app_id] = (life, counters, slot)
    gone: list[str] = []
    for app_id, entry in prev_apps.items():
        if app_id in new_apps:
            continue
        life = entry[0]
        if covered is not None and not covered(life):
            new_apps[app_id] = entry
        elif life[0] not in FINAL_APP_STATES:
            gone.append(app_id)
        # else: a final app out of the finished window is forgotten, as the RM does
    prev_nodes = memory.nodes
    if nodes is None:
        return PollWrites(
            rows, gone, [], PollMemory(new_apps, prev_nodes, primed=True), counter_rows
        )
    new_nodes: dict[str, NodeKey] = {n.node_id: _node_key(n) for n in nodes}
    changed = [n for n in nodes if prev_nodes.get(n.node_id) != new_nodes[n.node_id]]
    memory_after = PollMemory(new_apps, new_nodes, primed=True)
    return PollWrites(rows, gone, changed, memory_after, counter_rows)


def app_row(cluster_id: int, app: AppRecord, now_ms: int) -> dict[str, Any]:
    """The ``applications`` row of one app as seen at ``now_ms`` (listed: not gone)."""
    return {
        "app_id": app.app_id,
        "cluster_id": cluster_id,
        "user": app.user,
        "queue": app.queue,
        "name": app.name,
        "app_type": app.app_type,
        "tags": "," + ",".join(app.tags) + ("," if app.tags else ""),
        "state": app.state,
        "final_status": app.final_status,
        "progress": app.progress,
        "submitted_ms": app.submitted_ms,
        "started_ms": app.started_ms,
        "launched_ms": app.launched_ms,
        "finished_ms": app.finished_ms,
        "elapsed_ms": app.elapsed_ms,
        "allocated_vcores": app.allocated.vcores,
        "allocated_mb": app.allocated.memory_mb,
        "vcore_seconds": app.vcore_seconds,
        "memory_seconds": app.memory_seconds,
        "running_containers": app.running_containers,
        "priority": app.priority,
        "diagnostics": app.diagnostics,
        "node_label": app.node_label or None,
        "first_seen_ms": now_ms,
        "updated_ms": now_ms,
        "gone_ms": None,
        "final_seen_ms": now_ms if app.state in FINAL_APP_STATES else None,
    }


def _upsert_statement(session: Session) -> Any:
    """INSERT ... ON CONFLICT (app_id) DO UPDATE of every column but the first-seen times; built
    without values so one compiled form serves every batch."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        stmt: Any = postgresql.insert(_APPS)
    elif dialect == "sqlite":
        stmt = sqlite.insert(_APPS)
    else:  # pragma: no cover
        raise NotImplementedError(f"upsert not implemented for {dialect}")
    keep = ("app_id", "first_seen_ms")
    updates = {c.name: stmt.excluded[c.name] for c in _APPS.columns if c.name not in keep}
    # The first final sighting stays (a rewrite after a restart must not make it new again).
    updates["final_seen_ms"] = func.coalesce(_APPS.c.final_seen_ms, stmt.excluded.final_seen_ms)
    return stmt.on_conflict_do_update(index_elements=["app_id"], set_=updates)


def _batches(rows: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(rows), BATCH):
        yield rows[start : start + BATCH]


def upsert_app_rows(session: Session, rows: Sequence[dict[str, Any]]) -> int:
    """Insert or refresh ``rows`` (from ``app_row``) in fixed-size batches; returns how many."""
    if not rows:
        return 0
    conn = session.connection()
    stmt = _upsert_statement(session)
    for batch in _batches(rows):
        conn.execute(stmt, list(batch))
    return len(rows)


def update_counters(session: Session, rows: Sequence[dict[str, Any]]) -> int:
    """Refresh the running counters of known apps (rows from ``plan``); returns how many."""
    if not rows:
        return 0
    stmt = (
        update(_APPS)
        .where(_APPS.c.app_id == bindparam("b_app_id"))
        .values(
            progress=bindparam("b_progress"),
            elapsed_ms=bindparam("b_elapsed_ms"),
            vcore_seconds=bindparam("b_vcore_seconds"),
            memory_seconds=bindparam("b_memory_seconds"),
            updated_ms=bindparam("b_updated_ms"),
        )
    )
    conn = session.connection()
    for batch in _batches(rows):
        conn.execute(stmt, list(batch))
    return len(rows)


def mark_gone(session: Session, app_ids: Sequence[str], now_ms: int) -> int:
    """Record that the RM stopped listing these (not final) apps at ``now_ms``."""
    if not app_ids:
        return 0
    stmt = (
        update(_APPS)
        .where(_APPS.c.app_id == bindparam("b_app_id"), _APPS.c.gone_ms.is_(None))
        .values(gone_ms=bindparam("b_gone_ms"))
    )
    conn = session.connection()
    for batch in _batches(app_ids):
        conn.execute(stmt, [{"b_app_id": a, "b_gone_ms": now_ms} for a in batch])
    return len(app_ids)


def mark_unlisted_gone(session: Session, cluster_id: int, now_ms: int) -> None:
    """After a poll that wrote every listed app at ``now_ms``: any other not-final app is gone."""
    session.connection().execute(
        update(_APPS)
        .where(
            _APPS.c.cluster_id == cluster_id,
            _APPS.c.gone_ms.is_(None),
            _APPS.c.state.not_in(sorted(FINAL_APP_STATES)),
            _APPS.c.updated_ms < now_ms,
        )
        .values(gone_ms=now_ms)
    )


def node_totals(nodes: Sequence[NodeState]) -> dict[str, int]:
    """A poll's totals over the listed nodes (capability and usage of the RUNNING ones)."""
    running = [n for n in nodes if n.state == "RUNNING"]
    return {
        "nodes": len(nodes),
        "running_nodes": len(running),
        "capability_vcores": sum(n.capability.vcores for n in running),
        "capability_mb": sum(n.capability.memory_mb for n in running),
        "used_vcores": sum(n.used.vcores for n in running),
        "used_mb": sum(n.used.memory_mb for n in running),
        "num_containers": sum(n.num_containers for n in running),
    }


def snapshot_totals(snap: ClusterSnapshot) -> dict[str, int]:
    """The totals of a poll: over its nodes, or, when it did not list them, the RM's cluster
    metrics (the same sums, which the RM keeps over its active nodes)."""
    if snap.nodes_read:
        return node_totals(snap.nodes)
    m = snap.metrics
    return {
        "nodes": m.total_nodes,
        "running_nodes": m.active_nodes,
        "capability_vcores": m.total.vcores,
        "capability_mb": m.total.memory_mb,
        "used_vcores": m.allocated.vcores,
        "used_mb": m.allocated.memory_mb,
        "num_containers": m.containers_allocated,
    }


def add_cluster_sample(
    session: Session, cluster_id: int, totals: Mapping[str, int], taken_ms: int
) -> None:
    """Append one ``cluster_samples`` row."""
    session.connection().execute(
        insert(_TOTALS), [{"cluster_id": cluster_id, "taken_ms": taken_ms, **totals}]
    )


def add_node_rows(
    session: Session, cluster_id: int, nodes: Sequence[NodeState], taken_ms: int
) -> int:
    """Append one raw row per given node, in fixed-size batches; returns how many."""
    if not nodes:
        return 0
    conn = session.connection()
    stmt = insert(_NODES)
    for batch in _batches(nodes):
        conn.execute(
            stmt,
            [
                {
                    "cluster_id": cluster_id,
                    "taken_ms": taken_ms,
                    "node_id": n.node_id,
                    "host": n.host,
                    "rack": n.rack,
                    "state": n.state,
                    "labels": ",".join(n.labels),
                    "capability_vcores": n.capability.vcores,
                    "capability_mb": n.capability.memory_mb,
                    "used_vcores": n.used.vcores,
                    "used_mb": n.used.memory_mb,
                    "num_containers": n.num_containers,
                }
                for n in batch
            ],
        )
    return len(nodes)
