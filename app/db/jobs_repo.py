"""Repository functions of deadline jobs. Each takes a ``Session`` and never commits.

State changes go through ``transition``: an ``UPDATE ... WHERE state IN (...)`` whose row count
tells the caller whether it won, so the API (cancel) and the admission service (admit, submit,
kill) never overwrite each other's step, on one process or several.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeVarTuple, cast

from sqlalchemy import (
    CursorResult,
    Insert,
    Row,
    Select,
    Table,
    Text,
    and_,
    bindparam,
    case,
    false,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from app.auth.principal import current_user
from app.db.jobs_models import (
    AdmissionSetting,
    EstimatorObservation,
    EstimatorStateRow,
    Job,
    JobDecision,
)
from app.db.models import (
    DEADLINE_TAGGED_LIKE,
    JOB_TAGGED_LIKE,
    Application,
    Base,
    Cluster,
    ClusterSample,
    Decision,
)
from app.db.repo import InvalidCursor, decode_cursor, encode_cursor
from app.domain.model import FINAL_APP_STATES, times_tasks
from app.domain.tags import (
    CANCELLED,
    DROPPED,
    FAILED,
    FINISHED,
    HOLDING_STATES,
    JOB_TAG,
    KILLED,
    QUEUED,
    SUBMITTED,
)
from app.policies.base import WaitingFilter
from app.policies.justice import core as justice

ESTIMATOR_ID = 1

_Ts = TypeVarTuple("_Ts")


# ---- estimator ---------------------------------------------------------------------------------


def lock_estimator(session: Session, now_ms: int) -> EstimatorStateRow:
    """The estimator row, created empty on first use and locked for this transaction.

    On PostgreSQL the row lock (``SELECT ... FOR UPDATE``) serialises every transaction that
    admits or learns, across processes; SQLite serialises writers itself.
    """
    row = _select_estimator(session)
    if row is not None:
        return row
    # First use: two processes may race to create it; ON CONFLICT lets both go on.
    dialect = session.get_bind().dialect.name
    values = {"id": ESTIMATOR_ID, "version": 0, "state": {}, "updated_ms": now_ms}
    stmt: Any
    if dialect == "postgresql":
        stmt = postgresql.insert(EstimatorStateRow).values(values).on_conflict_do_nothing()
    else:
        stmt = sqlite.insert(EstimatorStateRow).values(values).on_conflict_do_nothing()
    session.execute(stmt)
    row = _select_estimator(session)
    assert row is not None  # inserted just above
    return row


# Built once: every submission batch runs it, and building a statement costs more than the
# database takes to answer it.
_SELECT_ESTIMATOR = (
    select(EstimatorStateRow)
    .where(EstimatorStateRow.id == ESTIMATOR_ID)
    .with_for_update()
    .execution_options(populate_existing=True)
)


def _select_estimator(session: Session) -> EstimatorStateRow | None:
    return session.scalar(_SELECT_ESTIMATOR)


def save_estimator(
    session: Session, row: EstimatorStateRow, state: justice.EstimatorState, now_ms: int
) -> int:
    """Store a new estimator state; returns the new version."""
    row.state = state.to_dict()
    row.version += 1
    row.updated_ms = now_ms
    session.flush()
    return row.version


def read_estimator(session: Session) -> EstimatorStateRow | None:
    """The estimator row without locking it (for ``GET /estimator``)."""
    return session.get(EstimatorStateRow, ESTIMATOR_ID)


def observation_counts(session: Session) -> tuple[int, int]:
    """(apps learned from, apps skipped) over all observations."""
    rows = session.execute(
        select(EstimatorObservation.learned, func.count()).group_by(EstimatorObservation.learned)
    ).all()
    counts = {bool(learned): int(n) for learned, n in rows}
    return counts.get(True, 0), counts.get(False, 0)


# ---- capacity ----------------------------------------------------------------------------------


def running_vcores(session: Session, cluster_name: str) -> int | None:
    """Total vcores of the RUNNING NodeManagers at the latest poll, or ``None`` before any."""
    cluster_id = session.scalar(select(Cluster.id).where(Cluster.name == cluster_name))
    if cluster_id is None:
        return None
    total = session.scalar(
        select(ClusterSample.capability_vcores)
        .where(ClusterSample.cluster_id == cluster_id)
        .order_by(ClusterSample.taken_ms.desc())
        .limit(1)
    )
    return None if total is None else int(total)


def cluster_id(session: Session, cluster_name: str) -> int | None:
    """The cluster row's id, if the poller created it."""
    return session.scalar(select(Cluster.id).where(Cluster.name == cluster_name))


# ---- jobs --------------------------------------------------------------------------------------


def add_job(session: Session, job: Job) -> Job:
    """Insert a new job (flushed, so a duplicate idempotency key fails here)."""
    session.add(job)
    session.flush()
    return job


