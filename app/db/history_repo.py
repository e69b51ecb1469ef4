"""Reads and writes of the MapReduce job history (``app.db.history_models``): what the collector
still has to ask the JobHistory server about, storing a job with its tasks, and the runs the
profile book (``app.policies.hybridmr.profiles``) and Fawkes' live DD/TT/JS inputs are built from.

Storing is idempotent: a job's row is replaced and its tasks rewritten in the caller's
transaction, so asking twice (a retry, a restart between the fetch and the commit) leaves one row.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Select, delete, func, literal, or_, select
from sqlalchemy.orm import Session

from app.db import control_repo
from app.db.history_models import MapReduceJobRow, MapReduceTaskRow
from app.db.models import MAPREDUCE_APP_TYPE, Application
from app.db.promise_history import app_keys
from app.domain.history import MapReduceJob, counters_from_dict, counters_to_dict, summarise
from app.domain.model import FINAL_APP_STATES
from app.policies.hybridmr.profiles import Run

MAPREDUCE = MAPREDUCE_APP_TYPE
OK, RETRY, MISSING = "ok", "retry", "missing"
# Task rows kept per job (a job of 100,000 maps would otherwise write 100,000 rows).
MAX_TASK_ROWS = 10_000
# How many of the newest MapReduce jobs profiles are built from (Fawkes' DD and JS, /profiles).
PROFILE_RUNS = 2000
_TASKS_DONE = MapReduceJobRow.maps_completed + MapReduceJobRow.reduces_completed


def to_collect(
    session: Session, cluster_id: int, now_ms: int, *, limit: int, retry_after_ms: int
) -> list[str]:
    """Finished MapReduce apps never asked about, or due another try, oldest first.

    The app type is tested with a literal, as the predicate of the partial index
    ``ix_applications_mapreduce`` (a bound parameter would keep the engines from using it): the
    query reads the cluster's MapReduce apps alone, in finish order, never the other apps."""
    stmt = (
        select(Application.app_id)
        .outerjoin(MapReduceJobRow, MapReduceJobRow.app_id == Application.app_id)
        .where(
            Application.cluster_id == cluster_id,
            Application.app_type == literal(MAPREDUCE, literal_execute=True),
            Application.state.in_(sorted(FINAL_APP_STATES)),
            or_(
                MapReduceJobRow.app_id.is_(None),
                (MapReduceJobRow.status == RETRY)
                & (MapReduceJobRow.fetched_ms <= now_ms - retry_after_ms),
            ),
        )
        .order_by(Application.finished_ms, Application.app_id)
        .limit(limit)
    )
    return list(session.scalars(stmt))


def store_job(
    session: Session, app_id: str, job: MapReduceJob, cluster_vcores: float, now_ms: int
) -> MapReduceJobRow:
    """Replace the app's history with ``job`` and its tasks."""
    s = summarise(job)
    row = session.get(MapReduceJobRow, app_id) or MapReduceJobRow(app_id=app_id, attempts=0)
    values = {
        "status": OK,
        "seq": (session.scalar(select(func.max(MapReduceJobRow.seq))) or 0) + 1,
        "attempts": row.attempts + 1,
        "fetched_ms": now_ms,
        "last_error": None,
        "job_id": job.job_id,
        "state": job.state,
        "submit_ms": job.submit_ms,
        "start_ms": job.start_ms,
        "finish_ms": job.finish_ms,
        "maps_total": job.maps_total,
        "maps_completed": job.maps_completed,
        "reduces_total": job.reduces_total,
        "reduces_completed": job.reduces_completed,
        "avg_map_ms": job.avg_map_ms,
        "avg_shuffle_ms": job.avg_shuffle_ms,
        "avg_merge_ms": job.avg_merge_ms,
        "avg_reduce_ms": job.avg_reduce_ms,
        "map_phase_ms": s.map_phase_ms,
        "reduce_phase_ms": s.reduce_phase_ms,
        "map_peak_vcores": s.map_peak_vcores,
        "reduce_peak_vcores": s.reduce_peak_vcores,
        "input_bytes": s.input_bytes,
        "output_bytes": s.output_bytes,
        "shuffle_bytes": s.shuffle_bytes,
        "spilled_records": s.spilled_records,
        "cpu_ms": s.cpu_ms,
        "vcore_ms": s.vcore_ms,
        "cluster_vcores": cluster_vcores,
        "counters": counters_to_dict(job.counters),
    }
    for key, value in values.items():
        setattr(row, key, value)
    session.add(row)
    session.flush()
    session.execute(delete(MapReduceTaskRow).where(MapReduceTaskRow.app_id == app_id))
    if job.tasks:
        # The phase numbers above come from every task; the rows kept are bounded per job.
        session.add_all(
            MapReduceTaskRow(
                app_id=app_id,
                task_id=t.task_id,
                kind=t.kind,
                state=t.state,
                start_ms=t.start_ms,
                finish_ms=t.finish_ms,
                elapsed_ms=t.elapsed_ms,
            )
            for t in job.tasks[:MAX_TASK_ROWS]
        )
    return row


