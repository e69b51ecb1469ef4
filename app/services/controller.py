"""The queue controller (issue 5): every ``policy_interval_s`` it turns live RM state into queue
capacities (``docs/style.md``, "The tick": observe -> persist -> decide -> plan -> actuate ->
record).

One tick:

1. configuration: the settings overlaid with the operator's ``PUT /policy`` (persisted);
   ``observe`` stops here and records nothing; ``static`` records a skip;
2. staleness: no decision when the last good poll is older than three poll intervals;
3. live configuration of the managed parent's children, read from the RM now (never from the DB);
4. inputs: interval averages from the stored samples (``app.services.policy_inputs``); the LTRF
   ledger integrated from measured usage up to the newest poll;
5. decide (``app.control.decide``) and plan (``app.control.plan``: exact 100.00, bounds,
   hysteresis, step limit);
6. drift: the live values against the last push the RM accepted (or the operator's accepted
   baseline), via the configuration version and a value comparison; a push left ``pending`` by
   a tick that died after its PUT is the baseline when the RM holds its values;
7. actuate in ``enforce`` mode only (``app.yarn.actuator``: validate, one PUT, read back, restore),
   after committing the push as ``pending`` (write-ahead), so a crash before step 8 is not
   mistaken for an operator's edit by the next tick;
8. record one decision with inputs, shares, plan, what was pushed and the RM's answer; the
   policy state, the ledger and the push's outcome are committed in the same transaction.

A tick that fails is recorded as such (RM unreachable, policy error) and the loop goes on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.control import config as control_config
from app.control import floors as control_floors
from app.control import idle, preemption
from app.control.config import STATIC, ControlConfig
from app.control.decide import run_policy
from app.control.drift import differences
from app.control.ledger import LedgerState, LedgerStep, integrate
from app.control.plan import Plan, plan_outcome
from app.db import control_repo, leader_repo, repo
from app.db.control_models import ConfigPush
from app.db.models import Decision
from app.db.session import transaction
from app.domain.observation import PolicyInputs
from app.domain.outcome import PolicyOutcome
from app.policies.base import PolicyError
from app.services.base import Clock, LoopService, wall_clock_ms
from app.services.policy_inputs import load_inputs, load_polls
from app.yarn.actuator import Actuator, LiveConfig, PushResult
from app.yarn.errors import RMError

KIND = "queue"
LEDGER_STATE = "ltrf-ledger"
STALE_POLLS = 3


@dataclass(frozen=True, slots=True)
class Context:
    """What a tick knows before asking the RM: cluster, configuration, freshness of the data."""

    cluster_id: int
    cfg: ControlConfig
    source: str
    last_good_poll_ms: int | None


@dataclass(frozen=True, slots=True)
class Work:
    """Everything a tick computed; nothing of it is stored yet (``preview`` stops here)."""

    ctx: Context
    now_ms: int
    live: LiveConfig
    inputs: PolicyInputs
    outcome: PolicyOutcome
    plan: Plan
    ledger: LedgerStep | None
    ledger_before: Mapping[str, Any]
    state_before: Mapping[str, Any]
    drift: Mapping[str, Any]
    baseline: Mapping[str, Any] | None
    settle: tuple[int, str] | None = None
    pending_id: int | None = None
    floors: control_floors.Floors | None = None
    # The decision written ahead with the push (status ``pushing``), completed by ``_commit``.
    pending_decision_id: int | None = None

    @property
    def drift_blocks(self) -> bool:
        """Drift is never overwritten silently: only with ``allow_drift_overwrite``."""
        return bool(self.drift) and not self.ctx.cfg.allow_drift_overwrite


@dataclass(frozen=True, slots=True)
class TickReport:
    """What one tick did (returned to tests and the CLI)."""

    status: str
    reason: str
    decision_id: int | None = None
    pushed: Mapping[str, Mapping[str, str]] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


class Controller(LoopService):
    """Decide and (in enforce mode) push queue capacities every interval."""

    name = "controller"

    def __init__(
        self,
        actuator: Actuator,
        sessions: sessionmaker[Session],
        *,
        defaults: ControlConfig,
        cluster_name: str,
        rm_urls: tuple[str, ...],
        poll_interval_s: float,
        clock: Clock = wall_clock_ms,
    ) -> None:
        super().__init__(defaults.interval_s, clock)
        self.actuator = actuator
        self.sessions = sessions
        self.defaults = defaults
        self.cluster_name = cluster_name
        self.rm_urls = rm_urls
        self.poll_interval_s = poll_interval_s
        self._lock = asyncio.Lock()
        self.last_report: TickReport | None = None
        # Resources admission reserved for admitted deadline grants, per queue: that queue's
        # floor is at least this (``set_admission_floor``).
        self.admission_floor: dict[str, control_floors.Amount] = {}
        # This process's leader epoch (``app.services.leader``); None: not fenced (one process).
        self.epoch: Callable[[], int | None] = lambda: None

    def set_admission_floor(self, queue: str, vcores: float, memory_mb: float) -> None:
        """Keep ``queue``'s capacity at least ``vcores``/``memory_mb`` (0 and 0 removes it)."""
        if vcores <= 0 and memory_mb <= 0:
            self.admission_floor.pop(queue, None)
        else:
            self.admission_floor[queue] = control_floors.Amount(vcores, memory_mb)

    async def run_once(self, now_ms: int) -> None:
        self.last_report = await self.control(now_ms)

    # --- configuration ----------------------------------------------------------------------

    def load_context(self, session: Session, now_ms: int) -> Context:
        """The cluster row and the effective configuration (operator overrides win)."""
        cluster = repo.ensure_cluster(session, self.cluster_name, self.rm_urls, now_ms)
        row = control_repo.get_control_config(session, cluster.id)
        cfg, source = self.defaults, "settings"
        if row is not None:
            try:
                cfg = control_config.overlay(self.defaults, stored_changes(row))
                source = "operator"
            except PolicyError:
                # A stored override no longer valid (e.g. a policy renamed): settings win.
                self.log.exception("stored policy configuration is invalid; using settings")
        return Context(cluster.id, cfg, source, cluster.last_good_poll_ms)

    async def set_policy(self, changes: Mapping[str, Any], now_ms: int) -> ControlConfig:
        """``PUT /policy``: validate, persist, record a decision; ``accept_drift`` makes the live
        configuration the new baseline. ``PolicyError`` names the offending field."""
        accept = bool(changes.get("accept_drift", False))
        rest = {k: v for k, v in changes.items() if k != "accept_drift"}
        async with self._lock:
            live = await self.actuator.read_live(self.defaults.managed_parent) if accept else None
            return await asyncio.to_thread(self._save_policy, rest, live, now_ms)

    def _save_policy(
        self, changes: Mapping[str, Any], live: LiveConfig | None, now_ms: int
    ) -> ControlConfig:
        with transaction(self.sessions) as session:
            ctx = self.load_context(session, now_ms)
            cfg = control_config.overlay(ctx.cfg, changes)
            control_repo.save_control_config(session, ctx.cluster_id, cfg.to_dict(), now_ms)
            if live is not None:
                control_repo.add_push(session, _baseline_row(ctx.cluster_id, live, now_ms))
            reason = "operator changed " + ", ".join(sorted(changes) or ["nothing"])
            if live is not None:
                reason += "; live configuration accepted as the drift baseline"
            repo.add_decision(
                session,
                Decision(
                    cluster_id=ctx.cluster_id,
                    created_ms=now_ms,
                    kind="policy",
                    policy=cfg.policy,
                    mode=cfg.mode,
                    params=cfg.to_dict(),
                    inputs={"previous": ctx.cfg.to_dict(), "changes": dict(changes)},
                    outputs={"config": cfg.to_dict()},
                    status="changed",
                    reason=reason,
                ),
            )
        return cfg

    def current(self, now_ms: int) -> Context:
        """The effective configuration now (``GET /policy``)."""
        with transaction(self.sessions) as session:
            return self.load_context(session, now_ms)

    # --- the tick ---------------------------------------------------------------------------

    async def control(self, now_ms: int) -> TickReport:
        """One tick as of ``now_ms``; returns what it did (also recorded as a decision)."""
        async with self._lock:
            ctx = await asyncio.to_thread(self.current, now_ms)
            early = self._early_exit(ctx, now_ms)
            if early is not None:
                return await self._record_skip(ctx, now_ms, *early)
            try:
                work = await self.prepare(ctx, now_ms)
            except RMError as exc:
                return await self._record_skip(ctx, now_ms, "rm_error", exc.message)
            except PolicyError as exc:
                return await self._record_skip(ctx, now_ms, "policy_error", str(exc))
            if pushes(work):
                # Write-ahead: were the process to die between the PUT and the commit, the next
                # tick finds this push and its decision, and settles both from what the RM holds.
                try:
                    push_id, decision_id = await asyncio.to_thread(self._write_ahead, work)
                except leader_repo.Fenced as exc:
                    # deposed between the lock check and this tick: the new leader decides
                    return await self._record_skip(ctx, now_ms, "fenced", str(exc))
                work = replace(work, pending_id=push_id, pending_decision_id=decision_id)
            result = await self._actuate(work)
            return await asyncio.to_thread(self._commit, work, result)

    def _early_exit(self, ctx: Context, now_ms: int) -> tuple[str, str] | None:
        if ctx.cfg.mode == "observe":
            return "observe", "observe mode decides nothing"
        if ctx.cfg.policy == STATIC:
            return "static", "the static policy leaves the queues as configured"
        limit_ms = int(STALE_POLLS * self.poll_interval_s * 1000)
        if ctx.last_good_poll_ms is None:
            return "stale", "no good poll yet"
        age = now_ms - ctx.last_good_poll_ms
        if age > limit_ms:
            return "stale", f"last good poll {age / 1000:.0f}s ago (> {limit_ms / 1000:.0f}s)"
        return None

    async def prepare(self, ctx: Context, now_ms: int) -> Work:
        """Observe, decide and plan without storing anything (``POST /policy/preview`` too)."""
        live = await self.actuator.read_live(ctx.cfg.managed_parent)
        return await asyncio.to_thread(self._decide, ctx, live, now_ms)

    def _decide(self, ctx: Context, live: LiveConfig, now_ms: int) -> Work:
        cfg = ctx.cfg
        queues = sorted(live.values)
        with self.sessions() as session:
            inputs = load_inputs(session, ctx.cluster_id, queues, now_ms, cfg.interval_s)
            ledger_before = control_repo.load_policy_state(session, ctx.cluster_id, LEDGER_STATE)
            ledger = self._ledger(session, ctx, queues, ledger_before, now_ms)
            state = control_repo.load_policy_state(session, ctx.cluster_id, cfg.policy)
            baseline_row = control_repo.last_baseline(session, ctx.cluster_id, live.parent)
            pending = control_repo.last_pending(session, ctx.cluster_id, live.parent, baseline_row)
            settle = settle_pending(pending, live) if pending is not None else None
            if settle is not None and settle[1] == "applied":
                baseline_row = pending
            baseline = _baseline_json(baseline_row) if baseline_row is not None else None
            idle_sources = control_repo.idle_baselines(session, ctx.cluster_id, live.parent)
        ledger_state = ledger.state if ledger else LedgerState.from_dict(ledger_before)
        floors = _floors(cfg, live, inputs, self.admission_floor)
        # The floors are the minimum shares the policies see (Fawkes' m_i).
        floored = replace(cfg, bounds=floors.bounds(cfg.bounds))
        outcome = run_policy(floored, inputs, queues, state, ledger_state)
        if idle.no_demand(inputs, queues):
            percents, source = idle.baseline(cfg.baseline, *idle_sources, queues)
            if percents is not None:
                cluster = {"vcores": inputs.total.vcores, "memory": inputs.total.memory_mb}
                outcome = idle.toward_baseline(outcome, percents, source, cluster)
        plan = self._plan(cfg, outcome, live, inputs, floors)
        drift = _drift(baseline, live)
        return Work(
            ctx,
            now_ms,
            live,
            inputs,
            outcome,
            plan,
            ledger,
            ledger_before,
            state,
            drift,
            baseline,
            settle,
            floors=floors,
        )

    def _ledger(
        self,
        session: Session,
        ctx: Context,
        queues: Sequence[str],
        before: Mapping[str, Any],
        now_ms: int,
    ) -> LedgerStep | None:
        cursor = control_repo.ledger_cursor(session, ctx.cluster_id)
        since = cursor if cursor is not None else now_ms - int(ctx.cfg.interval_s * 1000)
        polls = load_polls(session, ctx.cluster_id, queues, since, now_ms)
        # Only LTRF's parameters name a discount and a lending rule; every other policy's ledger
        # (kept for a later switch to LTRF, and shown in GET /ledger) uses the plain one.
        discount = float(ctx.cfg.params.get("discount", 1.0))
        weights = {q: ctx.cfg.weight(q) for q in queues}
        max_gap = int(STALE_POLLS * self.poll_interval_s * 1000)
        state = LedgerState.from_dict(before)
        lending = str(ctx.cfg.params.get("lending", "used"))
        return integrate(state, polls, weights, discount, max_gap, lending)

    def _plan(
        self,
        cfg: ControlConfig,
        outcome: PolicyOutcome,
        live: LiveConfig,
        inputs: PolicyInputs,
        floors: control_floors.Floors,
    ) -> Plan:
        return plan_outcome(
            outcome,
            live.values,
            bounds=cfg.bounds,
            max_step_pp=cfg.max_step_pp,
            min_change_pp=cfg.min_change_pp,
            total={"vcores": inputs.total.vcores, "memory": inputs.total.memory_mb},
            floors=floors,
        )

    async def _actuate(self, work: Work) -> PushResult | None:
        if not pushes(work):
            return None
        return await self.actuator.push(
            work.ctx.cfg.managed_parent,
            work.plan.changes(),
            work.plan.previous(),
            work.live.version,
        )

    def _write_ahead(self, work: Work) -> tuple[int, int]:
        """Commit the push as ``pending`` and its decision as ``pushing`` before the PUT;
        ``_commit`` completes both, or a later tick settles them from the RM's state."""
        with transaction(self.sessions) as session:
            leader_repo.check_epoch(session, self.epoch())
            decision = repo.add_decision(session, _decision_row(work, None, *PUSHING))
            decision.inputs = {**decision.inputs, "leader_epoch": self.epoch()}
            row = _push_row(work, control_repo.PENDING, None)
            row.decision_id = decision.id
            control_repo.add_push(session, row)
            return row.id, decision.id

    # --- recording --------------------------------------------------------------------------

    def _commit(self, work: Work, result: PushResult | None) -> TickReport:
        status, reason = outcome_status(work, result)
        cfg, cid = work.ctx.cfg, work.ctx.cluster_id
        with transaction(self.sessions) as session:
            row = _decision_row(work, result, status, reason)
            if work.pending_decision_id is not None:
                decision = control_repo.complete_decision(session, work.pending_decision_id, row)
            else:
                decision = repo.add_decision(session, row)
            if work.outcome.state is not None:
                control_repo.save_policy_state(
                    session, cid, cfg.policy, dict(work.outcome.state), work.now_ms
                )
            if work.ledger is not None:
                control_repo.add_ledger_rows(session, cid, work.ledger.rows)
                control_repo.save_policy_state(
                    session, cid, LEDGER_STATE, work.ledger.state.to_dict(), work.now_ms
                )
            if work.settle is not None:
                push_id, settled = work.settle
                version = work.live.version if settled == "applied" else None
                control_repo.settle_push(session, push_id, settled, version)
                control_repo.settle_pending_decision(
                    session, push_id, RECOVERED[settled], recovery_reason(settled, work.live)
                )
            if result is not None and work.pending_id is not None:
                # Unverified: whether the PUT landed is unknown, so the row stays pending and the
                # next tick settles it by the values it reads (never a false drift).
                settled = control_repo.PENDING if result.status == "unverified" else result.status
                control_repo.settle_push(
                    session, work.pending_id, settled, result.version_after, decision.id
                )
        pushed = work.plan.changes() if result is not None and result.applied else None
        return TickReport(status, reason, decision.id, pushed)

    async def _record_skip(self, ctx: Context, now_ms: int, status: str, reason: str) -> TickReport:
        if status == "observe":
            return TickReport(status, reason)
        decision_id = await asyncio.to_thread(self._store_skip, ctx, now_ms, status, reason)
        return TickReport(status, reason, decision_id)

    def _store_skip(self, ctx: Context, now_ms: int, status: str, reason: str) -> int:
        with transaction(self.sessions) as session:
            row = repo.add_decision(
                session,
                Decision(
                    cluster_id=ctx.cluster_id,
                    created_ms=now_ms,
                    kind=KIND,
                    policy=ctx.cfg.policy,
                    mode=ctx.cfg.mode,
                    params=ctx.cfg.to_dict(),
                    inputs={"last_good_poll_ms": ctx.last_good_poll_ms},
                    outputs={},
                    status=status,
                    reason=reason,
                ),
            )
            return row.id

    async def preview(self, now_ms: int, changes: Mapping[str, Any] | None) -> dict[str, Any]:
        """What a tick would decide now (optionally under changed settings); stores nothing."""
        ctx = await asyncio.to_thread(self.current, now_ms)
        if changes:
            ctx = Context(
                ctx.cluster_id,
                control_config.overlay(ctx.cfg, changes),
                "preview",
                ctx.last_good_poll_ms,
            )
        early = self._early_exit(ctx, now_ms)
        if early is not None and early[0] != "observe":
            return {"status": early[0], "reason": early[1], "config": ctx.cfg.to_dict()}
        work = await self.prepare(ctx, now_ms)
        status, reason = outcome_status(work, None)
        if pushes(work):
            status, reason = "would_push", "enforce mode would push these changes now"
        return {
            "status": status,
            "reason": reason,
            "config": ctx.cfg.to_dict(),
            "inputs": audit_inputs(work),
            "outputs": audit_outputs(work, None),
            "changes": work.plan.changes() if work.plan.push else {},
        }


