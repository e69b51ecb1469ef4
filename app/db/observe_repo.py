"""Read models of the operator's view: what ``/metrics`` and the ``/ui`` dashboard show, derived
from the recorded history (samples, decisions, pushes, ledger, jobs, estimator, polls).

Everything here is a read; the numbers come from the rows the loops already write, so a scrape
or a page view never disturbs the control loop and every shown value can be traced to a record.
The writes are ``retire`` and ``tally_jobs``: retention hands them the rows it prunes (polls,
decisions) or counts out (ended jobs, job decisions) of tables counters are derived from, and
their tallies are added to the live counts so no counter ever goes down.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Integer,
    String,
    and_,
    case,
    cast,
    func,
    null,
    or_,
    select,
    text,
)
from sqlalchemy.orm import Session

from app.control.guard import STATE_KEY as GUARD_STATE
from app.db import control_repo, repo
from app.db.control_models import ConfigPush, LedgerEntry, PolicyState
from app.db.history_models import MapReduceJobRow
from app.db.jobs_models import UNTALLIED_SQL, EstimatorStateRow, Job, JobDecision, JobTally
from app.db.models import (
    LISTED_SQL,
    Application,
    Decision,
    NodeSample,
    PollRecord,
    Queue,
    QueueSample,
)
from app.domain.model import UNSTARTED_APP_STATES, AppRecord, Resources
from app.domain.tags import SUBMITTED

QUEUE_KIND = "queue"
# Decisions of HybridMR placement of observed jobs (``app.services.placement``).
PLACEMENT_KIND = "placement"
# controller records that ran no policy (nothing to plot)
SKIP_STATUSES = ("observe", "stale", "static", "rm_error", "policy_error")
# Seconds; the poll-duration histogram's upper bounds (a healthy poll takes tens of ms).
POLL_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Farthest an extrapolated job ETA may lie beyond the app's last update; beyond, it is unknown.
ETA_HORIZON_MS = 366 * 86_400_000
# Queue paths both engines' JSON path syntax carries as they are (SQLite compares a path's label
# with the key's JSON-escaped text; PostgreSQL's path is an array literal, split at , { } " \).
_PATH_SAFE = re.compile(r"[A-Za-z0-9_.:@+-]+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# A parenthesised aside of a reason, `` (...)``, also one the first clause cut short.
_ASIDE = re.compile(r"\s+\([^()]*(?:\)|$)")
_HEX_ID = re.compile(r"\b[0-9a-fA-F]{16,}\b")
# ``policy_states`` key of each cluster's tallies of pruned rows (``retire``).
RETIRED_KEY = "metrics_retired"
# The one ``job_tallies`` row.
JOB_TALLY_ID = 1
# Per pruned table, the columns its counters need of a deleted row (cluster id first).
RETIRED_COLUMNS: dict[type[Any], tuple[Any, ...]] = {
    PollRecord: (PollRecord.cluster_id, PollRecord.ok, PollRecord.duration_ms),
    Decision: (Decision.cluster_id, Decision.kind, Decision.status),
}


def reason_template(reason: str) -> str:
    """A decision reason with its numbers replaced by ``N``: a bounded label value
    (``request of 4 CPUs does not fit in 2 free`` -> ``request of N CPUs does not fit in N free``).

    Only the first clause (up to ``;``) is kept, without its parenthesised asides: there Promise
    names the estimate's source (the job's signature: its name, user and queue), the job that
    holds a reservation, and why a try was made; and ids (hex job ids) become ``N`` too.
    """
    text = _ASIDE.sub("", reason.split(";", 1)[0])
    text = _NUMBER.sub("N", _HEX_ID.sub("N", text)).strip()
    return text[:80] or "none"


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


@dataclass(frozen=True, slots=True)
class QueueNow:
    """One queue's latest numbers, each None when nothing recorded it yet."""

    path: str
    is_leaf: bool
    configured: float | None = None
    used_capacity: float | None = None
    absolute_used: float | None = None
    used_vcores: int | None = None
    pending_containers: int | None = None
    running_apps: int | None = None
    pending_apps: int | None = None
    desired: float | None = None
    pushed: float | None = None
    weight: float | None = None
    share: float | None = None
    debt: float | None = None
    discrimination: float | None = None
    drift: bool = False