def get_job(session: Session, job_id: str) -> Job | None:
    """One job by id."""
    return session.get(Job, job_id)


def key_scope(owner: str | None) -> str:
    """Whose idempotency keys a job's is among (``Job.idempotency_owner``): its owner's."""
    return owner or ""


_FIRST_DECISION = (
    select(func.min(JobDecision.id))
    .where(JobDecision.job_id == Job.id)
    .correlate(Job)
    .scalar_subquery()
)
# Built once, as ``_SELECT_ESTIMATOR``: the lookup every submission batch makes.
_JOBS_BY_KEYS = (
    select(Job, JobDecision)
    .outerjoin(JobDecision, JobDecision.id == _FIRST_DECISION)
    .where(Job.idempotency_key.in_(bindparam("keys", expanding=True)))
    .where(Job.idempotency_owner.in_(bindparam("owners", expanding=True)))
)

ScopedKey = tuple[str, str]  # (``key_scope``, idempotency key)


def jobs_by_keys(
    session: Session, keys: Collection[ScopedKey]
) -> dict[ScopedKey, tuple[Job, JobDecision | None]]:
    """The jobs created with any of ``keys``, each with its first decision (what a replay
    answers), in one query: a batch of submissions looks up all its keys at once."""
    if not keys:
        return {}
    out: dict[ScopedKey, tuple[Job, JobDecision | None]] = {}
    params = {"keys": sorted({k for _, k in keys}), "owners": sorted({o for o, _ in keys})}
    for job, decision in session.execute(_JOBS_BY_KEYS, params):
        assert job.idempotency_key is not None  # matched by it
        scoped = (job.idempotency_owner, job.idempotency_key)
        if scoped in keys:  # not another owner's same key
            out[scoped] = (job, decision)
    return out


def reload_jobs(session: Session, job_ids: Sequence[str]) -> None:
    """Re-read jobs this session holds (one query), after ``transition`` changed them in SQL."""
    if job_ids:
        stmt = select(Job).where(Job.id.in_(list(job_ids)))
        session.scalars(stmt.execution_options(populate_existing=True)).all()


def jobs_in(
    session: Session, states: Iterable[str], limit: int = 1000, *, with_timeout: bool = True
) -> list[Job]:
    """Jobs in the given states, oldest submission first; ``with_timeout=False`` leaves out
    those whose YARN LIFETIME timeout is already set."""
    stmt = select(Job).where(Job.state.in_(list(states)))
    if not with_timeout:
        stmt = stmt.where(Job.timeout_set.is_(False))
    return list(session.scalars(stmt.order_by(Job.submitted_ms, Job.id).limit(limit)))


def timed_jobs(
    session: Session, limit: int, skip: Container[str] = (), *, waves: bool = True
) -> list[tuple[str, str, int]]:
    """``(job id, app id, deadline ms)`` of submitted jobs whose app is RUNNING and whose run
    sets ``task_containers`` true (``times_tasks``), except those in ``skip``, earliest deadline
    first; with ``waves``, only those of more tasks than vcores granted (their first waves are
    timed: ``app.jobs.first_wave``; a job of one wave shows a miss that way only at its
    deadline), else every one (their progress is read: ``record_progress``). The run is JSON,
    read here rather than queried per database dialect; the jobs whose apps run at once are
    few."""
    stmt = (
        select(Job.id, Job.app_id, Job.run, Job.deadline_ms)
        .where(Job.state == SUBMITTED, Job.app_state == "RUNNING", Job.app_id.is_not(None))
        .order_by(Job.deadline_ms, Job.id)
    )
    if waves:
        stmt = stmt.where(Job.requested_tasks > Job.granted_cpus)
    out: list[tuple[str, str, int]] = []
    for job_id, app_id, run, deadline_ms in session.execute(stmt):
        if job_id in skip or app_id is None:
            continue
        if times_tasks(run):
            out.append((job_id, app_id, deadline_ms))
            if len(out) >= limit:
                break
    return out


def raise_task_floors(session: Session, floors: Mapping[str, float]) -> None:
    """Store each job's first-wave time where it is larger than the one stored and the job is
    still submitted (a bound only grows)."""
    for job_id, floor in floors.items():
        session.execute(
            update(Job)
            .where(
                Job.id == job_id,
                Job.state == SUBMITTED,
                or_(Job.task_floor_s.is_(None), Job.task_floor_s < floor),
            )
            .values(task_floor_s=floor)
        )