# --- pure helpers of the recording ------------------------------------------------------------


def stored_changes(row: Any) -> dict[str, Any]:
    """A ``control_configs`` row as ``overlay`` changes."""
    limits = dict(row.limits or {})
    out: dict[str, Any] = {
        "policy": row.policy,
        "params": dict(row.params or {}),
        "mode": row.mode,
        "bounds": dict(row.bounds or {}),
    }
    keys = ("weights", "max_step_pp", "min_change_pp", "allow_drift_overwrite")
    for key in (*keys, "floors", "baseline"):
        if key in limits:
            out[key] = limits[key]
    return out


def _drift(baseline: Mapping[str, Any] | None, live: LiveConfig) -> dict[str, Any]:
    if baseline is None:
        return {}
    if live.version is not None and live.version == baseline.get("version"):
        return {}  # nothing was written since our last push
    diff = differences(baseline["values"], live.values)
    if not diff:
        return {}
    return {
        "queues": diff,
        "baseline_version": baseline.get("version"),
        "live_version": live.version,
        "baseline_push_id": baseline.get("id"),
    }


def _baseline_json(row: ConfigPush) -> dict[str, Any]:
    return {
        "id": row.id,
        "status": row.status,
        "pushed_ms": row.pushed_ms,
        "values": dict(row.values),
        "version": row.version_after,
    }


