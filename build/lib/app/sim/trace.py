"""Workload loaders: SWIM, the two Google 2011 files, our own CSV, a seeded generator, and the
sidecar's own application history (``../shared/traces/README.md``; thesis seed 004, section 5.3).

Every loader yields ``SimJob``s: ``tasks`` is PYTHIA/Justice's ``requestedTasks`` (maximum
parallelism, one vcore per task) and ``work`` its ``compTime`` in vcore-seconds.

* SWIM (Facebook 2009) TSV, no header: ``job_id, submit_s, gap_s, map_input_bytes, shuffle_bytes,
  reduce_output_bytes``. ``tasks = max(1, ceil(input / 64 MiB))`` as SWIM's replay does; there are
  no task times, so ``work = tasks * task_overhead_s + bytes / bytes_per_vcore_s`` with ``bytes``
  the sum of input, shuffle and output and both constants parameters (defaults 5 s, 32 MiB/s).
  The ``withInputPaths`` variant of the files has 9 tab fields: the six above, then the job's
  input path, output path and one more; the path columns are ignored here (only the first six
  are read), so the same file loads from either variant.
* Google ``jobs_with_tasks_first19h.csv.gz``: ``tasks = n_tasks``, ``work = task_seconds_total``,
  ``runtime_s = last_task_end_s - first_task_start_s``, submission ``submit_s``. The 265 jobs with
  ``task_seconds_total = 0`` never ran a task and are skipped.
* Google ``jobs_29d.csv.gz`` has no task counts or task times: each job is one task (``tasks = 1``)
  whose work is its wall time, ``end_s - schedule_s`` (at least 1 s). Jobs without ``end_s`` (still
  running when the trace ends) are skipped; ``submit_s = 0`` jobs (already there at the start)
  are kept and arrive at 0. Read as a stream, with a progress callback.
* Our CSV format (header required, extra columns are errors):
  ``job_id,submit_s,tasks,work_vcore_s[,queue][,user][,input_bytes][,runtime_s][,deadline_s]``;
  empty optional fields mean "unknown".
* ``synthetic``: seeded Poisson arrivals, 60% one-task jobs and a log-uniform tail of larger jobs
  (the shape of Figure 5.1 of the thesis), task times log-normal, queues drawn by weight.
* ``jobs_from_app_records``: finished YARN applications (``AppRecord``): ``submit_s`` from
  ``submitted_ms`` (relative to the earliest), ``work = vcore_seconds``, ``runtime_s`` from
  ``started_ms``/``finished_ms``, ``tasks = max(1, round(vcore_seconds / runtime_s))`` (the mean
  parallelism, the only task count the RM keeps for finished apps).

Queues: ``queue_by="user"`` names a queue per user (``u<id>``), ``"group:K"`` folds users into K
queues (``g<id mod K>``), ``"single"`` puts everything in ``default``.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from app.domain.model import AppRecord
from app.sim.jobs import SimJob

MIB = 1024 * 1024
SWIM_SPLIT_BYTES = 64 * MIB
FORMATS = ("swim", "google", "google29d", "csv")
CSV_COLUMNS = (
    "job_id",
    "submit_s",
    "tasks",
    "work_vcore_s",
    "queue",
    "user",
    "input_bytes",
    "runtime_s",
    "deadline_s",
)
CSV_REQUIRED = CSV_COLUMNS[:4]

RowProgress = Callable[[int], None]


class TraceError(ValueError):
    """A trace file is malformed; the message names file and line."""


@dataclass(frozen=True, slots=True)
class SwimParams:
    """Assumed processing speed for SWIM jobs (the trace has none)."""

    bytes_per_vcore_s: float = 32 * MIB
    task_overhead_s: float = 5.0


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


def queue_name(user: str, queue_by: str) -> str:
    """Queue of a job submitted by ``user`` under the ``queue_by`` rule (module docstring)."""
    if queue_by == "single":
        return "default"
    if queue_by == "user":
        return f"u{user}"
    if queue_by.startswith("group:"):
        k = int(queue_by.split(":", 1)[1])
        if k < 1:
            raise ValueError("group:K needs K >= 1")
        key = int(user) if user.isdigit() else sum(map(ord, user))
        return f"g{key % k}"
    raise ValueError(f"unknown queue rule {queue_by!r}; use single, user or group:K")


# ----- SWIM -----
def load_swim(
    path: Path, queue: str | None = None, params: SwimParams | None = None
) -> list[SimJob]:
    """SWIM TSV; all jobs go to ``queue`` (default: the file name's stem)."""
    p = params or SwimParams()
    qname = queue or path.stem
    jobs: list[SimJob] = []
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                jobs.append(_swim_job(line, lineno, path, qname, p))
    return jobs


def _swim_job(line: str, lineno: int, path: Path, queue: str, p: SwimParams) -> SimJob:
    # Split on tabs, not whitespace: the ``withInputPaths`` columns may hold any path text.
    parts = [f.strip() for f in line.rstrip("\r\n").split("\t")]
    if len(parts) not in (6, 9):
        raise TraceError(
            f"{path}:{lineno}: expected 6 or 9 (withInputPaths) tab-separated fields, "
            f"got {len(parts)}"
        )
    try:
        submit = float(parts[1])
        inp, shuffle, out = (float(x) for x in parts[3:6])
    except ValueError as exc:
        raise TraceError(f"{path}:{lineno}: {exc}") from None
    tasks = max(1, math.ceil(inp / SWIM_SPLIT_BYTES))
    work = tasks * p.task_overhead_s + (inp + shuffle + out) / p.bytes_per_vcore_s
    return SimJob(f"{queue}/{parts[0]}", submit, tasks, work, queue=queue, input_bytes=inp)


# ----- Google 2011, first 19 hours -----
def load_google(path: Path, queue_by: str = "single") -> list[SimJob]:
    """``jobs_with_tasks_first19h.csv.gz`` (module docstring)."""
    jobs: list[SimJob] = []
    with _open_text(path) as fh:
        reader = csv.DictReader(fh)
        for lineno, row in enumerate(reader, 2):
            job = _google_job(row, lineno, path, queue_by)
            if job is not None:
                jobs.append(job)
    return jobs


def _google_job(row: dict[str, str], lineno: int, path: Path, queue_by: str) -> SimJob | None:
    try:
        work = float(row["task_seconds_total"])
        if work <= 0:
            return None
        first, last = row["first_task_start_s"], row["last_task_end_s"]
        runtime = float(last) - float(first) if first and last else None
        return SimJob(
            row["job_id"],
            float(row["submit_s"]),
            max(1, int(row["n_tasks"])),
            work,
            queue=queue_name(row["user_id"], queue_by),
            user=row["user_id"],
            runtime_s=runtime,
        )
    except (KeyError, ValueError) as exc:
        raise TraceError(f"{path}:{lineno}: {exc!r}") from None


# ----- Google 2011, 29 days -----
def iter_google29d(
    path: Path, queue_by: str = "single", progress: RowProgress | None = None, every: int = 50_000
) -> Iterator[SimJob]:
    """Stream ``jobs_29d.csv.gz`` one job at a time (module docstring)."""
    with _open_text(path) as fh:
        reader = csv.reader(fh)
        header = next(reader)
        col = {name: i for i, name in enumerate(header)}
        try:
            i_id, i_user = col["job_id"], col["user_id"]
            i_sub, i_sch, i_end = col["submit_s"], col["schedule_s"], col["end_s"]
        except KeyError as exc:
            raise TraceError(f"{path}: missing column {exc}") from None
        for n, row in enumerate(reader, 1):
            if progress is not None and n % every == 0:
                progress(n)
            end = row[i_end]
            if not end:
                continue
            sched = row[i_sch] or row[i_sub]
            work = max(1.0, float(end) - float(sched))
            user = row[i_user]
            yield SimJob(
                row[i_id],
                float(row[i_sub]),
                1,
                work,
                queue=queue_name(user, queue_by),
                user=user,
                runtime_s=work,
            )


def load_google29d(
    path: Path,
    queue_by: str = "single",
    progress: RowProgress | None = None,
    limit: int | None = None,
) -> list[SimJob]:
    """The first ``limit`` usable jobs of the 29-day file (all of them when None)."""
    out: list[SimJob] = []
    for job in iter_google29d(path, queue_by, progress):
        out.append(job)
        if limit is not None and len(out) >= limit:
            break
    return out


# ----- our CSV -----
def load_csv(path: Path) -> list[SimJob]:
    """Our own format (module docstring); header names decide the columns."""
    with _open_text(path) as fh:
        reader = csv.DictReader(fh)
        fields = tuple(reader.fieldnames or ())
        unknown = [f for f in fields if f not in CSV_COLUMNS]
        missing = [f for f in CSV_REQUIRED if f not in fields]
        if unknown or missing:
            raise TraceError(f"{path}: unknown columns {unknown}, missing columns {missing}")
        return [_csv_job(row, lineno, path) for lineno, row in enumerate(reader, 2)]


def _opt(row: dict[str, str], key: str) -> float | None:
    value = row.get(key) or ""
    return float(value) if value.strip() else None


def _csv_job(row: dict[str, str], lineno: int, path: Path) -> SimJob:
    try:
        return SimJob(
            row["job_id"],
            float(row["submit_s"]),
            int(row["tasks"]),
            float(row["work_vcore_s"]),
            queue=row.get("queue") or "default",
            user=row.get("user") or "",
            input_bytes=_opt(row, "input_bytes") or 0.0,
            runtime_s=_opt(row, "runtime_s"),
            deadline_s=_opt(row, "deadline_s"),
        )
    except ValueError as exc:
        raise TraceError(f"{path}:{lineno}: {exc}") from None


def write_csv(jobs: Iterable[SimJob], path: Path) -> None:
    """Write ``jobs`` in our CSV format (round-trips through ``load_csv``)."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for j in jobs:
            w.writerow(
                [
                    j.job_id,
                    repr(j.submit_s),
                    j.tasks,
                    repr(j.work),
                    j.queue,
                    j.user,
                    repr(j.input_bytes),
                    "" if j.runtime_s is None else repr(j.runtime_s),
                    "" if j.deadline_s is None else repr(j.deadline_s),
                ]
            )


# ----- synthetic -----
@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """Parameters of the generator (defaults: a small, heavy-tailed, two-queue workload)."""

    jobs: int = 500
    mean_interarrival_s: float = 10.0
    one_task_fraction: float = 0.6
    max_tasks: int = 2000
    task_median_s: float = 30.0
    task_sigma: float = 1.0
    queues: tuple[tuple[str, float], ...] = (("a", 0.7), ("b", 0.3))


def synthetic(spec: SyntheticSpec, seed: int) -> list[SimJob]:
    """A reproducible workload: the same ``(spec, seed)`` always gives the same jobs."""
    rng = random.Random(seed)
    names = [q for q, _ in spec.queues]
    weights = [w for _, w in spec.queues]
    t = 0.0
    jobs: list[SimJob] = []
    for i in range(spec.jobs):
        t += rng.expovariate(1.0 / spec.mean_interarrival_s)
        if rng.random() < spec.one_task_fraction:
            tasks = 1
        else:
            tasks = max(2, int(math.exp(rng.uniform(math.log(2), math.log(spec.max_tasks)))))
        task_s = rng.lognormvariate(math.log(spec.task_median_s), spec.task_sigma)
        queue = rng.choices(names, weights)[0]
        work = tasks * task_s
        jobs.append(SimJob(f"s{i}", t, tasks, work, queue=queue, input_bytes=tasks * 64.0 * MIB))
    return jobs


# ----- the sidecar's own history -----
def jobs_from_app_records(records: Iterable[AppRecord]) -> list[SimJob]:
    """Finished apps with submission, start and finish times and ``vcore_seconds > 0``."""
    usable = [
        r
        for r in records
        if r.is_finished
        and r.submitted_ms is not None
        and r.started_ms is not None
        and r.finished_ms is not None
        and r.vcore_seconds > 0
    ]
    if not usable:
        return []
    origin = min(r.submitted_ms for r in usable if r.submitted_ms is not None)
    return [_job_from_record(r, origin) for r in usable]


def _job_from_record(r: AppRecord, origin: int) -> SimJob:
    assert r.submitted_ms is not None and r.started_ms is not None and r.finished_ms is not None
    runtime = max(0.001, (r.finished_ms - r.started_ms) / 1000.0)
    work = float(r.vcore_seconds)
    return SimJob(
        r.app_id,
        (r.submitted_ms - origin) / 1000.0,
        max(1, round(work / runtime)),
        work,
        queue=r.queue,
        user=r.user,
        runtime_s=runtime,
    )


# ----- sizing -----
def peak_parallelism(jobs: Iterable[SimJob]) -> int:
    """Peak of the trace's own vcores in use: each job holds ``work / runtime`` vcores over its
    recorded run (or ``tasks`` from submission for ``work / tasks`` s when no runtime is known);
    the thesis sizes clusters against this "peak observed capacity" (Table 5.1).
    """
    deltas: list[tuple[float, float]] = []
    for j in jobs:
        if j.runtime_s is not None and j.runtime_s > 0:
            start, dur = j.submit_s, j.runtime_s
            level = j.work / dur
        else:
            start, dur, level = j.submit_s, j.work / j.tasks, float(j.tasks)
        deltas.append((start, level))
        deltas.append((start + dur, -level))
    deltas.sort()
    cur = peak = 0.0
    for _, d in deltas:
        cur += d
        peak = max(peak, cur)
    return max(1, math.ceil(peak))


def mean_demand(jobs: Iterable[SimJob]) -> float:
    """Mean vcores the trace asks for: total work over the span from the first submission to
    the last recorded end (same per-job durations as ``peak_parallelism``). A capacity relative to
    this measures contention on traces whose peak is one huge, short job."""
    work = 0.0
    first = math.inf
    last = -math.inf
    for j in jobs:
        dur = j.runtime_s if j.runtime_s is not None and j.runtime_s > 0 else j.work / j.tasks
        work += j.work
        first = min(first, j.submit_s)
        last = max(last, j.submit_s + dur)
    if work <= 0 or not last > first:
        return 0.0
    return work / (last - first)
