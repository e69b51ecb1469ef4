"""MapReduce job history as the JobHistory server reports it, and what the sidecar derives from
it: phase timings, the counters the policies read, peak against mean vcores per phase.

The numbers the RM's application list does not carry (input bytes, task counts, phase times) live
here; Fawkes' DD/TT/JS weightings, the HybridMR profile database and PRISM's phase profiles read
them. Pure data and arithmetic, no I/O.

Decisions where the JobHistory REST API is silent:

* ``input_bytes`` is ``FileInputFormatCounter.BYTES_READ`` (what the job's input format read:
  the job's input size in HybridMR's sense); a job without it (``SleepJob``, a custom input
  format) falls back to the map tasks' filesystem reads (``HDFS_BYTES_READ`` + ``FILE_BYTES_READ``
  map values), else 0.
* The map phase runs from the first map task's start to the last map task's finish; the reduce
  phase from there to the job's finish (shuffle tail, merge and reduce; 0 without reduces). Their
  sum can be less than the job's run time by the AM's set-up and commit.
* A phase's mean vcores are its ``VCORES_MILLIS_*`` counter over the phase's length; its peak is
  the most tasks of that type running at once (from the task intervals) times the vcores per task
  (``VCORES_MILLIS_*`` / ``MILLIS_*``, 1 when the counters are missing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAP, REDUCE = "MAP", "REDUCE"
_INPUT_FORMAT = "org.apache.hadoop.mapreduce.lib.input.FileInputFormatCounter"
_OUTPUT_FORMAT = "org.apache.hadoop.mapreduce.lib.output.FileOutputFormatCounter"
_FS = "org.apache.hadoop.mapreduce.FileSystemCounter"
_TASK = "org.apache.hadoop.mapreduce.TaskCounter"
_JOB = "org.apache.hadoop.mapreduce.JobCounter"


@dataclass(frozen=True, slots=True)
class Counter:
    """One counter's total, map and reduce values."""

    total: int
    map: int = 0
    reduce: int = 0


@dataclass(frozen=True, slots=True)
class TaskRun:
    """One task of a finished job (``/jobs/{id}/tasks``)."""

    task_id: str
    kind: str  # MAP or REDUCE
    state: str
    start_ms: int | None
    finish_ms: int | None
    elapsed_ms: int


@dataclass(frozen=True, slots=True)
class MapReduceJob:
    """A finished MapReduce job as the JobHistory server reports it."""

    job_id: str
    name: str
    queue: str
    user: str
    state: str
    submit_ms: int | None
    start_ms: int | None
    finish_ms: int | None
    maps_total: int
    maps_completed: int
    reduces_total: int
    reduces_completed: int
    avg_map_ms: int = 0
    avg_shuffle_ms: int = 0
    avg_merge_ms: int = 0
    avg_reduce_ms: int = 0
    counters: Mapping[str, Mapping[str, Counter]] = field(default_factory=dict)
    tasks: tuple[TaskRun, ...] = ()

    def counter(self, group: str, name: str) -> Counter | None:
        """A counter by group and name, None when the job did not report it."""
        return self.counters.get(group, {}).get(name)


def job_id_of(app_id: str) -> str | None:
    """``application_<ts>_<n>`` -> ``job_<ts>_<n>``: a MapReduce job shares its app's id."""
    prefix = "application_"
    return "job_" + app_id[len(prefix) :] if app_id.startswith(prefix) else None


def _value(job: MapReduceJob, group: str, name: str, part: str = "total") -> int:
    found = job.counter(group, name)
    return int(getattr(found, part)) if found is not None else 0


def input_bytes(job: MapReduceJob) -> int:
    """The job's input size (module docstring)."""
    found = job.counter(_INPUT_FORMAT, "BYTES_READ")
    if found is not None:
        return found.total
    return _value(job, _FS, "HDFS_BYTES_READ", "map") + _value(job, _FS, "FILE_BYTES_READ", "map")


@dataclass(frozen=True, slots=True)
class Phase:
    """One phase of a job: how long, and how many vcores on average and at its peak."""

    name: str
    duration_ms: int
    tasks: int
    mean_vcores: float
    peak_vcores: float


def _spans(tasks: Iterable[TaskRun], kind: str) -> list[tuple[int, int]]:
    return [
        (t.start_ms, t.finish_ms)
        for t in tasks
        if t.kind == kind
        and t.start_ms is not None
        and t.finish_ms is not None
        and t.finish_ms >= t.start_ms
    ]


def max_concurrent(spans: Sequence[tuple[int, int]]) -> int:
    """The most intervals open at one instant (a finish at t frees its slot before a start at t)."""
    events = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans])
    best = running = 0
    for _, step in events:
        running += step
        best = max(best, running)
    return best


