"""HybridMR placement of observed jobs (seed 001, section III, Algorithm 2): the deadline jobs
users submit straight to YARN, which the sidecar can only move between queues.

A job the sidecar submits is placed by its node-label expression at submission
(``admission.submit``). A job it did not submit already has its label: the RM fixed it when the
app was accepted. What can still change is the queue, and measured on Hadoop 3.5.0 (the mini
cluster, two NodeManagers, one labelled): a MapReduce job moved while ACCEPTED into a queue whose
``default-node-label-expression`` is the label ran its ApplicationMaster on the shared partition
(the AM's request was made at submission) and every map and reduce container on the labelled
node, because the RM gives each later container request without a label of its own the queue's
default. So the operator names that queue (``YARN_SIDECAR_PLACEMENT_QUEUE``) and this loop, at
every poll interval, takes each ACCEPTED or RUNNING app that carries a ``deadline:`` tag, was not
submitted by the sidecar and is not in that queue yet, and runs Algorithm 2 for it once: the
signature's shared-partition run time (``profiles.place``: median of the runs of its signature,
then user and type, queue, all) against the time from the app's start to its deadline. An app
the shared partition would make late is moved (``PUT /apps/{id}/queue``) in ``enforce`` mode and
only advised otherwise; every decision is recorded (kind ``placement``) with its numbers, and
an app is decided once (the decided set is rebuilt from those records after a restart, and
forgets an app a day after the poller last listed it; an RM that cannot be reached leaves it
undecided for the next tick). Only the live apps whose stored tags hold ``deadline:`` are read
from the database, however many the cluster runs. The earlier the move, the more of
the job's containers it places: an app seen only after its AM asked for every container gains
nothing, which the record cannot tell.

The RM authorises a move against its caller, the sidecar, not against the app's owner (Hadoop's
``moveApplicationAcrossQueues`` in ``ClientRMService`` asks whether the caller may submit to or
administer the target queue). So before it moves an app the sidecar asks the owner's question
itself (``app.domain.queue_acl``): once per tick, and only when there is an app to move, it reads
``yarn.acl.enable`` (and ``yarn.authorization-provider``) from the RM and, when ACLs are on, the
queues' ACLs. Those are the ones ``GET /scheduler`` reports for each queue (``queueAcls``): the
running scheduler's, whichever store configured them. A file-based store, the usual one in
production, has no ``GET /scheduler-conf`` (Hadoop 3.5.0 answers 400); only an RM that reports
no ACLs there has its mutable store read instead. An app whose owner may not submit to the target
queue, or could only through a group the sidecar cannot see, is recorded ``refused`` with the
reason and stays where it is. Those reads fail like the move: an unreachable RM leaves the apps
to move undecided for the next tick; a refusal records them ``failed``, unmoved. Advise mode reads
nothing, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import control_repo, history_repo, repo
from app.db.models import Application, Decision
from app.db.observe_repo import PLACEMENT_KIND
from app.db.promise_history import app_keys
from app.db.session import transaction
from app.domain import queue_acl
from app.domain.model import queue_names
from app.domain.tags import DEADLINE_TAG, JOB_TAG, DeadlineTags, parse_deadline_tags
from app.policies.hybridmr import profiles
from app.redact import redact_text
from app.services.base import Clock, LoopService, wall_clock_ms
from app.yarn.errors import RMError, RMUnavailable

KIND = PLACEMENT_KIND
POLICY = "hybridmr"
CANDIDATE_STATES = ("ACCEPTED", "RUNNING")
# Placement records read back at start-up to rebuild the decided set (newest first).
DECIDED_LOOKBACK = 10_000
# A decided app is remembered while the poller lists it, and this long after it last did (an app
# the RM stops listing can come back, after a failover say, and must not be decided twice).
DECIDED_KEEP_MS = 24 * 3600 * 1000
MAX_ERROR_CHARS = 300


class Mover(Protocol):
    """What placement needs of the RM client: the move, and what decides who may make it."""

    async def move_application(self, app_id: str, queue: str) -> str: ...

    async def rm_conf(self, names: Sequence[str]) -> dict[str, str]: ...

    async def queue_acls(self) -> dict[str, str] | None: ...

    async def scheduler_conf(self) -> dict[str, str]: ...


# May this owner submit to the target queue (one tick's ACLs, ``queue_acl.submit_access``)?
OwnerCheck = Callable[[str], queue_acl.Verdict]


@dataclass(frozen=True, slots=True)
class Plan:
    """Algorithm 2's choice for one observed app."""

    app_id: str
    queue: str
    placement: profiles.Placement
    user: str

    @property
    def moves(self) -> bool:
        """Whether the app belongs on the labelled partition."""
        return self.placement.partition == "native"