def record_progress(session: Session, readings: Mapping[str, tuple[float, int]]) -> None:
    """Store each still-submitted job's progress reading ``(progress 0 to 1, read at ms)``: as
    its first reading too while it has none above 0, and as its latest when read after the one
    stored (``promise.model.progress_end`` projects the job's end from the two)."""
    for job_id, (progress, at_ms) in readings.items():
        mine = (Job.id == job_id, Job.state == SUBMITTED)
        if progress > 0:
            session.execute(
                update(Job)
                .where(*mine, Job.progress_first.is_(None))
                .values(progress_first=progress, progress_first_ms=at_ms)
            )
        session.execute(
            update(Job)
            .where(*mine, or_(Job.progress_last_ms.is_(None), Job.progress_last_ms < at_ms))
            .values(progress_last=progress, progress_last_ms=at_ms)
        )


def _plain_rows(session: Session, stmt: Select[*_Ts]) -> Sequence[Row[*_Ts]]:
    """The rows of a select of columns, fetched whole through Core: a full round reads every
    waiting job, and the ORM's per-row work about doubled what fetching them cost. The session's
    pending changes are flushed first, as its own ``execute`` would."""
    session.flush()
    return session.connection().execute(stmt).all()


_ADMISSION_COLUMNS = (
    Job.id, Job.state, Job.requested_tasks, Job.deadline_s, Job.submitted_ms, Job.granted_cpus,
)  # fmt: skip


def _running(
    job_id: str, tasks: int, deadline_s: float, submitted_ms: int, cpus: int | None
) -> justice.RunningJob:
    """A CPU-holding job's row as the policies take it."""
    return justice.RunningJob(job_id, tasks, deadline_s, submitted_ms / 1000, cpus or 0)


def admission_inputs(
    session: Session, queued_ids: Sequence[str] | None = None
) -> tuple[list[justice.Job], list[justice.RunningJob]]:
    """Queued jobs and CPU-holding jobs (admitted, submitting, submitted) in one query; with
    ``queued_ids``, of the queued jobs only those (an incremental round's new submissions)."""
    queued = Job.state == QUEUED
    if queued_ids is not None:
        queued = queued & Job.id.in_(list(queued_ids))
    stmt = (
        select(*_ADMISSION_COLUMNS)
        .where(or_(queued, Job.state.in_(list(HOLDING_STATES))))
        .order_by(Job.submitted_ms, Job.id)
    )
    waiting: list[justice.Job] = []
    running: list[justice.RunningJob] = []
    for job_id, state, tasks, deadline_s, submitted_ms, cpus in _plain_rows(session, stmt):
        if state == QUEUED:
            waiting.append(justice.Job(job_id, tasks, deadline_s, submitted_ms / 1000))
        else:
            running.append(_running(job_id, tasks, deadline_s, submitted_ms, cpus))
    return waiting, running


def waiting_inputs(
    session: Session,
    now_ms: int,
    capacity: int,
    only: WaitingFilter,
    include: Collection[str] = (),
) -> list[justice.Job]:
    """The queued jobs a round can change (``only``, ``WaitingFilter``) and those in
    ``include``, in submission order as ``admission_inputs`` gives them. The tests are looser
    than the policy's own arithmetic (a second of time, half a CPU of request), so every job the
    policy could drop or admit is among them; the policy decides on exactly those."""
    # time left < horizon * window  <=>  submitted + (1 - horizon) * window < now
    near = Job.submitted_ms + (1.0 - only.horizon) * 1000.0 * Job.deadline_s < now_ms + 1000
    limit = case((Job.requested_tasks < capacity, Job.requested_tasks), else_=capacity)
    if only.free < 1:
        fits: ColumnElement[bool] = false()
    elif only.fraction is None:
        fits = limit <= only.free
    else:
        left_ms = Job.deadline_s * 1000.0 + Job.submitted_ms - now_ms
        fits = only.fraction * 1000.0 * Job.deadline_s * limit <= (only.free + 0.5) * left_ms
    chosen = or_(near, fits, Job.id.in_(list(include))) if include else or_(near, fits)
    stmt = (
        select(Job.id, Job.requested_tasks, Job.deadline_s, Job.submitted_ms)
        .where(Job.state == QUEUED, chosen)
        .order_by(Job.submitted_ms, Job.id)
    )
    return [
        justice.Job(job_id, tasks, deadline_s, submitted_ms / 1000)
        for job_id, tasks, deadline_s, submitted_ms in _plain_rows(session, stmt)
    ]


def holding_inputs(session: Session) -> tuple[list[justice.RunningJob], int]:
    """The CPU-holding jobs (admitted, submitting, submitted; as ``admission_inputs`` gives
    them) and how many jobs are queued, in one query: what an incremental round reads when it
    has the new jobs in hand."""
    queued = select(func.count().label("n")).where(Job.state == QUEUED).subquery()
    # One row even when nothing holds CPUs: the count, joined to every holding job.
    stmt = (
        select(queued.c.n, *_ADMISSION_COLUMNS)
        .select_from(queued)
        .outerjoin(Job, Job.state.in_(list(HOLDING_STATES)))
        .order_by(Job.submitted_ms, Job.id)
    )
    count = 0
    running: list[justice.RunningJob] = []
    for n, job_id, _state, tasks, deadline_s, submitted_ms, cpus in _plain_rows(session, stmt):
        count = int(n)
        if job_id is not None:
            running.append(_running(job_id, tasks, deadline_s, submitted_ms, cpus))
    return running, count


