"""What TRACK_JOB (seed 004, Algorithm 3) learns from a finished YARN app.

``docs/policies.md``: ``compTime`` is the RM's ``vcoreSeconds``, ``numCPUsAllocd`` the vcores the
sidecar granted, success means finished within the deadline. Choices where the docs are silent:

* Only apps that ended ``FINISHED`` / ``SUCCEEDED`` teach. A killed app's ``vcoreSeconds`` stop
  at the kill (the selective dropping of 5.1.2 kills large violators precisely so that only the
  smaller ones, which run to completion, feed the statistics); a failed app's work is not the
  job's work. Such apps are still recorded as observations, with the reason they were skipped. A
  sidecar job killed so is kept too, as a lower bound of its work that Promise's estimator learns
  (``app.db.promise_history``; ``rounds._keep_censored``).
* An app submitted straight to YARN was granted nothing by the sidecar: its ``numCPUsAllocd`` is
  its mean parallelism ``ceil(vcoreSeconds / elapsed)``, capped at its tasks; without a
  ``tasks:`` tag its tasks are that same mean parallelism. Its deadline in seconds is the
  ``deadline:`` epoch minus the RM's submission time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.tags import DeadlineTags, mean_parallelism, parse_deadline_tags
from app.policies.justice.core import JobOutcome


@dataclass(frozen=True, slots=True)
class FinishedApp:
    """The facts of a finished app that learning needs (from the poller's applications table)."""

    app_id: str
    tags: Sequence[str]
    state: str
    final_status: str
    submitted_ms: int | None
    finished_ms: int | None
    elapsed_ms: int
    vcore_seconds: int


@dataclass(frozen=True, slots=True)
class SidecarJobFacts:
    """The sidecar's own record of a job: what it asked for and what it granted."""

    job_id: str
    tasks: int
    deadline_s: float
    deadline_ms: int
    granted_cpus: int


def skip_reason(app: FinishedApp) -> str | None:
    """Why a finished app cannot teach the estimator, or ``None`` if it can."""
    if app.state != "FINISHED" or app.final_status != "SUCCEEDED":
        return f"ended {app.state}/{app.final_status}: its vcoreSeconds are not a whole run"
    if app.finished_ms is None:
        return "the RM reports no finish time"
    return None


def met_deadline(finished_ms: int | None, deadline_ms: int) -> bool:
    """Success in Algorithm 3's sense: finished no later than the deadline."""
    return finished_ms is not None and finished_ms <= deadline_ms


def job_outcome(job: SidecarJobFacts, app: FinishedApp) -> JobOutcome | str:
    """TRACK_JOB's arguments for a job the sidecar submitted, or why it is skipped."""
    reason = skip_reason(app)
    if reason is not None:
        return reason
    return JobOutcome(
        id=job.job_id,
        tasks=job.tasks,
        deadline_s=job.deadline_s,
        comp_time=float(app.vcore_seconds),
        cpus=job.granted_cpus,
        success=met_deadline(app.finished_ms, job.deadline_ms),
    )


def tagged_outcome(app: FinishedApp) -> JobOutcome | str:
    """TRACK_JOB's arguments for an app submitted with a ``deadline:`` tag, or why it is skipped."""
    reason = skip_reason(app)
    if reason is not None:
        return reason
    parsed = parse_deadline_tags(app.tags)
    if not isinstance(parsed, DeadlineTags):
        return parsed
    if app.submitted_ms is None:
        return "the RM reports no submission time"
    deadline_s = parsed.deadline_s_epoch - app.submitted_ms / 1000
    if deadline_s <= 0:
        return f"deadline tag is {-deadline_s:g}s before the submission"
    parallelism = mean_parallelism(app.vcore_seconds, app.elapsed_ms)
    tasks = parsed.tasks if parsed.tasks is not None else parallelism
    return JobOutcome(
        id=app.app_id,
        tasks=tasks,
        deadline_s=deadline_s,
        comp_time=float(app.vcore_seconds),
        cpus=min(parallelism, tasks),
        success=met_deadline(app.finished_ms, int(parsed.deadline_s_epoch * 1000)),
    )