def _baseline_row(cluster_id: int, live: LiveConfig, now_ms: int) -> ConfigPush:
    return ConfigPush(
        cluster_id=cluster_id,
        pushed_ms=now_ms,
        parent=live.parent,
        values={q: dict(v) for q, v in live.values.items()},
        previous={},
        version_before=live.version,
        version_after=live.version,
        status="baseline",
    )


def _push_row(work: Work, status: str, version_after: int | None) -> ConfigPush:
    return ConfigPush(
        cluster_id=work.ctx.cluster_id,
        pushed_ms=work.now_ms,
        parent=work.live.parent,
        values=work.plan.expected(),
        previous={q: dict(v) for q, v in work.live.values.items()},
        version_before=work.live.version,
        version_after=version_after,
        status=status,
    )


PUSHING = ("pushing", "written before the PUT; completed when the RM answers")
# A recovered push's decision status, by what the RM's state shows.
RECOVERED = {"applied": "pushed", "not_applied": "not_applied", "unknown": "unknown"}


def settle_pending(pending: ConfigPush, live: LiveConfig) -> tuple[int, str]:
    """What became of a push whose tick died before recording the RM's answer.

    Every accepted scheduler-configuration change moves the RM's configuration version, so an
    unmoved version proves the PUT never landed (``not_applied``). A moved version with the
    pushed values in place means it landed (``applied``; the baseline from now on). A moved
    version with other values, or no version to compare, cannot tell (``unknown``)."""
    before, now = pending.version_before, live.version
    if before is not None and now is not None and now == before:
        return pending.id, "not_applied"
    if not differences(pending.values, live.values):
        return pending.id, "applied"
    return pending.id, "unknown"