class ObservedPlacement(LoopService):
    """Moves observed deadline jobs the shared partition would make late (module docstring)."""

    name = "placement"

    def __init__(
        self,
        rm: Mover,
        sessions: sessionmaker[Session],
        *,
        cluster_name: str,
        target_queue: str,
        interval_s: float,
        mode: Callable[[], str],
        clock: Clock = wall_clock_ms,
    ) -> None:
        super().__init__(interval_s, clock)
        self.rm = rm
        self.sessions = sessions
        self.cluster_name = cluster_name
        self.target_queue = target_queue
        self.mode = mode
        # app id -> when it was decided or last seen live since (``_forget``)
        self._decided: dict[str, int] | None = None

    async def run_once(self, now_ms: int) -> None:
        # ``mode`` reads the controller's configuration from the database: off the event loop
        mode, plans = await asyncio.to_thread(lambda: (self.mode(), self.plan(now_ms)))
        owner_check: OwnerCheck | str = "not read"
        if mode == "enforce" and any(plan.moves for plan in plans):
            try:
                owner_check = await self._owner_check()
            except RMUnavailable as exc:
                # temporary: the apps to move stay undecided and are looked at again next tick
                self.log.warning("reading the queue ACLs: RM unavailable: %s", exc)
                plans = [plan for plan in plans if not plan.moves]
            except RMError as exc:
                owner_check = redact_text(str(exc))[:MAX_ERROR_CHARS]
                self.log.warning("reading the queue ACLs failed: %s", owner_check)
        for plan in plans:
            status, note = "decided", None
            if plan.moves and mode != "enforce":
                status = "advised"
            elif plan.moves:
                decided = await self._move(plan, owner_check)
                if decided is None:
                    continue  # the RM could not be reached: undecided until the next tick
                status, note = decided
            await asyncio.to_thread(self._record, plan, mode, status, note, now_ms)

    async def _move(self, plan: Plan, owner_check: OwnerCheck | str) -> tuple[str, str] | None:
        """Moves ``plan``'s app if its owner may submit to the target queue: (status, note), or
        None when the RM could not be reached. ``owner_check`` is this tick's check, or why the
        ACLs could not be read."""
        if not callable(owner_check):
            return "failed", f"not moved: the queue ACLs could not be read: {owner_check}"
        verdict = owner_check(plan.user)
        who, queue = f"owner {plan.user or '(unknown)'}", self.target_queue
        if not verdict.allowed:
            note = f"not moved: {who} may not submit to {queue}: {verdict.reason}"
            self.log.warning("not moving %s: %s", plan.app_id, note)
            return "refused", note
        note = f"{who} may submit to {queue}: {verdict.reason}"
        try:
            await self.rm.move_application(plan.app_id, queue)
        except RMUnavailable as exc:
            self.log.warning("moving %s: RM unavailable: %s", plan.app_id, exc)
            return None
        except RMError as exc:
            error = redact_text(str(exc))[:MAX_ERROR_CHARS]
            self.log.warning("moving %s failed: %s", plan.app_id, error)
            return "failed", f"{note}; the move failed: {error}"
        return "applied", note

    async def _owner_check(self) -> OwnerCheck:
        """This tick's answer to "may this user submit to the target queue?": the RM's ACL
        switches, and the queues' ACLs only when they say those decide."""
        rm_values = await self.rm.rm_conf(queue_acl.RM_KEYS)
        conf: dict[str, str] = {}
        if queue_acl.needs_scheduler_conf(rm_values):
            reported = await self.rm.queue_acls()
            conf = reported if reported is not None else await self.rm.scheduler_conf()
        verdicts: dict[str, queue_acl.Verdict] = {}

        def check(user: str) -> queue_acl.Verdict:
            if user not in verdicts:
                verdicts[user] = queue_acl.submit_access(
                    user,
                    self.target_queue,
                    acl_enable=rm_values.get(queue_acl.ACL_ENABLE_KEY),
                    scheduler_conf=conf,
                    authorization_provider=rm_values.get(queue_acl.AUTHORIZATION_PROVIDER_KEY),
                )
            return verdicts[user]

        return check

    def plan(self, now_ms: int) -> list[Plan]:
        """Algorithm 2 for every observed deadline app not decided yet."""
        with self.sessions() as session:
            cluster = repo.get_cluster(session, self.cluster_name)
            if cluster is None:
                return []
            if self._decided is None:
                self._decided = dict.fromkeys(_decided_apps(session, cluster.id), now_ms)
            # only the apps with a deadline: tag are read (the rest of a large cluster is not)
            tagged = history_repo.live_tagged_apps(
                session, cluster.id, CANDIDATE_STATES, DEADLINE_TAG
            )
            self._forget(self._decided, [app.app_id for app in tagged], now_ms)
            apps = [
                (app, tags)
                for app in tagged
                if app.app_id not in self._decided
                and (tags := _deadline(app, self.target_queue)) is not None
            ]
            if not apps:
                return []
            totals = control_repo.latest_totals(session, cluster.id, now_ms)
            book = profiles.ProfileBook(
                history_repo.runs(session, cluster.id, limit=history_repo.PROFILE_RUNS)
            )
        out = []
        for app, tags in apps:
            started_s = (app.started_ms or app.submitted_ms or now_ms) / 1000
            desired = max(0.0, tags.deadline_s_epoch - started_s)
            placed = profiles.place(
                book, app_keys(app).chain(), None, desired, totals.vcores if totals else 0.0
            )
            out.append(Plan(app.app_id, app.queue, placed, app.user))
        return out

    @staticmethod
    def _forget(decided: dict[str, int], live: Sequence[str], now_ms: int) -> None:
        """Keeps the decided set to the apps still live and those decided or seen live within
        ``DECIDED_KEEP_MS`` (it would otherwise grow by every app ever decided)."""
        for app_id in live:
            if app_id in decided:
                decided[app_id] = now_ms
        cutoff = now_ms - DECIDED_KEEP_MS
        for app_id in [app_id for app_id, seen in decided.items() if seen < cutoff]:
            del decided[app_id]

    def _record(self, plan: Plan, mode: str, status: str, note: str | None, now_ms: int) -> None:
        # a refused app stays where it is; a failed one is recorded with where it was to go
        target = self.target_queue if plan.moves and status != "refused" else plan.queue
        reason = plan.placement.reason
        if status == "advised":
            reason += f"; advised only ({mode} mode)"
        if note:
            reason += f"; {note}"
        with transaction(self.sessions) as session:
            cluster = repo.get_cluster(session, self.cluster_name)
            if cluster is None:
                return
            repo.add_decision(
                session,
                Decision(
                    cluster_id=cluster.id,
                    created_ms=now_ms,
                    kind=KIND,
                    policy=POLICY,
                    mode=mode,
                    params={"target_queue": self.target_queue},
                    inputs={
                        "app_id": plan.app_id,
                        "queue": plan.queue,
                        "user": plan.user,
                        **plan.placement.numbers(),
                    },
                    outputs={"app_id": plan.app_id, "queue": target},
                    status=status,
                    reason=reason,
                ),
            )
        assert self._decided is not None
        self._decided[plan.app_id] = now_ms


def _deadline(app: Application, target_queue: str) -> DeadlineTags | None:
    """The app's deadline tags when it is a candidate: tagged, not the sidecar's, not in the
    target queue already (YARN reports the leaf or the full path)."""
    tags = app.tag_list
    if any(tag.startswith(JOB_TAG) for tag in tags):
        return None
    if app.queue in queue_names(target_queue):
        return None
    parsed = parse_deadline_tags(tags)
    return parsed if isinstance(parsed, DeadlineTags) else None


def _decided_apps(session: Session, cluster_id: int) -> set[str]:
    rows = session.scalars(
        select(Decision.inputs)
        .where(Decision.cluster_id == cluster_id, Decision.kind == KIND)
        .order_by(Decision.id.desc())
        .limit(DECIDED_LOOKBACK)
    )
    return {
        str(inputs["app_id"])
        for inputs in rows
        if isinstance(inputs, dict) and inputs.get("app_id")
    }
