"""Service-tick admission rounds that read and rank the waiting jobs outside the admission lock.

Every admission interval a round re-ranked every waiting job (about 30 to 60 ms at 10,000
waiting), and while it held the admission lock every ``POST /jobs`` waited for it. Under a
``monotone`` policy (Justice, PYTHIA; ``app.jobs.rounds``, incremental submission rounds) a tick
that finds the last round's mark intact (same policy, parameters, capacity and estimator version,
no more free CPUs than the mark left) can admit no waiting job: each waiting job did not fit when
it was last decided and its request only grows. What such a tick can still do is drop waiting
jobs whose deadline became unreachable, and Algorithm 6 decides a drop from the job, the
estimator's fraction, the capacity and the time alone (``justice.core._triage``), not from the
other jobs or the free CPUs.

So the tick reads and ranks the waiting jobs without the lock (``snapshot``), and if that
ranking admits and kills nothing, it takes the lock only to check the mark again against the
holding jobs (a few rows) and apply the drops with compare-and-set (``apply``): a job cancelled
or decided meanwhile is left alone. Nor does it read every waiting job, only those the policy's
``waiting_filter`` says it can change (``rounds.selected_waiting``): a tick over 10,000 waiting
jobs with none near its deadline ranks none. Ranking them all took about 70 ms of CPU with the
GIL held, during which every request thread waited for the interpreter even though the lock was
free. Anything else (no mark, a changed key, CPUs freed, a kill due, an admission in the
ranking) is the full round under the lock, as before. Jobs submitted after the snapshot were
each decided against the same mark by their own round; a deadline of theirs that becomes
unreachable is dropped by the next tick.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.db import jobs_repo
from app.jobs.rounds import (
    AdmissionConfig,
    RoundMark,
    RoundResult,
    apply_decisions,
    capacity,
    estimator_summary,
    mark_key,
    policy_of,
    record_applied,
    selected_waiting,
)
from app.policies.justice import core as justice
from app.policies.justice.core import EstimatorState


@dataclass(frozen=True, slots=True)
class TickSnapshot:
    """The drops a ranking of the waiting jobs found, and what it relied on."""

    key: tuple[str, str, int, int]
    drops: tuple[justice.Decision, ...]
    evaluated: int  # waiting jobs ranked (those the policy's waiting filter selected)


def snapshot(
    session: Session, cfg: AdmissionConfig, now_ms: int, since: RoundMark | None
) -> TickSnapshot | None:
    """Rank the waiting jobs without locking anything; ``None`` when the tick needs the full
    round (module docstring)."""
    policy = policy_of(cfg)
    if since is None or not policy.monotone or policy.estimator_source != "state":
        return None
    row = jobs_repo.read_estimator(session)
    cap = capacity(session, cfg)
    if row is None or cap is None:
        return None
    key = mark_key(policy, cap, row.version)
    if key != since.key:
        return None
    state = EstimatorState.from_dict(row.state)
    running = jobs_repo.holding_jobs(session)
    free = max(cap - policy.booked(running), 0)
    if free > since.free_end:
        return None
    waiting = selected_waiting(session, policy, state, cap, now_ms, free)
    decisions = policy.admit(waiting, running, free, cap, now_ms / 1000, state)
    if any(d.action in ("admit", "kill") for d in decisions):
        return None
    drops = tuple(d for d in decisions if d.action == "drop")
    return TickSnapshot(key, drops, len(waiting))


def apply(
    session: Session,
    cfg: AdmissionConfig,
    now_ms: int,
    trigger: str,
    taken: TickSnapshot,
    since: RoundMark | None,
) -> RoundResult | None:
    """Under the admission lock: the snapshot's drops, if the mark still holds now; ``None``
    when it does not and the full round must run."""
    policy = policy_of(cfg)
    row = jobs_repo.lock_estimator(session, now_ms)
    cap = capacity(session, cfg)
    if since is None or cap is None:
        return None
    key = mark_key(policy, cap, row.version)
    if key != taken.key or key != since.key:
        return None
    running, queued = jobs_repo.holding_inputs(session)
    free = max(cap - policy.booked(running), 0)
    if free > since.free_end:
        return None
    state = EstimatorState.from_dict(row.state)
    # Kills depend on the holding jobs only, which may have changed since the snapshot.
    if any(d.action == "kill" for d in policy.admit([], running, free, cap, now_ms / 1000, state)):
        return None
    result = RoundResult(capacity=cap, decisions=list(taken.drops), mark=RoundMark(key, free))
    result.incremental = True
    result.applied = apply_decisions(session, result.decisions, now_ms)
    numbers = {
        "trigger": trigger,
        "capacity": cap,
        "free_cpus": free,
        "waiting": queued,
        "running": len(running),
        "estimator": estimator_summary(state, cfg.params),
        "evaluated": taken.evaluated,
        "ranked_unlocked": True,
    }
    record_applied(session, cfg, result, numbers, now_ms, trigger)
    return result