# Built once, as ``_SELECT_ESTIMATOR``: a submission's incremental round reads it.
_HOLDING_JOBS = (
    select(*_ADMISSION_COLUMNS)
    .where(Job.state.in_(list(HOLDING_STATES)))
    .order_by(Job.submitted_ms, Job.id)
)


def holding_jobs(session: Session) -> list[justice.RunningJob]:
    """The CPU-holding jobs alone (``holding_inputs`` without the count): what a submission's
    incremental round reads, whose cost must not grow with the queue (counting 10,000 queued
    rows took 2 to 3 ms of every submission batch on PostgreSQL)."""
    return [
        _running(job_id, tasks, deadline_s, submitted_ms, cpus)
        for job_id, _state, tasks, deadline_s, submitted_ms, cpus in _plain_rows(
            session, _HOLDING_JOBS
        )
    ]


def admitted_containers(session: Session) -> dict[str, int]:
    """Per queue, the containers the jobs admission let run there hold at least: each holding
    job's granted vcores plus its ApplicationMaster (YARN starts one per application, whatever
    the admission policy books for it). What the queue controller keeps those queues at."""
    stmt = (
        select(Job.queue, func.sum(func.coalesce(Job.granted_cpus, 0) + 1))
        .where(Job.state.in_(list(HOLDING_STATES)))
        .group_by(Job.queue)
    )
    return {queue: int(n) for queue, n in session.execute(stmt)}


def count_queued(session: Session) -> int:
    """Jobs waiting for admission."""
    return int(session.scalar(select(func.count()).where(Job.state == QUEUED)) or 0)


def transition(
    session: Session, job_id: str, from_states: Sequence[str], now_ms: int, **values: Any
) -> bool:
    """Move a job out of one of ``from_states``, setting ``values``; False if it was elsewhere."""
    stmt = (
        update(Job)
        .where(Job.id == job_id, Job.state.in_(list(from_states)))
        .values(updated_ms=now_ms, **values)
        .execution_options(synchronize_session=False)
    )
    result: CursorResult[Any] = session.execute(stmt)  # type: ignore[assignment]
    return result.rowcount == 1


def set_queued_reason(
    session: Session, job_ids: Collection[str], reason: str, *, only_if: str | None = None
) -> None:
    """Store ``reason`` on those of ``job_ids`` still queued (and whose reason is ``only_if``,
    when given): what a queued job says while it waits, for its readers and for the next round
    (a round that planned nothing leaves its mark there)."""
    ids = sorted(job_ids)
    session.flush()
    for at in range(0, len(ids), _IDS_PER_STATEMENT):
        stmt = update(Job).where(Job.id.in_(ids[at : at + _IDS_PER_STATEMENT]), Job.state == QUEUED)
        if only_if is not None:
            stmt = stmt.where(Job.reason == only_if)
        session.execute(stmt.values(reason=reason).execution_options(synchronize_session=False))


def queued_with_reason(session: Session, *reasons: str) -> set[str]:
    """The queued jobs whose stored reason is one of ``reasons`` (``set_queued_reason``)."""
    session.flush()
    stmt = select(Job.id).where(Job.state == QUEUED, Job.reason.in_(reasons))
    return set(session.scalars(stmt))


# Ids per statement of ``set_queued_reason`` (one bind parameter each, far under any limit).
_IDS_PER_STATEMENT = 1000

# Ids per compare-and-set statement of ``drop_queued`` on SQLite (three bind parameters each,
# under its limit).
_DROPS_PER_STATEMENT = 300


def drop_queued(session: Session, reasons: Mapping[str, str], now_ms: int) -> set[str]:
    """Drop the queued jobs named in ``reasons``, each with its own reason, by compare-and-set
    (what ``transition`` does for one); returns the ids dropped (a job no longer queued is left
    as it is). On PostgreSQL one statement joins the jobs with the ids and reasons passed as two
    arrays; elsewhere one statement per ``_DROPS_PER_STATEMENT`` ids. A round that drops
    thousands at once (an admission policy switched on over a long queue) made two statements
    per job and held the admission lock for seconds."""
    ids = sorted(reasons)
    if session.get_bind().dialect.name == "postgresql":
        given = (
            func.unnest(
                bindparam("drop_ids", ids, type_=postgresql.ARRAY(Job.id.type)),
                bindparam(
                    "drop_reasons", [reasons[i] for i in ids], type_=postgresql.ARRAY(Text())
                ),
            )
            .table_valued("id", "reason")
            .render_derived(name="given")
        )
        return set(
            session.execute(
                update(Job)
                .where(Job.id == given.c.id, Job.state == QUEUED)
                .values(state=DROPPED, updated_ms=now_ms, reason=given.c.reason)
                .returning(Job.id)
                .execution_options(synchronize_session=False)
            ).scalars()
        )
    dropped: set[str] = set()
    for at in range(0, len(ids), _DROPS_PER_STATEMENT):
        chunk = ids[at : at + _DROPS_PER_STATEMENT]
        stmt = (
            update(Job)
            .where(Job.id.in_(chunk), Job.state == QUEUED)
            .values(
                state=DROPPED,
                updated_ms=now_ms,
                reason=case({job_id: reasons[job_id] for job_id in chunk}, value=Job.id),
            )
            .returning(Job.id)
            .execution_options(synchronize_session=False)
        )
        dropped.update(session.execute(stmt).scalars())
    return dropped


