"""SQLAlchemy 2 typed models of the sidecar's history.

Times are epoch milliseconds (``BigInteger``), as the RM reports them, so a stored value compares
directly with the RM's ``finishedTime`` watermark and nothing depends on the database's timezone.
One row per YARN application (upserted as it progresses); queue and node samples are appended once
per poll; decisions are the audit trail of everything the policies decided.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.auth.principal import current_label
from app.domain.tags import DEADLINE_TAG, JOB_TAG

# The predicates of the partial indexes on ``applications`` (and what the queries using them
# repeat): apps tagged ``deadline:`` that no sidecar job owns; MapReduce apps. The tags hold no
# LIKE wildcard, so no ESCAPE clause is needed.
DEADLINE_TAGGED_LIKE = f"%,{DEADLINE_TAG}%"
JOB_TAGGED_LIKE = f"%,{JOB_TAG}%"
DEADLINE_TAGGED_SQL = f"tags LIKE '{DEADLINE_TAGGED_LIKE}' AND tags NOT LIKE '{JOB_TAGGED_LIKE}'"
MAPREDUCE_APP_TYPE = "MAPREDUCE"
MAPREDUCE_SQL = f"app_type = '{MAPREDUCE_APP_TYPE}'"
# The apps the RM still lists (the poller stamps ``gone_ms`` on one it no longer does).
LISTED_SQL = "gone_ms IS NULL"


def partial_index(name: str, where: str, *columns: str) -> Index:
    """An index of the rows matching ``where`` only, on both engines."""
    return Index(name, *columns, sqlite_where=text(where), postgresql_where=text(where))


# Stable constraint names so Alembic autogenerate and downgrades work on every engine.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    """Declarative base carrying the naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}


class Cluster(Base):
    """A YARN cluster the sidecar watches (one per deployment; keyed by the configured name)."""

    __tablename__ = "clusters"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    rm_urls: Mapped[str] = mapped_column(Text)
    active_rm_url: Mapped[str | None] = mapped_column(String(500))
    rm_cluster_id: Mapped[int | None] = mapped_column(BigInteger)
    hadoop_version: Mapped[str | None] = mapped_column(String(100))
    # Highest finishedTime recorded: the next poll asks for apps finished since then, so a
    # restart never misses an app that finished while the sidecar was down.
    finished_watermark_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    first_seen_ms: Mapped[int] = mapped_column(BigInteger)
    last_poll_ms: Mapped[int | None] = mapped_column(BigInteger)
    last_good_poll_ms: Mapped[int | None] = mapped_column(BigInteger)
    last_error: Mapped[str | None] = mapped_column(Text)


