"""Repository functions: each takes a ``Session`` and never commits (the caller owns the
transaction, as in Prefect's model layer). Bulk writes are fixed-size batches
(``app.db.poll_writes``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, insert, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from app.db import poll_writes
from app.db.models import (
    Application,
    Cluster,
    Decision,
    PollRecord,
    Queue,
    QueueSample,
)
from app.domain.model import AppRecord, NodeState, QueueState
from app.redact import redact_url

# Ids per ``IN (...)`` when loading rows by primary key (well under either engine's limit of
# bound parameters).
_IN_BATCH = 500


class InvalidCursor(ValueError):
    """A pagination cursor that this server did not issue."""


def _dialect_insert(session: Session, model: Any) -> Any:
    """An INSERT that supports ``on_conflict_*`` on the two supported engines."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(model)
    if dialect == "sqlite":
        return sqlite.insert(model)
    raise NotImplementedError(f"upsert not implemented for {dialect}")  # pragma: no cover


def ensure_cluster(session: Session, name: str, rm_urls: Sequence[str], now_ms: int) -> Cluster:
    """The cluster row for ``name``, created on first use; RM URLs follow the configuration.

    Several loops call this at start-up at once: the insert ignores a row another one just made.
    The URLs are stored with their passwords masked, whatever the caller passes.
    """
    urls = ",".join(redact_url(url) for url in rm_urls)
    cluster = session.scalar(select(Cluster).where(Cluster.name == name))
    if cluster is None:
        stmt = _dialect_insert(session, Cluster).values(
            name=name, rm_urls=urls, first_seen_ms=now_ms, finished_watermark_ms=0
        )
        session.execute(stmt.on_conflict_do_nothing(index_elements=["name"]))
        cluster = session.scalar(select(Cluster).where(Cluster.name == name))
        assert cluster is not None
    elif cluster.rm_urls != urls:
        cluster.rm_urls = urls
    return cluster


def upsert_queues(
    session: Session, cluster_id: int, queues: Sequence[QueueState], now_ms: int
) -> dict[str, int]:
    """Create or refresh each queue's configuration row; returns path -> queue id."""
    existing = {
        q.path: q for q in session.scalars(select(Queue).where(Queue.cluster_id == cluster_id))
    }
    for qs in queues:
        row = existing.get(qs.path)
        if row is None:
            row = Queue(cluster_id=cluster_id, path=qs.path, first_seen_ms=now_ms)
            session.add(row)
            existing[qs.path] = row
        row.name = qs.name
        row.parent_path = qs.parent
        row.is_leaf = qs.is_leaf
        row.state = qs.state
        row.capacity = qs.capacity
        row.max_capacity = qs.max_capacity
        row.weight = qs.weight
        row.mode = qs.mode
        row.last_seen_ms = now_ms
    session.flush()
    return {path: row.id for path, row in existing.items()}


def add_queue_samples(
    session: Session, queue_ids: dict[str, int], queues: Sequence[QueueState], taken_ms: int
) -> int:
    """Append one sample per queue; returns how many."""
    rows = [
        {
            "queue_id": queue_ids[q.path],
            "taken_ms": taken_ms,
            "capacity": q.capacity,
            "max_capacity": q.max_capacity,
            "used_capacity": q.used_capacity,
            "absolute_capacity": q.absolute_capacity,
            "absolute_used_capacity": q.absolute_used_capacity,
            "used_vcores": q.used.vcores,
            "used_memory_mb": q.used.memory_mb,
            "pending_vcores": q.pending.vcores,
            "pending_memory_mb": q.pending.memory_mb,
            "pending_containers": q.pending_containers,
            "running_apps": q.num_active_apps,
            "pending_apps": q.num_pending_apps,
        }
        for q in queues
    ]
    if rows:
        session.execute(insert(QueueSample), rows)
    return len(rows)


def upsert_apps(session: Session, cluster_id: int, apps: Sequence[AppRecord], now_ms: int) -> int:
    """Insert new applications and update known ones, in fixed-size batches.

    Idempotent: polling the same apps again, or after a restart, never duplicates a row; the
    first-seen time is kept from the first insert.
    """
    # One row per app id even if the RM listed an app twice (running + finished windows overlap).
    rows = list({a.app_id: poll_writes.app_row(cluster_id, a, now_ms) for a in apps}.values())
    return poll_writes.upsert_app_rows(session, rows)


def add_node_samples(
    session: Session, cluster_id: int, nodes: Sequence[NodeState], taken_ms: int
) -> int:
    """Append the poll's cluster totals and one raw sample per NodeManager; returns how many."""
    poll_writes.add_cluster_sample(session, cluster_id, poll_writes.node_totals(nodes), taken_ms)
    return poll_writes.add_node_rows(session, cluster_id, nodes, taken_ms)


def record_poll(session: Session, poll: PollRecord) -> PollRecord:
    """Store one poll outcome."""
    session.add(poll)
    session.flush()
    return poll


def get_cluster(session: Session, name: str) -> Cluster | None:
    """The cluster row by configured name."""
    return session.scalar(select(Cluster).where(Cluster.name == name))


# ---- reads for the API -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueView:
    """A queue's configuration with one sample (the latest, or one from history)."""

    queue: Queue
    sample: QueueSample | None


def latest_sample_id(queue_id: Any) -> Any:
    """The id of the newest sample of ``queue_id`` (a column or a value), as a scalar subquery.

    ``ORDER BY taken_ms DESC LIMIT 1`` under ``queue_id = ?`` reads one entry of
    ``ix_queue_samples_queue_taken`` (backwards) on both engines, however long the history.
    """
    # an alias of its own, so a query that also selects samples does not correlate it away
    sample = aliased(QueueSample)
    return (
        select(sample.id)
        .where(sample.queue_id == queue_id)
        .order_by(sample.taken_ms.desc())
        .limit(1)
        .scalar_subquery()
    )


