"""Phase timings, peak and mean vcores and the counters the policies read, hand-computed from
the recorded WordCount and SleepJob histories and from made-up task intervals."""

from __future__ import annotations

import pytest

from app.domain.history import (
    Counter,
    MapReduceJob,
    TaskRun,
    counters_from_dict,
    counters_to_dict,
    input_bytes,
    max_concurrent,
    phases,
    summarise,
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
