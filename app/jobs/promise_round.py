"""Admission rounds of the Promise policy in the live sidecar (``app/policies/promise``).

The same pure planner the simulator runs (``promise.core.admit``), fed from SQL: the estimator
is rebuilt from the learned observations (``app.db.promise_history``; incremental between rounds,
complete after a restart), the waiting and running jobs carry their signatures, and every
decision is applied with ``rounds``' compare-and-set and recorded with its ETA (``numbers.eta``:
predicted start, finish bound and central finish, what a queued job waits for, and for a drop
the earliest finish it could have had).

Book only what YARN can give: free vcores are what the deadline queue can hold now (``room``)
less what runs in the deadline queue without a ``sidecar-job:`` tag (the sidecar did not admit
it) less every admitted grant plus its ApplicationMaster container (``am_containers``, 1 by
default live: YARN starts one AM per application that no task grant counts). ``admitted_floor``
is what the queue controller must keep the deadline queue at.

What the deadline queue can hold now, when the operator has not fixed the deadline capacity, is
read from the latest poll: its guarantee (absolute capacity of the running NodeManagers' vcores,
rounded down as the CapacityScheduler does), or, if more, everything the other queues leave
unused (YARN lends idle capacity to a queue up to its maximum capacity), never above that
maximum. Without it, a grant booked on the whole cluster while another queue held most of it sat
ACCEPTED in YARN for minutes; with it, such a job waits in the sidecar with an ETA, and every job
admitted can start at once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.control import floors
from app.db import jobs_repo, repo
from app.db.jobs_models import JobDecision
from app.db.models import Application, ClusterSample, Decision, Queue, QueueSample
from app.db.promise_history import admission_jobs
from app.domain import tags as t
from app.domain.model import queue_names
from app.jobs.eta_plans import EtaPlans, QueuedPlan
from app.jobs.promise_memory import SHARED, PromiseMemory
from app.jobs.rounds import (
    UNKNOWN_CAPACITY,
    AdmissionConfig,
    RoundResult,
    answer_queued,
    apply_decisions,
    capacity,
    submitter,
)
from app.policies.base import AdmissionPolicy
from app.policies.justice import core as justice
from app.policies.promise import core


def foreign_vcores(session: Session, queue: str) -> int:
    """Vcores held in the deadline queue by running apps the sidecar did not submit."""
    stmt = select(func.coalesce(func.sum(Application.allocated_vcores), 0)).where(
        Application.queue.in_(queue_names(queue)),
        Application.state == "RUNNING",
        ~Application.tags.contains(f",{t.JOB_TAG}"),
    )
    return int(session.execute(stmt).scalar_one())


def room(total: int, guarantee_pct: float, max_pct: float, others_used: int) -> int:
    """Vcores a queue can hold without waiting for anyone: its guarantee (``guarantee_pct`` of
    ``total``, rounded down like the CapacityScheduler) or, if more, what the other queues leave
    unused, capped at its maximum capacity (``max_pct``)."""
    guaranteed = floors.rm_guaranteed(guarantee_pct / 100, total)
    ceiling = floors.rm_guaranteed(max_pct / 100, total)
    return max(0, min(ceiling, max(guaranteed, total - others_used)))


def room_now(session: Session, cluster_name: str, queue: str) -> int | None:
    """``room`` of ``queue`` from the latest poll; ``None`` before the poller has seen it."""
    cluster_id = jobs_repo.cluster_id(session, cluster_name)
    if cluster_id is None:
        return None
    cluster = session.execute(
        select(ClusterSample.capability_vcores, ClusterSample.used_vcores)
        .where(ClusterSample.cluster_id == cluster_id)
        .order_by(ClusterSample.taken_ms.desc())
        .limit(1)
    ).first()
    parts = queue.split(".")
    chain = [".".join(parts[: i + 1]) for i in range(1, len(parts))]  # below root
    if cluster is None or not chain:
        return None
    # One indexed lookup per level of the path (``repo.latest_sample_id``): only these queues,
    # not every queue ``repo.latest_queues`` reads, on every admission round.
    latest: dict[str, QueueSample] = {}
    for path in chain:
        sample = session.scalar(
            select(QueueSample)
            .join(Queue, Queue.id == QueueSample.queue_id)
            .where(Queue.cluster_id == cluster_id, Queue.path == path)
            .where(QueueSample.id == repo.latest_sample_id(Queue.id))
        )
        if sample is None:
            return None
        latest[path] = sample
    total, used = int(cluster[0]), int(cluster[1])
    own = latest[queue]
    # Percentage mode: a queue's absolute maximum is its maximum times its parent's.
    max_pct = 100.0
    for path in chain:
        max_pct *= latest[path].max_capacity / 100
    return room(total, own.absolute_capacity, max_pct, max(used - own.used_vcores, 0))


LOADING = (
    "queued: Promise is reading its estimator's whole history (a restart, or a capacity change "
    "that relearns it); the round after it decides this job"
)
# The reasons of a submission answered by a round that planned nothing: the next round that
# plans decides it as at its first round (``core.WaitingJob.first_round``), where it is promised
# on its bound and, small and of a new signature, explored.
UNPLANNED = (LOADING, UNKNOWN_CAPACITY)


def admitted_floor(session: Session, values: dict[str, Any]) -> int:
    """Vcores the deadline queue must keep: admitted grants plus their AM containers."""
    _, running = admission_jobs(session, holding_only=True)
    return core.booked_floor(running, core.promise_params(values))


class _Plan(NamedTuple):
    """What a round that planned decided, and the numbers it decided on (its audit inputs)."""

    decisions: list[core.Decision]
    numbers: dict[str, Any]
    values: dict[str, Any]  # the policy's parameters


def promise_round(
    session: Session,
    cfg: AdmissionConfig,
    policy: AdmissionPolicy,
    deadline_queue: str,
    now_ms: int,
    trigger: str,
    wanted: Collection[str] = (),
    requester: str | None = None,
    principals: Mapping[str, str | None] | None = None,
    memory: PromiseMemory = SHARED,
) -> RoundResult:
    """One Promise round over every queued and running job; decisions applied and recorded.

    ``wanted``: the submissions this round serves, whose decision is recorded even when it is
    "queue" (``requester`` is the one whose decision is also returned alone); ``principals``:
    who submitted them (``rounds.admission_round``); ``memory``: the process's estimator and
    arrival meter. While ``memory`` is loading the whole history (``promise_memory``), or while
    the deadline capacity is unknown, the round plans nothing: each submission answers queued,
    decided by the next round that plans as at its first round (the reason stored on it, one of
    ``UNPLANNED``, says so until a round plans it)."""
    jobs_repo.lock_estimator(session, now_ms)  # one lock order with the learning pass
    cap = capacity(session, cfg)
    result = RoundResult(capacity=cap)
    if cap is None:
        jobs_repo.set_queued_reason(session, wanted, UNKNOWN_CAPACITY)
        answer_queued(session, cfg, result, wanted, requester, now_ms, principals)
        return result
    plan = _plan(session, cfg, policy, deadline_queue, cap, now_ms, trigger, wanted, memory)
    if plan is None:
        # Kept on the jobs, not in this process: a round after a restart, or another replica's,
        # plans them as at their first round too.
        jobs_repo.set_queued_reason(session, wanted, LOADING)
        answer_queued(session, cfg, result, wanted, requester, now_ms, principals, LOADING)
        return result
    if cfg.promise is not None:
        # What readers may answer with until the next plan (``eta_plans``): the jobs it leaves
        # queued; the others are admitted or dropped once this round commits.
        queued = {d.job_id: d.to_dict() for d in plan.decisions if d.action == "queue"}
        result.plan = QueuedPlan(now_ms, dict(cfg.promise), queued)
    recorded = _apply(session, result, plan.decisions, now_ms, wanted)
    rows = _record(session, cfg, policy, result, plan, recorded, trigger, now_ms, principals)
    for row in rows:
        result.answer(row, wanted, requester)
    return result


def _plan(
    session: Session,
    cfg: AdmissionConfig,
    policy: AdmissionPolicy,
    deadline_queue: str,
    cap: int,
    now_ms: int,
    trigger: str,
    wanted: Collection[str],
    memory: PromiseMemory,
) -> _Plan | None:
    """The planner's decisions over every queued and running job, on what the deadline queue
    can hold now; None while ``memory`` is loading the whole history."""
    values = dict(policy.params)
    waiting, running = admission_jobs(session)
    foreign = foreign_vcores(session, deadline_queue)
    booked = policy.booked(running)
    holdable = _holdable(session, cfg, cap, deadline_queue)
    free = max(holdable - foreign - booked, 0)
    planner = core.promise_params(values)
    with memory.held(unless_loading=True) as held:
        est = memory.estimator(session, values, cap) if held else None
        if est is None:
            return None
        # The submissions this round serves are at their first round: promised on their bounds
        # (``risk.after_wait``), though the round runs a moment after they were submitted; so
        # are those answered queued while the history was being read, never planned yet.
        unplanned = jobs_repo.queued_with_reason(session, *UNPLANNED)
        first = set(wanted) | unplanned
        waiting = [replace(j, first_round=True) if j.id in first else j for j in waiting]
        load = memory.arrivals(session, est, cap, now_ms, wanted)
        decisions = core.admit(waiting, running, free, cap, now_ms / 1000, est, planner, load)
    if unplanned:  # planned now: a later round prices their wait
        for mark in UNPLANNED:
            jobs_repo.set_queued_reason(session, unplanned, "", only_if=mark)
    numbers = {
        "trigger": trigger,
        "capacity": cap,
        "room_vcores": holdable,
        "foreign_vcores": foreign,
        "booked_vcores": booked,
        "free_cpus": free,
        "waiting": len(waiting),
        "running": len(running),
        "arrivals_per_h": round(load.jobs_per_s * 3600, 3),
        "arrival_vcores": round(load.vcores, 3),
        # the median slack of the recent arrivals (``loss.Slack``), what the crowd-out test reads
        "arrival_slack_s": (
            round(load.slack.values[len(load.slack.values) // 2], 3) if load.slack else None
        ),
        # and the median of the vcores each needs at once (``loss.Sizes``)
        "arrival_need_vcores": (
            sorted(load.sizes.needs)[len(load.sizes.needs) // 2] if load.sizes else None
        ),
        # every arrival the meter has counted and the largest need among them: a hold is
        # priced for arrivals larger than any seen, one in (counted + 1)
        "arrivals_counted": load.seen,
        "arrival_need_top_vcores": load.top_need,
    }
    return _Plan(decisions, numbers, values)


def _apply(
    session: Session,
    result: RoundResult,
    decisions: Sequence[core.Decision],
    now_ms: int,
    wanted: Collection[str],
) -> list[core.Decision]:
    """Apply ``decisions`` with ``rounds``' compare-and-set (into ``result``); returns those to
    record: every one applied but a queued job's, unless this round serves it."""
    recorded: list[core.Decision] = []
    pairs = [
        (d, justice.Decision(d.action, d.job_id, d.cpus, d.reason))
        for d in decisions
        if d.action != "keep"
    ]
    result.decisions = [plain for _, plain in pairs]
    taken = {id(plain) for plain in apply_decisions(session, result.decisions, now_ms)}
    for d, plain in pairs:
        if id(plain) in taken:
            result.applied.append(plain)
            if d.action != "queue" or d.job_id in wanted:
                recorded.append(d)
    return recorded