@dataclass(slots=True)
class Snapshot:
    """Everything ``/metrics`` exposes that lives in the database."""

    cluster_known: bool = False
    queues: list[QueueNow] = field(default_factory=list)
    apps_by_state: dict[str, int] = field(default_factory=dict)
    control_by_status: dict[str, int] = field(default_factory=dict)
    pushes_by_outcome: dict[str, int] = field(default_factory=dict)
    admission: dict[tuple[str, str], int] = field(default_factory=dict)
    jobs_by_state: dict[str, int] = field(default_factory=dict)
    deadlines: dict[str, int] = field(default_factory=dict)
    estimator: dict[str, Any] = field(default_factory=dict)
    polls_by_outcome: dict[str, int] = field(default_factory=dict)
    poll_buckets: list[int] = field(default_factory=list)
    poll_count: int = 0
    poll_sum_s: float = 0.0
    last_poll_duration_s: float | None = None
    last_good_poll_ms: int | None = None
    last_decision_ms: int | None = None
    # MapReduce jobs in the history by collector status (ok, retry, missing).
    history_jobs: dict[str, int] = field(default_factory=dict)
    # The interference guard's maximum-capacity caps per queue (percent), empty when inactive.
    guard_caps: dict[str, float] = field(default_factory=dict)
    # HybridMR placement of observed jobs by status (applied, advised, decided, refused, failed).
    placements_by_status: dict[str, int] = field(default_factory=dict)
    # Deadline jobs submitted to YARN that it has not started (``unstarted_jobs``), and the
    # earliest of their submissions to YARN.
    unstarted_jobs: int = 0
    unstarted_since_ms: int | None = None


def latest_queue_decision(session: Session, cluster_id: int) -> Decision | None:
    """The newest controller tick that ran a policy (skips carry no plan)."""
    ids = session.scalars(
        select(Decision.id)
        .where(Decision.cluster_id == cluster_id, Decision.kind == QUEUE_KIND)
        .order_by(Decision.created_ms.desc(), Decision.id.desc())
        .limit(20)
    ).all()
    for decision_id in ids:  # normally the first one; each row is large
        row = session.get(Decision, decision_id)
        if row is not None and (row.outputs or {}).get("plan"):
            return row
    return None


def decision_numbers(row: Decision | None) -> dict[str, dict[str, float]]:
    """Per-queue numbers of one controller decision: desired (target) capacity, weight, measured
    share, debt, discrimination, drift (1.0), each keyed by queue path."""
    out: dict[str, dict[str, float]] = {}
    if row is None:
        return out

    def put(queue: str, key: str, value: Any) -> None:
        number = _float(value)
        if number is not None:
            out.setdefault(queue, {})[key] = number

    outputs, inputs = row.outputs or {}, row.inputs or {}
    for q, line in ((outputs.get("plan") or {}).get("queues") or {}).items():
        if isinstance(line, Mapping) and _float(line.get("target_h")) is not None:
            put(q, "desired", float(line["target_h"]) / 100)
    details = (outputs.get("policy") or {}).get("details") or {}
    for key, name in (("weights", "weight"), ("discrimination", "discrimination")):
        for q, v in (details.get(key) or {}).items():
            put(q, name, v)
    for q, v in (details.get("debt") or {}).items():
        put(q, "debt", v)
    for q, v in (((inputs.get("policy_inputs") or {}).get("queues")) or {}).items():
        if isinstance(v, Mapping):
            put(q, "share", v.get("used_fraction"))
    for q in (outputs.get("drift") or {}).get("queues") or {}:
        put(q, "drift", 1.0)
    return out


