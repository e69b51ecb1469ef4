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

Errors: a bad row is a ``TraceError`` reading ``file:line: column: problem``, a bad file (not
UTF-8, not gzip, no header) ``file: problem``. Rows have the header's fields (our CSV may leave
optional ones off the end), numbers are finite, times and byte counts from the public traces are
not negative, and every job is within ``SimJob``'s bounds (``app.sim.jobs``).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import random
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from app.domain.model import AppRecord
from app.sim.jobs import MAX_TASKS, JobError, SimJob

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

    def __post_init__(self) -> None:
        if not 0 < self.bytes_per_vcore_s < math.inf:
            raise ValueError(
                f"bytes_per_vcore_s must be > 0 and finite, not {self.bytes_per_vcore_s:g}"
            )
        if not 0 <= self.task_overhead_s < math.inf:
            raise ValueError(f"task_overhead_s must be >= 0 and finite, not {self.task_overhead_s}")


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


@contextmanager
def _reading(path: Path) -> Iterator[IO[str]]:
    """``path`` as text. Decoding and decompression run ahead of the rows, a chunk at a time, so
    their errors name the file but no line."""
    try:
        with _open_text(path) as fh:
            yield fh
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start]
        raise TraceError(f"{path}: not UTF-8 text (byte 0x{byte:02x}: {exc.reason})") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise TraceError(f"{path}: not a readable gzip file: {exc}") from None
    except csv.Error as exc:
        raise TraceError(f"{path}: {exc}") from None


_Row = TypeVar("_Row")


def _lines(rows: Iterator[_Row], path: Path, line: Callable[[], int]) -> Iterator[tuple[int, _Row]]:
    """``rows`` with the line each ends on (``line()``: the reader's ``line_num``; counting rows
    would drift at blank lines and quoted line breaks); CSV syntax errors name the line."""
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as exc:
            raise TraceError(f"{path}:{line()}: {exc}") from None
        yield line(), row


