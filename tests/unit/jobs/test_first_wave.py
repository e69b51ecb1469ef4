"""Timing a job's first wave from an attempt's container list (``app/jobs/first_wave.py``)."""

from __future__ import annotations

from app.domain.model import AttemptContainers, LiveContainer
from app.jobs.first_wave import Timing, time_first_wave
from app.yarn import mapping
from app.yarn.wire import AppAttemptsEnvelope, ContainersEnvelope
from tests.unit.yarn.samples import recorded

AM = "container_1795677996968_0002_01_000001"


def task_floor_s(attempt: AttemptContainers) -> float | None:
    return time_first_wave(attempt).floor_s


def _c(n: int, elapsed_ms: int, prefix: str = "container_1795677996968_0002_01") -> LiveContainer:
    return LiveContainer(f"{prefix}_{n:06d}", elapsed_ms)


def _attempt(*containers: LiveContainer) -> AttemptContainers:
    return AttemptContainers("appattempt_1795677996968_0002_000001", AM, containers)


def test_the_recorded_attempt_gives_its_youngest_task_containers_age() -> None:
    attempts = AppAttemptsEnvelope.model_validate(recorded("app_attempts_running.json"))
    assert attempts.appAttempts is not None
    listed = ContainersEnvelope.model_validate(recorded("attempt_containers.json"))
    attempt = mapping.attempt_containers(attempts.appAttempts.appAttempt[-1], listed)
    tasks = [c for c in listed.container if c.containerId != attempt.am_container_id]
    assert len(tasks) == 2
    assert task_floor_s(attempt) == min(c.elapsedTime for c in tasks) / 1000


def test_all_task_containers_running_give_the_youngest_age() -> None:
    assert task_floor_s(_attempt(_c(1, 50_000), _c(2, 41_000), _c(3, 40_500))) == 40.5


def test_a_missing_container_number_means_a_task_ended_and_there_is_no_new_bound() -> None:
    # 000002 is no longer listed: it ended, and the younger ones say nothing about it, now or
    # at any later reading
    ended = _attempt(_c(1, 50_000), _c(3, 40_000), _c(4, 9_000))
    assert time_first_wave(ended) == Timing(None, True)
    # all still running: a bound, and later readings may raise it
    assert time_first_wave(_attempt(_c(1, 50_000), _c(2, 40_000))) == Timing(40.0, False)
    # no task container listed yet (or all gone, which the list cannot tell): read again later
    assert time_first_wave(_attempt()) == Timing(None, False)


def test_no_task_container_yet_gives_no_bound() -> None:
    assert task_floor_s(_attempt(_c(1, 5_000))) is None
    assert task_floor_s(_attempt()) is None


def test_containers_of_another_attempt_or_unknown_ids_give_no_bound() -> None:
    other = _c(2, 30_000, prefix="container_1795677996968_0002_02")
    assert task_floor_s(_attempt(_c(1, 50_000), other)) is None
    odd = LiveContainer("not-a-container", 30_000)
    assert task_floor_s(_attempt(_c(1, 50_000), odd)) is None


def test_epoch_prefixed_ids_are_read() -> None:
    prefix = "container_e17_1795677996968_0002_01"
    attempt = AttemptContainers("a", f"{prefix}_000001", (_c(2, 12_000, prefix),))
    assert task_floor_s(attempt) == 12.0
