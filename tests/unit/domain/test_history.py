"""Phase timings, peak and mean vcores and the counters the policies read, hand-computed from
the recorded WordCount and SleepJob histories and from made-up task intervals."""

from __future__ import annotations

import pytest

from app.domain.history import (
    MAP,
    REDUCE,
    Counter,
    MapReduceJob,
    TaskRun,
    counters_from_dict,
    counters_to_dict,
    input_bytes,
    max_concurrent,
    phases,
    summarise,
    task_use,
)
from tests.unit.yarn.test_jobhistory import SLEEP, WORDCOUNT, client


async def _job(app_id: str) -> MapReduceJob:
    async with client() as jhs:
        job = await jhs.job_of_app(app_id)
    assert job is not None
    return job


async def test_wordcount_phases_and_counters() -> None:
    s = summarise(await _job(WORDCOUNT))
    # maps ran 1795503996626 .. 1795504001953; the job finished at 1795504006556
    assert (s.map_phase_ms, s.reduce_phase_ms) == (5327, 4603)
    assert s.input_bytes == 3015609  # FileInputFormatCounter.BYTES_READ
    assert (s.output_bytes, s.shuffle_bytes, s.spilled_records) == (110, 312, 48)
    assert (s.cpu_ms, s.vcore_ms) == (2060, 14479 + 2081)
    # three maps at once of 1 vcore each (VCORES_MILLIS_MAPS == MILLIS_MAPS), one reduce
    assert (s.map_peak_vcores, s.reduce_peak_vcores) == (3.0, 1.0)


async def test_wordcount_task_use_and_containers_from_the_counters() -> None:
    job = await _job(WORDCOUNT)
    m, r = task_use(job, MAP), task_use(job, REDUCE)
    # containers: VCORES_MILLIS / MILLIS = 1 vcore, MB_MILLIS / MILLIS = 14826496 / 14479 MB
    assert (m.container_vcores, m.container_mb) == (1.0, 1024.0)
    assert (r.container_vcores, r.container_mb) == (1.0, 1024.0)
    # use: CPU ms over task ms, physical memory over the tasks (3 maps, 1 reduce)
    assert m.vcores == pytest.approx(1770 / 14479)
    assert m.memory_mb == pytest.approx(857268224 / 3 / 2**20)
    assert r.vcores == pytest.approx(290 / 2081)
    assert r.memory_mb == pytest.approx(155344896 / 2**20)


def test_task_use_is_capped_at_the_container_and_defaults_without_counters() -> None:
    jc, tc = "org.apache.hadoop.mapreduce.JobCounter", "org.apache.hadoop.mapreduce.TaskCounter"
    counters = {
        jc: {
            "MILLIS_MAPS": Counter(1000),
            "VCORES_MILLIS_MAPS": Counter(2000),
            "MB_MILLIS_MAPS": Counter(512_000),
        },
        tc: {
            "CPU_MILLISECONDS": Counter(5000, 5000, 0),
            "PHYSICAL_MEMORY_BYTES": Counter(2**30, 2**30, 0),
        },
    }
    job = MapReduceJob("job_1", "n", "q", "u", "SUCCEEDED", 0, 0, 1, 1, 1, 0, 0, counters=counters)
    # 5 CPU-seconds in 1 s of task time on a 2-vcore, 512 MB container: use capped at both
    m = task_use(job, MAP)
    assert (m.vcores, m.memory_mb) == (2.0, 512.0)
    assert (m.container_vcores, m.container_mb) == (2.0, 512.0)
    # no reduce counters: MapReduce's default container, used in full
    r = task_use(job, REDUCE)
    assert (r.vcores, r.memory_mb, r.container_vcores, r.container_mb) == (1.0, 1024.0, 1.0, 1024.0)


async def test_sleep_job_has_no_input_format_counter_and_reads_nothing() -> None:
    job = await _job(SLEEP)
    assert input_bytes(job) == 0
    map_phase, _ = phases(job)
    assert map_phase.tasks == 3
    assert map_phase.mean_vcores == pytest.approx(
        job.counters["org.apache.hadoop.mapreduce.JobCounter"]["VCORES_MILLIS_MAPS"].total
        / map_phase.duration_ms
    )


def test_input_falls_back_to_the_maps_filesystem_reads() -> None:
    fs = "org.apache.hadoop.mapreduce.FileSystemCounter"
    job = MapReduceJob(
        "job_1_1",
        "j",
        "q",
        "u",
        "SUCCEEDED",
        0,
        0,
        10,
        1,
        1,
        0,
        0,
        counters={
            fs: {"HDFS_BYTES_READ": Counter(700, 500, 200), "FILE_BYTES_READ": Counter(30, 20, 10)}
        },
    )
    assert input_bytes(job) == 520


def test_peak_counts_overlapping_tasks_with_a_finish_freeing_its_slot_first() -> None:
    assert max_concurrent([(0, 10), (5, 15), (10, 20)]) == 2
    assert max_concurrent([(0, 10), (0, 10), (0, 10)]) == 3
    assert max_concurrent([]) == 0


def test_a_job_without_reduces_has_an_empty_reduce_phase() -> None:
    tasks = (TaskRun("t_m_0", "MAP", "SUCCEEDED", 100, 400, 300),)
    job = MapReduceJob("job_1_2", "j", "q", "u", "SUCCEEDED", 0, 100, 900, 1, 1, 0, 0, tasks=tasks)
    map_phase, reduce_phase = phases(job)
    assert (map_phase.duration_ms, reduce_phase.duration_ms) == (300, 0)
    # no counters: one vcore per task
    assert map_phase.peak_vcores == 1.0


def test_counters_round_trip_through_json() -> None:
    counters = {"g": {"a": Counter(3, 2, 1)}, "h": {"b": Counter(0)}}
    assert counters_from_dict(counters_to_dict(counters)) == counters