class Queue(Base):
    """A CapacityScheduler queue's configuration as last seen."""

    __tablename__ = "queues"
    __table_args__ = (UniqueConstraint("cluster_id", "path", name="uq_queues_cluster_path"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(String(500))
    name: Mapped[str] = mapped_column(String(200))
    parent_path: Mapped[str | None] = mapped_column(String(500))
    is_leaf: Mapped[bool] = mapped_column(Boolean)
    state: Mapped[str] = mapped_column(String(20))
    capacity: Mapped[float] = mapped_column(Float)
    max_capacity: Mapped[float] = mapped_column(Float)
    weight: Mapped[float] = mapped_column(Float, default=-1.0)
    mode: Mapped[str] = mapped_column(String(20), default="percentage")
    first_seen_ms: Mapped[int] = mapped_column(BigInteger)
    last_seen_ms: Mapped[int] = mapped_column(BigInteger)


class QueueSample(Base):
    """One queue at one poll."""

    __tablename__ = "queue_samples"
    __table_args__ = (Index("ix_queue_samples_queue_taken", "queue_id", "taken_ms"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    queue_id: Mapped[int] = mapped_column(ForeignKey("queues.id", ondelete="CASCADE"))
    taken_ms: Mapped[int] = mapped_column(BigInteger)
    capacity: Mapped[float] = mapped_column(Float)
    max_capacity: Mapped[float] = mapped_column(Float)
    used_capacity: Mapped[float] = mapped_column(Float)
    absolute_capacity: Mapped[float] = mapped_column(Float)
    absolute_used_capacity: Mapped[float] = mapped_column(Float)
    used_vcores: Mapped[int] = mapped_column(Integer)
    used_memory_mb: Mapped[int] = mapped_column(BigInteger)
    pending_vcores: Mapped[int] = mapped_column(Integer)
    pending_memory_mb: Mapped[int] = mapped_column(BigInteger)
    pending_containers: Mapped[int] = mapped_column(Integer)
    running_apps: Mapped[int] = mapped_column(Integer)
    pending_apps: Mapped[int] = mapped_column(Integer)


class Application(Base):
    """One YARN application, upserted on every poll that sees it."""

    __tablename__ = "applications"
    __table_args__ = (
        Index("ix_applications_queue_submitted", "queue", "submitted_ms"),
        Index("ix_applications_state", "state"),
        Index("ix_applications_finished", "finished_ms"),
        Index("ix_applications_final_seen", "cluster_id", "final_seen_ms"),
        # Partial indexes (0017) for the per-tick work lists, which must not read the whole
        # history: the engines use one only for a query whose WHERE repeats its predicate word
        # for word, with literals (``app.db.jobs_repo.unobserved_tagged_apps``,
        # ``app.db.history_repo.to_collect``).
        partial_index(
            "ix_applications_deadline_tagged", DEADLINE_TAGGED_SQL, "finished_ms", "app_id"
        ),
        partial_index(
            "ix_applications_mapreduce", MAPREDUCE_SQL, "cluster_id", "finished_ms", "app_id"
        ),
        # The apps the RM lists now, by state (``/metrics``' applications gauge): bounded by
        # what the RM keeps, not by the history.
        partial_index("ix_applications_listed", LISTED_SQL, "cluster_id", "state"),
    )

    app_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    user: Mapped[str] = mapped_column(String(200))
    queue: Mapped[str] = mapped_column(String(500))
    name: Mapped[str] = mapped_column(Text)
    app_type: Mapped[str] = mapped_column(String(100))
    # Comma-wrapped (",a,b,") so a tag filter is one indexed-free LIKE on every engine.
    tags: Mapped[str] = mapped_column(Text, default=",")
    state: Mapped[str] = mapped_column(String(20))
    final_status: Mapped[str] = mapped_column(String(20))
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    submitted_ms: Mapped[int | None] = mapped_column(BigInteger)
    started_ms: Mapped[int | None] = mapped_column(BigInteger)
    launched_ms: Mapped[int | None] = mapped_column(BigInteger)
    finished_ms: Mapped[int | None] = mapped_column(BigInteger)
    elapsed_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    allocated_vcores: Mapped[int] = mapped_column(Integer, default=0)
    allocated_mb: Mapped[int] = mapped_column(BigInteger, default=0)
    vcore_seconds: Mapped[int] = mapped_column(BigInteger, default=0)
    memory_seconds: Mapped[int] = mapped_column(BigInteger, default=0)
    running_containers: Mapped[int] = mapped_column(Integer, default=0)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    diagnostics: Mapped[str] = mapped_column(Text, default="")
    # The node label the app asked for (its partition); None: the default partition.
    node_label: Mapped[str | None] = mapped_column(String(200))
    first_seen_ms: Mapped[int] = mapped_column(BigInteger)
    # The poll that last wrote the row: a poll rewrites only apps that changed.
    updated_ms: Mapped[int] = mapped_column(BigInteger)
    # Set by the first good poll that no longer listed a not-final app; cleared if it reappears.
    gone_ms: Mapped[int | None] = mapped_column(BigInteger)
    # The poll that first saw the app in a final state (never rewritten): polls commit in order,
    # so a reader that counted up to one poll's time has counted every app it saw end.
    final_seen_ms: Mapped[int | None] = mapped_column(BigInteger)

    @property
    def tag_list(self) -> list[str]:
        """The tags, unwrapped from their stored ``,a,b,`` form."""
        return [tag for tag in self.tags.split(",") if tag]


class ClusterSample(Base):
    """The cluster's NodeManagers summed at one poll: what the controller and admission read.

    Raw ``NodeSample`` rows are written only for nodes that changed, so this is the one row per
    poll that says how big the cluster was.
    """

    __tablename__ = "cluster_samples"
    __table_args__ = (Index("ix_cluster_samples_cluster_taken", "cluster_id", "taken_ms"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    taken_ms: Mapped[int] = mapped_column(BigInteger)
    nodes: Mapped[int] = mapped_column(Integer)
    running_nodes: Mapped[int] = mapped_column(Integer)
    # Capability and usage of the RUNNING NodeManagers only.
    capability_vcores: Mapped[int] = mapped_column(BigInteger)
    capability_mb: Mapped[int] = mapped_column(BigInteger)
    used_vcores: Mapped[int] = mapped_column(BigInteger)
    used_mb: Mapped[int] = mapped_column(BigInteger)
    num_containers: Mapped[int] = mapped_column(Integer)


class NodeSample(Base):
    """One NodeManager at a poll where it was new or had changed since its previous row."""

    __tablename__ = "node_samples"
    __table_args__ = (Index("ix_node_samples_cluster_taken", "cluster_id", "taken_ms"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    taken_ms: Mapped[int] = mapped_column(BigInteger)
    node_id: Mapped[str] = mapped_column(String(300))
    host: Mapped[str] = mapped_column(String(300))
    rack: Mapped[str] = mapped_column(String(300))
    state: Mapped[str] = mapped_column(String(30))
    labels: Mapped[str] = mapped_column(Text, default="")
    capability_vcores: Mapped[int] = mapped_column(Integer)
    capability_mb: Mapped[int] = mapped_column(BigInteger)
    used_vcores: Mapped[int] = mapped_column(Integer)
    used_mb: Mapped[int] = mapped_column(BigInteger)
    num_containers: Mapped[int] = mapped_column(Integer)


class Decision(Base):
    """The audit trail: one row per policy decision with its inputs, outputs and the RM's answer."""

    __tablename__ = "decisions"
    __table_args__ = (Index("ix_decisions_kind_created", "kind", "created_ms"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    cluster_id: Mapped[int | None] = mapped_column(ForeignKey("clusters.id", ondelete="SET NULL"))
    created_ms: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(30))
    policy: Mapped[str] = mapped_column(String(100))
    mode: Mapped[str] = mapped_column(String(20))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    pushed: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(30))
    rm_response: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text, default="")
    # Who caused it: the API caller's audit label; NULL for the sidecar's own loops.
    principal: Mapped[str | None] = mapped_column(String(200), default=current_label)


class PollRecord(Base):
    """One poller tick: when, against which RM, and whether it worked (for /ready and debugging)."""

    __tablename__ = "polls"
    __table_args__ = (Index("ix_polls_cluster_started", "cluster_id", "started_ms"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    started_ms: Mapped[int] = mapped_column(BigInteger)
    duration_ms: Mapped[int] = mapped_column(Integer)
    ok: Mapped[bool] = mapped_column(Boolean)
    rm_url: Mapped[str | None] = mapped_column(String(500))
    apps_upserted: Mapped[int] = mapped_column(Integer, default=0)
    queues_sampled: Mapped[int] = mapped_column(Integer, default=0)
    nodes_sampled: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