def transition_app(
    session: Session,
    job_id: str,
    from_states: Sequence[str],
    current_app_id: str | None,
    now_ms: int,
    **values: Any,
) -> bool:
    """``transition`` that also requires the job's current ``app_id`` (write-ahead submission:
    whoever reserved the id owns the submit; a second claimant sees the id changed and stops)."""
    owned = Job.app_id.is_(None) if current_app_id is None else Job.app_id == current_app_id
    stmt = (
        update(Job)
        .where(Job.id == job_id, Job.state.in_(list(from_states)), owned)
        .values(updated_ms=now_ms, **values)
        .execution_options(synchronize_session=False)
    )
    result: CursorResult[Any] = session.execute(stmt)  # type: ignore[assignment]
    return result.rowcount == 1


def add_decision(session: Session, decision: JobDecision) -> JobDecision:
    """Append one decision or lifecycle step of a job (``insert_new``, as ``add_decisions``)."""
    insert_new(session, [decision])
    return decision


def add_decisions(session: Session, decisions: Sequence[JobDecision]) -> None:
    """Append several decisions in one statement, ids in this order (``insert_new``: they stay
    out of the session)."""
    insert_new(session, decisions)


def insert_jobs(session: Session, jobs: Sequence[Job]) -> None:
    """Insert new jobs in one statement (``insert_new``); a used idempotency key fails here."""
    insert_new(session, jobs)


# The round's cluster id looked up in the insert itself: one round trip less per round.
_ROUND_CLUSTER = select(Cluster.id).where(Cluster.name == bindparam("round_cluster"))
_INSERT_ROUND = insert(cast(Table, Decision.__table__)).values(
    cluster_id=_ROUND_CLUSTER.scalar_subquery()
)


def add_round(session: Session, cluster_name: str, row: Decision) -> int:
    """Insert an admission round's audit row for ``cluster_name`` (its ``cluster_id`` NULL when
    the poller has not created the cluster) and return its id, which is set on ``row`` too."""
    values = _insert_values(row)
    del values["cluster_id"]
    session.flush()
    result = session.connection().execute(_INSERT_ROUND, {**values, "round_cluster": cluster_name})
    row.id = _new_id(result)
    return row.id


# ---- inserts through Core ----------------------------------------------------------------------
# A submission batch inserts its jobs, its round's audit row and their decisions. Through the ORM
# that is two unit-of-work flushes, which took about as much CPU as the rest of the batch's
# statements together; the rows are new and nothing in the transaction reads them back through
# the session, so they go through Core.


def insert_new(session: Session, rows: Sequence[Base]) -> None:
    """Insert new objects of one mapped class in one statement, after the session's pending
    changes (flushed first, for the rows these refer to). The objects stay out of the session:
    the caller keeps them as what was stored (``_insert_values``), autoincrement ids included."""
    if not rows:
        return
    session.flush()
    cls = type(rows[0])
    table = cast(Table, cls.__table__)
    key = table.autoincrement_column
    values = [_insert_values(r) for r in rows]
    conn = session.connection()
    if key is None:
        conn.execute(_insert_of(table), values)
    elif conn.dialect.insert_executemany_returning_sort_by_parameter_order:
        returned = conn.execute(_insert_returning(table), values)
        for row, (new_id,) in zip(rows, returned, strict=True):
            setattr(row, key.key, new_id)
    else:  # a SQLite before 3.35 has no RETURNING: one statement a row
        for row, one in zip(rows, values, strict=True):
            setattr(row, key.key, _new_id(conn.execute(_insert_of(table), one)))


def _new_id(result: CursorResult[Any]) -> int:
    """The autoincrement id a one-row INSERT gave."""
    key = result.inserted_primary_key
    assert key is not None  # an INSERT's result
    return int(key[0])


@functools.cache
def _insert_of(table: Table) -> Insert:
    return insert(table)


@functools.cache
def _insert_returning(table: Table) -> Insert:
    """``table``'s INSERT, returning its autoincrement ids in the order of the rows given."""
    key = table.autoincrement_column
    assert key is not None
    return insert(table).returning(key, sort_by_parameter_order=True)


