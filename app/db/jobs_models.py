"""Models of deadline-tagged jobs (seed 004 ch. 5, ``docs/policies.md`` "PYTHIA and
Justice").

* ``jobs``: one row per ``POST /jobs``. Queued jobs wait here, not in memory, so a restart loses
  none. ``state`` is the sidecar's lifecycle (``app.jobs.states``); ``app_state`` is the RM's word.
  ``app_id`` is written before the submit call (write-ahead, state ``submitting``) and is unique,
  so one job never owns two YARN applications.
* ``job_decisions``: every admission decision (admit, queue, drop, kill) with the numbers that
  produced it, and every lifecycle step (submit, adopt, finish, cancel, fail) with its reason.
  ``round_id`` points at the admission round's audit row in the shared ``decisions`` table.
* ``estimator_states``: the Justice / PYTHIA estimator (Algorithm 3's globals), one row, versioned:
  every update bumps ``version`` in the transaction that records what was learned.
* ``estimator_observations``: one row per YARN application considered for TRACK_JOB, keyed by the
  app id, so each finished app teaches the estimator exactly once, across restarts too.
* ``admission_settings``: the admission policy the operator chose at run time (``PUT /admission``).
* ``job_tallies``: ``/metrics``' counts of the ended jobs and the job decisions that retention has
  counted out of the live tables (``tallied_ms`` set on those rows), one row; a scrape adds it to
  the rows not tallied yet, so its cost follows the live jobs, not the history.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.auth.principal import current_label, current_user
from app.db.models import Base, partial_index

# The rows ``/metrics`` still counts one by one (``job_tallies`` holds the rest): the predicate of
# the partial indexes on ``jobs`` and ``job_decisions``, which the queries repeat word for word.
UNTALLIED_SQL = "tallied_ms IS NULL"
# The jobs retention may delete once they are old enough: ended and tallied (only an ended job is
# tallied, and an ended job never changes state again) and never given a YARN application (a job
# with an app stays, as its application row does, for the what-if tool's deadlines and Promise's
# estimator). The predicate of ``ix_jobs_prunable``, which ``app.db.retention`` repeats word for
# word, so a retention step reads only the rows it can delete, not the kept history. "NOT (app_id
# IS NOT NULL)", not "app_id IS NULL": SQLite takes an IS NULL term to the unique index on
# ``app_id``, which it believes returns one row (it returns every job without an app), and would
# walk and sort those instead; PostgreSQL reads both forms alike.
PRUNABLE_SQL = "NOT (app_id IS NOT NULL) AND tallied_ms IS NOT NULL"


class Job(Base):
    """A deadline-tagged job submitted through the sidecar."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_state", "state"),
        Index("ix_jobs_submitted", "submitted_ms", "id"),
        Index("ix_jobs_queue_submitted", "queue", "submitted_ms"),
        # An idempotency key is the submitter's own: another user's identical key is another
        # request, and must neither replay nor reveal that user's job.
        UniqueConstraint("idempotency_owner", "idempotency_key"),
        partial_index("ix_jobs_untallied", UNTALLIED_SQL, "state", "met_deadline"),
        partial_index("ix_jobs_prunable", PRUNABLE_SQL, "updated_ms", "id"),
    )

    # A random hex id, not a counter: the RM tag ``sidecar-job:<id>`` must never match an app of
    # an earlier database (a counter restarts at 1 after a reset and would adopt a stranger).
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    queue: Mapped[str] = mapped_column(String(500))
    state: Mapped[str] = mapped_column(String(20))
    requested_tasks: Mapped[int] = mapped_column(Integer)
    input_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # The node label of the partition the job was placed on (HybridMR Algorithm 2); None: shared.
    node_label: Mapped[str | None] = mapped_column(String(200))
    block_size: Mapped[int | None] = mapped_column(BigInteger)
    deadline_s: Mapped[float] = mapped_column(Float)
    deadline_ms: Mapped[int] = mapped_column(BigInteger)
    submitted_ms: Mapped[int] = mapped_column(BigInteger)
    run: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    tags: Mapped[list[Any]] = mapped_column(JSON, default=list)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    # ``owner`` as its key's scope, "" for none: unlike a NULL it makes a unique pair
    idempotency_owner: Mapped[str] = mapped_column(String(100), default="", server_default="")
    request_hash: Mapped[str] = mapped_column(String(64))
    granted_cpus: Mapped[int | None] = mapped_column(Integer)
    admitted_ms: Mapped[int | None] = mapped_column(BigInteger)
    app_id: Mapped[str | None] = mapped_column(String(100), unique=True)
    app_state: Mapped[str | None] = mapped_column(String(20))
    final_status: Mapped[str | None] = mapped_column(String(20))
    yarn_submitted_ms: Mapped[int | None] = mapped_column(BigInteger)
    finished_ms: Mapped[int | None] = mapped_column(BigInteger)
    elapsed_ms: Mapped[int | None] = mapped_column(BigInteger)
    vcore_seconds: Mapped[int | None] = mapped_column(BigInteger)
    met_deadline: Mapped[bool | None] = mapped_column(Boolean)
    # How long its first tasks have run without one ending, the largest seen (``app.jobs.
    # first_wave``); None until timed.
    task_floor_s: Mapped[float | None] = mapped_column(Float)
    # Its app's progress (0 to 1) at the first reading above 0 and at the latest, with when each
    # was read (``jobs_repo.record_progress``); None until read.
    progress_first: Mapped[float | None] = mapped_column(Float)
    progress_first_ms: Mapped[int | None] = mapped_column(BigInteger)
    progress_last: Mapped[float | None] = mapped_column(Float)
    progress_last_ms: Mapped[int | None] = mapped_column(BigInteger)
    lifetime_expiry_ms: Mapped[int | None] = mapped_column(BigInteger)
    timeout_set: Mapped[bool] = mapped_column(Boolean, default=False)
    reason: Mapped[str] = mapped_column(Text, default="")
    updated_ms: Mapped[int] = mapped_column(BigInteger)
    # The user the job runs as on YARN and who may see and cancel it; the sidecar's own user when
    # submitted without a principal.
    owner: Mapped[str | None] = mapped_column(String(100), default=current_user)
    # When retention added this ended job to ``job_tallies`` (``app.db.retention``); from then on
    # /metrics counts it there, not here. None: counted from this row.
    tallied_ms: Mapped[int | None] = mapped_column(BigInteger)