def recovery_reason(settled: str, live: LiveConfig) -> str:
    """The reason a recovered push's decision gives."""
    version = f"configuration version {live.version}" if live.version is not None else ""
    why = {
        "applied": f"the RM holds the pushed values ({version or 'values compared'})",
        "not_applied": f"the RM's {version} has not moved since the push: the PUT never landed",
        "unknown": "the RM holds other values and its configuration moved since the push: "
        "whether this PUT landed cannot be told",
    }[settled]
    return f"settled by a later tick (the RM's answer to the PUT was never recorded): {why}"


def _decision_row(work: Work, result: PushResult | None, status: str, reason: str) -> Decision:
    """The decision of one tick (also the ``pushing`` record written ahead of a PUT)."""
    cfg = work.ctx.cfg
    return Decision(
        cluster_id=work.ctx.cluster_id,
        created_ms=work.now_ms,
        kind=KIND,
        policy=cfg.policy,
        mode=cfg.mode,
        params=cfg.to_dict(),
        inputs=audit_inputs(work),
        outputs=audit_outputs(work, result),
        pushed=work.plan.changes() if result is not None or status == PUSHING[0] else None,
        status=status,
        rm_response=result.message if result is not None else None,
        reason=reason,
    )


def pushes(work: Work) -> bool:
    """Whether this tick sends its plan to the RM."""
    cfg = work.ctx.cfg
    return cfg.mode == "enforce" and work.plan.push and not work.drift_blocks


