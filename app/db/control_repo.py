"""Repository functions of the control loop. Each takes a ``Session`` and never commits:
the caller owns the transaction (as ``app.db.repo``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, insert, or_, select
from sqlalchemy.orm import Session

from app.control.ledger import LedgerRow
from app.db.control_models import ConfigPush, ControlConfig, LedgerEntry, PolicyState
from app.db.models import Application, ClusterSample, Decision, Queue, QueueSample
from app.db.repo import InvalidCursor, decode_cursor, encode_cursor
from app.domain.model import queue_names
from app.domain.observation import ClusterTotals, SamplePoint

# ---- operator configuration and policy state -------------------------------------------------


def get_control_config(session: Session, cluster_id: int) -> ControlConfig | None:
    """The operator's overrides (``PUT /policy``), if any."""
    return session.scalar(select(ControlConfig).where(ControlConfig.cluster_id == cluster_id))


def save_control_config(
    session: Session, cluster_id: int, values: dict[str, Any], now_ms: int
) -> ControlConfig:
    """Create or replace the overrides; ``values`` is ``ControlConfig.to_dict()`` of the pure
    configuration (policy, params, mode, bounds and the limits)."""
    row = get_control_config(session, cluster_id)
    if row is None:
        row = ControlConfig(cluster_id=cluster_id)
        session.add(row)
    row.policy = values["policy"]
    row.params = dict(values["params"])
    row.mode = values["mode"]
    row.bounds = dict(values["bounds"])
    keys = ("weights", "max_step_pp", "min_change_pp", "allow_drift_overwrite")
    row.limits = {k: values[k] for k in (*keys, "floors", "baseline") if k in values}
    row.updated_ms = now_ms
    session.flush()
    return row


def load_policy_state(session: Session, cluster_id: int, policy: str) -> dict[str, Any]:
    """A policy's state between ticks (empty before its first tick)."""
    row = session.scalar(
        select(PolicyState).where(
            PolicyState.cluster_id == cluster_id, PolicyState.policy == policy
        )
    )
    return dict(row.state) if row is not None else {}


def save_policy_state(
    session: Session, cluster_id: int, policy: str, state: dict[str, Any], now_ms: int
) -> None:
    """Create or replace a policy's state."""
    row = session.scalar(
        select(PolicyState).where(
            PolicyState.cluster_id == cluster_id, PolicyState.policy == policy
        )
    )
    if row is None:
        row = PolicyState(cluster_id=cluster_id, policy=policy)
        session.add(row)
    row.state = state
    row.updated_ms = now_ms
    session.flush()


# ---- samples ---------------------------------------------------------------------------------


def queue_points(
    session: Session, cluster_id: int, queues: Sequence[str], start_ms: int, end_ms: int
) -> dict[int, dict[str, SamplePoint]]:
    """Samples of ``queues`` taken in ``[start_ms, end_ms]``, by poll time then queue path."""
    stmt = (
        select(Queue.path, QueueSample)
        .join(QueueSample, QueueSample.queue_id == Queue.id)
        .where(
            Queue.cluster_id == cluster_id,
            Queue.path.in_(list(queues)),
            QueueSample.taken_ms >= start_ms,
            QueueSample.taken_ms <= end_ms,
        )
        .order_by(QueueSample.taken_ms)
    )
    out: dict[int, dict[str, SamplePoint]] = defaultdict(dict)
    for path, s in session.execute(stmt).all():
        out[s.taken_ms][path] = SamplePoint(
            taken_ms=s.taken_ms,
            used_vcores=float(s.used_vcores),
            used_memory_mb=float(s.used_memory_mb),
            pending_vcores=float(s.pending_vcores),
            pending_memory_mb=float(s.pending_memory_mb),
            pending_containers=float(s.pending_containers),
            pending_apps=float(s.pending_apps),
            running_apps=float(s.running_apps),
            absolute_capacity=float(s.absolute_capacity),
        )
    return dict(out)


def cluster_totals(
    session: Session, cluster_id: int, start_ms: int, end_ms: int
) -> dict[int, ClusterTotals]:
    """Resources of the RUNNING NodeManagers at each poll in ``[start_ms, end_ms]``."""
    stmt = select(
        ClusterSample.taken_ms, ClusterSample.capability_vcores, ClusterSample.capability_mb
    ).where(
        ClusterSample.cluster_id == cluster_id,
        ClusterSample.taken_ms >= start_ms,
        ClusterSample.taken_ms <= end_ms,
    )
    return {
        t: ClusterTotals(float(v or 0), float(m or 0)) for t, v, m in session.execute(stmt).all()
    }


