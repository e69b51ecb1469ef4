"""Simulator speed-ups change no result: each optimised path is compared, on fixed seeds, with
the algorithm it replaced, kept here as the reference implementation."""

from __future__ import annotations

import math

import pytest

from app.sim import experiment, trace
from app.sim.cluster import ClusterSpec
from app.sim.tasks import _EPS, TaskCluster


def _reference_room(self: TaskCluster, q: int) -> int:
    # The replaced code: the whole per-queue list built for one queue's value.
    return math.floor(self.max_shares[q] * self.capacity - self.used_by_queue()[q] + _EPS)


def _outcome(policy: str, seed: int) -> tuple[dict[str, object], list[tuple[str, float | None]]]:
    jobs = trace.synthetic(trace.SyntheticSpec(jobs=120, mean_interarrival_s=5.0), seed)
    jobs = experiment.with_deadlines(jobs, "Fixed2x", 60, seed)
    result = experiment.run_policy(policy, jobs, ClusterSpec(60), model="tasks")
    ends = sorted((r.job.job_id, r.end_s) for r in result.runs)
    summary = {k: v for k, v in result.summary().items() if k != "wall_s"}
    return summary, ends


@pytest.mark.parametrize("policy", ["baseline-fs", "fawkes:TD"])
def test_task_model_room_is_identical_to_the_reference(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _outcome(policy, 3)
    monkeypatch.setattr(TaskCluster, "_room", _reference_room)
    slow = _outcome(policy, 3)
    assert fast == slow  # exact: every end time and every headline number
