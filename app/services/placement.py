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
an app is decided once (the decided set is rebuilt from those records after a restart; an RM
that cannot be reached leaves it undecided for the next tick). The earlier the move, the more of
the job's containers it places: an app seen only after its AM asked for every container gains
nothing, which the record cannot tell.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import control_repo, history_repo, repo
from app.db.models import Application, Decision
from app.db.observe_repo import PLACEMENT_KIND
from app.db.promise_history import app_keys
from app.db.session import transaction
from app.domain.model import queue_names
from app.domain.tags import JOB_TAG, DeadlineTags, parse_deadline_tags
from app.policies.hybridmr import profiles
from app.redact import redact_text
from app.services.base import Clock, LoopService, wall_clock_ms
from app.yarn.errors import RMError, RMUnavailable

KIND = PLACEMENT_KIND
POLICY = "hybridmr"
CANDIDATE_STATES = ("ACCEPTED", "RUNNING")
# Placement records read back at start-up to rebuild the decided set (newest first).
DECIDED_LOOKBACK = 10_000
MAX_ERROR_CHARS = 300


class Mover(Protocol):
    """What placement needs of the RM client."""

    async def move_application(self, app_id: str, queue: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Plan:
    """Algorithm 2's choice for one observed app."""

    app_id: str
    queue: str
    placement: profiles.Placement

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
        self._decided: set[str] | None = None

    async def run_once(self, now_ms: int) -> None:
        # ``mode`` reads the controller's configuration from the database: off the event loop
        mode, plans = await asyncio.to_thread(lambda: (self.mode(), self.plan(now_ms)))
        for plan in plans:
            status, error = "decided", None
            if plan.moves and mode != "enforce":
                status = "advised"
            elif plan.moves:
                try:
                    await self.rm.move_application(plan.app_id, self.target_queue)
                    status = "applied"
                except RMUnavailable as exc:
                    # temporary: the app stays undecided and is looked at again next tick
                    self.log.warning("moving %s: RM unavailable: %s", plan.app_id, exc)
                    continue
                except RMError as exc:
                    status, error = "failed", redact_text(str(exc))[:MAX_ERROR_CHARS]
                    self.log.warning("moving %s failed: %s", plan.app_id, error)
            await asyncio.to_thread(self._record, plan, mode, status, error, now_ms)

    def plan(self, now_ms: int) -> list[Plan]:
        """Algorithm 2 for every observed deadline app not decided yet."""
        with self.sessions() as session:
            cluster = repo.get_cluster(session, self.cluster_name)
            if cluster is None:
                return []
            if self._decided is None:
                self._decided = _decided_apps(session, cluster.id)
            apps = [
                (app, tags)
                for app in history_repo.live_apps(session, cluster.id, CANDIDATE_STATES)
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
            out.append(Plan(app.app_id, app.queue, placed))
        return out

    def _record(self, plan: Plan, mode: str, status: str, error: str | None, now_ms: int) -> None:
        target = self.target_queue if plan.moves else plan.queue
        reason = plan.placement.reason
        if status == "advised":
            reason += f"; advised only ({mode} mode)"
        if error:
            reason += f"; the move failed: {error}"
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
                    inputs={"app_id": plan.app_id, "queue": plan.queue, **plan.placement.numbers()},
                    outputs={"app_id": plan.app_id, "queue": target},
                    status=status,
                    reason=reason,
                ),
            )
        assert self._decided is not None
        self._decided.add(plan.app_id)


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