def latest_totals(session: Session, cluster_id: int, until_ms: int) -> ClusterTotals | None:
    """The cluster's size at the newest poll at or before ``until_ms``."""
    newest = session.scalar(
        select(func.max(ClusterSample.taken_ms)).where(
            ClusterSample.cluster_id == cluster_id, ClusterSample.taken_ms <= until_ms
        )
    )
    if newest is None:
        return None
    return cluster_totals(session, cluster_id, newest, newest).get(newest, ClusterTotals(0, 0))


def completed_apps(
    session: Session,
    cluster_id: int,
    queues: Sequence[str],
    seen_after_ms: int,
    seen_through_ms: int,
    finished_after_ms: int,
) -> dict[str, int]:
    """Apps that FINISHED, first seen so by a poll in ``(seen_after_ms, seen_through_ms]`` and
    finished (the RM's clock) after ``finished_after_ms``, per queue path (the RM reports an app's
    queue as a leaf name or a full path, depending on the version)."""
    stmt = (
        select(Application.queue, func.count())
        .where(
            Application.cluster_id == cluster_id,
            Application.state == "FINISHED",
            Application.final_seen_ms > seen_after_ms,
            Application.final_seen_ms <= seen_through_ms,
            Application.finished_ms > finished_after_ms,
        )
        .group_by(Application.queue)
    )
    return per_managed_queue({name: int(n) for name, n in session.execute(stmt).all()}, queues)


def per_managed_queue(counts: Mapping[str, int], queues: Sequence[str]) -> dict[str, int]:
    """Counts keyed by the queue an app row names, summed per managed queue path: the RM reports
    an app's queue as a leaf name or a full path, depending on the version."""
    return {q: sum(counts.get(name, 0) for name in queue_names(q)) for q in queues}


# ---- ledger ----------------------------------------------------------------------------------


def ledger_cursor(session: Session, cluster_id: int) -> int | None:
    """Where the ledger stops: the end of the last integrated interval."""
    return session.scalar(
        select(func.max(LedgerEntry.end_ms)).where(LedgerEntry.cluster_id == cluster_id)
    )


def add_ledger_rows(session: Session, cluster_id: int, rows: Iterable[LedgerRow]) -> int:
    """Append one interval's rows; the unique key refuses an interval counted twice."""
    values = [{"cluster_id": cluster_id, **row.to_dict()} for row in rows]
    if values:
        session.execute(insert(LedgerEntry), values)
    return len(values)


def list_ledger(
    session: Session, cluster_id: int, since_ms: int | None, queue: str | None, limit: int
) -> tuple[list[LedgerEntry], bool]:
    """The newest ``limit`` ledger rows from ``since_ms`` (interval end), optionally of one
    queue, oldest first; and whether older ones were left out. The newest, because the ledger
    grows every tick and what a reader needs most is the current debt."""
    stmt = select(LedgerEntry).where(LedgerEntry.cluster_id == cluster_id)
    if since_ms is not None:
        stmt = stmt.where(LedgerEntry.end_ms >= since_ms)
    if queue is not None:
        stmt = stmt.where(LedgerEntry.queue == queue)
    stmt = stmt.order_by(LedgerEntry.end_ms.desc(), LedgerEntry.queue.desc()).limit(limit + 1)
    rows = list(session.scalars(stmt))
    return rows[:limit][::-1], len(rows) > limit


# ---- pushes ----------------------------------------------------------------------------------

BASELINE_STATUSES = ("applied", "baseline", "superseded")
PENDING = "pending"


def last_baseline(session: Session, cluster_id: int, parent: str) -> ConfigPush | None:
    """The newest push the RM accepted (or configuration the operator accepted as baseline)."""
    stmt = (
        select(ConfigPush)
        .where(
            ConfigPush.cluster_id == cluster_id,
            ConfigPush.parent == parent,
            ConfigPush.status.in_(BASELINE_STATUSES),
        )
        .order_by(ConfigPush.pushed_ms.desc(), ConfigPush.id.desc())
        .limit(1)
    )
    return session.scalar(stmt)