_Default = Callable[[], Any]


@functools.cache
def _insert_plan(cls: type[Base]) -> tuple[tuple[str, _Default | None], ...]:
    """Per column attribute but an autoincrement key: its name and its Python-side default."""
    table = cast(Table, cls.__table__)
    plan: list[tuple[str, _Default | None]] = []
    for prop in sa_inspect(cls).column_attrs:
        column = prop.columns[0]
        if column is table.autoincrement_column:
            continue
        default = column.default
        make: _Default | None = None
        if default is not None and getattr(default, "is_callable", False):
            make = functools.partial(default.arg, None)  # wrapped to take an execution context
        elif default is not None and getattr(default, "is_scalar", False):
            make = functools.partial(_same, default.arg)
        plan.append((prop.key, make))
    return tuple(plan)


def _same(value: Any) -> Any:
    return value


def _insert_values(row: Base) -> dict[str, Any]:
    """``row``'s columns as its INSERT takes them. A column never set gets its default set on
    the object first, as a flush would, so the object shows what was stored; every row of a
    class has the same keys, which one statement for many rows needs."""
    given = row.__dict__
    values: dict[str, Any] = {}
    for key, make in _insert_plan(type(row)):
        if key in given:
            values[key] = given[key]
        elif make is not None:
            values[key] = value = make()
            setattr(row, key, value)
        else:
            values[key] = None
    return values


def decisions_of(session: Session, job_id: str) -> list[JobDecision]:
    """Every decision of a job, oldest first."""
    stmt = select(JobDecision).where(JobDecision.job_id == job_id).order_by(JobDecision.id)
    return list(session.scalars(stmt))


