"""Async ResourceManager REST client: one method per endpoint (``docs/yarn.md`` sections 2-5, 13).

The only module that speaks HTTP to the RM. It owns three concerns and keeps them here:

* **RM HA.** RMs are tried in order starting from the last one that answered as active. A standby
  RM answers every REST path except ``/ws/v1/cluster/info`` with ``307 Temporary Redirect``
  ("This is standby RM. The redirect url is: ...", Hadoop ``RMWebAppFilter.doFilter``), or with a
  ``Refresh`` header / "There is no active RM right now." when it knows no active RM. On
  ``/info`` it answers 200 with ``haState`` ``STANDBY``. Redirects are never followed blindly:
  the ``Location`` only reorders the configured RMs, so we never talk to an unconfigured host.
  Not every standby redirects (both RMs of a ``MiniYARNCluster`` answer for themselves, and a
  standby then even accepts a scheduler-configuration PUT into the shared store), so with more
  than one RM configured an RM is used only once its ``/info`` said ``ACTIVE``: reads go to the
  RM so confirmed, and every write asks ``/info`` first, since a write a standby takes is lost.
* **Retries.** Temporary failures (refused or timed-out connections, 5xx, standby everywhere) are
  retried in rounds over all RMs with exponential backoff ``backoff_s * 2**k``; 4xx never is.
* **Error mapping.** httpx exceptions and HTTP statuses become ``app.yarn.errors`` at this edge.

Non-idempotent writes (``submit_application``, ``update_scheduler_conf``) move on to another RM or
retry only when the request provably was not processed: the connection could not be established,
or a standby's filter redirected it before any handler ran. A read timeout, a dropped connection
or a 5xx after sending surface at once as ``RMUnavailable``; the caller decides (a resubmission of
the same application id is harmless on the RM side: ``ClientRMService.submitApplication`` returns
success for an id it already knows, but we do not rely on that here).
"""

from __future__ import annotations

import asyncio
import enum
import gc
import json
import logging
import math
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import httpx
import orjson
from pydantic import BaseModel

from app.domain.model import (
    FINAL_APP_STATES,
    AppRecord,
    AttemptContainers,
    ClusterInfo,
    ClusterMetrics,
    ClusterSnapshot,
    NodeState,
    QueueState,
    Resources,
    SchedulerSettings,
)
from app.redact import redact_url
from app.yarn import mapping, wire
from app.yarn.errors import RMNotFound, RMProtocolError, RMRejected, RMUnavailable, RMUnreachable
from app.yarn.pooled import PooledClient
from app.yarn.wire import NewApplication, SchedConfUpdate

log = logging.getLogger(__name__)

API_PREFIX = "/ws/v1/cluster"
# Key of a submission context naming the user to run as (see app.jobs.contexts.RUN_AS).
RUN_AS_KEY = "run_as"
RUNNING_APP_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
# Not yet running: listed in full on every poll (few, and their start is what admission follows).
PENDING_APP_STATES = RUNNING_APP_STATES[:-1]
FINISHED_APP_STATES = tuple(sorted(FINAL_APP_STATES))
KILL_POLL_S = 0.5
_XML = "application/xml"
_NO_ACTIVE_RM = b"There is no active RM right now"
# ``AppInfo`` fields the sidecar never reads, left out of the RM's answer (``deSelects``,
# YARN-6871): the per-partition ``resourceInfo`` is more than half of every app's JSON.
APP_DESELECTS = ("resourceInfo",)
# Bodies above this size are decoded with the cyclic garbage collector paused: decoding builds
# millions of containers, and generation-0 collections scanning them are most of the time spent.
_PAUSE_GC_BYTES = 256 * 1024

_M = TypeVar("_M", bound=BaseModel)


class _Retry(enum.Enum):
    """How far a request may be repeated after a temporary failure."""

    IDEMPOTENT = "idempotent"  # reads, kill, timeout, validate, new-application
    UNSENT_ONLY = "unsent-only"  # submit, scheduler-conf PUT: only if provably not processed