def idle_baselines(
    session: Session, cluster_id: int, parent: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """For the idle-cluster rule: the values an operator last accepted as baseline, and the values
    the RM held before the sidecar's first push (``None`` when there is no such row)."""
    where = (ConfigPush.cluster_id == cluster_id, ConfigPush.parent == parent)
    accepted = session.scalar(
        select(ConfigPush)
        .where(*where, ConfigPush.status == "baseline")
        .order_by(ConfigPush.pushed_ms.desc(), ConfigPush.id.desc())
        .limit(1)
    )
    first = session.scalar(
        select(ConfigPush)
        .where(*where, ConfigPush.status != "baseline")
        .order_by(ConfigPush.pushed_ms, ConfigPush.id)
        .limit(1)
    )
    return (
        dict(accepted.values) if accepted is not None else None,
        dict(first.previous) if first is not None and first.previous else None,
    )


def last_pending(
    session: Session, cluster_id: int, parent: str, baseline: ConfigPush | None
) -> ConfigPush | None:
    """The newest push written ahead of its PUT and never settled (the tick died between the PUT
    and its commit), if it is newer than ``baseline``; older ones are of no use as a baseline."""
    stmt = (
        select(ConfigPush)
        .where(
            ConfigPush.cluster_id == cluster_id,
            ConfigPush.parent == parent,
            ConfigPush.status == PENDING,
        )
        .order_by(ConfigPush.pushed_ms.desc(), ConfigPush.id.desc())
        .limit(1)
    )
    row = session.scalar(stmt)
    if row is None or baseline is None:
        return row
    return row if (row.pushed_ms, row.id) > (baseline.pushed_ms, baseline.id) else None


def settle_push(
    session: Session,
    push_id: int,
    status: str,
    version_after: int | None,
    decision_id: int | None = None,
) -> None:
    """Record the outcome of a push written ahead as ``pending``."""
    row = session.get(ConfigPush, push_id)
    if row is None:
        raise LookupError(f"config push {push_id} not found")
    row.status = status
    row.version_after = version_after
    if decision_id is not None:
        row.decision_id = decision_id
    session.flush()


def complete_decision(session: Session, decision_id: int, done: Decision) -> Decision:
    """Fill the decision written ahead of a push with the tick's outcome (same row, same id)."""
    row = session.get(Decision, decision_id)
    if row is None:
        raise LookupError(f"decision {decision_id} not found")
    for attr in ("outputs", "pushed", "status", "rm_response", "reason"):
        setattr(row, attr, getattr(done, attr))
    session.flush()
    return row


def settle_pending_decision(session: Session, push_id: int, status: str, reason: str) -> None:
    """Complete the decision written ahead of a push that a later tick settled."""
    push = session.get(ConfigPush, push_id)
    if push is None or push.decision_id is None:
        return
    row = session.get(Decision, push.decision_id)
    if row is not None and row.status in ("pushing", "pushed_unverified"):
        # An unverified push keeps what its tick said, and says how it ended.
        row.reason = reason if row.status == "pushing" else f"{row.reason}; {reason}"
        row.status = status
        session.flush()


def list_pushes(
    session: Session, limit: int, before_id: int | None = None, status: str | None = None
) -> list[ConfigPush]:
    """Pushes newest first (``before_id`` pages on)."""
    stmt = select(ConfigPush)
    if status is not None:
        stmt = stmt.where(ConfigPush.status == status)
    if before_id is not None:
        stmt = stmt.where(ConfigPush.id < before_id)
    return list(session.scalars(stmt.order_by(ConfigPush.id.desc()).limit(limit)))


def add_push(session: Session, push: ConfigPush) -> ConfigPush:
    """Record one push (or an accepted baseline)."""
    session.add(push)
    session.flush()
    return push


# ---- decisions -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecisionFilter:
    """Filters of ``GET /decisions``; times are epoch ms on ``created_ms`` (from inclusive)."""

    kind: str | None = None
    policy: str | None = None
    status: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None


def list_decisions(
    session: Session, flt: DecisionFilter, limit: int, cursor: str | None
) -> tuple[list[Decision], str | None]:
    """Decisions newest first (by time, then id), keyset-paginated like ``list_apps``."""
    stmt = select(Decision)
    if flt.kind:
        stmt = stmt.where(Decision.kind == flt.kind)
    if flt.policy:
        stmt = stmt.where(
            or_(
                Decision.policy == flt.policy,
                Decision.policy.startswith(f"{flt.policy}:", autoescape=True),
            )
        )
    if flt.status:
        stmt = stmt.where(Decision.status == flt.status)
    if flt.since_ms is not None:
        stmt = stmt.where(Decision.created_ms >= flt.since_ms)
    if flt.until_ms is not None:
        stmt = stmt.where(Decision.created_ms < flt.until_ms)
    if cursor:
        last_ms, last_id = decode_cursor(cursor, 2)
        if not isinstance(last_ms, int) or not isinstance(last_id, int):
            raise InvalidCursor("cursor is not one this server issued")
        stmt = stmt.where(
            or_(
                Decision.created_ms < last_ms,
                and_(Decision.created_ms == last_ms, Decision.id < last_id),
            )
        )
    stmt = stmt.order_by(Decision.created_ms.desc(), Decision.id.desc()).limit(limit + 1)
    rows = list(session.scalars(stmt))
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor([rows[-1].created_ms, rows[-1].id])
    return rows, next_cursor


def get_decision(session: Session, decision_id: int) -> Decision | None:
    """One decision by id."""
    return session.get(Decision, decision_id)