def first_decision(session: Session, job_id: str) -> JobDecision | None:
    """The decision the job's submission produced."""
    stmt = select(JobDecision).where(JobDecision.job_id == job_id).order_by(JobDecision.id)
    return session.scalars(stmt.limit(1)).first()


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Filters of ``GET /jobs``; times are epoch ms on the submission time."""

    state: str | None = None
    queue: str | None = None
    submitted_from_ms: int | None = None
    submitted_to_ms: int | None = None


def list_jobs(
    session: Session, flt: JobFilter, limit: int, cursor: str | None
) -> tuple[list[Job], str | None]:
    """Jobs newest first (submission time, then id), keyset-paginated."""
    stmt = select(Job)
    if flt.state:
        stmt = stmt.where(Job.state == flt.state)
    if flt.queue:
        stmt = stmt.where(
            or_(Job.queue == flt.queue, Job.queue.endswith(f".{flt.queue}", autoescape=True))
        )
    if flt.submitted_from_ms is not None:
        stmt = stmt.where(Job.submitted_ms >= flt.submitted_from_ms)
    if flt.submitted_to_ms is not None:
        stmt = stmt.where(Job.submitted_ms < flt.submitted_to_ms)
    if cursor:
        last_ms, last_id = decode_cursor(cursor, 2)
        if not isinstance(last_ms, int) or not isinstance(last_id, str):
            raise InvalidCursor("cursor is not one this server issued")
        stmt = stmt.where(
            or_(Job.submitted_ms < last_ms, and_(Job.submitted_ms == last_ms, Job.id < last_id))
        )
    stmt = stmt.order_by(Job.submitted_ms.desc(), Job.id.desc()).limit(limit + 1)
    rows = list(session.scalars(stmt))
    next_cursor = None
    if len(rows) > limit:
        rows = rows[:limit]
        next_cursor = encode_cursor([rows[-1].submitted_ms, rows[-1].id])
    return rows, next_cursor


# ---- observations ------------------------------------------------------------------------------


def jobs_with_apps(session: Session, states: Sequence[str]) -> list[tuple[Job, Application]]:
    """Jobs in ``states`` whose YARN application the poller has recorded."""
    stmt = (
        select(Job, Application)
        .join(Application, Application.app_id == Job.app_id)
        .where(Job.state.in_(list(states)))
        .order_by(Job.submitted_ms)
    )
    return [(job, app) for job, app in session.execute(stmt).all()]


def last_good_poll_ms(session: Session, cluster_name: str) -> int | None:
    """When the poller last read the whole RM successfully, or ``None`` before any poll."""
    return session.scalar(select(Cluster.last_good_poll_ms).where(Cluster.name == cluster_name))


def _settled(settled_ms: int, finished_ms: ColumnElement[Any] | None = None) -> Any:
    # The poller re-reads a finished app until its grace has passed; only then is it final.
    finished = Application.finished_ms if finished_ms is None else finished_ms
    return or_(finished.is_(None), finished <= settled_ms)


# The app's state and finish time as expressions no index matches (the ``+column`` idiom), with
# the same values and order: a planner given an index on either would walk every finished app of
# the history (SQLite has no statistics to know better) rather than the few rows a work list
# holds (``unlearned_job_apps``, ``unobserved_tagged_apps``).
_UNINDEXED_APP_STATE = Application.state.concat("")
_UNINDEXED_APP_FINISHED = Application.finished_ms + 0


def unlearned_job_apps(
    session: Session, settled_ms: int, limit: int = 500
) -> list[tuple[Job, Application]]:
    """Jobs whose app ended before ``settled_ms`` and that TRACK_JOB has not considered yet.

    Driven from the jobs table: each ended job's app is found by its primary key, so the cost
    follows the sidecar's own jobs, never the rest of the applications history. The app-side
    conditions are written so no index on ``applications`` applies: a planner
    that walked the apps by state or finish time would read every finished app instead."""
    stmt = (
        select(Job, Application)
        .join(Application, Application.app_id == Job.app_id)
        .outerjoin(EstimatorObservation, EstimatorObservation.app_id == Job.app_id)
        .where(
            EstimatorObservation.app_id.is_(None),
            Job.state.in_([FINISHED, FAILED, KILLED, CANCELLED]),
            _UNINDEXED_APP_STATE.in_(sorted(FINAL_APP_STATES)),
            _settled(settled_ms, _UNINDEXED_APP_FINISHED),
        )
        .order_by(_UNINDEXED_APP_FINISHED, Application.app_id)
        .limit(limit)
    )
    return [(job, app) for job, app in session.execute(stmt).all()]


def unseen_job_apps(
    session: Session, cluster_name: str, states: Sequence[str], unlisted_grace_ms: int
) -> list[tuple[str, str, bool]]:
    """(job id, app id, listed) of the jobs whose app the RM may have dropped: jobs in
    ``states`` whose app is not final in the history but was missing from the latest good poll
    (which lists every app the RM still holds; ``listed`` True), and submitted jobs whose app no
    good poll has listed at all although the latest one started ``unlisted_grace_ms`` or more
    after the app's submission (``listed`` False: the RM lost it before the poller saw it, or
    the poller has not caught it yet). Oldest submission first."""
    last_good = last_good_poll_ms(session, cluster_name)
    if last_good is None:
        return []
    gone = and_(
        Application.app_id.is_not(None),
        Application.state.not_in(sorted(FINAL_APP_STATES)),
        Application.gone_ms.is_not(None),
    )
    # An app without a row never was listed: the poller writes every app it lists.
    never_listed = and_(
        Application.app_id.is_(None),
        Job.state == SUBMITTED,
        Job.yarn_submitted_ms <= last_good - unlisted_grace_ms,
    )
    stmt = (
        select(Job.id, Job.app_id, Application.app_id.is_not(None))
        .outerjoin(Application, Application.app_id == Job.app_id)
        .where(Job.state.in_(list(states)), Job.app_id.is_not(None), or_(gone, never_listed))
        .order_by(Job.submitted_ms, Job.id)
    )
    return [
        (job_id, app_id, bool(listed))
        for job_id, app_id, listed in session.execute(stmt).all()
        if app_id is not None
    ]


def live_job_tagged_apps(session: Session, cluster_name: str) -> list[Application]:
    """Apps carrying a ``sidecar-job:`` tag that the latest good poll listed as not final."""
    last_good = last_good_poll_ms(session, cluster_name)
    if last_good is None:
        return []
    stmt = select(Application).where(
        _not_final_app_state(),
        Application.gone_ms.is_(None),
        Application.tags.contains(f",{JOB_TAG}", autoescape=True),
    )
    return list(session.scalars(stmt))


def _not_final_app_state() -> ColumnElement[bool]:
    """``applications.state NOT IN FINAL_APP_STATES`` as the ranges between the final states,
    each of which the index on ``applications.state`` answers: the live apps alone are read,
    never the finished history (a ``NOT IN`` is answered by reading every row). The same rows
    on any collation that orders the final states (upper-case ASCII words) as Python does,
    which every SQLite and PostgreSQL collation does; the ``NOT IN`` is kept as a check."""
    state, finals = Application.state, sorted(FINAL_APP_STATES)
    ranges: list[ColumnElement[bool]] = [state < finals[0]]
    ranges += [and_(state > low, state < high) for low, high in pairwise(finals)]
    ranges.append(state > finals[-1])
    return and_(or_(*ranges), state.not_in(finals))


def last_step_ms(session: Session, job_id: str, action: str) -> int | None:
    """When the job's latest decision with ``action`` was recorded."""
    stmt = select(func.max(JobDecision.created_ms)).where(
        JobDecision.job_id == job_id, JobDecision.action == action
    )
    return session.scalar(stmt)