class JobDecision(Base):
    """One decision or lifecycle step of a job, with the numbers behind it."""

    __tablename__ = "job_decisions"
    __table_args__ = (
        Index("ix_job_decisions_job", "job_id", "id"),
        # Retention's delete of a decision finds the steps that point at it by this index.
        Index("ix_job_decisions_round", "round_id"),
        partial_index("ix_job_decisions_untallied", UNTALLIED_SQL, "id"),
        # Retention deletes decisions by their own age, oldest first, through this index: a step
        # reads the decisions it deletes, not those of the jobs kept beyond the window.
        Index("ix_job_decisions_created", "created_ms", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    round_id: Mapped[int | None] = mapped_column(ForeignKey("decisions.id", ondelete="SET NULL"))
    created_ms: Mapped[int] = mapped_column(BigInteger)
    action: Mapped[str] = mapped_column(String(20))
    policy: Mapped[str | None] = mapped_column(String(20))
    cpus: Mapped[int] = mapped_column(Integer, default=0)
    req_cpus: Mapped[int | None] = mapped_column(Integer)
    fraction: Mapped[float | None] = mapped_column(Float)
    ttd_s: Mapped[float | None] = mapped_column(Float)
    priority: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text, default="")
    numbers: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    principal: Mapped[str | None] = mapped_column(String(200), default=current_label)
    # When retention added this row to ``job_tallies``, as ``Job.tallied_ms``.
    tallied_ms: Mapped[int | None] = mapped_column(BigInteger)


class JobTally(Base):
    """Counts of ended jobs (by state, deadline met or missed) and of job decisions (by action and
    reason template) that retention took out of the per-row counts; one row."""

    __tablename__ = "job_tallies"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_ms: Mapped[int] = mapped_column(BigInteger)


class EstimatorStateRow(Base):
    """The estimator's state (``EstimatorState.to_dict()``); one row, ``version`` +1 per update."""

    __tablename__ = "estimator_states"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_ms: Mapped[int] = mapped_column(BigInteger)


class EstimatorObservation(Base):
    """A finished YARN application considered by TRACK_JOB (learned from, or skipped and why)."""

    __tablename__ = "estimator_observations"
    __table_args__ = (
        Index("ix_estimator_observations_observed", "observed_ms"),
        # A job's delete (retention) looks for the observations naming it (``ON DELETE SET
        # NULL``) by this index, not by a scan of the table.
        Index("ix_estimator_observations_job", "job_id"),
    )

    app_id: Mapped[str] = mapped_column(String(100), primary_key=True)
    job_id: Mapped[str | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"))
    source: Mapped[str] = mapped_column(String(20))
    observed_ms: Mapped[int] = mapped_column(BigInteger)
    learned: Mapped[bool] = mapped_column(Boolean)
    tasks: Mapped[int | None] = mapped_column(Integer)
    deadline_s: Mapped[float | None] = mapped_column(Float)
    comp_time: Mapped[float | None] = mapped_column(Float)
    cpus: Mapped[int | None] = mapped_column(Integer)
    success: Mapped[bool | None] = mapped_column(Boolean)
    estimator_version: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text, default="")
    # Not learned by TRACK_JOB, but kept for Promise's estimator as a lower bound of the job's
    # work: the app was killed before it ended (``comp_time`` is what it had used by then).
    censored: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class AdmissionSetting(Base):
    """The operator's admission policy and parameters set through ``PUT /admission``, one row per
    cluster (absent: ``YARN_SIDECAR_ADMISSION_POLICY`` from the settings). In the database so a
    restart keeps it and every replica's admission round reads the same policy."""

    __tablename__ = "admission_settings"

    cluster_name: Mapped[str] = mapped_column(String(200), primary_key=True)
    policy: Mapped[str] = mapped_column(String(100))
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    updated_ms: Mapped[int] = mapped_column(BigInteger)