def latest_pushed(session: Session, cluster_id: int) -> dict[str, float]:
    """Each queue's capacity as last written by an applied push (or accepted as baseline)."""
    rows = session.scalars(
        select(ConfigPush)
        .where(
            ConfigPush.cluster_id == cluster_id,
            ConfigPush.status.in_(("applied", "baseline", "unverified")),
        )
        .order_by(ConfigPush.pushed_ms.desc(), ConfigPush.id.desc())
        .limit(50)
    ).all()
    out: dict[str, float] = {}
    for row in rows:
        for q, values in (row.values or {}).items():
            cap = _float((values or {}).get("capacity")) if isinstance(values, Mapping) else None
            if q not in out and cap is not None:
                out[q] = cap
    return out


def latest_debts(session: Session, cluster_id: int) -> dict[str, float]:
    """The LTRF ledger's debt of each queue at its newest integrated interval."""
    newest = (
        select(LedgerEntry.queue, func.max(LedgerEntry.end_ms).label("end_ms"))
        .where(LedgerEntry.cluster_id == cluster_id)
        .group_by(LedgerEntry.queue)
        .subquery()
    )
    rows = session.execute(
        select(LedgerEntry.queue, LedgerEntry.debt).join(
            newest,
            and_(
                LedgerEntry.queue == newest.c.queue,
                LedgerEntry.end_ms == newest.c.end_ms,
                LedgerEntry.cluster_id == cluster_id,
            ),
        )
    ).all()
    return {q: float(d) for q, d in rows}


def fawkes_discrimination(session: Session, cluster_id: int) -> dict[str, float]:
    """Fawkes' ``D_i`` as kept between ticks (any weighting's state)."""
    out: dict[str, float] = {}
    rows = session.scalars(
        select(PolicyState)
        .where(PolicyState.cluster_id == cluster_id, PolicyState.policy.like("fawkes%"))
        .order_by(PolicyState.updated_ms)
    ).all()
    for row in rows:
        for q, v in ((row.state or {}).get("discrimination") or {}).items():
            number = _float(v)
            if number is not None:
                out[q] = number
    return out


def _grouped(session: Session, column: Any, *where: Any) -> dict[str, int]:
    rows = session.execute(select(column, func.count()).where(*where).group_by(column)).all()
    return {str(k): int(n) for k, n in rows if k is not None}


def unstarted_jobs(session: Session) -> tuple[int, int | None]:
    """Deadline jobs the sidecar submitted to YARN whose app YARN has not started, as the polls
    have seen it (not listed yet, or still waiting for its ApplicationMaster), and the earliest
    of their submissions to YARN. Admission books only what the deadline queue can hold now, so
    each should start within a poll interval; one that waits longer holds a grant YARN is not
    serving (another queue holds the capacity, or the deadline queue's capacity changed)."""
    count, since = session.execute(
        select(func.count(), func.min(Job.yarn_submitted_ms))
        .select_from(Job)
        .outerjoin(Application, Application.app_id == Job.app_id)
        .where(
            Job.state == SUBMITTED,
            or_(
                Application.app_id.is_(None),
                Application.state.in_(sorted(UNSTARTED_APP_STATES)),
            ),
        )
    ).one()
    return int(count), None if since is None else int(since)


# ----- counts of pruned rows -------------------------------------------------------------------


def _counts(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): int(n) for k, n in value.items() if isinstance(n, int)}


def _tally_polls(tally: dict[str, Any], rows: Sequence[Sequence[Any]]) -> None:
    outcomes = _counts(tally.get("polls"))
    buckets = _counts(tally.get("poll_buckets"))
    total_ms = int(tally.get("poll_sum_ms") or 0)
    for _, ok, duration_ms in rows:
        key = "ok" if ok else "error"
        outcomes[key] = outcomes.get(key, 0) + 1
        total_ms += int(duration_ms)
        for bound in POLL_BUCKETS:
            if duration_ms <= int(bound * 1000):
                buckets[str(bound)] = buckets.get(str(bound), 0) + 1
    tally["polls"] = outcomes
    tally["poll_buckets"] = buckets
    tally["poll_count"] = int(tally.get("poll_count") or 0) + len(rows)
    tally["poll_sum_ms"] = total_ms