def unobserved_tagged_apps(
    session: Session, settled_ms: int, limit: int = 500
) -> list[Application]:
    """Apps tagged ``deadline:`` that no sidecar job owns, ended before ``settled_ms``, and that
    nobody has learned from.

    The tag tests are the predicate of the partial index ``ix_applications_deadline_tagged``,
    with literals (a bound parameter would keep the engines from using it), and the state and
    finish time are tested as expressions no other index matches: the query reads the tagged
    apps alone, in the order it returns them, rather than every finished app."""
    stmt = (
        select(Application)
        .outerjoin(EstimatorObservation, EstimatorObservation.app_id == Application.app_id)
        .where(
            EstimatorObservation.app_id.is_(None),
            _UNINDEXED_APP_STATE.in_(sorted(FINAL_APP_STATES)),
            _settled(settled_ms, _UNINDEXED_APP_FINISHED),
            *deadline_tagged(),
        )
        .order_by(Application.finished_ms, Application.app_id)
        .limit(limit)
    )
    return list(session.scalars(stmt))


def deadline_tagged() -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    """``tags`` holds a ``deadline:`` tag and no ``sidecar-job:`` one, worded as the predicate
    of ``ix_applications_deadline_tagged`` (``app.db.models.DEADLINE_TAGGED_SQL``)."""
    return (
        Application.tags.like(literal(DEADLINE_TAGGED_LIKE, literal_execute=True)),
        Application.tags.not_like(literal(JOB_TAGGED_LIKE, literal_execute=True)),
    )


def is_observed(session: Session, app_id: str) -> bool:
    """True once an app has been considered by TRACK_JOB."""
    return session.get(EstimatorObservation, app_id) is not None


def add_observation(session: Session, observation: EstimatorObservation) -> None:
    """Record that an app was learned from or skipped (its id is the primary key: once only)."""
    session.add(observation)
    session.flush()


def observations(session: Session, limit: int = 100) -> list[EstimatorObservation]:
    """The most recent observations, newest first."""
    stmt = (
        select(EstimatorObservation)
        .order_by(EstimatorObservation.observed_ms.desc(), EstimatorObservation.app_id)
        .limit(limit)
    )
    return list(session.scalars(stmt))


# ---- the admission policy chosen at run time -----------------------------------------------------


_ADMISSION_SETTING = select(AdmissionSetting).where(
    AdmissionSetting.cluster_name == bindparam("name")
)


def admission_setting(session: Session, cluster_name: str) -> AdmissionSetting | None:
    """The operator's admission policy for the cluster, or ``None`` (use the settings)."""
    # A built select rather than ``session.get``: every round reads it in a fresh session,
    # where the identity map holds nothing to look up first.
    return session.scalar(_ADMISSION_SETTING, {"name": cluster_name})


def save_admission_setting(
    session: Session, cluster_name: str, policy: str, params: dict[str, Any], now_ms: int
) -> AdmissionSetting:
    """Store (insert or replace) the admission policy for the cluster; two operators writing at
    once both succeed, the later write wins, and neither sees a key conflict."""
    change = {"policy": policy, "params": params, "updated_ms": now_ms}
    values = {"cluster_name": cluster_name, **change}
    if session.get_bind().dialect.name == "postgresql":
        pg = postgresql.insert(AdmissionSetting).values(values)
        session.execute(pg.on_conflict_do_update(index_elements=["cluster_name"], set_=change))
    else:
        lite = sqlite.insert(AdmissionSetting).values(values)
        session.execute(lite.on_conflict_do_update(index_elements=["cluster_name"], set_=change))
    row = session.get(AdmissionSetting, cluster_name, populate_existing=True)
    assert row is not None
    return row


def new_job_id() -> str:
    """A random 32-hex-digit id (lower case, as YARN stores tags)."""
    return uuid.uuid4().hex


def new_job_row(
    *,
    name: str,
    queue: str,
    requested_tasks: int,
    input_bytes: int | None,
    block_size: int | None,
    deadline_ms: int,
    run: Mapping[str, Any],
    tags: Sequence[str],
    idempotency_key: str | None,
    request_hash: str,
    now_ms: int,
    owner: str | None = None,
) -> Job:
    """A queued job as ``POST /jobs`` stores it (not yet added to a session); ``owner`` None
    takes the current principal's user (the column default)."""
    extra: dict[str, Any] = {} if owner is None else {"owner": owner}
    return Job(
        **extra,
        id=new_job_id(),
        name=name,
        queue=queue,
        state=QUEUED,
        requested_tasks=requested_tasks,
        input_bytes=input_bytes,
        block_size=block_size,
        deadline_s=(deadline_ms - now_ms) / 1000,
        deadline_ms=deadline_ms,
        submitted_ms=now_ms,
        run=dict(run),
        tags=list(tags),
        idempotency_key=idempotency_key,
        idempotency_owner=key_scope(owner if owner is not None else current_user()),
        request_hash=request_hash,
        timeout_set=False,
        reason="",
        updated_ms=now_ms,
    )
