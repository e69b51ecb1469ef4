"""``yarn_sidecar_admission_decisions_total{action,reason}`` stays bounded however many jobs,
names and users Promise decides on: one series per kind of reason, not per job."""

from __future__ import annotations

import pytest

from app.db import jobs_repo, observe_repo
from app.db.jobs_models import JobDecision
from app.db.session import transaction
from tests import operator_data as od
from tests.conftest import Db


def _source(i: int) -> str:
    """An estimate's source as Promise's estimator names it: predictor @ the job's signature."""
    name = f"report-{['eu', 'us', 'apac', 'latam', 'mea'][i % 5]}-{['orders', 'ads'][i % 2]}"
    return f"{['task_s', 'ratio'][i % 2]}@n:{name}|u:user{chr(97 + i % 7)}|t:yarn|q:deadline"


def _reasons(i: int) -> list[tuple[str, str]]:
    """Promise's reasons (``app.policies.promise.core``) for the i-th job, numbers varying."""
    src, other = _source(i), f"{i + 1:032x}"
    return [
        ("admit", f"{i % 5 + 1} vcores: {i % 3 + 1} waves finish by now+{i * 7.5:.1f}s <= "
                  f"deadline now+{600 + i:.1f}s ({src})"),
        ("admit", f"{i % 5 + 2} vcores: 1 waves finish by now+{i:.1f}s <= deadline now+600.0s "
                  f"({src}), 2 more than its bound needs ({i % 9} of its 9 history runs fit it, "
                  f"1 fit {i % 5 + 2})"),
        ("admit", f"tried on {i % 4 + 1} vcores (running jobs end too late; deadline "
                  f"now+{i:.1f}s): {i % 100}% of its history fits, central estimate finishes by "
                  f"now+{i:.1f}s ({src})"),
        ("queue", f"waits for vcores to free up (after {other}, expected at now+{i:.1f}s)"),
        ("drop", f"cannot finish by its deadline now+{i:.1f}s: at best {i % 8 + 1} vcores from "
                 f"now+{i:.1f}s finish at now+{2 * i:.1f}s ({src})"),
    ]  # fmt: skip


FINISH = "N vcores: N waves finish by now+Ns <= deadline now+Ns"
BEST = "cannot finish by its deadline now+Ns: at best N vcores from now+Ns finish at now"


def _admission(db: Db) -> dict[tuple[str, str], int]:
    with db.sessions() as s:
        return observe_repo.snapshot(s, od.CLUSTER).admission


def test_promise_reasons_give_one_series_per_kind(db: Db) -> None:
    jobs = 40
    od.seed_jobs(db.sessions, count=jobs)
    before = _admission(db)
    with transaction(db.sessions) as s:
        for i in range(jobs):
            for action, reason in _reasons(i):
                jobs_repo.add_decision(
                    s,
                    JobDecision(job_id=f"{i:032x}", created_ms=od.NOW_MS, action=action,
                                policy="promise", cpus=1, reason=reason),
                )  # fmt: skip
    after = _admission(db)
    added = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    assert added == {
        ("admit", FINISH): jobs,
        ("admit", (FINISH + ", N more than its bound needs")[:80]): jobs,
        ("admit", "tried on N vcores"): jobs,
        ("queue", "waits for vcores to free up"): jobs,
        ("drop", BEST): jobs,
    }


@pytest.mark.parametrize(
    ("reason", "label"),
    [
        ("needs 5 CPUs > min(tasks, capacity) = 4", "needs N CPUs > min(tasks, capacity) = N"),
        ("whole request of 3 CPUs fits", "whole request of N CPUs fits"),
        (
            "waits for running jobs to end before their bounds (no start after those meets its "
            "deadline)",
            "waits for running jobs to end before their bounds",
        ),
        (
            f"YARN already had application_1_2 tagged sidecar-job:{7:032x}: adopted, not "
            "submitted again",
            "YARN already had application_N_N tagged sidecar-job:N: adopted, not submitted ag",
        ),
    ],
)
def test_reason_labels_keep_the_kind_and_drop_what_names_a_job(reason: str, label: str) -> None:
    assert observe_repo.reason_template(reason) == label
