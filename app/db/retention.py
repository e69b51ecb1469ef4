"""Retention of the recorded history: raw samples for a window, hourly means beyond it, nothing
beyond the longest window.

What grows with every poll is thinned or pruned here, in small transactions so no statement
holds locks for long (the poller and the API keep writing meanwhile):

* ``queue_samples`` and ``cluster_samples`` older than the raw window are downsampled in place
  to one row per queue (cluster) and hour, whose numbers are the hour's means; readers of the
  series see hourly points there and need no second table. Beyond the hourly window they go.
* ``node_samples`` are change records (a row only when a node changed): beyond the raw window
  each node keeps its last record of each hour (its state at the end of the hour); beyond the
  hourly window they go, except each node's newest row, which is its current state.
* ``polls`` (one row per poll, for ``/ready`` and debugging) are kept for the raw window.
* ``decisions`` (the audit trail) are kept for their own window; pushes and job steps that
  pointed at a pruned decision keep their own record (the reference becomes null). Controller
  ticks that changed nothing (``ROUTINE_STATUSES``) go with the raw window: each carries the
  tick's inputs, about 1.5 KB per queue, and a tick a minute at 200 queues wrote 457 MB a day
  that a year's window kept.
* ``jobs`` and ``job_decisions`` are first counted out of ``/metrics``' per-row counts: every job
  decision, and every ended job an hour after its last change (``TALLY_SETTLE_MS``), is added to
  ``job_tallies`` and stamped ``tallied_ms`` in one transaction, so a scrape counts only the rows
  not stamped yet. Beyond the decision window a job decision goes by its own age, once its job
  has ended and both are stamped. A job given a YARN application (``app_id`` set) keeps its row
  for good, as ``applications`` keeps the app's: the what-if tool reads its deadline from it and
  Promise's estimator joins it with the runs it learned from. A job never given one (dropped,
  refused or cancelled before submission) goes once ended and unchanged for the decision window,
  found through a partial index holding only such rows (``PRUNABLE_SQL``), so a step reads the
  rows it deletes and never the kept history. A pruned job is unknown to ``GET /jobs/{id}``, and
  its idempotency key may make a new job; a kept job whose decisions went answers a replayed
  ``POST /jobs`` without its first decision.
* ``ledger_entries`` (one row per queue and controller interval) are kept for the hourly window,
  except each queue's newest row: the ledger continues from the newest row's end and from its
  state in ``policy_states``, and ``/metrics`` reads each queue's debt from its newest row. They
  are read cluster by cluster through ``ix_ledger_entries_cluster_end``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, exists, func, select, text, update
from sqlalchemy.orm import Session, aliased

from app.db import observe_repo
from app.db.control_models import LedgerEntry
from app.db.jobs_models import PRUNABLE_SQL, UNTALLIED_SQL, Job, JobDecision
from app.db.models import Cluster, ClusterSample, Decision, NodeSample, PollRecord, QueueSample
from app.domain.tags import FINAL_STATES

HOUR_MS = 3_600_000
# Controller ticks that did nothing: no change worth pushing, the static policy, observe mode.
ROUTINE_STATUSES = ("no_change", "static", "observe")
# Rows read per scan for hours still to downsample (bounded work per step).
SCAN_ROWS = 20_000
DAY_MS = 24 * HOUR_MS
# How long an ended job stays counted from its own row before it is tallied: its state and
# deadline outcome are written when it ends, and nothing changes them after, but a job that
# ended moments ago may still be in a transaction that has not committed its last step.
TALLY_SETTLE_MS = HOUR_MS

# Numeric columns averaged when an hour of samples becomes one row.
_QUEUE_MEANS = (
    "capacity",
    "max_capacity",
    "used_capacity",
    "absolute_capacity",
    "absolute_used_capacity",
    "used_vcores",
    "used_memory_mb",
    "pending_vcores",
    "pending_memory_mb",
    "pending_containers",
    "running_apps",
    "pending_apps",
)
_CLUSTER_MEANS = (
    "nodes",
    "running_nodes",
    "capability_vcores",
    "capability_mb",
    "used_vcores",
    "used_mb",
    "num_containers",
)


@dataclass(frozen=True, slots=True)
class Windows:
    """How long each kind of history is kept (days)."""

    raw_days: float = 7.0
    hourly_days: float = 365.0
    decision_days: float = 365.0


@dataclass(slots=True)
class Pruned:
    """What one pass did, by table."""

    downsampled_hours: dict[str, int] = field(default_factory=dict)
    deleted_rows: dict[str, int] = field(default_factory=dict)
    more: bool = False  # another step has work to do

    def add(self, table: str, hours: int = 0, rows: int = 0) -> None:
        self.downsampled_hours[table] = self.downsampled_hours.get(table, 0) + hours
        self.deleted_rows[table] = self.deleted_rows.get(table, 0) + rows

    @property
    def total_rows(self) -> int:
        return sum(self.deleted_rows.values())


def _hour_groups(
    session: Session, model: Any, key: Any, cutoff_ms: int, since_ms: int, limit: int
) -> tuple[list[tuple[Any, int]], int]:
    """(key, hour) buckets in ``[since_ms, cutoff_ms)`` that still hold more than one row, oldest
    first, and where the next scan starts (the hour of the last complete bucket scanned)."""
    rows = session.execute(
        select(key, model.taken_ms)
        .where(model.taken_ms < cutoff_ms, model.taken_ms >= since_ms)
        .order_by(model.taken_ms)
        .limit(SCAN_ROWS)
    ).all()
    counts: dict[tuple[Any, int], int] = {}
    for k, taken in rows:
        bucket = (k, int(taken) // HOUR_MS)
        counts[bucket] = counts.get(bucket, 0) + 1
    if len(rows) < SCAN_ROWS:
        resume = cutoff_ms // HOUR_MS * HOUR_MS  # everything before the cutoff was seen
    else:
        resume = int(rows[-1][1]) // HOUR_MS * HOUR_MS  # the last hour may be partial
    groups = sorted((b for b, n in counts.items() if n > 1), key=lambda b: b[1])
    if len(groups) > limit:
        resume = min(resume, groups[limit][1] * HOUR_MS)
    return groups[:limit], resume


def _downsample(
    session: Session,
    model: Any,
    key: Any,
    means: Sequence[str],
    groups: Sequence[tuple[Any, int]],
) -> int:
    """Turn each (key, hour) group into one row holding the hour's means (with no means: the
    hour's last row, a node's state at the end of the hour); returns the rows deleted."""
    deleted = 0
    for k, hour in groups:
        start, end = hour * HOUR_MS, (hour + 1) * HOUR_MS
        where = (key == k, model.taken_ms >= start, model.taken_ms < end)
        pick = func.min(model.id) if means else func.max(model.id)
        averages = session.execute(
            select(pick, *(func.avg(getattr(model, c)) for c in means)).where(*where)
        ).one()
        keeper, values = averages[0], averages[1:]
        if keeper is None:
            continue
        typed = {}
        for column, value in zip(means, values, strict=True):
            python_type = getattr(model, column).type.python_type
            typed[column] = round(float(value)) if python_type is int else float(value)
        if typed:
            session.execute(update(model).where(model.id == keeper).values(**typed))
        result = session.execute(delete(model).where(*where, model.id != keeper))
        deleted += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return deleted


def _delete_before(session: Session, model: Any, column: Any, cutoff_ms: int, limit: int) -> int:
    """Delete at most ``limit`` rows with ``column`` before ``cutoff_ms`` (oldest first)."""
    ids = select(model.id).where(column < cutoff_ms).order_by(model.id).limit(limit)
    result = session.execute(delete(model).where(model.id.in_(ids.scalar_subquery())))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def _delete_counted(
    session: Session,
    model: Any,
    column: Any,
    cutoff_ms: int,
    limit: int,
    now_ms: int,
    *only: Any,
) -> int:
    """``_delete_before`` for a table whose rows ``/metrics`` counts (polls, decisions), of
    the rows matching ``only`` too: the deleted rows are tallied in the same transaction
    (``observe_repo.retire``), so those counters never go down."""
    ids = select(model.id).where(column < cutoff_ms, *only).order_by(model.id).limit(limit)
    gone = session.execute(
        delete(model)
        .where(model.id.in_(ids.scalar_subquery()))
        .returning(*observe_repo.RETIRED_COLUMNS[model])
    ).all()
    observe_repo.retire(session, model, gone, now_ms)
    return len(gone)


def _delete_old_node_changes(session: Session, cutoff_ms: int, limit: int) -> int:
    """Node change records before ``cutoff_ms``, except each node's newest row."""
    newest = (
        select(func.max(NodeSample.id))
        .group_by(NodeSample.cluster_id, NodeSample.node_id)
        .scalar_subquery()
    )
    ids = (
        select(NodeSample.id)
        .where(NodeSample.taken_ms < cutoff_ms, NodeSample.id.not_in(newest))
        .order_by(NodeSample.id)
        .limit(limit)
    )
    result = session.execute(delete(NodeSample).where(NodeSample.id.in_(ids.scalar_subquery())))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def prune_step(
    session: Session, windows: Windows, now_ms: int, *, batch: int, since: dict[str, int]
) -> Pruned:
    """One bounded step of retention (at most ``batch`` rows deleted per table, fewer hour
    groups). ``since`` holds, per table, where the downsampling scan resumes, and is advanced.
    The caller commits the step and calls again while ``more`` is true."""
    out = Pruned()
    # whole hours only: an hour is downsampled once, when all of it is past the raw window
    raw_cut = (now_ms - int(windows.raw_days * DAY_MS)) // HOUR_MS * HOUR_MS
    hourly_cut = now_ms - int(windows.hourly_days * DAY_MS)
    groups = max(1, batch // 400)
    for name, model, key, means in (
        ("queue_samples", QueueSample, QueueSample.queue_id, _QUEUE_MEANS),
        ("cluster_samples", ClusterSample, ClusterSample.cluster_id, _CLUSTER_MEANS),
        ("node_samples", NodeSample, NodeSample.node_id, ()),
    ):
        if model is NodeSample:
            gone = _delete_old_node_changes(session, hourly_cut, batch)
        else:
            gone = _delete_before(session, model, model.taken_ms, hourly_cut, batch)
        out.add(name, rows=gone)
        start = max(since.get(name, 0), hourly_cut)
        found, resume = _hour_groups(session, model, key, raw_cut, start, groups)
        out.add(name, hours=len(found), rows=_downsample(session, model, key, means, found))
        out.more = out.more or resume < raw_cut // HOUR_MS * HOUR_MS or bool(found)
        since[name] = resume
    polls = _delete_counted(session, PollRecord, PollRecord.started_ms, raw_cut, batch, now_ms)
    out.add("polls", rows=polls)
    decision_cut = now_ms - int(windows.decision_days * DAY_MS)
    decisions = _delete_counted(session, Decision, Decision.created_ms, decision_cut, batch, now_ms)
    routine = (Decision.kind == observe_repo.QUEUE_KIND, Decision.status.in_(ROUTINE_STATUSES))
    decisions += _delete_counted(
        session, Decision, Decision.created_ms, raw_cut, batch, now_ms, *routine
    )
    out.add("decisions", rows=decisions)
    tallied = _tally_jobs(session, now_ms, batch)
    steps, jobs = _prune_jobs(session, decision_cut, batch)
    out.add("job_decisions", rows=steps)
    out.add("jobs", rows=jobs)
    out.add("ledger_entries", rows=_delete_old_ledger(session, hourly_cut, batch))
    out.more = out.more or tallied >= batch
    out.more = out.more or any(n >= batch for n in out.deleted_rows.values())
    return out


def _tally_jobs(session: Session, now_ms: int, limit: int) -> int:
    """Stamp up to ``limit`` job decisions and ``limit`` settled ended jobs ``tallied_ms`` and add
    them to ``job_tallies`` (``observe_repo.tally_jobs``); returns the larger of the two counts.
    Both are found through the partial indexes holding only the rows not stamped yet."""
    untallied = text(UNTALLIED_SQL)
    step_ids = select(JobDecision.id).where(untallied).order_by(JobDecision.id).limit(limit)
    steps = session.execute(
        update(JobDecision)
        .where(JobDecision.id.in_(step_ids.scalar_subquery()), JobDecision.tallied_ms.is_(None))
        .values(tallied_ms=now_ms)
        .returning(JobDecision.action, JobDecision.reason)
        .execution_options(synchronize_session=False)
    ).all()
    job_ids = (
        select(Job.id)
        .where(
            untallied,
            Job.state.in_(FINAL_STATES),
            Job.updated_ms < now_ms - TALLY_SETTLE_MS,
        )
        .order_by(Job.id)
        .limit(limit)
    )
    jobs = session.execute(
        update(Job)
        # re-checked by the update itself: another pass may have stamped them meanwhile
        .where(
            Job.id.in_(job_ids.scalar_subquery()),
            Job.tallied_ms.is_(None),
            Job.state.in_(FINAL_STATES),
        )
        .values(tallied_ms=now_ms)
        .returning(Job.state, Job.met_deadline)
        .execution_options(synchronize_session=False)
    ).all()
    observe_repo.tally_jobs(session, jobs, steps, now_ms)
    return max(len(steps), len(jobs))


def _prune_jobs(session: Session, cutoff_ms: int, limit: int) -> tuple[int, int]:
    """Delete up to ``limit`` job decisions made before ``cutoff_ms`` and up to ``limit`` jobs
    never given an app that last changed before it (both ended and tallied); returns (decisions,
    jobs) deleted."""
    owner = aliased(Job)
    # Oldest first along ``ix_job_decisions_created``: the rows a step walks are the ones it
    # deletes, bar the few of jobs still running (or ended in the last hour) that old.
    step_ids = (
        select(JobDecision.id)
        .where(
            JobDecision.created_ms < cutoff_ms,
            JobDecision.tallied_ms.is_not(None),
            exists().where(
                owner.id == JobDecision.job_id,
                owner.state.in_(FINAL_STATES),
                owner.tallied_ms.is_not(None),
            ),
        )
        .order_by(JobDecision.created_ms, JobDecision.id)
        .limit(limit)
    )
    steps = session.execute(
        delete(JobDecision).where(JobDecision.id.in_(step_ids.scalar_subquery()))
    )
    # Only jobs without an app: one with an app keeps its row for good (the module's docstring).
    # ``ix_jobs_prunable`` holds only those, once ended and tallied; the engines use it because
    # the WHERE repeats its predicate word for word. No other indexed term here (a tallied job
    # has ended): SQLite could take it to another index and read the jobs kept.
    job_ids = (
        select(Job.id)
        .where(
            text(PRUNABLE_SQL),
            Job.updated_ms < cutoff_ms,
            # A decision still here goes with its job (``ON DELETE CASCADE``), so only once it is
            # tallied and every counter keeps it; the next step tallies it and takes the job.
            ~exists().where(JobDecision.job_id == Job.id, JobDecision.tallied_ms.is_(None)),
        )
        .order_by(Job.updated_ms, Job.id)
        .limit(limit)
    )
    jobs = session.execute(delete(Job).where(Job.id.in_(job_ids.scalar_subquery())))
    return int(steps.rowcount or 0), int(jobs.rowcount or 0)  # type: ignore[attr-defined]


def _delete_old_ledger(session: Session, cutoff_ms: int, limit: int) -> int:
    """Up to ``limit`` ledger rows that ended before ``cutoff_ms`` and have a later row of the
    same queue (found by the unique key on cluster, queue and start): each queue's newest row
    stays. Cluster by cluster, so each query is a range of ``ix_ledger_entries_cluster_end``
    (a year of rows at 200 queues is a hundred million: a scan of them all is not bounded)."""
    later = aliased(LedgerEntry)
    newer = exists().where(
        later.cluster_id == LedgerEntry.cluster_id,
        later.queue == LedgerEntry.queue,
        later.start_ms > LedgerEntry.start_ms,
    )
    deleted = 0
    for cluster_id in session.scalars(select(Cluster.id).order_by(Cluster.id)).all():
        if deleted >= limit:
            break
        ids = (
            select(LedgerEntry.id)
            .where(LedgerEntry.cluster_id == cluster_id, LedgerEntry.end_ms < cutoff_ms, newer)
            .order_by(LedgerEntry.end_ms)
            .limit(limit - deleted)
        )
        result = session.execute(
            delete(LedgerEntry).where(LedgerEntry.id.in_(ids.scalar_subquery()))
        )
        deleted += int(result.rowcount or 0)  # type: ignore[attr-defined]
    return deleted
