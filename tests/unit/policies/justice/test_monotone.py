"""The property incremental submission rounds rely on (``AdmissionPolicy.monotone``,
``app.jobs.rounds``): once a round has left ``left`` CPUs free, a later round with no more free
CPUs, the same estimator and no kill due decides new jobs alone exactly as it decides them among
every waiting job. Checked on seeded random rounds of Justice and PYTHIA, with and without a
learned fraction."""

from __future__ import annotations

import random

import pytest

from app.policies.justice import core
from app.policies.justice.admission import JusticeAdmission

CAP = 16


def _state(rnd: random.Random, variant: str) -> core.EstimatorState:
    state = core.EstimatorState()
    params = core.make_params(variant)
    for k in range(rnd.choice((0, 0, 3, 8))):
        tasks = rnd.randint(1, 20)
        deadline = rnd.uniform(50, 500)
        outcome = core.JobOutcome(
            f"o{k}", tasks, deadline, rnd.uniform(1, deadline * min(tasks, CAP)), tasks,
            rnd.random() < 0.7,
        )  # fmt: skip
        state = core.track_job(state, outcome, CAP, params)
    return state


def _jobs(rnd: random.Random, prefix: str, n: int, t: float) -> list[core.Job]:
    return [
        core.Job(f"{prefix}{k}", rnd.randint(1, 24), rnd.uniform(5, 400), t - rnd.uniform(0, 60))
        for k in range(n)
    ]


@pytest.mark.parametrize("variant", ["justice", "pythia"])
def test_new_jobs_alone_are_decided_as_among_every_waiting_job(variant: str) -> None:
    params = core.make_params(variant, {"drop_threshold": 10_000})
    contested = 0  # rounds where a new job was admitted while older ones kept waiting
    for seed in range(400):
        rnd = random.Random(seed)
        state = _state(rnd, variant)
        t0 = 1000.0
        running = [
            core.RunningJob(f"r{k}", 4, 10_000.0, t0 - 10, rnd.randint(1, 4))
            for k in range(rnd.randint(0, 3))
        ]
        free = max(CAP - sum(r.cpus for r in running), 0)
        old = _jobs(rnd, "w", rnd.randint(0, 30), t0)
        first = core.admit(state, old, running, free, CAP, t0, params)
        admitted = {d.job_id: d.cpus for d in first if d.action == "admit"}
        left = free - sum(admitted.values())
        queued = {d.job_id for d in first if d.action == "queue"}
        running += [
            core.RunningJob(j.id, j.tasks, j.deadline_s, j.submitted_s, admitted[j.id])
            for j in old
            if j.id in admitted
        ]
        # later, with no more free CPUs (possibly fewer: another process admitted meanwhile)
        t1 = t0 + rnd.uniform(0, 120)
        now_free = max(left - rnd.choice((0, 0, 1, 3)), 0)
        new = _jobs(rnd, "n", rnd.randint(1, 10), t1)
        waiting = [j for j in old if j.id in queued] + new
        alone = core.admit(state, new, running, now_free, CAP, t1, params)
        among = [d for d in core.admit(state, waiting, running, now_free, CAP, t1, params)
                 if d.job_id.startswith("n")]  # fmt: skip
        assert sorted(alone) == sorted(among), seed
        # and no older job fits: it was queued and still is, or is now infeasible
        assert all(
            d.action in ("queue", "drop")
            for d in core.admit(state, waiting, running, now_free, CAP, t1, params)
            if d.job_id.startswith("w")
        ), seed
        contested += bool(queued) and any(d.action == "admit" for d in alone)
    assert contested >= 40  # the property was put to the test, not only on empty queues


@pytest.mark.parametrize("variant", ["justice", "pythia"])
def test_no_waiting_job_is_dropped_before_its_horizon(variant: str) -> None:
    # What a round that reads only the jobs past the ``waiting_filter`` horizon relies on
    # (``app.jobs.rounds.selected_waiting``): a job with at least ``h`` of its deadline window
    # left is never dropped, and some jobs just past it are.
    policy = JusticeAdmission(core.make_params(variant))
    near = dropped = 0
    for seed in range(300):
        rnd = random.Random(seed)
        state = _state(rnd, variant)
        h = policy.waiting_filter(state, CAP).horizon
        t = 1000.0
        jobs = _jobs(rnd, "w", 30, t)
        drops = {d.job_id for d in policy.admit(jobs, [], CAP, CAP, t, state) if d.action == "drop"}
        for j in jobs:
            left = j.deadline_s - (t - j.submitted_s)
            if left >= h * j.deadline_s:
                assert j.id not in drops, (seed, j, h)
            elif left > h * j.deadline_s - 1.0:
                near += 1
                dropped += j.id in drops
    assert dropped > 0 and near > 0