def _tally_decisions(tally: dict[str, Any], rows: Sequence[Sequence[Any]]) -> None:
    kinds = dict(tally.get("decisions") or {})
    for _, kind, status in rows:
        statuses = _counts(kinds.get(str(kind)))
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        kinds[str(kind)] = statuses
    tally["decisions"] = kinds


def retire(session: Session, model: type[Any], rows: Sequence[Sequence[Any]], now_ms: int) -> None:
    """Add rows retention deletes (``RETIRED_COLUMNS[model]`` of each) to their cluster's
    tallies, which ``snapshot`` adds to the live counts. Called in the transaction of the delete,
    so a scrape sees each row either live or tallied, never both or neither; the tallies live in
    the database, so the counters also survive a restart."""
    by_cluster: dict[int, list[Sequence[Any]]] = {}
    for row in rows:
        if row[0] is not None:  # a decision whose cluster is gone counts nowhere
            by_cluster.setdefault(int(row[0]), []).append(row)
    for cid, mine in sorted(by_cluster.items()):
        # locked, so two deleting transactions cannot both add to the same old tallies
        row = session.scalar(
            select(PolicyState)
            .where(PolicyState.cluster_id == cid, PolicyState.policy == RETIRED_KEY)
            .with_for_update()
        )
        tally = copy.deepcopy(dict(row.state)) if row is not None else {}
        if model is PollRecord:
            _tally_polls(tally, mine)
        else:
            _tally_decisions(tally, mine)
        control_repo.save_policy_state(session, cid, RETIRED_KEY, tally, now_ms)


def _add_retired(session: Session, cluster_id: int, snap: Snapshot) -> None:
    """The tallies of pruned rows (``retire``) added to the live counts."""
    tally = control_repo.load_policy_state(session, cluster_id, RETIRED_KEY)
    kinds = tally.get("decisions") or {}
    for counts, kind in (
        (snap.control_by_status, QUEUE_KIND),
        (snap.placements_by_status, PLACEMENT_KIND),
    ):
        for status, n in _counts(kinds.get(kind)).items():
            counts[status] = counts.get(status, 0) + n
    for outcome, n in _counts(tally.get("polls")).items():
        snap.polls_by_outcome[outcome] = snap.polls_by_outcome.get(outcome, 0) + n
    buckets = _counts(tally.get("poll_buckets"))
    snap.poll_buckets = [
        n + buckets.get(str(b), 0) for b, n in zip(POLL_BUCKETS, snap.poll_buckets, strict=True)
    ]
    snap.poll_count += int(tally.get("poll_count") or 0)
    snap.poll_sum_s += int(tally.get("poll_sum_ms") or 0) / 1000


def tally_jobs(
    session: Session,
    jobs: Sequence[Sequence[Any]],
    decisions: Sequence[Sequence[Any]],
    now_ms: int,
) -> None:
    """Add ended jobs (``(state, met_deadline)`` each) and job decisions (``(action, reason)``)
    that retention stamps ``tallied_ms`` to ``job_tallies``, in the transaction that stamps them:
    a scrape counts each row either one by one or in the tallies, never both or neither."""
    if not jobs and not decisions:
        return
    # locked, so two tallying transactions cannot both add to the same old counts
    row = session.scalar(select(JobTally).where(JobTally.id == JOB_TALLY_ID).with_for_update())
    tally = copy.deepcopy(dict(row.state)) if row is not None else {}
    states, deadlines = _counts(tally.get("jobs")), _counts(tally.get("deadlines"))
    for state, met in jobs:
        states[str(state)] = states.get(str(state), 0) + 1
        if met is not None:
            key = "met" if met else "missed"
            deadlines[key] = deadlines.get(key, 0) + 1
    actions = dict(tally.get("admission") or {})
    for action, reason in decisions:
        reasons = _counts(actions.get(str(action)))
        template = reason_template(reason or "")
        reasons[template] = reasons.get(template, 0) + 1
        actions[str(action)] = reasons
    tally.update(jobs=states, deadlines=deadlines, admission=actions)
    if row is None:
        session.add(JobTally(id=JOB_TALLY_ID, state=tally, updated_ms=now_ms))
    else:
        row.state, row.updated_ms = tally, now_ms
    session.flush()


