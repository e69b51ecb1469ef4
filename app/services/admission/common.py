"""What every part of the admission service shares: the RM calls it needs, the request and
answer types of its API, its options and the state attributes the parts read and write."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from app.db import repo
from app.db.jobs_models import Job, JobDecision
from app.domain.model import AppRecord, AttemptContainers
from app.jobs.rounds import AdmissionConfig, LearnResult, RoundResult
from app.services.base import Clock
from app.yarn.wire import NewApplication
from app.yarn.workload import Harness


class JobsRM(Protocol):
    """What the service needs of ``app.yarn.client.RMClient``."""

    async def apps(self, *, tags: Sequence[str] | None = None) -> tuple[AppRecord, ...]: ...

    async def app(self, app_id: str) -> AppRecord: ...

    async def new_application(self) -> NewApplication: ...

    async def submit_application(self, context: Mapping[str, Any]) -> None: ...

    async def kill_application(
        self, app_id: str, diagnostics: str = "", wait_s: float = 30.0
    ) -> str: ...

    async def set_application_timeout(self, app_id: str, expiry_ms: int) -> None: ...

    async def attempt_containers(self, app_id: str) -> AttemptContainers | None: ...


class JobRejected(Exception):
    """A job request the service refuses; ``status`` is the HTTP status the API answers."""

    def __init__(self, status: int, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.status = status
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class NewJob:
    """A validated job request (the API's body, free of HTTP)."""

    name: str
    queue: str
    deadline_ms: int
    requested_tasks: int
    input_bytes: int | None
    block_size: int | None
    run: Mapping[str, Any]
    tags: Sequence[str]
    idempotency_key: str | None
    request_hash: str
    # Who submits it: the owner (user) and the audit label of its first decision. Captured in
    # the submitter's own thread (``create_job``): the batch that stores it runs in whichever
    # submitter's thread holds the admission lock, whose principal is someone else's.
    owner: str | None = None
    principal: str | None = None


@dataclass(frozen=True, slots=True)
class Submitted:
    """The stored job and its first decision; ``created`` is False for an idempotent replay."""

    job: Job
    decision: JobDecision | None
    created: bool


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """Knobs of the service besides the policy."""

    rm_urls: tuple[str, ...]
    overrun_factor: float = 1.0
    harness: Harness | None = None
    writes_enabled: bool = True
    kill_wait_s: float = 10.0
    # The node label of the dedicated partition HybridMR's placement may send a job to; "": off.
    placement_label: str = ""


# How long after reserving an id a timed-out POST /apps may still land. The client gives up after
# its timeout (seconds); a request queued behind a busy RM lands well within this.
LANDING_GRACE_MS = 300_000


class ServiceState:
    """The attributes the parts share (set by ``AdmissionService.__init__``) and the two rules
    more than one part applies."""

    rm: JobsRM
    sessions: sessionmaker[Session]
    options: ServiceOptions
    clock: Clock
    log: logging.Logger
    # ``default_cfg`` is the settings' policy; ``cfg`` the one the last round ran, which
    # ``PUT /admission`` (stored in the database, read by every round) may have changed.
    default_cfg: AdmissionConfig
    cfg: AdmissionConfig
    # The stored choice's key (policy, parameters, when set) with the configuration built from it.
    _cfg_known: tuple[tuple[str, str, int], AdmissionConfig] | None
    # Serialises admission and learning in this process (SQLite has no row locks; on
    # PostgreSQL the estimator row lock does the same across processes).
    _db_lock: threading.Lock
    _act_lock: asyncio.Lock
    eager: bool
    # Leadership (``app.services.leader``): only the leader acts on YARN, and each submission
    # records and is fenced by its epoch.
    may_act: Callable[[], bool]
    epoch: Callable[[], int | None]
    _kicked: asyncio.Task[None] | None
    _kick_again: bool
    last_round: RoundResult | None
    last_learn: LearnResult | None

    async def act(self) -> None:
        """Kill, submit and set timeouts (``AdmissionService.act``)."""
        raise NotImplementedError

    def lifetime_expiry_ms(self, job: Job) -> int:
        """When YARN's LIFETIME timeout kills the job's app."""
        if job.requested_tasks > self.cfg.params.drop_threshold:
            return job.deadline_ms
        return job.deadline_ms + int(self.options.overrun_factor * job.deadline_s * 1000)

    def _store_app(self, session: Session, record: AppRecord, now_ms: int) -> None:
        cluster = repo.ensure_cluster(session, self.cfg.cluster_name, self.options.rm_urls, now_ms)
        repo.upsert_apps(session, cluster.id, [record], now_ms)
