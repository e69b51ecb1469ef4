"""Admission rounds and learning passes inside one database transaction.

``admission_round`` is ADMISSION_CONTROL (seed 004, Algorithm 6) as the sidecar runs it: on every
submission, every completion and every service tick (so deadlines that pass between events still
drop waiting jobs and kill large violators). It reads the queued and the CPU-holding jobs, calls
the admission policy (an ``AdmissionPolicy`` from ``app.policies.registry``: Justice, PYTHIA, or
Promise through ``promise_round``) and applies each decision with a compare-and-set state change,
so a job cancelled meanwhile is never admitted. ``learn_pass`` feeds TRACK_JOB (Algorithm 3) from
finished applications. Both lock the estimator row first (one lock order, no deadlocks).

A job ends (and frees its CPUs) at its app's first final record, but is learned from only once
the poller's ``FINISHED_GRACE_MS`` re-read is over (``finished_ms + grace <= last good poll``):
until then the RM's ``vcoreSeconds`` still grow while the AM container exits.

What is recorded (``docs/policies.md``: every decision with the inputs and numbers that produced
it): each admit, drop and kill, and the queue decision of the job that triggered the round, go to
``job_decisions`` with the round's numbers; the round itself goes to the shared ``decisions``
table (kind ``admission``) with the estimator, capacity and free CPUs it saw. A queued job that
stays queued in a later round gets no new row: with hundreds waiting that would be hundreds of
rows per event, and its numbers are recomputed, not lost, on the next change.

Capacity is ``YARN_SIDECAR_DEADLINE_CAPACITY_VCORES`` or, when 0, the vcores of the RUNNING
NodeManagers at the latest poll; before any poll a new job is queued with that reason. Free CPUs
are capacity minus the CPUs granted to admitted, submitting and submitted jobs.

Incremental submission rounds: reading and ranking every waiting job is what makes a round's
cost grow with the queue (about 85 ms at 10,000 waiting). For a ``monotone`` policy (Justice,
PYTHIA) a job that did not fit cannot fit later while the estimator and the capacity are the
same and the free CPUs have not grown: its request only grows as its deadline nears. So a round
records a ``RoundMark`` (policy, capacity, estimator version, the free CPUs it left) and a
submission round that finds the same mark and no more free CPUs decides the new jobs alone,
against the running jobs, exactly as a round over every waiting job would decide them; if a kill
is due, or anything in the mark changed, it runs the full round. What it leaves to the next full
round (every service tick) is dropping older waiting jobs whose deadline has become unreachable,
which frees nothing. The new jobs of such a round are decided from the rows in memory and
inserted with their decisions: it reads only the holding jobs, not even the number waiting
(counting 10,000 queued rows was 2 to 3 ms of every submission; ticks record it). A
service tick that finds the mark intact ranks the waiting jobs before taking the admission lock
(``app.jobs.tick_round``). And a full round reads only the waiting jobs it can change
(``selected_waiting``): those the policy could drop now or whose request fits in the CPUs free.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session

from app.db import jobs_repo
from app.db.jobs_models import EstimatorObservation, Job, JobDecision
from app.db.models import Application, Decision
from app.domain import tags as t
from app.domain.model import FINAL_APP_STATES, FINISHED_GRACE_MS
from app.jobs.eta_plans import QueuedPlan
from app.jobs.outcomes import FinishedApp, SidecarJobFacts, job_outcome, tagged_outcome
from app.jobs.promise_memory import SHARED, PromiseMemory
from app.policies import registry
from app.policies.base import AdmissionPolicy
from app.policies.justice import core as justice
from app.policies.justice.admission import JusticeAdmission
from app.policies.justice.core import EstimatorState, JobOutcome, JusticeParams
from app.settings import Settings


@dataclass(frozen=True, slots=True)
class AdmissionConfig:
    """The policy and where capacity comes from."""

    params: JusticeParams
    capacity_vcores: int
    cluster_name: str
    mode: str
    # The poller re-reads a finished app for this long (its vcoreSeconds still grow while the AM
    # container exits); learning waits for it. Injectable so a real-RM test need not wait 2 min.
    finished_grace_ms: int = FINISHED_GRACE_MS
    # Promise's validated parameters when it is the admission policy (Justice still learns)
    promise: Mapping[str, Any] | None = None
    deadline_queue: str = "root.deadline"
    # The admission policy (``app.policies.registry``); None: the one ``params`` or ``promise``
    # describe (``policy_of``).
    policy: AdmissionPolicy | None = None
    # The settings' value of every admission parameter: what a policy chosen at run time
    # (``PUT /admission``) takes for those its request leaves out, as the settings' policy does.
    defaults: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RoundMark:
    """What a round left (module docstring, incremental submission rounds)."""

    key: tuple[str, str, int, int]  # policy, its parameters, capacity, estimator version
    free_end: int  # free CPUs after the round's admissions


@dataclass(slots=True)
class RoundResult:
    """What a round decided and recorded."""

    decisions: list[justice.Decision] = field(default_factory=list)
    applied: list[justice.Decision] = field(default_factory=list)
    requester_decision: JobDecision | None = None
    round_id: int | None = None
    capacity: int | None = None
    # Each requester's decision when one round serves several submissions.
    requester_decisions: dict[str, JobDecision] = field(default_factory=dict)
    # Set by rounds of a monotone policy: what the next submission round may assume.
    mark: RoundMark | None = None
    incremental: bool = False
    # Set by Promise's rounds: the ETAs of the jobs it left queued, for readers (``eta_plans``).
    plan: QueuedPlan | None = None

    def answer(self, decided: JobDecision, wanted: Collection[str], requester: str | None) -> None:
        """Keep ``decided`` as the answer to its submission, if this round serves it."""
        if decided.job_id in wanted:
            self.requester_decisions[decided.job_id] = decided
        if decided.job_id == requester:
            self.requester_decision = decided

    @property
    def admitted(self) -> int:
        """How many jobs this round admitted."""
        return sum(d.action == "admit" for d in self.applied)

    @property
    def killed(self) -> int:
        """How many running jobs this round decided to kill."""
        return sum(d.action == "kill" for d in self.applied)


@dataclass(slots=True)
class LearnResult:
    """What a learning pass saw."""

    finished_jobs: int = 0
    learned: int = 0
    skipped: int = 0
    version: int | None = None


def config_from_settings(settings: Settings) -> AdmissionConfig:
    """The start-up policy (``YARN_SIDECAR_ADMISSION_POLICY``, validated by its ``PolicySpec``
    through the registry) and the capacity source from the settings."""
    learning = justice.make_params("justice", _justice_settings(settings))
    base = AdmissionConfig(
        learning,
        settings.deadline_capacity_vcores,
        settings.cluster_name,
        settings.mode.value,
        deadline_queue=settings.deadline_queue,
        defaults=_policy_settings(settings),
    )
    spec = registry.lookup(settings.admission_policy, "admission_policy")
    values = policy_values(base, spec.name, {}, "admission_policy")
    return with_policy(base, registry.admission_policy(spec.name, values, "admission_policy"))


def policy_values(
    cfg: AdmissionConfig, name: str, params: Mapping[str, Any], field_name: str = "policy"
) -> dict[str, Any]:
    """``params`` over the settings' values of the parameters policy ``name`` declares: a
    policy chosen at run time keeps what the operator configured (Promise's ApplicationMaster
    container and start-up prior, Justice's drop threshold) unless the request changes it,
    instead of falling back to the simulator's defaults."""
    spec = registry.lookup(name, field_name)
    known = {p.name for p in spec.params}
    return {**{k: v for k, v in cfg.defaults.items() if k in known}, **params}


def _justice_settings(settings: Settings) -> dict[str, Any]:
    return {
        "smoothing": settings.admission_smoothing,
        "alpha": settings.admission_alpha,
        "drop_threshold": settings.drop_threshold,
    }


def _policy_settings(settings: Settings) -> dict[str, Any]:
    """Every admission parameter the settings carry; each policy takes the ones it declares."""
    return {
        **_justice_settings(settings),
        "quantile": settings.promise_quantile,
        "min_samples": settings.promise_min_samples,
        "window": settings.promise_window,
        "am_containers": settings.promise_am_containers,
        "startup_s": settings.promise_startup_s,
        "crowd_out": settings.promise_crowd_out,
    }


def with_policy(cfg: AdmissionConfig, policy: AdmissionPolicy) -> AdmissionConfig:
    """``cfg`` running ``policy``. The Justice estimator row learns under every policy: with
    its own parameters when the policy keeps its estimator there (Justice, PYTHIA), with
    Justice's (``cfg``'s smoothing, alpha, drop threshold) when it rebuilds one from history."""
    if policy.estimator_source == "state":
        return replace(
            cfg, params=justice.make_params(policy.name, policy.params), policy=policy, promise=None
        )
    learning = justice.make_params(
        "justice",
        {
            "smoothing": cfg.params.smoothing,
            "alpha": cfg.params.alpha,
            "drop_threshold": cfg.params.drop_threshold,
        },
    )
    return replace(cfg, params=learning, policy=policy, promise=dict(policy.params))


def policy_of(cfg: AdmissionConfig) -> AdmissionPolicy:
    """The admission policy ``cfg`` runs (one built from its parameters when none was set)."""
    if cfg.policy is not None:
        return cfg.policy
    if cfg.promise is not None:
        return registry.admission_policy("promise", cfg.promise)
    return registry.admission_policy(cfg.params.variant, _params_dict(cfg.params))


def estimator_summary(state: EstimatorState, params: JusticeParams) -> dict[str, Any]:
    """The numbers of the estimator that a decision depended on."""
    return {
        "observations": state.completed,
        "min_cpu_frac": state.min_frac,
        "max_cpu_frac": state.max_frac,
        "last_cpu_frac": state.last_frac,
        "last_success": state.last_success,
        "correction": justice.smoothed_error(state, params),
        "fraction": justice.allocation_fraction(state, params),
    }


def capacity(session: Session, cfg: AdmissionConfig) -> int | None:
    """Deadline capacity in vcores, or ``None`` while unknown."""
    if cfg.capacity_vcores > 0:
        return cfg.capacity_vcores
    vcores = jobs_repo.running_vcores(session, cfg.cluster_name)
    return vcores if vcores else None


# ---- admission ---------------------------------------------------------------------------------


def admission_round(
    session: Session,
    cfg: AdmissionConfig,
    now_ms: int,
    trigger: str,
    requester: str | None = None,
    requesters: Sequence[str] = (),
    since: RoundMark | None = None,
    new_jobs: Sequence[Job] = (),
    principals: Mapping[str, str | None] | None = None,
    memory: PromiseMemory = SHARED,
) -> RoundResult:
    """Run Algorithm 6 over every queued and running job and apply the decisions.

    ``requester`` (or several ``requesters``, when concurrent submissions share one round): jobs
    whose decision is recorded even when it is "queue". ``since``: the mark of this process's
    last committed round; a submission round that may rely on it decides the new jobs alone
    (module docstring). ``new_jobs``: queued rows built for this round and not yet added to the
    session (requesters too): an incremental round decides them from memory and inserts them
    with their decision applied, where a full round stores them first and reads them back.
    ``principals``: who submitted each requester (the audit label its decision records; every
    other decision records none). ``memory``: the process's Promise estimator and arrival meter
    (``app.jobs.promise_memory``)."""
    if new_jobs and (requester is not None or requesters):
        raise ValueError("new_jobs are the round's requesters: give them alone")
    wanted = (
        set(requesters)
        | {job.id for job in new_jobs}
        | ({requester} if requester is not None else set())
    )
    policy = policy_of(cfg)
    if policy.estimator_source == "history":
        from app.jobs.promise_round import promise_round  # it builds on this module

        _store(session, new_jobs)
        return promise_round(
            session,
            cfg,
            policy,
            cfg.deadline_queue,
            now_ms,
            trigger,
            wanted=wanted,
            requester=requester,
            principals=principals,
            memory=memory,
        )
    return _justice_round(
        session, cfg, policy, now_ms, trigger, wanted, requester, since, new_jobs, principals
    )


def _justice_round(
    session: Session,
    cfg: AdmissionConfig,
    policy: AdmissionPolicy,
    now_ms: int,
    trigger: str,
    wanted: set[str],
    requester: str | None,
    since: RoundMark | None,
    new_jobs: Sequence[Job],
    principals: Mapping[str, str | None] | None,
) -> RoundResult:
    """``admission_round`` under a policy whose estimator is the global fraction (Justice,
    PYTHIA): the new submissions alone where the last round's mark allows (module docstring),
    else every queued and running job."""
    row = jobs_repo.lock_estimator(session, now_ms)
    state = EstimatorState.from_dict(row.state)
    result = RoundResult(capacity=capacity(session, cfg))
    if result.capacity is None:
        _store(session, new_jobs)
        answer_queued(session, cfg, result, wanted, requester, now_ms, principals)
        return result
    key = mark_key(policy, result.capacity, row.version)
    partial = None
    if policy.monotone and since is not None and since.key == key and wanted:
        partial = _incremental(
            session, policy, sorted(wanted), since, result.capacity, now_ms, state, new_jobs
        )
    unstored: dict[str, Job] = {}
    waiting_count: int | None = None
    evaluated: int | None = None
    if partial is not None:
        waiting, running, free, result.decisions = partial
        result.incremental = True
        unstored = {job.id: job for job in new_jobs}
        n_running, evaluated = len(running), len(waiting)  # the new submissions only
    else:
        _store(session, new_jobs)
        free, n_running, waiting_count, evaluated = _decide_all(
            session, policy, state, result, result.capacity, now_ms, wanted
        )
    numbers: dict[str, Any] = {
        "trigger": trigger,
        "capacity": result.capacity,
        "free_cpus": free,
        "running": n_running,
        "estimator": estimator_summary(state, cfg.params),
    }
    if waiting_count is not None:
        numbers["waiting"] = waiting_count
    if evaluated is not None:
        numbers["evaluated"] = evaluated  # those decided, where not every waiting job was
    if policy.monotone:
        left = free + sum(d.cpus for d in result.decisions if d.action == "kill")
        left -= sum(d.cpus for d in result.decisions if d.action == "admit")
        result.mark = RoundMark(key, left)
    took = apply_decisions(
        session, [d for d in result.decisions if d.job_id not in unstored], now_ms
    )
    taken = {id(d) for d in took}
    result.applied = [
        d
        for d in result.decisions
        if (
            _apply_unstored(unstored[d.job_id], d, now_ms)
            if d.job_id in unstored
            else id(d) in taken
        )
    ]
    # Inserted with their decisions applied, before the round's record that refers to them.
    jobs_repo.insert_jobs(session, list(unstored.values()))
    record_applied(session, cfg, result, numbers, now_ms, trigger, wanted, requester, principals)
    return result


def _decide_all(
    session: Session,
    policy: AdmissionPolicy,
    state: EstimatorState,
    result: RoundResult,
    cap: int,
    now_ms: int,
    wanted: set[str],
) -> tuple[int, int, int, int | None]:
    """Decide every queued and running job (into ``result.decisions``); returns the free vcores
    before the round, how many jobs run and wait, and how many waiting jobs were decided when
    ``selected_waiting`` read fewer than all."""
    running, waiting_count = jobs_repo.holding_inputs(session)
    free = max(cap - policy.booked(running), 0)
    now_s = now_ms / 1000
    # Kills free CPUs before any admission (Algorithm 6), and they depend on the holding jobs
    # alone.
    kills = policy.admit([], running, free, cap, now_s, state)
    freed = sum(d.cpus for d in kills if d.action == "kill")
    waiting = selected_waiting(session, policy, state, cap, now_ms, free + freed, wanted)
    result.decisions = list(policy.admit(waiting, running, free, cap, now_s, state))
    evaluated = len(waiting) if len(waiting) < waiting_count else None
    return free, len(running), waiting_count, evaluated


def selected_waiting(
    session: Session,
    policy: AdmissionPolicy,
    state: EstimatorState,
    capacity: int,
    now_ms: int,
    free: int,
    include: Collection[str] = (),
) -> list[justice.Job]:
    """The waiting jobs a round with ``free`` CPUs after its kills can change, with those in
    ``include`` (the round's requesters, whose decisions are recorded even when they queue):
    every waiting job when the policy gives no ``waiting_filter``. The rest would only be
    queued again, and a queued decision writes nothing; so the round decides as it would over
    every waiting job (``tests/unit/jobs/test_tick_round.py`` compares the two)."""
    only = policy.waiting_filter(state, free)
    if only is None:
        return jobs_repo.admission_inputs(session)[0]
    return jobs_repo.waiting_inputs(session, now_ms, capacity, only, include)


def mark_key(policy: AdmissionPolicy, capacity: int, version: int) -> tuple[str, str, int, int]:
    """What a round's decisions depended on besides the jobs (``RoundMark.key``)."""
    return (policy.name, repr(sorted(policy.params.items())), capacity, version)


def apply_decisions(
    session: Session, decisions: Sequence[justice.Decision], now_ms: int
) -> list[justice.Decision]:
    """The decisions that took effect, in their order, each applied with a compare-and-set: the
    drops together (``jobs_repo.drop_queued``), the others one by one."""
    drops = {d.job_id: d.reason for d in decisions if d.action == "drop"}
    dropped = jobs_repo.drop_queued(session, drops, now_ms) if drops else set()
    return [
        d
        for d in decisions
        if (d.job_id in dropped if d.action == "drop" else _apply(session, d, now_ms))
    ]


def record_applied(
    session: Session,
    cfg: AdmissionConfig,
    result: RoundResult,
    numbers: Mapping[str, Any],
    now_ms: int,
    trigger: str,
    wanted: set[str] | frozenset[str] = frozenset(),
    requester: str | None = None,
    principals: Mapping[str, str | None] | None = None,
) -> None:
    """Record the round (when it changed something or answered a requester) and a job decision
    for each applied decision that is not a mere "still queued"."""
    recorded = [d for d in result.applied if d.action != "queue" or d.job_id in wanted]
    if recorded:
        result.round_id = _record_round(session, cfg, numbers, recorded, now_ms, trigger)
    job_decisions = [
        _job_decision(decision, cfg, numbers, result.round_id, now_ms, principals)
        for decision in recorded
    ]
    jobs_repo.add_decisions(session, job_decisions)
    for job_decision in job_decisions:
        result.answer(job_decision, wanted, requester)


def _store(session: Session, new_jobs: Sequence[Job]) -> None:
    """Add the round's new rows to the session and insert them now, in one statement, for a
    round that reads them back."""
    if new_jobs:
        session.add_all(new_jobs)
        session.flush()


def _incremental(
    session: Session,
    policy: AdmissionPolicy,
    new_ids: Sequence[str],
    since: RoundMark,
    capacity: int,
    now_ms: int,
    state: EstimatorState,
    new_jobs: Sequence[Job] = (),
) -> tuple[list[justice.Job], list[justice.RunningJob], int, list[justice.Decision]] | None:
    """The new jobs decided alone, or ``None`` when the full round is needed (free CPUs grew
    since the mark, or a running job is due to be killed).

    ``new_jobs`` (not yet inserted; their ids are ``new_ids``): taken from memory as
    ``admission_inputs`` would read them back (queued, in submission order), so only the
    holding jobs are read. The queue is not counted: the decision does not depend on it, and
    counting it was the one part of a submission that grew with the queue (ticks and full
    rounds record it)."""
    if new_jobs:
        running = jobs_repo.holding_jobs(session)
        ordered = sorted(new_jobs, key=lambda job: (job.submitted_ms, job.id))
        waiting = [
            justice.Job(job.id, job.requested_tasks, job.deadline_s, job.submitted_ms / 1000)
            for job in ordered
        ]
    else:
        waiting, running = jobs_repo.admission_inputs(session, queued_ids=new_ids)
    free = max(capacity - policy.booked(running), 0)
    if free > since.free_end:
        return None
    decisions = list(policy.admit(waiting, running, free, capacity, now_ms / 1000, state))
    if any(d.action == "kill" for d in decisions):
        return None
    return waiting, running, free, decisions


def _apply(session: Session, d: justice.Decision, now_ms: int) -> bool:
    """Apply one queue, admit or kill decision with a compare-and-set; False if the job moved on
    meanwhile (drops go together, ``apply_decisions``)."""
    if d.action == "queue":
        return True
    if d.action == "admit":
        return jobs_repo.transition(
            session,
            d.job_id,
            [t.QUEUED],
            now_ms,
            state=t.ADMITTED,
            granted_cpus=d.cpus,
            admitted_ms=now_ms,
            reason=d.reason,
        )
    # kill: a job not yet on YARN ends at once; one with an app waits for the RM's kill.
    job = jobs_repo.get_job(session, d.job_id)
    if job is None:
        return False
    if job.state not in t.HOLDING_STATES:
        return False
    # From the state just read only: a job that started its submission meanwhile must not be
    # marked killed without its app being killed; the next round decides again.
    target = t.KILLED if job.state == t.ADMITTED else t.KILLING
    return jobs_repo.transition(
        session, d.job_id, [job.state], now_ms, state=target, reason=d.reason
    )


def _apply_unstored(job: Job, d: justice.Decision, now_ms: int) -> bool:
    """``_apply`` on a queued row this transaction built and has not inserted yet: no one else
    can have moved it, so the values ``_apply`` would write are set on it and inserted."""
    if d.action == "queue":
        return True
    if d.action == "admit":
        job.state = t.ADMITTED
        job.granted_cpus = d.cpus
        job.admitted_ms = now_ms
    elif d.action == "drop":
        job.state = t.DROPPED
    else:
        return False  # kill: a queued job holds nothing (``_apply`` finds it not holding)
    job.reason = d.reason
    job.updated_ms = now_ms
    return True


def submitter(principals: Mapping[str, str | None] | None, job_id: str) -> dict[str, Any]:
    """The ``principal`` of a round's decision about ``job_id``: its submitter's for a requester
    in ``principals``, otherwise none. Explicit, never the column default: a round a request
    runs also decides other users' jobs, which that request's principal did not decide."""
    return {"principal": None if principals is None else principals.get(job_id)}


def _job_decision(
    d: justice.Decision,
    cfg: AdmissionConfig,
    numbers: Mapping[str, Any],
    round_id: int | None,
    now_ms: int,
    principals: Mapping[str, str | None] | None = None,
) -> JobDecision:
    return JobDecision(
        **submitter(principals, d.job_id),
        job_id=d.job_id,
        round_id=round_id,
        created_ms=now_ms,
        action=d.action,
        policy=cfg.params.variant,
        cpus=d.cpus,
        req_cpus=d.req_cpus,
        fraction=d.fraction,
        ttd_s=d.ttd_s,
        priority=d.priority,
        reason=d.reason,
        numbers=dict(numbers),
    )


def _record_round(
    session: Session,
    cfg: AdmissionConfig,
    numbers: Mapping[str, Any],
    recorded: list[justice.Decision],
    now_ms: int,
    trigger: str,
) -> int:
    counts = {a: sum(d.action == a for d in recorded) for a in ("admit", "queue", "drop", "kill")}
    row = Decision(
        created_ms=now_ms,
        kind="admission",
        policy=cfg.params.variant,
        mode=cfg.mode,
        params=_params_dict(cfg.params),
        inputs=dict(numbers),
        outputs={"decisions": [d.to_dict() for d in recorded]},
        status="decided",
        reason=f"{trigger}: " + ", ".join(f"{n} {a}" for a, n in counts.items() if n),
    )
    return jobs_repo.add_round(session, cfg.cluster_name, row)


def _params_dict(params: JusticeParams) -> dict[str, Any]:
    return {
        "smoothing": params.smoothing,
        "alpha": params.alpha,
        "drop_threshold": params.drop_threshold,
        "error_history": params.error_history,
    }


# Why a submission's round planned nothing and left it queued (``answer_queued``).
UNKNOWN_CAPACITY = (
    "queued: deadline capacity unknown (no NodeManager polled yet and "
    "YARN_SIDECAR_DEADLINE_CAPACITY_VCORES is 0)"
)


def answer_queued(
    session: Session,
    cfg: AdmissionConfig,
    result: RoundResult,
    wanted: Collection[str],
    requester: str | None,
    now_ms: int,
    principals: Mapping[str, str | None] | None = None,
    reason: str = UNKNOWN_CAPACITY,
) -> None:
    """A round that plans nothing: each submission it serves still answers with its first
    decision stored, "queue" for ``reason``; the next round that plans decides it."""
    for job_id in sorted(wanted):
        decided = jobs_repo.add_decision(
            session,
            JobDecision(
                **submitter(principals, job_id),
                job_id=job_id,
                created_ms=now_ms,
                action="queue",
                policy=policy_of(cfg).name,  # under Promise, params are Justice's learning ones
                cpus=0,
                reason=reason,
                numbers={"trigger": "submission", "capacity": result.capacity},
            ),
        )
        result.answer(decided, wanted, requester)


def record_step(
    session: Session,
    cfg: AdmissionConfig,
    job_id: str,
    action: str,
    reason: str,
    now_ms: int,
    *,
    cpus: int = 0,
    principal: str | None = None,
    **numbers: Any,
) -> JobDecision:
    """Record a lifecycle step (submit, adopt, fail, cancel, killed) of a job. ``principal``: the
    caller who asked for it (a user's cancel); none for the sidecar's own steps, whichever
    request's thread or task happens to run them."""
    return jobs_repo.add_decision(
        session,
        JobDecision(
            principal=principal,
            job_id=job_id,
            created_ms=now_ms,
            action=action,
            policy=cfg.params.variant,
            cpus=cpus,
            reason=reason,
            numbers=dict(numbers),
        ),
    )


# ---- learning ----------------------------------------------------------------------------------


def finished_app(app: Application) -> FinishedApp:
    """An applications row as learning sees it."""
    return FinishedApp(
        app_id=app.app_id,
        tags=tuple(app.tag_list),
        state=app.state,
        final_status=app.final_status,
        submitted_ms=app.submitted_ms,
        finished_ms=app.finished_ms,
        elapsed_ms=app.elapsed_ms,
        vcore_seconds=app.vcore_seconds,
    )


def final_job_state(job_state: str, app: Application) -> str:
    """The job's end state once its app is final."""
    if app.state == "FINISHED" and app.final_status == "SUCCEEDED":
        return t.FINISHED
    if job_state == t.KILLING:
        return t.KILLED
    if job_state == t.CANCELLING:
        return t.CANCELLED
    return t.KILLED if app.state == "KILLED" else t.FAILED


def learn_pass(session: Session, cfg: AdmissionConfig, now_ms: int) -> LearnResult:
    """Finish jobs whose apps ended, learn from them and from ``deadline:``-tagged apps."""
    row = jobs_repo.lock_estimator(session, now_ms)
    learning = _Learning(
        session,
        cfg,
        capacity(session, cfg),
        now_ms,
        EstimatorState.from_dict(row.state),
        row.version + 1,
    )
    for job, app in jobs_repo.jobs_with_apps(session, [t.SUBMITTED, t.KILLING, t.CANCELLING]):
        learning.follow_job(job, app)
    settled = settled_ms(session, cfg)
    if settled is not None:
        for job, app in jobs_repo.unlearned_job_apps(session, settled):
            learning.learn_job(job, app)
        for app in jobs_repo.unobserved_tagged_apps(session, settled):
            learning.observe(app, None, "tagged", tagged_outcome(finished_app(app)))
    if learning.result.learned:
        learning.result.version = jobs_repo.save_estimator(session, row, learning.state, now_ms)
    return learning.result


def settled_ms(session: Session, cfg: AdmissionConfig) -> int | None:
    """Apps that finished by this time have their final ``vcoreSeconds`` in the history: the
    last good poll re-read them after the poller's grace. ``None`` before any good poll."""
    last_good = jobs_repo.last_good_poll_ms(session, cfg.cluster_name)
    return None if last_good is None else last_good - cfg.finished_grace_ms


@dataclass(slots=True)
class _Learning:
    """One learning pass: the estimator state it carries forward and what it saw."""

    session: Session
    cfg: AdmissionConfig
    cap: int | None
    now_ms: int
    state: EstimatorState
    next_version: int
    result: LearnResult = field(default_factory=LearnResult)

    @property
    def learner(self) -> AdmissionPolicy:
        """TRACK_JOB with the Justice estimator's parameters (the row every policy keeps)."""
        return JusticeAdmission(self.cfg.params)

    def follow_job(self, job: Job, app: Application) -> None:
        """Copy the app's progress onto the job; when it is final, end the job (its CPUs are free
        at once; learning waits until the app's accounting has settled)."""
        job.app_state = app.state
        job.final_status = app.final_status
        job.updated_ms = self.now_ms
        if app.state not in FINAL_APP_STATES:
            return
        _finish_job(self.session, self.cfg, job, app, self.now_ms)
        self.result.finished_jobs += 1

    def learn_job(self, job: Job, app: Application) -> None:
        """TRACK_JOB from an ended job's settled app record, which also corrects the job's."""
        job.vcore_seconds = app.vcore_seconds
        job.elapsed_ms = app.elapsed_ms
        facts = SidecarJobFacts(
            job.id, job.requested_tasks, job.deadline_s, job.deadline_ms, job.granted_cpus or 0
        )
        killed = job.state == t.KILLED and app.state == "KILLED"
        outcome = job_outcome(facts, finished_app(app))
        self.observe(app, job.id, "job", outcome, killed=facts if killed else None)

    def observe(
        self,
        app: Application,
        job_id: str | None,
        source: str,
        outcome: JobOutcome | str,
        killed: SidecarJobFacts | None = None,
    ) -> None:
        """TRACK_JOB once per app id; a skipped app is recorded with its reason, and a killed
        job's (``killed``) kept as a lower bound of its work (``_keep_censored``)."""
        if jobs_repo.is_observed(self.session, app.app_id):
            return
        row = EstimatorObservation(
            app_id=app.app_id, job_id=job_id, source=source, observed_ms=self.now_ms
        )
        if isinstance(outcome, JobOutcome) and self.cap is not None:
            self.state = self.learner.learn(self.state, outcome, self.cap)
            self.result.learned += 1
            _fill_learned(row, outcome, self.next_version)
        else:
            self.result.skipped += 1
            row.learned = False
            row.reason = outcome if isinstance(outcome, str) else _NO_CAPACITY
            if killed is not None:
                _keep_censored(row, killed, app.vcore_seconds)
        jobs_repo.add_observation(self.session, row)


_NO_CAPACITY = "deadline capacity unknown (no NodeManager polled yet): maxCPUs undefined"


def _keep_censored(row: EstimatorObservation, facts: SidecarJobFacts, vcore_seconds: float) -> None:
    """Keep a killed job's skipped observation as a lower bound of its work, for Promise's
    estimator (``app.db.promise_history``): what the app had used by its kill."""
    row.censored = True
    row.tasks = facts.tasks
    row.deadline_s = facts.deadline_s
    row.comp_time = float(vcore_seconds)
    row.cpus = facts.granted_cpus
    row.success = False
    row.reason += "; kept as a lower bound of its work"


def _fill_learned(row: EstimatorObservation, outcome: JobOutcome, version: int) -> None:
    row.learned = True
    row.tasks = outcome.tasks
    row.deadline_s = outcome.deadline_s
    row.comp_time = outcome.comp_time
    row.cpus = outcome.cpus
    row.success = outcome.success
    row.estimator_version = version
    row.reason = ""


def _finish_job(
    session: Session, cfg: AdmissionConfig, job: Job, app: Application, now_ms: int
) -> None:
    end = final_job_state(job.state, app)
    job.state = end
    job.finished_ms = app.finished_ms
    job.elapsed_ms = app.elapsed_ms
    job.vcore_seconds = app.vcore_seconds
    job.met_deadline = app.finished_ms is not None and app.finished_ms <= job.deadline_ms
    reason = f"application {app.app_id} ended {app.state}/{app.final_status}"
    if app.diagnostics and end != t.FINISHED:
        reason += f": {app.diagnostics[:500]}"
    job.reason = reason
    jobs_repo.add_decision(
        session,
        JobDecision(
            principal=None,  # the sidecar saw the app end, whoever's request runs this pass
            job_id=job.id,
            created_ms=now_ms,
            action="finish",
            policy=cfg.params.variant,
            cpus=job.granted_cpus or 0,
            reason=reason,
            numbers={
                "app_id": app.app_id,
                "state": end,
                "vcore_seconds": app.vcore_seconds,
                "elapsed_ms": app.elapsed_ms,
                "finished_ms": app.finished_ms,
                "deadline_ms": job.deadline_ms,
                "met_deadline": job.met_deadline,
            },
        ),
    )