def _show(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


def _number(text: str | None, column: str, where: str, minimum: float | None = None) -> float:
    """``text`` as a finite float (at least ``minimum``), else a ``TraceError`` naming
    ``column``."""
    if text is None or not text.strip():
        raise TraceError(f"{where}: {column}: missing")
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{where}: {column}: not a number: {_show(text)}") from None
    if not math.isfinite(value):
        raise TraceError(f"{where}: {column}: must be a finite number, got {_show(text)}")
    if minimum is not None and value < minimum:
        raise TraceError(f"{where}: {column}: must be >= {minimum:g}, got {_show(text)}")
    return value


def _count(text: str | None, column: str, where: str) -> int:
    if text is None or not text.strip():
        raise TraceError(f"{where}: {column}: missing")
    try:
        return int(text)
    except ValueError:
        raise TraceError(f"{where}: {column}: not a whole number: {_show(text)}") from None


def _job(where: str, columns: dict[str, str], *args: Any, **kwargs: Any) -> SimJob:
    """``SimJob(*args, **kwargs)``; out of bounds (``jobs`` module docstring), a ``TraceError``
    naming the file's own column for the field."""
    try:
        return SimJob(*args, **kwargs)
    except JobError as exc:
        raise TraceError(f"{where}: {columns.get(exc.field, exc.field)}: {exc.problem}") from None


def check_queue_by(queue_by: str) -> None:
    """``ValueError`` unless ``queue_by`` is a rule of ``queue_name``."""
    if queue_by in ("single", "user"):
        return
    if queue_by.startswith("group:"):
        k = queue_by.split(":", 1)[1]
        if not k.isdigit() or int(k) < 1:
            raise ValueError(f"group:K needs a whole number K >= 1, got {queue_by!r}")
        return
    raise ValueError(f"unknown queue rule {queue_by!r}; use single, user or group:K")


def queue_name(user: str, queue_by: str) -> str:
    """Queue of a job submitted by ``user`` under the ``queue_by`` rule (module docstring)."""
    if queue_by == "single":
        return "default"
    if queue_by == "user":
        return f"u{user}"
    if queue_by.startswith("group:"):
        # called per row: the rule itself is checked once, up front (``check_queue_by``)
        k = int(queue_by.split(":", 1)[1])
        if k < 1:
            raise ValueError("group:K needs K >= 1")
        key = int(user) if user.isdigit() else sum(map(ord, user))
        return f"g{key % k}"
    raise ValueError(f"unknown queue rule {queue_by!r}; use single, user or group:K")


# ----- SWIM -----
SWIM_COLUMNS = (
    "job_id",
    "submit_s",
    "gap_s",
    "map_input_bytes",
    "shuffle_bytes",
    "reduce_output_bytes",
)


def load_swim(
    path: Path, queue: str | None = None, params: SwimParams | None = None
) -> list[SimJob]:
    """SWIM TSV; all jobs go to ``queue`` (default: the file name's stem)."""
    p = params or SwimParams()
    qname = queue or path.stem
    jobs: list[SimJob] = []
    with _reading(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                jobs.append(_swim_job(line, lineno, path, qname, p))
    return jobs


def _swim_job(line: str, lineno: int, path: Path, queue: str, p: SwimParams) -> SimJob:
    # Split on tabs, not whitespace: the ``withInputPaths`` columns may hold any path text.
    parts = [f.strip() for f in line.rstrip("\r\n").split("\t")]
    where = f"{path}:{lineno}"
    if len(parts) not in (6, 9):
        raise TraceError(
            f"{where}: expected 6 or 9 (withInputPaths) tab-separated fields, got {len(parts)}"
        )
    submit = _number(parts[1], "submit_s", where, 0.0)
    inp, shuffle, out = (_number(parts[k], SWIM_COLUMNS[k], where, 0.0) for k in (3, 4, 5))
    if inp > MAX_TASKS * SWIM_SPLIT_BYTES:
        raise TraceError(
            f"{where}: map_input_bytes: {inp:g} bytes is over {MAX_TASKS:,} splits of 64 MiB"
        )
    tasks = max(1, math.ceil(inp / SWIM_SPLIT_BYTES))
    work = tasks * p.task_overhead_s + (inp + shuffle + out) / p.bytes_per_vcore_s
    return _job(where, {}, f"{queue}/{parts[0]}", submit, tasks, work, queue=queue, input_bytes=inp)


# ----- Google 2011, first 19 hours -----
GOOGLE_COLUMNS = {"work": "task_seconds_total", "tasks": "n_tasks", "runtime_s": "last_task_end_s"}


def load_google(path: Path, queue_by: str = "single") -> list[SimJob]:
    """``jobs_with_tasks_first19h.csv.gz`` (module docstring)."""
    jobs: list[SimJob] = []
    with _reading(path) as fh:
        reader = csv.DictReader(fh)
        for lineno, row in _lines(reader, path, lambda: reader.line_num):
            job = _google_job(row, lineno, path, queue_by)
            if job is not None:
                jobs.append(job)
    return jobs


def _google_job(row: dict[str, str], lineno: int, path: Path, queue_by: str) -> SimJob | None:
    where = f"{path}:{lineno}"
    _check_width(row, where)
    try:
        work = _number(row["task_seconds_total"], "task_seconds_total", where)
        if work <= 0:
            return None
        first, last = row["first_task_start_s"], row["last_task_end_s"]
        runtime = None
        if first and last:
            end = _number(last, "last_task_end_s", where)
            runtime = end - _number(first, "first_task_start_s", where)
        user = row["user_id"]
        return _job(
            where,
            GOOGLE_COLUMNS,
            row["job_id"],
            _number(row["submit_s"], "submit_s", where, 0.0),
            max(1, _count(row["n_tasks"], "n_tasks", where)),
            work,
            queue=queue_name(user, queue_by),
            user=user,
            runtime_s=runtime,
        )
    except KeyError as exc:
        raise TraceError(f"{where}: missing column {exc}") from None


def _check_width(row: Mapping[Any, Any], where: str, short_ok: bool = False) -> None:
    """``csv.DictReader`` puts the fields past the header under ``None`` and fills the missing
    ones with ``None``: a row has no more fields than the header, nor fewer unless
    ``short_ok``."""
    header = len(row) - (None in row)
    if None in row:
        raise TraceError(f"{where}: {header + len(row[None])} fields, the header has {header}")
    if not short_ok and None in row.values():
        given = sum(v is not None for v in row.values())
        raise TraceError(f"{where}: {given} fields, the header has {header}")


# ----- Google 2011, 29 days -----
def iter_google29d(
    path: Path, queue_by: str = "single", progress: RowProgress | None = None, every: int = 50_000
) -> Iterator[SimJob]:
    """Stream ``jobs_29d.csv.gz`` one job at a time (module docstring)."""
    with _reading(path) as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise TraceError(f"{path}: empty file, expected a header line")
        col = {name: i for i, name in enumerate(header)}
        try:
            i_id, i_user = col["job_id"], col["user_id"]
            i_sub, i_sch, i_end = col["submit_s"], col["schedule_s"], col["end_s"]
        except KeyError as exc:
            raise TraceError(f"{path}: missing column {exc}") from None
        width = len(header)
        columns = {"work": "end_s", "runtime_s": "end_s"}
        n = 0
        try:
            # The loop of the scale benchmark (672,074 rows): the messages are only built for a
            # bad row, and csv errors are caught around the loop rather than per row.
            for row in reader:
                n += 1
                if progress is not None and n % every == 0:
                    progress(n)
                if len(row) != width:
                    where = f"{path}:{reader.line_num}"
                    raise TraceError(f"{where}: {len(row)} fields, the header has {width}")
                end = row[i_end]
                if not end:
                    continue
                try:
                    submit, finish = float(row[i_sub]), float(end)
                    sched = float(row[i_sch]) if row[i_sch] else submit
                except ValueError:
                    submit = finish = sched = math.nan
                if not (0.0 <= submit < math.inf and math.isfinite(sched + finish)):
                    _explain29d(row, f"{path}:{reader.line_num}", i_sub, i_sch, i_end)
                work = max(1.0, finish - sched)
                user = row[i_user]
                try:
                    job = SimJob(
                        row[i_id],
                        submit,
                        1,
                        work,
                        queue=queue_name(user, queue_by),
                        user=user,
                        runtime_s=work,
                    )
                except JobError as exc:
                    where = f"{path}:{reader.line_num}"
                    field = columns.get(exc.field, exc.field)
                    raise TraceError(f"{where}: {field}: {exc.problem}") from None
                yield job
        except csv.Error as exc:
            raise TraceError(f"{path}:{reader.line_num}: {exc}") from None


def _explain29d(row: list[str], where: str, i_sub: int, i_sch: int, i_end: int) -> None:
    """The ``TraceError`` of a 29-day row whose times did not parse as finite numbers."""
    _number(row[i_sub], "submit_s", where, 0.0)
    if row[i_sch]:
        _number(row[i_sch], "schedule_s", where)
    _number(row[i_end], "end_s", where)
    raise TraceError(f"{where}: schedule_s + end_s: not finite")  # both finite, the sum not


def load_google29d(
    path: Path,
    queue_by: str = "single",
    progress: RowProgress | None = None,
    limit: int | None = None,
) -> list[SimJob]:
    """The first ``limit`` usable jobs of the 29-day file (all of them when None)."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    out: list[SimJob] = []
    for job in iter_google29d(path, queue_by, progress):
        out.append(job)
        if limit is not None and len(out) >= limit:
            break
    return out


# ----- our CSV -----
CSV_NAMES = {"work": "work_vcore_s"}


def load_csv(path: Path) -> list[SimJob]:
    """Our own format (module docstring); header names decide the columns."""
    with _reading(path) as fh:
        reader = csv.DictReader(fh)
        fields = tuple(reader.fieldnames or ())
        unknown = [f for f in fields if f not in CSV_COLUMNS]
        missing = [f for f in CSV_REQUIRED if f not in fields]
        if unknown or missing:
            raise TraceError(f"{path}: unknown columns {unknown}, missing columns {missing}")
        twice = sorted({f for f in fields if fields.count(f) > 1})
        if twice:
            raise TraceError(f"{path}:1: columns {twice} appear more than once")
        return [_csv_job(row, n, path) for n, row in _lines(reader, path, lambda: reader.line_num)]


def _opt(row: dict[str, str], key: str, where: str, minimum: float | None = None) -> float | None:
    value = row.get(key) or ""
    return _number(value, key, where, minimum) if value.strip() else None


def _csv_job(row: dict[str, str], lineno: int, path: Path) -> SimJob:
    where = f"{path}:{lineno}"
    _check_width(row, where, short_ok=True)
    # Optional columns may be left off the end of a row (unknown, as an empty field is); the
    # required ones may not.
    for key in CSV_REQUIRED:
        if row[key] is None:
            given = sum(v is not None for v in row.values())
            raise TraceError(f"{where}: {key}: missing (the row has {given} fields)")
    return _job(
        where,
        CSV_NAMES,
        row["job_id"],
        _number(row["submit_s"], "submit_s", where),
        _count(row["tasks"], "tasks", where),
        _number(row["work_vcore_s"], "work_vcore_s", where),
        queue=row.get("queue") or "default",
        user=row.get("user") or "",
        input_bytes=_opt(row, "input_bytes", where, 0.0) or 0.0,
        runtime_s=_opt(row, "runtime_s", where),
        deadline_s=_opt(row, "deadline_s", where),
    )


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