PUSH_STATUS = {
    "applied": "pushed",
    "unverified": "pushed_unverified",
    "rejected": "rejected",
    "unavailable": "failed",
    "reverted": "reverted",
    "revert_failed": "revert_failed",
    "superseded": "drift",
}


def outcome_status(work: Work, result: PushResult | None) -> tuple[str, str]:
    """The decision's status and reason."""
    if result is not None:
        return PUSH_STATUS.get(result.status, result.status), result.message
    if not work.plan.push:
        return "no_change", work.plan.reason
    if work.drift_blocks:
        queues = ", ".join(sorted(work.drift["queues"]))
        return "drift", (
            f"configuration of {queues} was changed outside the sidecar; not overwritten "
            "(set allow_drift_overwrite, or PUT /policy with accept_drift)"
        )
    return "advised", f"advise mode: would push ({work.plan.reason})"


def audit_inputs(work: Work) -> dict[str, Any]:
    """The inputs part of a decision: samples, live configuration, ledger, policy state."""
    ledger = work.ledger
    return {
        "policy_inputs": work.inputs.to_dict(),
        "live": work.live.to_dict(),
        "last_good_poll_ms": work.ctx.last_good_poll_ms,
        "config_source": work.ctx.source,
        "policy_state_before": dict(work.state_before),
        "ledger": {
            "before": dict(work.ledger_before),
            "after": ledger.state.to_dict() if ledger else None,
            "interval": [ledger.start_ms, ledger.end_ms] if ledger else None,
            "skipped_gaps_s": ledger.skipped_gaps_s if ledger else 0.0,
            "rows": [r.to_dict() for r in ledger.rows] if ledger else [],
        },
        "baseline": dict(work.baseline) if work.baseline is not None else None,
    }


