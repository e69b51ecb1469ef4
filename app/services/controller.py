"""The queue controller: every ``policy_interval_s`` it turns live RM state into queue
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
from dataclasses import replace
from typing import Any, NamedTuple

import httpx
from sqlalchemy.orm import Session, sessionmaker

from app.control import config as control_config
from app.control import floors as control_floors
from app.control import guard as control_guard
from app.control import idle
from app.control import tick as control_tick
from app.control.config import STATIC, ControlConfig
from app.control.decide import run_policy
from app.control.guard import GuardConfig, Reading
from app.control.ledger import LedgerState, LedgerStep, integrate
from app.control.plan import Plan, live_percentages, plan_outcome
from app.control.tick import Context, TickReport, Work
from app.db import control_repo, control_rows, jobs_repo, leader_repo, repo
from app.db.models import Decision
from app.db.session import transaction
from app.domain.live import LiveConfig, PushResult
from app.domain.observation import Cursors, PolicyInputs
from app.domain.outcome import PolicyOutcome
from app.policies.base import PolicyError
from app.redact import redact_text
from app.services import slo
from app.services.base import Clock, LoopService, wall_clock_ms
from app.services.policy_inputs import load_inputs, load_polls
from app.yarn.actuator import Actuator
from app.yarn.errors import RMError

# Previews computed at once per process. Each reads the RM's scheduler configuration and the
# latency probes and takes a worker thread; a viewer asking in a loop would otherwise put that
# load on the RM, the probed services and the API's thread pool.
MAX_PREVIEWS = 2
# Seconds a refused client is told to wait (a preview takes well under a second).
PREVIEW_RETRY_AFTER_S = 2


class _Reads(NamedTuple):
    """What one tick read from the database (``Controller._read``)."""

    guard_before: dict[str, Any]
    readings: Sequence[Reading]
    inputs: PolicyInputs
    cursors: Cursors
    ledger_before: dict[str, Any]
    ledger: LedgerStep | None
    state: dict[str, Any]
    baseline: dict[str, Any] | None
    settle: tuple[int, str] | None
    idle_sources: tuple[dict[str, Any] | None, dict[str, Any] | None]
    admitted: dict[str, int]


class PreviewBusy(Exception):
    """``MAX_PREVIEWS`` previews are being computed already; this one was not started."""

    def __init__(self) -> None:
        super().__init__(
            f"preview: {MAX_PREVIEWS} previews already in progress (the most this process "
            "computes at once); retry shortly"
        )


LEDGER_STATE = "ltrf-ledger"
# Where the counts of completed apps and MapReduce tasks stopped (Fawkes' JT and TT inputs).
INPUT_CURSORS = "input-cursors"
# The interference guard's episode (``app.control.guard``), stored like a policy's state.
GUARD = control_guard.STATE_KEY
STALE_POLLS = 3


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
        history: bool = False,
        guard: GuardConfig | None = None,
        probe_http: httpx.AsyncClient | None = None,
    ) -> None:
        """``history``: a JobHistory server is read (``app.services.history``), so the policies
        may decide on the fields it fills (``control_config.HISTORY_VIEW``)."""
        super().__init__(defaults.interval_s, clock)
        self.history = history
        # The interference guard and the client its latency probes use (``app.services.slo``).
        self.guard = guard
        self.probe_http = probe_http
        self.observable = control_config.HISTORY_VIEW if history else control_config.LIVE_VIEW
        self.actuator = actuator
        self.sessions = sessions
        self.defaults = defaults
        self.cluster_name = cluster_name
        self.rm_urls = rm_urls
        self.poll_interval_s = poll_interval_s
        self._lock = asyncio.Lock()
        self._previews = 0
        self.last_report: TickReport | None = None
        # Resources reserved per queue beyond what the admitted jobs in the database hold
        # (``set_admission_floor``; each tick also reads those jobs, ``admitted_containers``).
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
                cfg = control_config.overlay(self.defaults, control_rows.stored_changes(row))
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
            control_config.check_observable(cfg, self.observable)
            control_rows.save_operator_config(session, ctx.cluster_id, cfg, changes, now_ms)
            if live is not None:
                control_repo.add_push(
                    session, control_rows.baseline_row(ctx.cluster_id, live, now_ms)
                )
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
            except Exception as exc:
                # Nothing was written or sent yet: the tick's failure is recorded like any other
                # outcome, so the audit trail has no silent gap.
                self.log.exception("controller tick failed before deciding")
                why = f"tick failed: {type(exc).__name__}: {redact_text(str(exc))[:300]}"
                return await self._record_skip(ctx, now_ms, "failed", why)
            if control_tick.pushes(work):
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
        probes = (
            await slo.read_probes(self.probe_http, self.guard)
            if self.guard is not None and self.probe_http is not None
            else {}
        )
        return await asyncio.to_thread(self._decide, ctx, live, now_ms, probes)

    def _decide(
        self, ctx: Context, live: LiveConfig, now_ms: int, probes: Mapping[str, Reading]
    ) -> Work:
        cfg = ctx.cfg
        queues = sorted(live.values)
        got = self._read(ctx, live, queues, now_ms, probes)
        ledger_state = got.ledger.state if got.ledger else LedgerState.from_dict(got.ledger_before)
        floors = control_tick.floors(cfg, live, got.inputs, self.admission_floor, got.admitted)
        # The floors are the minimum shares the policies see (Fawkes' m_i).
        floored = replace(cfg, bounds=floors.bounds(cfg.bounds))
        outcome = run_policy(floored, got.inputs, queues, got.state, ledger_state)
        if idle.no_demand(got.inputs, queues):
            percents, source = idle.baseline(cfg.baseline, *got.idle_sources, queues)
            if percents is not None:
                total = got.inputs.total
                cluster = {"vcores": total.vcores, "memory": total.memory_mb}
                outcome = idle.toward_baseline(outcome, percents, source, cluster)
        guard_audit: dict[str, Any] | None = None
        targets: dict[str, int] = {}
        if self.guard is not None:
            capacity_h, max_h = live_percentages(live.values)
            guard_step = control_guard.step(
                got.guard_before, got.readings, capacity_h, max_h, self.guard
            )
            targets = guard_step.targets
            guard_audit = guard_step.audit(got.readings, got.guard_before)
        plan = self._plan(cfg, outcome, live, got.inputs, floors, targets)
        return Work(
            ctx,
            now_ms,
            live,
            got.inputs,
            outcome,
            plan,
            got.ledger,
            got.ledger_before,
            got.state,
            control_tick.drift(got.baseline, live),
            got.baseline,
            got.settle,
            floors=floors,
            guard=guard_audit,
            cursors=got.cursors,
        )

    def _read(
        self,
        ctx: Context,
        live: LiveConfig,
        queues: Sequence[str],
        now_ms: int,
        probes: Mapping[str, Reading],
    ) -> _Reads:
        """What a tick decides on, read in one session: the guard's state and readings, the
        policy's inputs and state, the ledger, the last baseline and pending push, and the
        deadline queue's admitted grants."""
        cfg = ctx.cfg
        guard_before: dict[str, Any] = {}
        readings: Sequence[Reading] = ()
        with self.sessions() as session:
            if self.guard is not None:
                guard_before = control_repo.load_policy_state(session, ctx.cluster_id, GUARD)
                readings = slo.in_order(
                    self.guard,
                    dict(probes),
                    slo.read_queues(session, ctx.cluster_id, self.guard, now_ms),
                )
            stored = control_repo.load_policy_state(session, ctx.cluster_id, INPUT_CURSORS)
            inputs, cursors = load_inputs(
                session,
                ctx.cluster_id,
                queues,
                now_ms,
                cfg.interval_s,
                history=self.history,
                cursors=Cursors.from_dict(stored),
                lag_ms=int(STALE_POLLS * self.poll_interval_s * 1000),
                polled_ms=ctx.last_good_poll_ms,
            )
            ledger_before = control_repo.load_policy_state(session, ctx.cluster_id, LEDGER_STATE)
            ledger = self._ledger(session, ctx, queues, ledger_before, now_ms)
            state = control_repo.load_policy_state(session, ctx.cluster_id, cfg.policy)
            baseline_row = control_repo.last_baseline(session, ctx.cluster_id, live.parent)
            pending = control_repo.last_pending(session, ctx.cluster_id, live.parent, baseline_row)
            settle = control_tick.settle_pending(pending, live) if pending is not None else None
            if settle is not None and settle[1] == "applied":
                baseline_row = pending
            baseline = (
                control_rows.baseline_json(baseline_row) if baseline_row is not None else None
            )
            idle_sources = control_repo.idle_baselines(session, ctx.cluster_id, live.parent)
            # Read at every tick, not handed over by admission: a restart, or admission in
            # another process, still leaves the deadline queue its admitted grants.
            admitted = jobs_repo.admitted_containers(session)
        return _Reads(
            guard_before,
            readings,
            inputs,
            cursors,
            ledger_before,
            ledger,
            state,
            baseline,
            settle,
            idle_sources,
            admitted,
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
        max_targets: Mapping[str, int] | None = None,
    ) -> Plan:
        return plan_outcome(
            outcome,
            live.values,
            bounds=cfg.bounds,
            max_step_pp=cfg.max_step_pp,
            min_change_pp=cfg.min_change_pp,
            total={"vcores": inputs.total.vcores, "memory": inputs.total.memory_mb},
            floors=floors,
            max_targets=max_targets,
        )

    async def _actuate(self, work: Work) -> PushResult | None:
        if not control_tick.pushes(work):
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
            decision = repo.add_decision(
                session, control_rows.decision_row(work, None, *control_tick.PUSHING)
            )
            decision.inputs = {**decision.inputs, "leader_epoch": self.epoch()}
            row = control_rows.push_row(work, control_repo.PENDING, None)
            row.decision_id = decision.id
            control_repo.add_push(session, row)
            return row.id, decision.id

    # --- recording --------------------------------------------------------------------------

    def _commit(self, work: Work, result: PushResult | None) -> TickReport:
        status, reason = control_tick.outcome_status(work, result)
        cfg, cid = work.ctx.cfg, work.ctx.cluster_id
        # An entry keyed by no managed queue is ignored by the plan; every decision says so, in
        # its reason, so that a typo (``a`` for ``root.a``) cannot go unnoticed.
        unmatched = control_config.unmatched_queue_keys(cfg, work.live.values)
        if unmatched:
            reason = "; ".join([reason.rstrip("."), *unmatched])
        with transaction(self.sessions) as session:
            row = control_rows.decision_row(work, result, status, reason)
            if unmatched:
                row.outputs = {**row.outputs, "unmatched_queue_keys": unmatched}
            if work.pending_decision_id is not None:
                decision = control_repo.complete_decision(session, work.pending_decision_id, row)
            else:
                decision = repo.add_decision(session, row)
            if work.outcome.state is not None:
                control_repo.save_policy_state(
                    session, cid, cfg.policy, dict(work.outcome.state), work.now_ms
                )
            if work.guard is not None:
                control_repo.save_policy_state(
                    session, cid, GUARD, dict(work.guard["state_after"]), work.now_ms
                )
            if work.cursors is not None:
                control_repo.save_policy_state(
                    session, cid, INPUT_CURSORS, work.cursors.to_dict(), work.now_ms
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
                    session,
                    push_id,
                    control_tick.RECOVERED[settled],
                    control_tick.recovery_reason(settled, work.live),
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
                    kind=control_tick.KIND,
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
        """What a tick would decide now (optionally under changed settings); stores nothing.
        ``PreviewBusy`` when ``MAX_PREVIEWS`` are in progress already."""
        # Counted on the event loop with no await between the test and the increment.
        if self._previews >= MAX_PREVIEWS:
            raise PreviewBusy
        self._previews += 1
        try:
            return await self._preview(now_ms, changes)
        finally:
            self._previews -= 1

    async def _preview(self, now_ms: int, changes: Mapping[str, Any] | None) -> dict[str, Any]:
        ctx = await asyncio.to_thread(self.current, now_ms)
        if changes:
            cfg = control_config.overlay(ctx.cfg, changes)
            control_config.check_observable(cfg, self.observable)
            ctx = Context(ctx.cluster_id, cfg, "preview", ctx.last_good_poll_ms)
        early = self._early_exit(ctx, now_ms)
        if early is not None and early[0] != "observe":
            return {"status": early[0], "reason": early[1], "config": ctx.cfg.to_dict()}
        work = await self.prepare(ctx, now_ms)
        status, reason = control_tick.outcome_status(work, None)
        if control_tick.pushes(work):
            status, reason = "would_push", "enforce mode would push these changes now"
        return {
            "status": status,
            "reason": reason,
            "config": ctx.cfg.to_dict(),
            "inputs": control_tick.audit_inputs(work),
            "outputs": control_tick.audit_outputs(work, None),
            "changes": work.plan.changes() if work.plan.push else {},
        }


# --- pure helpers of the recording ------------------------------------------------------------