def _record(
    session: Session,
    cfg: AdmissionConfig,
    policy: AdmissionPolicy,
    result: RoundResult,
    plan: _Plan,
    recorded: Sequence[core.Decision],
    trigger: str,
    now_ms: int,
    principals: Mapping[str, str | None] | None,
) -> list[JobDecision]:
    """The round's audit row (its id in ``result``) and one decision row per recorded job, each
    with its ETA; returns those rows."""
    numbers = plan.numbers
    if recorded:
        row = Decision(
            created_ms=now_ms,
            kind="admission",
            policy=policy.name,
            mode=cfg.mode,
            params=dict(plan.values),
            inputs=dict(numbers),
            outputs={"decisions": [d.to_dict() for d in recorded]},
            status="decided",
            reason=f"{trigger}: " + ", ".join(f"{d.action} {d.job_id}" for d in recorded[:20]),
        )
        result.round_id = jobs_repo.add_round(session, cfg.cluster_name, row)
    rows = [
        JobDecision(
            **submitter(principals, d.job_id),
            job_id=d.job_id,
            round_id=result.round_id,
            created_ms=now_ms,
            action=d.action,
            policy=policy.name,
            cpus=d.cpus,
            reason=d.reason,
            numbers={**numbers, "eta": d.to_dict()},
        )
        for d in recorded
    ]
    jobs_repo.add_decisions(session, rows)  # one multi-row insert, not one per job
    return rows