def _with_tally(*blanks: Any) -> Any:
    """``job_tallies``' counts as one more row of a grouped count (``blanks``: its keys, typed
    nulls): each count and its tallies are read in one statement, so from one snapshot on both
    engines (two statements could see a retention pass commit between them and count its rows
    twice, or not at all)."""
    return select(*blanks, cast(null(), Integer), JobTally.state).where(JobTally.id == JOB_TALLY_ID)


def _job_counts(session: Session, snap: Snapshot) -> None:
    """Jobs by state, deadlines met and missed, job decisions by action and reason: the rows not
    tallied yet (through the partial indexes on ``tallied_ms IS NULL``), plus the tallies."""
    untallied = text(UNTALLIED_SQL)
    jobs = select(Job.state, Job.met_deadline, func.count(), cast(null(), JSON)).where(untallied)
    jobs = jobs.group_by(Job.state, Job.met_deadline)
    states: Counter[str] = Counter()
    snap.deadlines = {"met": 0, "missed": 0}
    for state, met, n, tally in session.execute(
        jobs.union_all(_with_tally(cast(null(), String), cast(null(), Boolean)))
    ).all():
        if tally is not None:
            states.update(_counts(tally.get("jobs")))
            for key, count in _counts(tally.get("deadlines")).items():
                snap.deadlines[key] = snap.deadlines.get(key, 0) + count
            continue
        if state is not None:
            states[str(state)] += int(n)
        if met is not None:
            snap.deadlines["met" if met else "missed"] += int(n)
    snap.jobs_by_state = dict(states)
    admission: Counter[tuple[str, str]] = Counter()
    steps = select(JobDecision.action, JobDecision.reason, func.count(), cast(null(), JSON))
    steps = steps.where(untallied).group_by(JobDecision.action, JobDecision.reason)
    for action, reason, n, tally in session.execute(
        steps.union_all(_with_tally(cast(null(), String), cast(null(), String)))
    ).all():
        if tally is not None:
            for name, reasons in (tally.get("admission") or {}).items():
                for template, count in _counts(reasons).items():
                    admission[(str(name), template)] += count
            continue
        admission[(str(action), reason_template(reason or ""))] += int(n)
    snap.admission = dict(admission)


def snapshot(session: Session, cluster_name: str) -> Snapshot:
    """The database's part of one scrape."""
    snap = Snapshot()
    cluster = repo.get_cluster(session, cluster_name)
    _job_counts(session, snap)
    snap.unstarted_jobs, snap.unstarted_since_ms = unstarted_jobs(session)
    est = session.scalars(select(EstimatorStateRow).order_by(EstimatorStateRow.id).limit(1)).first()
    if est is not None:
        snap.estimator = {**(est.state or {}), "version": est.version}
    if cluster is None:
        return snap
    snap.cluster_known = True
    snap.last_good_poll_ms = cluster.last_good_poll_ms
    _cluster_counts(session, cluster.id, snap)
    _queues_now(session, cluster.id, snap)
    return snap


def _cluster_counts(session: Session, cid: int, snap: Snapshot) -> None:
    """One cluster's counts: apps the RM lists, control decisions, pushes, placements, polls,
    retired rows and MapReduce history jobs."""
    # The apps the RM lists now (its own retention bounds them), through ix_applications_listed:
    # counting the whole history grew with every app ever seen, on every scrape.
    snap.apps_by_state = _grouped(
        session, Application.state, Application.cluster_id == cid, text(LISTED_SQL)
    )
    snap.control_by_status = _grouped(
        session, Decision.status, Decision.cluster_id == cid, Decision.kind == QUEUE_KIND
    )
    snap.pushes_by_outcome = _grouped(
        session, ConfigPush.status, ConfigPush.cluster_id == cid, ConfigPush.status != "baseline"
    )
    snap.placements_by_status = _grouped(
        session, Decision.status, Decision.cluster_id == cid, Decision.kind == PLACEMENT_KIND
    )
    _polls(session, cid, snap)
    _add_retired(session, cid, snap)
    snap.history_jobs = {
        str(status): int(n)
        for status, n in session.execute(
            select(MapReduceJobRow.status, func.count())
            .join(Application, Application.app_id == MapReduceJobRow.app_id)
            .where(Application.cluster_id == cid)
            .group_by(MapReduceJobRow.status)
        ).all()
    }