class _Temporary(Exception):
    """One RM failed temporarily; ``sent`` says whether the RM may have processed the request."""

    def __init__(
        self, reason: str, *, sent: bool, hint: str | None = None, kind: str = "server"
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent
        self.hint = hint
        self.kind = kind


StandbyProbe = Callable[[httpx.Response], bool]
# (method, endpoint template, seconds, error kind or None): told after every exchange with an RM,
# so latency and errors are measured at this edge and nowhere else.
RequestObserver = Callable[[str, str, float, str | None], None]


def _never_standby(_: httpx.Response) -> bool:
    return False


class RMClient(PooledClient):
    """Client for one YARN cluster, possibly with several (HA) ResourceManagers.

    ``urls`` are the RM web addresses (``http://rm1:8088``). ``transport`` and ``sleep`` are
    injected so tests run against ``httpx.MockTransport`` with fake time.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        user: str = "yarn-sidecar",
        timeout_s: float = 10.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        auth: httpx.Auth | None = None,
        verify: ssl.SSLContext | bool = True,
        observer: RequestObserver | None = None,
        on_failover: Callable[[str, str], None] | None = None,
    ) -> None:
        if not urls:
            raise ValueError("RMClient needs at least one ResourceManager URL")
        if retries < 0 or backoff_s < 0 or timeout_s <= 0:
            raise ValueError("retries and backoff_s must be >= 0, timeout_s > 0")
        self._urls = tuple(_base_url(url) for url in urls)
        self._user = user
        self._auth = auth
        self._retries = retries
        self._backoff_s = backoff_s
        self._sleep = sleep
        self._observer = observer
        self._on_failover = on_failover
        # How many times another RM than the last active one answered as active.
        self.failovers = 0
        self._answered = False  # the first active RM found is not a failover
        self._active = 0
        # The RM whose ``/info`` last said ACTIVE (HA only): reads trust it until it fails.
        self._confirmed: int | None = None
        # trust_env=False: the RM is an intra-cluster peer; an inherited HTTP_PROXY would only
        # reroute or break these calls. The connect timeout is capped so that a dead RM host
        # (dropped SYNs) delays failover to its HA peer by seconds, not by the read timeout.
        self._http = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=4),
            follow_redirects=False,
            trust_env=False,
            headers={"Accept": "application/json"},
            auth=auth,
            verify=verify,
        )

    @property
    def active_url(self) -> str:
        """The RM that last answered as active (the first configured one until then)."""
        return self._urls[self._active]

    # --- reads --------------------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        """``GET /info`` from the active RM (a standby answers this path itself, as STANDBY)."""
        envelope = await self._get_json("/info", wire.ClusterInfoEnvelope, standby=_info_is_standby)
        return mapping.cluster_info(envelope.clusterInfo)

    async def metrics(self) -> ClusterMetrics:
        """``GET /metrics``."""
        envelope = await self._get_json("/metrics", wire.ClusterMetricsEnvelope)
        return mapping.cluster_metrics(envelope.clusterMetrics)

    async def scheduler(self) -> tuple[QueueState, ...]:
        """``GET /scheduler``, flattened to queues with full paths (root first)."""
        return mapping.queues(await self._scheduler_info())

    async def queue_acls(self) -> dict[str, str] | None:
        """The queue ACLs ``GET /scheduler`` reports, as scheduler-configuration properties
        (``mapping.queue_acl_conf``); None when the RM reports none."""
        return mapping.queue_acl_conf(await self._scheduler_info())

    async def apps(
        self,
        *,
        states: Sequence[str] | None = None,
        finished_time_begin_ms: int | None = None,
        finished_time_end_ms: int | None = None,
        queue: str | None = None,
        user: str | None = None,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        deselects: Sequence[str] = (),
        started_time_begin_ms: int | None = None,
        started_time_end_ms: int | None = None,
    ) -> tuple[AppRecord, ...]:
        """``GET /apps`` with the RM's own filters (section 3.4; ``tags`` match any);
        ``deselects`` names ``AppInfo`` fields the RM may leave out."""
        params = _app_params(
            states=states,
            finished_time_begin_ms=finished_time_begin_ms,
            finished_time_end_ms=finished_time_end_ms,
            queue=queue,
            user=user,
            tags=tags,
            limit=limit,
            started_time_begin_ms=started_time_begin_ms,
            started_time_end_ms=started_time_end_ms,
        )
        if deselects:
            params["deSelects"] = ",".join(deselects)
        resp = await self._request("GET", "/apps", params=params)
        with _gc_paused(len(resp.content) > _PAUSE_GC_BYTES):
            # The decoded JSON and the wire objects are freed before collection resumes.
            items = _decode(resp, wire.AppsEnvelope).items()
            return tuple(mapping.app_record(app) for app in items)

    async def app(self, app_id: str) -> AppRecord:
        """``GET /apps/{id}``; an unknown id raises ``RMNotFound``."""
        envelope = await self._get_json(f"/apps/{_seg(app_id)}", wire.AppEnvelope)
        return mapping.app_record(envelope.app)

    async def attempt_containers(self, app_id: str) -> AttemptContainers | None:
        """The live containers of ``app_id``'s latest attempt: ``GET /apps/{id}/appattempts``,
        then ``.../appattempts/{attempt}/containers`` (2.9.0+); None before its first attempt."""
        base = f"/apps/{_seg(app_id)}/appattempts"
        attempts = await self._get_json(base, wire.AppAttemptsEnvelope)
        items = attempts.appAttempts.appAttempt if attempts.appAttempts is not None else []
        if not items:
            return None
        last = max(items, key=lambda a: a.id)
        listed = await self._get_json(
            f"{base}/{_seg(last.appAttemptId)}/containers", wire.ContainersEnvelope
        )
        return mapping.attempt_containers(last, listed)

    async def nodes(self, states: Sequence[str] | None = None) -> tuple[NodeState, ...]:
        """``GET /nodes``, optionally filtered by node state."""
        params = {"states": ",".join(states)} if states else None
        resp = await self._request("GET", "/nodes", params=params)
        with _gc_paused(len(resp.content) > _PAUSE_GC_BYTES):
            items = _decode(resp, wire.NodesEnvelope).items()
            return tuple(mapping.node_state(node) for node in items)

    async def scheduler_conf(self) -> dict[str, str]:
        """``GET /scheduler-conf``: the mutable store's properties (admin endpoint: user given)."""
        conf = await self._get_json("/scheduler-conf", wire.SchedConfWire, as_user=True)
        return {prop.name: prop.value for prop in conf.properties}

    async def scheduler_conf_version(self) -> int:
        """``GET /scheduler-conf/version``: +1 per applied mutation (memory store starts at 1)."""
        version = await self._get_json(
            "/scheduler-conf/version", wire.ConfVersionWire, as_user=True
        )
        return version.versionID

    async def rm_conf(self, names: Sequence[str]) -> dict[str, str]:
        """The RM's effective configuration values of ``names`` (its ``/conf`` servlet, one
        ``?name=`` per property, JSON). A name the RM does not define is left out."""
        out: dict[str, str] = {}
        for name in names:
            try:
                resp = await self._request(
                    "GET", "/conf", params={"name": name}, as_user=True, prefix=""
                )
            except RMNotFound:
                continue
            out[name] = _decode(resp, wire.ConfServletWire).property.value
        return out

    async def scheduler_settings(self) -> SchedulerSettings:
        """Whether the CapacityScheduler preempts, and its minimum allocation (``rm_conf``)."""
        return mapping.scheduler_settings(await self.rm_conf(mapping.SCHEDULER_SETTING_KEYS))

    # --- writes -------------------------------------------------------------------------------

    async def new_application(self) -> NewApplication:
        """``POST /apps/new-application``. Retried like a read: an unused id costs nothing."""
        resp = await self._request("POST", "/apps/new-application", as_user=True)
        new = _decode(resp, wire.NewApplicationWire)
        cap = new.maximum_resource_capability
        return NewApplication(
            app_id=new.application_id,
            max_resources=Resources(vcores=cap.vCores, memory_mb=cap.memory),
        )

    async def submit_application(self, context: Mapping[str, Any]) -> None:
        """``POST /apps`` with an ``application-submission-context`` body (section 4.2; 202).

        A ``run_as`` key names the user the application runs as (the API caller): sent as
        ``user.name`` with simple authentication, as the proxy-user ``doAs`` with Kerberos, so the
        cluster's own queue ACLs apply to that user, never silently to the sidecar."""
        body = dict(context)
        run_as = body.pop(RUN_AS_KEY, None)
        await self._request(
            "POST",
            "/apps",
            json_body=body,
            as_user=True,
            on_behalf_of=str(run_as) if run_as else None,
            retry=_Retry.UNSENT_ONLY,
        )

    async def kill_application(
        self, app_id: str, diagnostics: str = "", wait_s: float = 30.0
    ) -> str:
        """``PUT /apps/{id}/state`` KILLED, repeated while the RM answers 202 (section 4.3).

        Returns the state the RM last reported: a final state on 200, or the in-flight state
        (3.5.0 answers the first PUT with 202 ``KILLING``) if ``wait_s`` ran out first. Polls
        every ``KILL_POLL_S`` seconds; killing an already final app is a plain 200.
        """
        body: dict[str, str] = {"state": "KILLED"}
        if diagnostics:
            body["diagnostics"] = diagnostics
        polls_left = math.floor(wait_s / KILL_POLL_S)
        path = f"/apps/{_seg(app_id)}/state"
        while True:
            resp = await self._request("PUT", path, json_body=body, as_user=True)
            state = _decode(resp, wire.AppStateWire).state
            if resp.status_code != httpx.codes.ACCEPTED or polls_left <= 0:
                return state
            polls_left -= 1
            await self._sleep(KILL_POLL_S)

    async def set_application_timeout(self, app_id: str, expiry_ms: int) -> None:
        """``PUT /apps/{id}/timeout``: LIFETIME expires at ``expiry_ms`` (section 4.6)."""
        body = {"timeout": {"type": "LIFETIME", "expiryTime": format_expiry(expiry_ms)}}
        await self._request("PUT", f"/apps/{_seg(app_id)}/timeout", json_body=body, as_user=True)

    async def move_application(self, app_id: str, queue: str) -> str:
        """``PUT /apps/{id}/queue``: move an application to ``queue``; returns the queue the RM
        reports. Idempotent: moving an app to the queue it is in is a plain 200."""
        resp = await self._request(
            "PUT", f"/apps/{_seg(app_id)}/queue", json_body={"queue": queue}, as_user=True
        )
        body = resp.json() if resp.content else {}
        return str(body.get("queue", queue)) if isinstance(body, dict) else queue

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        """``PUT /scheduler-conf`` (XML, section 5.3); returns the RM's success text.

        An invalid result is a 400 with plain text, raised as ``RMRejected``; the RM reverts it.
        """
        resp = await self._request(
            "PUT",
            "/scheduler-conf",
            content=update.to_xml(),
            content_type=_XML,
            as_user=True,
            retry=_Retry.UNSENT_ONLY,
        )
        return resp.text.strip()

    async def validate_scheduler_conf(self, update: SchedConfUpdate) -> None:
        """``POST /scheduler-conf/validate``: raises ``RMRejected`` if the RM would refuse it."""
        await self._request(
            "POST",
            "/scheduler-conf/validate",
            content=update.to_xml(),
            content_type=_XML,
            as_user=True,
        )

    # --- composite ----------------------------------------------------------------------------

    async def snapshot(
        self,
        now_ms: int,
        *,
        finished_since_ms: int | None,
        running: RunningSlice | None = None,
        nodes: bool = True,
    ) -> ClusterSnapshot:
        """Everything a poll needs, fetched concurrently; the node list only with ``nodes``.

        Apps are those finished at or after ``finished_since_ms`` (``None``: every finished app
        the RM still remembers, bounded by its ``max-completed-applications``) plus the
        non-final ones: all of them when ``running`` is ``None``, else only what ``running``
        names (see ``RunningSlice``). An app listed twice appears once, in its latest form.
        """
        running_calls: list[Awaitable[tuple[AppRecord, ...]]]
        if running is None:
            running_calls = [self.apps(states=RUNNING_APP_STATES, deselects=APP_DESELECTS)]
        else:
            running_calls = [self.apps(states=PENDING_APP_STATES, deselects=APP_DESELECTS)]
            running_calls += [
                self.apps(
                    states=("RUNNING",),
                    started_time_begin_ms=begin,
                    started_time_end_ms=end,
                    deselects=APP_DESELECTS,
                )
                for begin, end in running.started
            ]
            if running.settled is not None:
                running_calls.append(
                    self.apps(
                        states=FINISHED_APP_STATES,
                        finished_time_begin_ms=running.settled[0],
                        finished_time_end_ms=running.settled[1],
                        deselects=APP_DESELECTS,
                    )
                )
        fixed = asyncio.gather(
            self.cluster_info(),
            self.metrics(),
            self._scheduler_info(),
            self.apps(
                states=FINISHED_APP_STATES,
                finished_time_begin_ms=finished_since_ms,
                deselects=APP_DESELECTS,
            ),
            self.nodes() if nodes else _no_nodes(),
        )
        (info, metrics, scheduler, finished, node_list), listed = await asyncio.gather(
            fixed, asyncio.gather(*running_calls)
        )
        apps = {app.app_id: app for part in listed for app in part}
        for app in finished:
            apps[app.app_id] = app
        return ClusterSnapshot(
            taken_ms=now_ms,
            rm_url=self.active_url,
            info=info,
            metrics=metrics,
            queues=mapping.queues(scheduler),
            apps=tuple(apps.values()),
            nodes=node_list,
            scheduler_type=scheduler.type,
            nodes_read=nodes,
        )

    # --- plumbing -----------------------------------------------------------------------------

    async def _scheduler_info(self) -> wire.SchedulerInfoWire:
        envelope = await self._get_json("/scheduler", wire.SchedulerEnvelope)
        return envelope.scheduler.schedulerInfo

    async def _get_json(
        self,
        path: str,
        model: type[_M],
        *,
        params: Mapping[str, str] | None = None,
        as_user: bool = False,
        standby: StandbyProbe = _never_standby,
    ) -> _M:
        resp = await self._request("GET", path, params=params, as_user=as_user, standby=standby)
        return _decode(resp, model)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        content: str | None = None,
        content_type: str | None = None,
        as_user: bool = False,
        on_behalf_of: str | None = None,
        retry: _Retry = _Retry.IDEMPOTENT,
        standby: StandbyProbe = _never_standby,
        prefix: str = API_PREFIX,
    ) -> httpx.Response:
        """Send to the active RM, failing over and retrying per ``retry``; 2xx or an RMError."""
        query = dict(params or {})
        if as_user and self._auth is not None:
            # Kerberos: the ticket says who the sidecar is; doAs who it acts for.
            if on_behalf_of:
                query["doAs"] = on_behalf_of
        elif as_user:
            query["user.name"] = on_behalf_of or self._user
        request = _Send(method, path, query, json_body, content, content_type, standby, prefix)
        failures: list[str] = []
        for round_no in range(self._retries + 1):
            if round_no:
                await self._sleep(self._backoff_s * 2 ** (round_no - 1))
            resp = await self._one_round(request, retry, failures)
            if resp is not None:
                return resp
        message = f"no active RM answered {method} {path}: " + "; ".join(failures[-3:])
        if retry is _Retry.UNSENT_ONLY:
            # a sent attempt is raised at once (``_one_round``): this write reached no RM
            raise RMUnreachable(message)
        raise RMUnavailable(message)

    async def _one_round(
        self, request: _Send, retry: _Retry, failures: list[str]
    ) -> httpx.Response | None:
        """Try each RM once, starting at the active one; ``None`` if all failed temporarily."""
        order = self._rm_order()
        while order:
            index = order.pop(0)
            try:
                if self._must_confirm(index, request, retry):
                    await self._send_once(index, _ACTIVE_PROBE)
                    self._confirmed = index
                resp = await self._send_once(index, request)
            except _Temporary as exc:
                if self._confirmed == index:
                    self._confirmed = None
                failures.append(exc.reason)
                if exc.sent and retry is _Retry.UNSENT_ONLY:
                    raise RMUnavailable(
                        f"{request.method} {request.path} may or may not have been applied: "
                        f"{exc.reason}"
                    ) from exc
                _move_hint_first(order, self._index_of(exc.hint))
                continue
            if index != self._active and self._answered:
                self._failed_over(self._active, index)
            self._active, self._answered = index, True
            if request.path == _ACTIVE_PROBE.path:
                self._confirmed = index
            return resp
        return None

    def _must_confirm(self, index: int, request: _Send, retry: _Retry) -> bool:
        """Ask ``/info`` first: HA, and a write, or a read from an RM not confirmed active."""
        if len(self._urls) == 1 or request.path == _ACTIVE_PROBE.path:
            return False
        write = request.method != "GET" or retry is _Retry.UNSENT_ONLY
        return write or self._confirmed != index

    def _failed_over(self, before: int, after: int) -> None:
        self._active = after
        self.failovers += 1
        old, new = redact_url(self._urls[before]), redact_url(self._urls[after])
        log.warning("ResourceManager failover: the active RM is now %s (was %s)", new, old)
        if self._on_failover is not None:
            self._on_failover(old, new)

    async def _send_once(self, index: int, request: _Send) -> httpx.Response:
        """One HTTP exchange with one RM, timed and told to the observer when there is one."""
        if self._observer is None:
            return await self._exchange(index, request)
        started = time.perf_counter()
        error: str | None = None
        try:
            return await self._exchange(index, request)
        except _Temporary as exc:
            error = exc.kind
            raise
        except RMNotFound:
            error = "not_found"
            raise
        except RMRejected:
            error = "rejected"
            raise
        finally:
            seconds = time.perf_counter() - started
            self._observer(request.method, endpoint_template(request.path), seconds, error)

    async def _exchange(self, index: int, request: _Send) -> httpx.Response:
        """One HTTP exchange with one RM, classified: 2xx returned, 4xx raised, rest temporary."""
        base = self._urls[index]
        shown = redact_url(base)  # error messages end up in logs, /ready and the audit trail
        try:
            resp = await self._http.request(
                request.method,
                base + request.prefix + request.path,
                params=request.query,
                json=request.json_body,
                content=request.content,
                headers={"Content-Type": request.content_type} if request.content_type else None,
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise _Temporary(f"{shown}: {_describe(exc)}", sent=False, kind="connect") from exc
        except httpx.TransportError as exc:
            raise _Temporary(f"{shown}: {_describe(exc)}", sent=True, kind="transport") from exc
        if _is_standby(resp) or request.standby(resp):
            hint = resp.headers.get("Location")
            raise _Temporary(f"{shown}: standby RM", sent=False, hint=hint, kind="standby")
        if resp.status_code >= 500:
            raise _Temporary(
                f"{shown}: HTTP {resp.status_code} {_rm_message(resp)}", sent=True, kind="server"
            )
        if resp.status_code >= 400:
            raise _rejection(resp)
        return resp

    def _rm_order(self) -> list[int]:
        count = len(self._urls)
        return [(self._active + offset) % count for offset in range(count)]

    def _index_of(self, location: str | None) -> int | None:
        """The configured RM a standby's ``Location`` points at, if it is one of ours."""
        if not location:
            return None
        target = urlsplit(location)
        for index, url in enumerate(self._urls):
            mine = urlsplit(url)
            if (mine.scheme, mine.netloc) == (target.scheme, target.netloc):
                return index
        return None


@dataclass(frozen=True, slots=True)
class _Send:
    """The parts of one logical request, reused verbatim for every RM and every retry."""

    method: str
    path: str
    query: dict[str, str]
    json_body: Any
    content: str | None
    content_type: str | None
    standby: StandbyProbe
    prefix: str = API_PREFIX


@dataclass(frozen=True, slots=True)
class RunningSlice:
    """Which running apps a poll asks for, instead of all of them.

    Every pending app is listed (``PENDING_APP_STATES``); RUNNING apps only when their
    ``startedTime`` falls in one of ``started`` (inclusive ``(begin, end)``; ``None``: open).
    ``settled``: also the final apps whose ``finishedTime`` is in this inclusive range.
    """

    started: tuple[tuple[int | None, int | None], ...]
    settled: tuple[int, int] | None = None


# --- helpers (pure) ---------------------------------------------------------------------------

# YARN's ids, wherever they appear in a path: attempt and container ids carry the app's
# cluster timestamp and sequence number, so each would be a new label set per application.
_YARN_IDS = (
    (re.compile(r"appattempt_\d+_\d+_\d+"), "{attempt_id}"),
    (re.compile(r"container_(?:e\d+_)?\d+_\d+_\d+_\d+"), "{container_id}"),
    (re.compile(r"application_\d+_\d+"), "{app_id}"),
)
# The segment after each of these collections names one of its members, whatever it looks
# like (an id the RM would refuse is still a label of its own): the literals kept as they are.
_MEMBER_OF = {
    "apps": "{app_id}",
    "appattempts": "{attempt_id}",
    "containers": "{container_id}",
    "nodes": "{node_id}",
}
_LITERAL_MEMBERS = frozenset({"new-application"})


async def _no_nodes() -> tuple[NodeState, ...]:
    return ()


def endpoint_template(path: str) -> str:
    """``/apps/application_1_0001/state`` -> ``/apps/{app_id}/state``: a bounded metric label.

    Application, attempt and container ids become ``{app_id}``, ``{attempt_id}`` and
    ``{container_id}``, and so does any segment naming a member of ``/apps``, ``/appattempts``,
    ``/containers`` or ``/nodes``: the label set does not grow with the apps the RM runs."""
    path = path.split("?", 1)[0]
    for pattern, name in _YARN_IDS:
        path = pattern.sub(name, path)
    segments = path.split("/")
    for index in range(1, len(segments)):
        member = _MEMBER_OF.get(segments[index - 1])
        if member and segments[index] and segments[index] not in _LITERAL_MEMBERS:
            segments[index] = member
    return "/".join(segments)


def _base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an http(s) RM address: {url!r}")
    return url.rstrip("/")


def _seg(value: str) -> str:
    """One path segment: an app id must not be able to change the path."""
    return quote(value, safe="")


def _move_hint_first(order: list[int], hint: int | None) -> None:
    if hint is not None and hint in order:
        order.remove(hint)
        order.insert(0, hint)


def _is_standby(resp: httpx.Response) -> bool:
    """``RMWebAppFilter``: a 3xx (``Location`` or ``Refresh``) or a 200 "no active RM" text."""
    if 300 <= resp.status_code < 400:
        return True
    head = resp.content[:64].lstrip()
    return resp.status_code == httpx.codes.OK and head.startswith(_NO_ACTIVE_RM)


def _info_is_standby(resp: httpx.Response) -> bool:
    """``/info`` is not redirected by a standby; its ``haState`` says so instead."""
    try:
        ha_state = resp.json()["clusterInfo"]["haState"]
    except (ValueError, KeyError, TypeError):
        return False
    return bool(ha_state == "STANDBY")


# Whether an RM is the active one: a standby answers ``/info`` itself, with ``haState``.
_ACTIVE_PROBE = _Send("GET", "/info", {}, None, None, None, _info_is_standby)


def _describe(exc: httpx.HTTPError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _decode(resp: httpx.Response, model: type[_M]) -> _M:
    """JSON body -> wire model; a non-JSON 2xx body is a protocol error."""
    with _gc_paused(len(resp.content) > _PAUSE_GC_BYTES):
        try:
            # orjson: the same values as ``json.loads``, several times faster on large bodies.
            data = orjson.loads(resp.content)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            snippet = resp.text[:200]
            raise RMProtocolError(
                f"RM answered {resp.status_code} with non-JSON: {snippet!r}"
            ) from exc
        return wire.parse(model, data)


@contextmanager
def _gc_paused(pause: bool) -> Iterator[None]:
    """Pause the cyclic collector while ``pause``: what is built here is acyclic and is kept or
    freed by reference counting, so collections scanning it would find nothing."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _rm_message(resp: httpx.Response) -> str:
    """The RM's own words: ``RemoteException.message`` if JSON, else the plain-text body."""
    text = resp.text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text or resp.reason_phrase
    remote = data.get("RemoteException") if isinstance(data, dict) else None
    if isinstance(remote, dict):
        message = remote.get("message") or remote.get("exception")
        if isinstance(message, str) and message:
            return message
    return text or resp.reason_phrase


def _rejection(resp: httpx.Response) -> RMRejected:
    message = _rm_message(resp)
    if resp.status_code == httpx.codes.NOT_FOUND:
        return RMNotFound(resp.status_code, message)
    return RMRejected(resp.status_code, message)


def _app_params(
    *,
    states: Sequence[str] | None,
    finished_time_begin_ms: int | None,
    finished_time_end_ms: int | None,
    queue: str | None,
    user: str | None,
    tags: Sequence[str] | None,
    limit: int | None,
    started_time_begin_ms: int | None = None,
    started_time_end_ms: int | None = None,
) -> dict[str, str]:
    """Query parameters of ``GET /apps`` (section 3.4); ``None`` means "do not filter"."""
    params: dict[str, str] = {}
    if states:
        params["states"] = ",".join(states)
    if started_time_begin_ms is not None:
        params["startedTimeBegin"] = str(started_time_begin_ms)
    if started_time_end_ms is not None:
        params["startedTimeEnd"] = str(started_time_end_ms)
    if finished_time_begin_ms is not None:
        params["finishedTimeBegin"] = str(finished_time_begin_ms)
    if finished_time_end_ms is not None:
        params["finishedTimeEnd"] = str(finished_time_end_ms)
    if queue is not None:
        params["queue"] = queue
    if user is not None:
        params["user"] = user
    if tags:
        params["applicationTags"] = ",".join(tags)
    if limit is not None:
        params["limit"] = str(limit)
    return params


def format_expiry(expiry_ms: int) -> str:
    """``Times.ISO8601_DATE_FORMAT`` in UTC with a colon-less offset: ``...T12:00:00.000+0000``."""
    instant = datetime.fromtimestamp(expiry_ms // 1000, tz=UTC)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{expiry_ms % 1000:03d}+0000"
