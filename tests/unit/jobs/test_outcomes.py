"""What TRACK_JOB learns from finished apps (``app.jobs.outcomes``), numbers by hand."""

from __future__ import annotations

from app.jobs.outcomes import FinishedApp, SidecarJobFacts, job_outcome, tagged_outcome
from app.policies.justice.core import JobOutcome

T0 = 1_700_000_000_000


def _app(**kw: object) -> FinishedApp:
    base: dict[str, object] = {
        "app_id": "application_1_0001",
        "tags": (),
        "state": "FINISHED",
        "final_status": "SUCCEEDED",
        "submitted_ms": T0,
        "finished_ms": T0 + 50_000,
        "elapsed_ms": 50_000,
        "vcore_seconds": 200,
    }
    base.update(kw)
    return FinishedApp(**base)  # type: ignore[arg-type]


def test_sidecar_job_outcome_uses_granted_cpus_and_its_own_deadline() -> None:
    job = SidecarJobFacts("j1", tasks=4, deadline_s=100.0, deadline_ms=T0 + 100_000, granted_cpus=3)
    assert job_outcome(job, _app()) == JobOutcome("j1", 4, 100.0, 200.0, 3, True)
    late = _app(finished_ms=T0 + 100_001)
    assert job_outcome(job, late) == JobOutcome("j1", 4, 100.0, 200.0, 3, False)
    on_time = _app(finished_ms=T0 + 100_000)
    outcome = job_outcome(job, on_time)
    assert isinstance(outcome, JobOutcome) and outcome.success


def test_killed_or_failed_apps_do_not_teach() -> None:
    job = SidecarJobFacts("j1", 4, 100.0, T0 + 100_000, 4)
    assert job_outcome(job, _app(state="KILLED", final_status="KILLED")) == (
        "ended KILLED/KILLED: its vcoreSeconds are not a whole run"
    )
    assert isinstance(job_outcome(job, _app(final_status="FAILED")), str)


def test_tagged_app_deadline_is_tag_minus_submission() -> None:
    # deadline tag 100 s after submission; 250 vcore-s over 50 s -> mean parallelism 5.
    app = _app(tags=("deadline:1700000100", "tasks:8"), vcore_seconds=250)
    assert tagged_outcome(app) == JobOutcome("application_1_0001", 8, 100.0, 250.0, 5, True)


def test_tagged_app_without_tasks_uses_mean_parallelism() -> None:
    app = _app(tags=("deadline:1700000040",), vcore_seconds=120, elapsed_ms=40_000)
    # finished at T0+50s, deadline at T0+40s: a miss; 120/40 = 3 vcores on average.
    assert tagged_outcome(app) == JobOutcome("application_1_0001", 3, 40.0, 120.0, 3, False)


def test_tagged_app_skips() -> None:
    assert tagged_outcome(_app(tags=("team",))) == "no deadline: tag"
    assert tagged_outcome(_app(tags=("deadline:1699999990",))) == (
        "deadline tag is 10s before the submission"
    )
    assert tagged_outcome(_app(tags=("deadline:1700000100",), submitted_ms=None)) == (
        "the RM reports no submission time"
    )