def current_eta(
    session: Session,
    cfg: AdmissionConfig,
    job_id: str,
    state: str,
    now_ms: int,
    recorded: Sequence[JobDecision],
    plans: EtaPlans | None = None,
    memory: PromiseMemory = SHARED,
) -> dict[str, Any] | None:
    """A queued job's ETA as the planner sees it now (read-only: nothing applied or recorded),
    from ``plans``' latest plan while it holds (``app.jobs.eta_plans``); for any other job, the
    ETA of its last decision in ``recorded`` (its decisions, oldest first, as the caller read
    them)."""
    if cfg.promise is None:
        return None
    if state == t.QUEUED:
        policy = dict(cfg.promise)
        if plans is None:
            made = plan_queued(session, cfg, policy, now_ms, memory)
            eta = None if made is None else made.etas.get(job_id)
        else:
            eta = plans.eta(
                job_id, policy, now_ms, lambda: plan_queued(session, cfg, policy, now_ms, memory)
            )
        if eta is not None:
            return eta
    for row in reversed(recorded):
        eta = (row.numbers or {}).get("eta")
        if isinstance(eta, dict):
            return eta
    return None


def plan_queued(
    session: Session,
    cfg: AdmissionConfig,
    values: dict[str, Any],
    now_ms: int,
    memory: PromiseMemory = SHARED,
) -> QueuedPlan | None:
    """What the planner says now of every queued job (read-only); None while the capacity is
    unknown or ``memory`` is loading the whole history."""
    cap = capacity(session, cfg)
    if cap is None:
        return None
    params = core.promise_params(values)
    waiting, running = admission_jobs(session)
    booked = core.booked_floor(running, params)
    holdable = _holdable(session, cfg, cap, cfg.deadline_queue)
    free = max(holdable - foreign_vcores(session, cfg.deadline_queue) - booked, 0)
    queued = {j.id for j in waiting}
    # A reader never waits for the estimator, nor reads the whole history where the service
    # does that: its job's recorded ETA answers meanwhile.
    with memory.held(unless_loading=True, wait=False) as held:
        est = memory.estimator(session, values, cap) if held else None
        if est is None:
            return None
        load = memory.arrivals(session, est, cap, now_ms)
        decisions = core.admit(waiting, running, free, cap, now_ms / 1000, est, params, load)
    etas = {d.job_id: d.to_dict() for d in decisions if d.job_id in queued}
    return QueuedPlan(now_ms, values, etas)


def _holdable(session: Session, cfg: AdmissionConfig, cap: int, queue: str) -> int:
    """The capacity admission may book: the operator's fixed deadline capacity, else what the
    deadline queue can hold now (the whole cluster until the poller has seen the queue)."""
    if cfg.capacity_vcores > 0:
        return cap
    now = room_now(session, cfg.cluster_name, queue)
    return cap if now is None else min(cap, now)