def _queues_now(session: Session, cid: int, snap: Snapshot) -> None:
    """One cluster's queues as the latest poll reported them, with what the controller decided
    and pushed for each, and the guard's caps."""
    guard = control_repo.load_policy_state(session, cid, GUARD_STATE)
    snap.guard_caps = {str(q): int(h) / 100 for q, h in (guard.get("caps") or {}).items()}
    decision = latest_queue_decision(session, cid)
    snap.last_decision_ms = decision.created_ms if decision is not None else None
    numbers = decision_numbers(decision)
    pushed = latest_pushed(session, cid)
    debts = latest_debts(session, cid)
    disc = fawkes_discrimination(session, cid)
    # Only the queues the latest poll reported: a queue deleted on the RM leaves /metrics.
    for view in repo.latest_queues(session, cid, current_only=True):
        q, s = view.queue, view.sample
        nums = numbers.get(q.path, {})
        snap.queues.append(
            QueueNow(
                path=q.path,
                is_leaf=q.is_leaf,
                configured=s.capacity if s is not None else q.capacity,
                used_capacity=s.used_capacity if s is not None else None,
                absolute_used=s.absolute_used_capacity if s is not None else None,
                used_vcores=s.used_vcores if s is not None else None,
                pending_containers=s.pending_containers if s is not None else None,
                running_apps=s.running_apps if s is not None else None,
                pending_apps=s.pending_apps if s is not None else None,
                desired=nums.get("desired"),
                pushed=pushed.get(q.path),
                weight=nums.get("weight"),
                share=nums.get("share"),
                debt=debts.get(q.path, nums.get("debt")),
                discrimination=disc.get(q.path, nums.get("discrimination")),
                drift=bool(nums.get("drift")),
            )
        )


def _polls(session: Session, cluster_id: int, snap: Snapshot) -> None:
    snap.polls_by_outcome = {"ok": 0, "error": 0}
    for ok, n in session.execute(
        select(PollRecord.ok, func.count())
        .where(PollRecord.cluster_id == cluster_id)
        .group_by(PollRecord.ok)
    ).all():
        snap.polls_by_outcome["ok" if ok else "error"] += int(n)
    buckets = [
        func.sum(case((PollRecord.duration_ms <= int(b * 1000), 1), else_=0)) for b in POLL_BUCKETS
    ]
    row = session.execute(
        select(func.count(), func.sum(PollRecord.duration_ms), *buckets).where(
            PollRecord.cluster_id == cluster_id
        )
    ).one()
    snap.poll_count = int(row[0] or 0)
    snap.poll_sum_s = float(row[1] or 0) / 1000
    snap.poll_buckets = [int(v or 0) for v in row[2:]]
    last = session.scalars(
        select(PollRecord.duration_ms)
        .where(PollRecord.cluster_id == cluster_id)
        .order_by(PollRecord.started_ms.desc())
        .limit(1)
    ).first()
    snap.last_poll_duration_s = last / 1000 if last is not None else None


# ----- the dashboard's series -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueSeries:
    """One queue over a window: sampled capacity and usage, and the controller's weight, desired
    capacity and debt at each of its decisions. Times in epoch ms."""

    path: str
    t: list[int]
    capacity: list[float]
    used_capacity: list[float]
    absolute_used: list[float]
    decision_t: list[int]
    weight: list[float | None]
    desired: list[float | None]
    debt_t: list[int]
    debt: list[float]