def record_miss(
    session: Session, app_id: str, now_ms: int, error: str, *, max_attempts: int
) -> MapReduceJobRow:
    """The JobHistory server had no answer for the app this time; give up after
    ``max_attempts``."""
    row = session.get(MapReduceJobRow, app_id) or MapReduceJobRow(
        app_id=app_id, attempts=0, counters={}
    )
    row.attempts += 1
    row.status = MISSING if row.attempts >= max_attempts else RETRY
    row.fetched_ms = now_ms
    row.last_error = error
    session.add(row)
    return row


def job_of(session: Session, app_id: str) -> tuple[MapReduceJobRow, list[MapReduceTaskRow]] | None:
    """An app's stored history with its tasks (by kind, then id)."""
    row = session.get(MapReduceJobRow, app_id)
    if row is None:
        return None
    tasks = session.scalars(
        select(MapReduceTaskRow)
        .where(MapReduceTaskRow.app_id == app_id)
        .order_by(MapReduceTaskRow.kind, MapReduceTaskRow.task_id)
    )
    return row, list(tasks)


def stored_jobs(session: Session, cluster_id: int, *, limit: int) -> list[MapReduceJob]:
    """The newest ``limit`` stored MapReduce jobs of a cluster, as the JobHistory server reported
    them (counters, phase averages; without tasks), oldest first: PRISM's recorded workload."""
    stmt = (
        select(MapReduceJobRow, Application)
        .join(Application, Application.app_id == MapReduceJobRow.app_id)
        .where(Application.cluster_id == cluster_id, MapReduceJobRow.status == OK)
        .order_by(MapReduceJobRow.submit_ms.desc(), MapReduceJobRow.app_id.desc())
        .limit(limit)
    )
    return [
        MapReduceJob(
            job_id=row.job_id or row.app_id,
            name=app.name,
            queue=app.queue,
            user=app.user,
            state=row.state or "",
            submit_ms=row.submit_ms,
            start_ms=row.start_ms,
            finish_ms=row.finish_ms,
            maps_total=row.maps_total,
            maps_completed=row.maps_completed,
            reduces_total=row.reduces_total,
            reduces_completed=row.reduces_completed,
            avg_map_ms=row.avg_map_ms,
            avg_shuffle_ms=row.avg_shuffle_ms,
            avg_merge_ms=row.avg_merge_ms,
            avg_reduce_ms=row.avg_reduce_ms,
            counters=counters_from_dict(row.counters or {}),
        )
        for row, app in reversed(session.execute(stmt).all())
    ]


def completed_tasks(
    session: Session, cluster_id: int, queues: Sequence[str], after_seq: int
) -> tuple[dict[str, int], int]:
    """Tasks of the jobs stored after ``after_seq``, per managed queue (the RM names a queue by
    leaf or full path depending on its version), and the last ``seq`` counted (``after_seq``
    when none): the cursor the next count starts from."""
    last = session.scalar(select(func.max(MapReduceJobRow.seq)))
    if last is None or last <= after_seq:
        return {q: 0 for q in queues}, after_seq
    stmt = (
        select(Application.queue, func.sum(_TASKS_DONE))
        .join(Application, Application.app_id == MapReduceJobRow.app_id)
        .where(
            Application.cluster_id == cluster_id,
            MapReduceJobRow.status == OK,
            MapReduceJobRow.seq > after_seq,
            MapReduceJobRow.seq <= last,
        )
        .group_by(Application.queue)
    )
    sums = {name: int(n or 0) for name, n in session.execute(stmt).all()}
    return control_repo.per_managed_queue(sums, queues), last


def seq_through(session: Session, through_ms: int) -> int:
    """The last ``seq`` of the jobs fetched at or before ``through_ms`` (0 when none): where a
    reader with no cursor of its own starts, so its first count is one interval's arrivals."""
    found = session.scalar(
        select(func.max(MapReduceJobRow.seq)).where(MapReduceJobRow.fetched_ms <= through_ms)
    )
    return int(found or 0)


def partition_of(app: Application) -> str:
    """HybridMR's partition of a run: ``native`` when the app asked for a node-label partition
    (the dedicated nodes), ``virtual`` for the shared default partition."""
    return "native" if app.node_label else "virtual"