def audit_outputs(work: Work, result: PushResult | None) -> dict[str, Any]:
    """The outputs part: the policy's numbers, the plan with reasons, drift, the push result."""
    return {
        "policy": work.outcome.to_dict(),
        "plan": work.plan.to_dict(),
        "drift": dict(work.drift),
        "drift_overwritten": bool(work.drift) and result is not None,
        "push": result.to_dict() if result is not None else None,
        "floors": work.floors.to_dict() if work.floors is not None else None,
        "effect": effect(work),
    }


def _floors(
    cfg: ControlConfig,
    live: LiveConfig,
    inputs: PolicyInputs,
    admission: Mapping[str, control_floors.Amount],
) -> control_floors.Floors:
    """Every managed queue's floor from the live cluster (``app.control.floors``)."""
    settings = live.scheduler
    unit = control_floors.Amount(
        settings.min_allocation_vcores or control_floors.DEFAULT_MIN_ALLOCATION_VCORES,
        settings.min_allocation_mb or control_floors.DEFAULT_MIN_ALLOCATION_MB,
    )
    source = "RM configuration" if settings.min_allocation_mb else "YARN defaults (RM unreadable)"
    scale = _parent_fraction(cfg, live)
    parent = control_floors.Amount(inputs.total.vcores * scale, inputs.total.memory_mb * scale)
    queues = sorted(live.values)
    return control_floors.compute(queues, cfg.floors, unit, source, parent, cfg.bounds, admission)


def _parent_fraction(cfg: ControlConfig, live: LiveConfig) -> float:
    """The managed parent's fraction of the cluster: its children's absolute capacities."""
    if cfg.managed_parent == "root" or not live.queues:
        return 1.0
    return min(1.0, sum(q.absolute_capacity for q in live.queues) / 100)


def effect(work: Work) -> dict[str, Any] | None:
    """How much of each changed guarantee takes effect now, how much waits for containers to
    finish (or for preemption), from the live cluster (``app.control.preemption``)."""
    if not work.plan.push:
        return None
    parent_vcores = work.inputs.total.vcores * _parent_fraction(work.ctx.cfg, work.live)
    changed = work.plan.changes()
    changes = {}
    for q, line in work.plan.lines.items():
        pair = preemption.guarantees(line.numbers, parent_vcores)
        if q in changed and pair is not None:
            changes[q] = pair
    used = {q.path: float(q.used.vcores) for q in work.live.queues}
    settings = work.live.scheduler
    preempts = settings.preempts
    return preemption.split(changes, used, parent_vcores, preempts, settings.to_dict())