def _thin(n: int, points: int) -> int:
    return max(1, -(-n // max(1, points)))


def _tick_numbers(
    session: Session, where: Sequence[Any], path: str, points: int
) -> list[tuple[int, float | None, float | None]]:
    """Time, desired capacity (percent of the parent) and weight of queue ``path`` at each
    controller tick matching ``where``, oldest first, at most ``points`` of them."""
    if _PATH_SAFE.fullmatch(path):
        # the two numbers are pulled out of the JSON by the database: a tick's record holds every
        # queue's inputs and plan, and parsing hundreds of them for one queue is the slow part
        target = Decision.outputs[("plan", "queues", path, "target_h")].as_float()
        weight_of = Decision.outputs[("policy", "details", "weights", path)].as_float()
        rows = session.execute(
            select(Decision.created_ms, target, weight_of)
            .where(*where)
            .order_by(Decision.created_ms)
        ).all()
        return [
            (int(t), float(d) / 100 if d is not None else None, float(w) if w is not None else None)
            for t, d, w in rows[:: _thin(len(rows), points)]
        ]
    # A name the JSON path syntax cannot carry on one of the engines: the database hands over
    # the per-queue maps of the ticks kept, and the queue is looked up in them here.
    ticks = session.execute(
        select(Decision.id, Decision.created_ms).where(*where).order_by(Decision.created_ms)
    ).all()
    ticks = ticks[:: _thin(len(ticks), points)]
    plans = Decision.outputs[("plan", "queues")]
    weights = Decision.outputs[("policy", "details", "weights")]
    numbers: dict[int, tuple[float | None, float | None]] = {}
    ids = [int(r[0]) for r in ticks]
    for start in range(0, len(ids), 500):  # bounded IN lists
        chunk = ids[start : start + 500]
        for decision_id, plan, weight in session.execute(
            select(Decision.id, plans, weights).where(Decision.id.in_(chunk))
        ).all():
            line = plan.get(path) if isinstance(plan, Mapping) else None
            desired = _float(line.get("target_h")) if isinstance(line, Mapping) else None
            numbers[int(decision_id)] = (
                desired / 100 if desired is not None else None,
                _float(weight.get(path)) if isinstance(weight, Mapping) else None,
            )
    return [(int(t), *numbers.get(int(i), (None, None))) for i, t in ticks]


def queue_series(
    session: Session, cluster_id: int, path: str, since_ms: int, until_ms: int, points: int
) -> QueueSeries | None:
    """At most ``points`` points per series (every k-th row), oldest first."""
    queue = session.scalars(
        select(Queue).where(Queue.cluster_id == cluster_id, Queue.path == path)
    ).first()
    if queue is None:
        return None
    samples = session.execute(
        select(
            QueueSample.taken_ms,
            QueueSample.capacity,
            QueueSample.used_capacity,
            QueueSample.absolute_used_capacity,
        )
        .where(
            QueueSample.queue_id == queue.id,
            QueueSample.taken_ms >= since_ms,
            QueueSample.taken_ms < until_ms,
        )
        .order_by(QueueSample.taken_ms)
    ).all()
    step = _thin(len(samples), points)
    kept = samples[::step]
    ticks = _tick_numbers(
        session,
        (
            Decision.cluster_id == cluster_id,
            Decision.kind == QUEUE_KIND,
            Decision.created_ms >= since_ms,
            Decision.created_ms < until_ms,
            Decision.status.not_in(SKIP_STATUSES),
        ),
        path,
        points,
    )
    ledger = session.execute(
        select(LedgerEntry.end_ms, LedgerEntry.debt)
        .where(
            LedgerEntry.cluster_id == cluster_id,
            LedgerEntry.queue == path,
            LedgerEntry.end_ms >= since_ms,
            LedgerEntry.end_ms < until_ms,
        )
        .order_by(LedgerEntry.end_ms)
    ).all()
    ledger = ledger[:: _thin(len(ledger), points)]
    return QueueSeries(
        path=path,
        t=[int(r[0]) for r in kept],
        capacity=[float(r[1]) for r in kept],
        used_capacity=[float(r[2]) for r in kept],
        absolute_used=[float(r[3]) for r in kept],
        decision_t=[t for t, _, _ in ticks],
        weight=[w for _, _, w in ticks],
        desired=[d for _, d, _ in ticks],
        debt_t=[int(r[0]) for r in ledger],
        debt=[float(r[1]) for r in ledger],
    )


def job_counts(session: Session) -> dict[str, int]:
    """Deadline jobs by state (the dashboard's filter chips)."""
    return _grouped(session, Job.state)


def job_etas(session: Session, job_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each job's application progress and an ETA extrapolated from it: a running app that was
    ``p`` % done ``e`` ms after it started should end at ``start + e * 100 / p``. An ETA more
    than ``ETA_HORIZON_MS`` after the app's last update is unknown (None): a tiny progress
    extrapolates to no meaningful time, possibly past any date a client can represent."""
    if not job_ids:
        return {}
    rows = session.execute(
        select(Job.id, Application)
        .join(Application, Application.app_id == Job.app_id)
        .where(Job.id.in_(list(job_ids)))
    ).all()
    out: dict[str, dict[str, Any]] = {}
    for job_id, a in rows:
        eta: int | None = None
        if a.finished_ms is not None:
            eta = a.finished_ms
        elif a.started_ms is not None and a.progress > 0:
            total_ms = (a.updated_ms - a.started_ms) * 100 / a.progress
            if a.started_ms + total_ms - a.updated_ms <= ETA_HORIZON_MS:
                eta = a.started_ms + int(total_ms)
        out[str(job_id)] = {"progress": a.progress, "eta_ms": eta, "app_state": a.state}
    return out


# ----- what-if input ---------------------------------------------------------------------------


def finished_apps(
    session: Session, cluster_name: str, since_ms: int | None, until_ms: int | None
) -> list[AppRecord]:
    """Finished applications submitted in ``[since_ms, until_ms)``, as domain records."""
    cluster = repo.get_cluster(session, cluster_name)
    if cluster is None:
        return []
    stmt = select(Application).where(
        Application.cluster_id == cluster.id, Application.finished_ms.is_not(None)
    )
    if since_ms is not None:
        stmt = stmt.where(Application.submitted_ms >= since_ms)
    if until_ms is not None:
        stmt = stmt.where(Application.submitted_ms < until_ms)
    return [_record(a) for a in session.scalars(stmt.order_by(Application.submitted_ms))]


def _record(a: Application) -> AppRecord:
    return AppRecord(
        app_id=a.app_id,
        user=a.user,
        queue=a.queue,
        name=a.name,
        app_type=a.app_type,
        tags=tuple(a.tag_list),
        state=a.state,
        final_status=a.final_status,
        progress=a.progress,
        submitted_ms=a.submitted_ms,
        started_ms=a.started_ms,
        launched_ms=a.launched_ms,
        finished_ms=a.finished_ms,
        elapsed_ms=a.elapsed_ms,
        allocated=Resources(a.allocated_vcores, a.allocated_mb),
        vcore_seconds=a.vcore_seconds,
        memory_seconds=a.memory_seconds,
        running_containers=a.running_containers,
        priority=a.priority,
        diagnostics=a.diagnostics,
    )


def job_deadlines(session: Session, app_ids: Sequence[str]) -> dict[str, float]:
    """Deadline (seconds after submission) of the apps that were sidecar deadline jobs."""
    out: dict[str, float] = {}
    ids = list(app_ids)
    for start in range(0, len(ids), 500):  # bounded IN lists
        chunk = ids[start : start + 500]
        for app_id, deadline in session.execute(
            select(Job.app_id, Job.deadline_s).where(Job.app_id.in_(chunk))
        ).all():
            out[str(app_id)] = float(deadline)
    return out


def cluster_vcores(session: Session, cluster_name: str) -> int | None:
    """The cluster's vcores at its newest node sample."""
    cluster = repo.get_cluster(session, cluster_name)
    if cluster is None:
        return None
    newest = session.scalar(
        select(func.max(NodeSample.taken_ms)).where(NodeSample.cluster_id == cluster.id)
    )
    if newest is None:
        return None
    total = session.scalar(
        select(func.sum(NodeSample.capability_vcores)).where(
            NodeSample.cluster_id == cluster.id,
            NodeSample.taken_ms == newest,
            NodeSample.state == "RUNNING",
        )
    )
    return int(total) if total else None