def _run(row: MapReduceJobRow, app: Application) -> Run:
    map_task_ms = _counter(row, "org.apache.hadoop.mapreduce.JobCounter", "MILLIS_MAPS")
    reduce_task_ms = _counter(row, "org.apache.hadoop.mapreduce.JobCounter", "MILLIS_REDUCES")
    map_vcore_ms = _counter(row, "org.apache.hadoop.mapreduce.JobCounter", "VCORES_MILLIS_MAPS")
    reduce_vcore_ms = _counter(
        row, "org.apache.hadoop.mapreduce.JobCounter", "VCORES_MILLIS_REDUCES"
    )
    start = row.start_ms or row.submit_ms or 0
    finish = row.finish_ms or start
    return Run(
        app_id=row.app_id,
        chain=app_keys(app).chain(),
        finished_ms=finish,
        input_bytes=float(row.input_bytes),
        cluster_size=float(row.cluster_vcores),
        map_s=row.map_phase_ms / 1000,
        reduce_s=row.reduce_phase_ms / 1000,
        total_s=max(0, finish - start) / 1000,
        tasks=row.maps_completed + row.reduces_completed,
        map_tasks=row.maps_completed,
        reduce_tasks=row.reduces_completed,
        map_mean_vcores=map_vcore_ms / row.map_phase_ms if row.map_phase_ms > 0 else 0.0,
        map_peak_vcores=row.map_peak_vcores,
        reduce_mean_vcores=(
            reduce_vcore_ms / row.reduce_phase_ms if row.reduce_phase_ms > 0 else 0.0
        ),
        reduce_peak_vcores=row.reduce_peak_vcores,
        map_vcores_per_task=map_vcore_ms / map_task_ms if map_task_ms > 0 else 1.0,
        reduce_vcores_per_task=reduce_vcore_ms / reduce_task_ms if reduce_task_ms > 0 else 1.0,
        partition=partition_of(app),
    )


def _counter(row: MapReduceJobRow, group: str, name: str) -> float:
    value = (row.counters or {}).get(group, {}).get(name)
    return float(value[0]) if isinstance(value, list) and value else 0.0


def runs(session: Session, cluster_id: int, *, limit: int) -> list[Run]:
    """Profile runs of the newest ``limit`` successful applications, oldest first: a MapReduce
    job with its JobHistory record gives input size and phases, any other finished application
    its run time alone (RM clock, start to finish)."""
    stmt = (
        select(Application, MapReduceJobRow)
        .outerjoin(
            MapReduceJobRow,
            (MapReduceJobRow.app_id == Application.app_id) & (MapReduceJobRow.status == OK),
        )
        .where(
            Application.cluster_id == cluster_id,
            Application.state == "FINISHED",
            Application.final_status == "SUCCEEDED",
        )
        .order_by(Application.finished_ms.desc(), Application.app_id.desc())
        .limit(limit)
    )
    out: list[Run] = []
    for app, row in reversed(session.execute(stmt).all()):
        if row is not None:
            out.append(_run(row, app))
        elif app.started_ms is not None and app.finished_ms is not None:
            out.append(_app_run(app, app.started_ms, app.finished_ms))
    return out


def _app_run(app: Application, started_ms: int, finished_ms: int) -> Run:
    total = max(0, finished_ms - started_ms) / 1000
    return Run(
        app_id=app.app_id,
        chain=app_keys(app).chain(),
        finished_ms=finished_ms,
        input_bytes=0.0,
        cluster_size=0.0,
        map_s=total,
        reduce_s=0.0,
        total_s=total,
        tasks=0,
        partition=partition_of(app),
    )


def live_apps(session: Session, cluster_id: int, states: Sequence[str]) -> list[Application]:
    """Apps the poller currently sees in ``states`` (not gone)."""
    return list(session.scalars(_live(cluster_id, states)))


def live_tagged_apps(
    session: Session, cluster_id: int, states: Sequence[str], tag_prefix: str
) -> list[Application]:
    """``live_apps`` that may carry a tag starting with ``tag_prefix``, chosen in the database:
    the stored tags (``,a,b,``) hold the prefix in any case. A superset (the prefix could sit
    inside another tag): the caller parses the tags it gets."""
    held = func.lower(Application.tags).contains(tag_prefix.lower(), autoescape=True)
    return list(session.scalars(_live(cluster_id, states).where(held)))


def _live(cluster_id: int, states: Sequence[str]) -> Select[Application]:
    return select(Application).where(
        Application.cluster_id == cluster_id,
        Application.state.in_(list(states)),
        Application.gone_ms.is_(None),
    )
