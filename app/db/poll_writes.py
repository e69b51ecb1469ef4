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

Every value a poll writes is first made storable (``storable_row``, ``storable_queues``): the RM
reports what its applications say (a name or container stderr in ``diagnostics`` may carry a NUL
character, a label may be longer than its column, a counter may pass BIGINT), and one value the
database refuses would roll back the whole poll, on every poll for as long as the RM lists the app.
"""

from __future__ import annotations

import operator
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import BigInteger, Column, Integer, String, Table, bindparam, func, insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import Application, ClusterSample, NodeSample, Queue, QueueSample
from app.domain.model import (
    FINAL_APP_STATES,
    AppRecord,
    ClusterSnapshot,
    NodeState,
    QueueState,
    Resources,
)

# Rows per executemany call: bounded memory per statement, far below any parameter limit.
BATCH = 1000

_APPS: Table = Application.__table__  # type: ignore[assignment]
_NODES: Table = NodeSample.__table__  # type: ignore[assignment]
_TOTALS: Table = ClusterSample.__table__  # type: ignore[assignment]
_QUEUES: Table = Queue.__table__  # type: ignore[assignment]
_QUEUE_SAMPLES: Table = QueueSample.__table__  # type: ignore[assignment]

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
                    "b_elapsed_ms": storable_int(app.elapsed_ms, _APPS.c.elapsed_ms),
                    "b_vcore_seconds": storable_int(app.vcore_seconds, _APPS.c.vcore_seconds),
                    "b_memory_seconds": storable_int(app.memory_seconds, _APPS.c.memory_seconds),
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
    """The ``applications`` row of one app as seen at ``now_ms`` (listed: not gone), storable."""
    row = {
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
    return storable_row(_APPS, row)


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
    row = storable_row(_TOTALS, {"cluster_id": cluster_id, "taken_ms": taken_ms, **totals})
    session.connection().execute(insert(_TOTALS), [row])


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
                storable_row(
                    _NODES,
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
                    },
                )
                for n in batch
            ],
        )
    return len(nodes)


# --- storable values ----------------------------------------------------------------------------

# The signed ranges of INTEGER and BIGINT (PostgreSQL refuses a value outside them; SQLite's
# driver cannot bind an int past 64 bits).
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

_TextColumns = tuple[tuple[str, int | None], ...]
_IntColumns = tuple[tuple[str, int, int], ...]
_columns_of: dict[str, tuple[_TextColumns, _IntColumns]] = {}


def storable_text(value: str, length: int | None = None) -> str:
    """``value`` as both databases keep it: NUL characters dropped (PostgreSQL refuses them in
    any text), lone UTF-16 surrogates replaced (no encoding has them), at most ``length``
    characters (a ``VARCHAR``'s limit counts characters)."""
    if "\x00" in value:
        value = value.replace("\x00", "")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "replace").decode("utf-8")
    if length is not None and len(value) > length:
        value = value[:length]
    return value


def storable_int(value: int, column: Column[Any]) -> int:
    """``value`` clamped to the range of ``column``'s integer type."""
    low, high = _INT64 if isinstance(column.type, BigInteger) else _INT32
    return low if value < low else high if value > high else value


def length(column: Column[Any]) -> int | None:
    """The most characters ``column`` holds (None: unlimited text)."""
    return column.type.length if isinstance(column.type, String) else None


def storable_row(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` (a dict of ``table``'s column values) with every text and integer value made
    storable in its column, in place; other values are left as they are."""
    texts, ints = _columns(table)
    for name, limit in texts:
        text = row.get(name)
        if text is not None:
            row[name] = storable_text(text, limit)
    for name, low, high in ints:
        number = row.get(name)
        if number is not None and not low <= number <= high:
            row[name] = low if number < low else high
    return row


def _columns(table: Table) -> tuple[_TextColumns, _IntColumns]:
    """``table``'s text columns with their lengths and integer columns with their ranges."""
    known = _columns_of.get(table.name)
    if known is None:
        texts: list[tuple[str, int | None]] = []
        ints: list[tuple[str, int, int]] = []
        for column in table.columns:
            if isinstance(column.type, String):
                texts.append((column.name, column.type.length))
            elif isinstance(column.type, Integer):
                ints.append(
                    (column.name, *(_INT64 if isinstance(column.type, BigInteger) else _INT32))
                )
        known = _columns_of[table.name] = (tuple(texts), tuple(ints))
    return known


def storable_queues(queues: Sequence[QueueState]) -> list[QueueState]:
    """``queues`` with every value ``app.db.repo`` writes of them (the ``queues`` row and a
    ``queue_samples`` row) storable in its column."""
    q, s = _QUEUES.c, _QUEUE_SAMPLES.c

    def text(value: str, column: Column[Any]) -> str:
        return storable_text(value, length(column))

    def resources(value: Resources, vcores: Column[Any], memory: Column[Any]) -> Resources:
        return Resources(storable_int(value.vcores, vcores), storable_int(value.memory_mb, memory))

    return [
        replace(
            queue,
            path=text(queue.path, q.path),
            name=text(queue.name, q.name),
            parent=None if queue.parent is None else text(queue.parent, q.parent_path),
            state=text(queue.state, q.state),
            mode=text(queue.mode, q.mode),
            used=resources(queue.used, s.used_vcores, s.used_memory_mb),
            pending=resources(queue.pending, s.pending_vcores, s.pending_memory_mb),
            pending_containers=storable_int(queue.pending_containers, s.pending_containers),
            num_active_apps=storable_int(queue.num_active_apps, s.running_apps),
            num_pending_apps=storable_int(queue.num_pending_apps, s.pending_apps),
        )
        for queue in queues
    ]