def phases(job: MapReduceJob) -> tuple[Phase, Phase]:
    """The map and reduce phases (module docstring)."""
    maps = _spans(job.tasks, MAP)
    reduces = _spans(job.tasks, REDUCE)
    map_start = min((s for s, _ in maps), default=job.start_ms or 0)
    map_end = max((f for _, f in maps), default=map_start)
    end = job.finish_ms if job.finish_ms is not None else map_end
    reduce_ms = max(0, end - map_end) if reduces or job.reduces_total else 0
    out = []
    for name, spans, length in (("map", maps, map_end - map_start), ("reduce", reduces, reduce_ms)):
        kind = "MAPS" if name == "map" else "REDUCES"
        vcore_ms = _value(job, _JOB, f"VCORES_MILLIS_{kind}")
        task_ms = _value(job, _JOB, f"MILLIS_{kind}")
        per_task = vcore_ms / task_ms if task_ms > 0 else 1.0
        mean = vcore_ms / length if length > 0 else 0.0
        out.append(Phase(name, max(0, length), len(spans), mean, max_concurrent(spans) * per_task))
    return out[0], out[1]


@dataclass(frozen=True, slots=True)
class JobSummary:
    """The columns the history table keeps per job (``app.db.history_models``)."""

    input_bytes: int
    output_bytes: int
    shuffle_bytes: int
    spilled_records: int
    cpu_ms: int
    vcore_ms: int
    map_phase_ms: int
    reduce_phase_ms: int
    map_peak_vcores: float
    reduce_peak_vcores: float


def summarise(job: MapReduceJob) -> JobSummary:
    """What the policies read of one job, from its counters and tasks."""
    map_phase, reduce_phase = phases(job)
    return JobSummary(
        input_bytes=input_bytes(job),
        output_bytes=_value(job, _OUTPUT_FORMAT, "BYTES_WRITTEN"),
        shuffle_bytes=_value(job, _TASK, "REDUCE_SHUFFLE_BYTES"),
        spilled_records=_value(job, _TASK, "SPILLED_RECORDS"),
        cpu_ms=_value(job, _TASK, "CPU_MILLISECONDS"),
        vcore_ms=_value(job, _JOB, "VCORES_MILLIS_MAPS")
        + _value(job, _JOB, "VCORES_MILLIS_REDUCES"),
        map_phase_ms=map_phase.duration_ms,
        reduce_phase_ms=reduce_phase.duration_ms,
        map_peak_vcores=map_phase.peak_vcores,
        reduce_peak_vcores=reduce_phase.peak_vcores,
    )


@dataclass(frozen=True, slots=True)
class TaskUse:
    """One kind of task of a job (map or reduce), per task: what it used on average and the
    container YARN allocated it (what PRISM's phase profile and the task model each hold)."""

    vcores: float
    memory_mb: float
    container_vcores: float
    container_mb: float


# MapReduce's defaults (mapreduce.{map,reduce}.memory.mb, .cpu.vcores) for a job without the
# allocation counters.
DEFAULT_CONTAINER = (1.0, 1024.0)


def task_use(job: MapReduceJob, kind: str) -> TaskUse:
    """``kind`` (``MAP`` or ``REDUCE``) tasks' use from the counters: vcores are CPU time over
    task time (``CPU_MILLISECONDS`` / ``MILLIS_*``), memory the physical memory per task
    (``PHYSICAL_MEMORY_BYTES``, sampled at each task's end, over the tasks); the container is
    ``VCORES_MILLIS_*`` and ``MB_MILLIS_*`` over ``MILLIS_*``. Use is capped at the container:
    YARN stops a task that outgrows it, so more is sampling noise."""
    part = "map" if kind == MAP else "reduce"
    plural = "MAPS" if kind == MAP else "REDUCES"
    tasks = job.maps_completed if kind == MAP else job.reduces_completed
    task_ms = _value(job, _JOB, f"MILLIS_{plural}")
    if task_ms <= 0:
        cv, cm = DEFAULT_CONTAINER
    else:
        cv = _value(job, _JOB, f"VCORES_MILLIS_{plural}") / task_ms or DEFAULT_CONTAINER[0]
        cm = _value(job, _JOB, f"MB_MILLIS_{plural}") / task_ms or DEFAULT_CONTAINER[1]
    cpu = _value(job, _TASK, "CPU_MILLISECONDS", part) / task_ms if task_ms > 0 else cv
    memory = _value(job, _TASK, "PHYSICAL_MEMORY_BYTES", part) / max(tasks, 1) / 2**20
    return TaskUse(min(cpu, cv), min(memory, cm) if memory > 0 else cm, cv, cm)


def counters_to_dict(counters: Mapping[str, Mapping[str, Counter]]) -> dict[str, Any]:
    """JSON form: ``{group: {name: [total, map, reduce]}}``."""
    return {
        g: {n: [c.total, c.map, c.reduce] for n, c in sorted(names.items())}
        for g, names in sorted(counters.items())
    }


def counters_from_dict(data: Mapping[str, Any]) -> dict[str, dict[str, Counter]]:
    """Inverse of ``counters_to_dict``."""
    return {
        str(g): {str(n): Counter(int(v[0]), int(v[1]), int(v[2])) for n, v in names.items()}
        for g, names in data.items()
    }