def latest_queues(
    session: Session, cluster_id: int, *, current_only: bool = False
) -> list[QueueView]:
    """Each known queue with its most recent sample, by path.

    One indexed lookup per queue (``latest_sample_id``), then the samples by primary key: the
    cost follows the number of queues, not the number of polls kept. With ``current_only``,
    only the queues the latest successful poll reported: every poll reports ``root`` and
    stamps each queue it lists with its time (``Queue.last_seen_ms``), so a queue deleted on
    the RM drops out at the next poll while an idle one (listed, nothing running) stays.
    """
    stmt = (
        select(Queue, latest_sample_id(Queue.id).label("sample_id"))
        .where(Queue.cluster_id == cluster_id)
        .order_by(Queue.path)
    )
    if current_only:
        newest = (
            select(func.max(Queue.last_seen_ms))
            .where(Queue.cluster_id == cluster_id)
            .scalar_subquery()
        )
        stmt = stmt.where(Queue.last_seen_ms == newest)
    rows = session.execute(stmt).all()
    ids = [sid for _, sid in rows if sid is not None]
    samples: dict[int, QueueSample] = {}
    for start in range(0, len(ids), _IN_BATCH):
        chunk = ids[start : start + _IN_BATCH]
        samples.update(
            (s.id, s) for s in session.scalars(select(QueueSample).where(QueueSample.id.in_(chunk)))
        )
    return [QueueView(q, samples.get(sid) if sid is not None else None) for q, sid in rows]


def queue_history(
    session: Session, cluster_id: int, since_ms: int, path: str | None = None, limit: int = 10_000
) -> list[QueueView]:
    """Samples taken at or after ``since_ms``, oldest first."""
    stmt = (
        select(Queue, QueueSample)
        .join(QueueSample, QueueSample.queue_id == Queue.id)
        .where(Queue.cluster_id == cluster_id, QueueSample.taken_ms >= since_ms)
        .order_by(QueueSample.taken_ms, Queue.path)
        .limit(limit)
    )
    if path is not None:
        stmt = stmt.where(Queue.path == path)
    return [QueueView(q, s) for q, s in session.execute(stmt).all()]


@dataclass(frozen=True, slots=True)
class AppFilter:
    """Filters of ``GET /apps``; times are epoch ms on the submission time."""

    queue: str | None = None
    user: str | None = None
    state: str | None = None
    tag: str | None = None
    submitted_from_ms: int | None = None
    submitted_to_ms: int | None = None


def encode_cursor(values: Sequence[Any]) -> str:
    """An opaque keyset cursor."""
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, arity: int) -> list[Any]:
    """Inverse of ``encode_cursor``; raises ``InvalidCursor`` on anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        # RecursionError: a cursor of thousands of nested arrays, which no server issues
        raise InvalidCursor("cursor is not one this server issued") from exc
    if not isinstance(values, list) or len(values) != arity:
        raise InvalidCursor("cursor is not one this server issued")
    for value in values:
        # Keys this server issues are BIGINT-sized numbers and encodable strings; anything else
        # would overflow the database's integer or its text encoding.
        if isinstance(value, bool) or (isinstance(value, int) and not -(2**63) <= value < 2**63):
            raise InvalidCursor("cursor is not one this server issued")
        if isinstance(value, str) and unstorable(value) is not None:
            raise InvalidCursor("cursor is not one this server issued")
    return values


def unstorable(value: str) -> str | None:
    """Why neither database can keep ``value`` as text, or None: PostgreSQL refuses a NUL
    character in any text, and neither encodes a lone UTF-16 surrogate."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate"
    return None


def list_apps(
    session: Session, flt: AppFilter, limit: int, cursor: str | None
) -> tuple[list[Application], str | None]:
    """Applications newest first (by submission time, then id), keyset-paginated."""
    stmt = select(Application)
    if flt.queue:
        stmt = stmt.where(
            or_(
                Application.queue == flt.queue,
                Application.queue.endswith(f".{flt.queue}", autoescape=True),
            )
        )
    if flt.user:
        stmt = stmt.where(Application.user == flt.user)
    if flt.state:
        stmt = stmt.where(Application.state == flt.state.upper())
    if flt.tag:
        stmt = stmt.where(Application.tags.contains(f",{flt.tag.lower()},", autoescape=True))
    if flt.submitted_from_ms is not None:
        stmt = stmt.where(Application.submitted_ms >= flt.submitted_from_ms)
    if flt.submitted_to_ms is not None:
        stmt = stmt.where(Application.submitted_ms < flt.submitted_to_ms)
    sub_key = func.coalesce(Application.submitted_ms, 0)
    if cursor:
        last_sub, last_id = decode_cursor(cursor, 2)
        if not isinstance(last_sub, int) or not isinstance(last_id, str):
            raise InvalidCursor("cursor is not one this server issued")
        stmt = stmt.where(
            or_(sub_key < last_sub, and_(sub_key == last_sub, Application.app_id < last_id))
        )
    stmt = stmt.order_by(sub_key.desc(), Application.app_id.desc()).limit(limit + 1)
    rows = list(session.scalars(stmt))
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = encode_cursor([last.submitted_ms or 0, last.app_id])
    return rows, next_cursor


def get_app(session: Session, app_id: str) -> Application | None:
    """One application by YARN id."""
    return session.get(Application, app_id)


def add_decision(session: Session, decision: Decision) -> Decision:
    """Append one audit record."""
    session.add(decision)
    session.flush()
    return decision
