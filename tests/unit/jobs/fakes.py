"""An in-memory ResourceManager for the admission service's tests (the ``JobsRM`` protocol).

It behaves like the RM where the service depends on it: ids come from new-application, a
submission creates an app carrying the context's tags (lower-cased), kill answers the final
state, an unknown id raises ``RMNotFound``, a re-submit of a known id is ignored (as
``ClientRMService`` does). ``submit_fault`` simulates a crash window: ``lost`` (the request never
reached the RM) or ``ambiguous`` (the RM applied it, the answer was lost).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.domain.model import AppRecord, AttemptContainers, Resources
from app.yarn.errors import RMNotFound, RMRejected, RMUnavailable
from app.yarn.wire import NewApplication


@dataclass
class FakeRM:
    now_ms: int = 1_700_000_000_000
    apps_by_id: dict[str, AppRecord] = field(default_factory=dict)
    contexts: dict[str, dict[str, Any]] = field(default_factory=dict)
    timeouts: dict[str, int] = field(default_factory=dict)
    kills: list[str] = field(default_factory=list)
    submits: list[str] = field(default_factory=list)
    submit_fault: str | None = None
    reject_submit: str | None = None
    unavailable: bool = False
    counter: int = 0
    # what ``attempt_containers`` answers per app id (absent: no attempt yet)
    attempts: dict[str, AttemptContainers] = field(default_factory=dict)
    attempt_reads: list[str] = field(default_factory=list)  # app ids, in the order read

    def _check(self) -> None:
        if self.unavailable:
            raise RMUnavailable("no active RM answered")

    async def apps(self, *, tags: Sequence[str] | None = None) -> tuple[AppRecord, ...]:
        self._check()
        wanted = set(tags or ())
        return tuple(
            a for a in self.apps_by_id.values() if not wanted or wanted.intersection(a.tags)
        )

    async def app(self, app_id: str) -> AppRecord:
        self._check()
        if app_id not in self.apps_by_id:
            raise RMNotFound(404, f"app with id: {app_id} not found")
        return self.apps_by_id[app_id]

    async def new_application(self) -> NewApplication:
        self._check()
        self.counter += 1
        return NewApplication(f"application_1_{self.counter:04d}", Resources(8, 8192))

    async def submit_application(self, context: Mapping[str, Any]) -> None:
        self._check()
        if self.reject_submit:
            raise RMRejected(400, self.reject_submit)
        fault, self.submit_fault = self.submit_fault, None
        if fault == "lost":
            raise RMUnavailable("POST /apps may or may not have been applied: connect failed")
        app_id = str(context["application-id"])
        if app_id in self.apps_by_id:
            return  # ClientRMService answers a re-submit of a known id with success, ignoring it
        self.submits.append(app_id)
        self.contexts[app_id] = dict(context)
        self.apps_by_id[app_id] = _record(app_id, context, self.now_ms)
        if fault == "ambiguous":
            raise RMUnavailable("POST /apps may or may not have been applied: read timeout")

    async def kill_application(
        self, app_id: str, diagnostics: str = "", wait_s: float = 30.0
    ) -> str:
        self._check()
        if app_id not in self.apps_by_id:
            raise RMNotFound(404, f"app with id: {app_id} not found")
        self.kills.append(app_id)
        current = self.apps_by_id[app_id]
        if not current.is_finished:
            self.apps_by_id[app_id] = replace(
                current,
                state="KILLED",
                final_status="KILLED",
                finished_ms=self.now_ms,
                elapsed_ms=self.now_ms - (current.submitted_ms or self.now_ms),
                diagnostics=diagnostics,
            )
        return self.apps_by_id[app_id].state

    async def set_application_timeout(self, app_id: str, expiry_ms: int) -> None:
        self._check()
        if app_id not in self.apps_by_id:
            raise RMNotFound(404, f"app with id: {app_id} not found")
        self.timeouts[app_id] = expiry_ms

    async def attempt_containers(self, app_id: str) -> AttemptContainers | None:
        self._check()
        if app_id not in self.apps_by_id:
            raise RMNotFound(404, f"app with id: {app_id} not found")
        self.attempt_reads.append(app_id)
        return self.attempts.get(app_id)

    def finish(
        self, app_id: str, *, at_ms: int, vcore_seconds: int, state: str = "FINISHED"
    ) -> AppRecord:
        """End an app as the RM would report it."""
        current = self.apps_by_id[app_id]
        final = "SUCCEEDED" if state == "FINISHED" else state
        self.apps_by_id[app_id] = replace(
            current,
            state=state,
            final_status=final,
            finished_ms=at_ms,
            elapsed_ms=at_ms - (current.submitted_ms or at_ms),
            vcore_seconds=vcore_seconds,
            allocated=Resources(0, 0),
            progress=100.0,
        )
        return self.apps_by_id[app_id]

    def tagged(self, tag: str) -> list[AppRecord]:
        return [a for a in self.apps_by_id.values() if tag in a.tags]


def _record(app_id: str, context: Mapping[str, Any], now_ms: int) -> AppRecord:
    tags = tuple(str(t).lower() for t in context.get("application-tags", {}).get("tag", []))
    return AppRecord(
        app_id=app_id,
        user="sidecar",
        queue=str(context.get("queue", "default")),
        name=str(context.get("application-name", "")),
        app_type=str(context.get("application-type", "YARN")),
        tags=tags,
        state="ACCEPTED",
        final_status="UNDEFINED",
        progress=0.0,
        submitted_ms=now_ms,
        started_ms=now_ms,
        launched_ms=None,
        finished_ms=None,
        elapsed_ms=0,
        allocated=Resources(1, 256),
        vcore_seconds=0,
        memory_seconds=0,
        running_containers=1,
        priority=0,
    )
