"""Async client of the MapReduce JobHistory server's REST API (``docs/yarn.md`` section 7,
Hadoop's ``HistoryServerRest.md``): a finished job, its tasks and its counters.

The only module that speaks HTTP to the JobHistory server (JHS). Same edge rules as the RM client
(``app.yarn.client``): the JHS is an intra-cluster peer (no proxy from the environment), the same
Kerberos and TLS options apply, httpx errors become ``app.yarn.errors`` here. There is no HA and
no retry loop: the collector (``app.services.history``) asks again on its next tick.

Wire quirks seen on a real 3.5.0 JHS (``tests/fixtures/jhs``): a one-element list arrives as a
bare object (``jobs.job``, a counter group's ``counter``), as on the RM.
"""

from __future__ import annotations

import ssl
from typing import Annotated, Any

import httpx
import orjson
from pydantic import BeforeValidator, Field

from app.domain.history import Counter, MapReduceJob, TaskRun, job_id_of
from app.redact import redact_url
from app.yarn.errors import RMNotFound, RMProtocolError, RMRejected, RMUnavailable
from app.yarn.mapping import instant
from app.yarn.pooled import PooledClient
from app.yarn.wire import _as_list, _Str, _Wire, parse

PREFIX = "/ws/v1/history"


class _JobWire(_Wire):
    id: str
    name: _Str = ""
    queue: _Str = ""
    user: _Str = ""
    state: _Str = ""
    submitTime: int = 0
    startTime: int = 0
    finishTime: int = 0
    mapsTotal: int = 0
    mapsCompleted: int = 0
    reducesTotal: int = 0
    reducesCompleted: int = 0
    avgMapTime: int = 0
    avgShuffleTime: int = 0
    avgMergeTime: int = 0
    avgReduceTime: int = 0


class _JobEnvelope(_Wire):
    job: _JobWire


class _TaskWire(_Wire):
    id: str
    type: str
    state: _Str = ""
    startTime: int = 0
    finishTime: int = 0
    elapsedTime: int = 0


class _TaskList(_Wire):
    task: Annotated[list[_TaskWire], BeforeValidator(_as_list)] = Field(default_factory=list)


class _TasksEnvelope(_Wire):
    tasks: Annotated[_TaskList | None, BeforeValidator(lambda v: v or None)] = None


class _CounterWire(_Wire):
    name: str
    totalCounterValue: int = 0
    mapCounterValue: int = 0
    reduceCounterValue: int = 0


class _GroupWire(_Wire):
    counterGroupName: str
    counter: Annotated[list[_CounterWire], BeforeValidator(_as_list)] = Field(default_factory=list)


class _JobCounters(_Wire):
    counterGroup: Annotated[list[_GroupWire], BeforeValidator(_as_list)] = Field(
        default_factory=list
    )


class _CountersEnvelope(_Wire):
    jobCounters: _JobCounters


class JobHistoryClient(PooledClient):
    """Reads finished MapReduce jobs from one JobHistory server (``http://jhs:19888``)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        auth: httpx.Auth | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.url,
            transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
            limits=httpx.Limits(max_connections=4, max_keepalive_connections=2),
            follow_redirects=False,
            trust_env=False,
            headers={"Accept": "application/json"},
            auth=auth,
            verify=verify,
        )

    async def job_of_app(self, app_id: str) -> MapReduceJob | None:
        """The finished job of a MapReduce application with its tasks and counters; None when the
        JHS does not know it (not moved to the done directory yet, or not a MapReduce job)."""
        job_id = job_id_of(app_id)
        if job_id is None:
            return None
        try:
            job = (await self._get(f"/mapreduce/jobs/{job_id}", _JobEnvelope)).job
        except RMNotFound:
            return None
        tasks = await self._get(f"/mapreduce/jobs/{job_id}/tasks", _TasksEnvelope)
        counters = await self._get(f"/mapreduce/jobs/{job_id}/counters", _CountersEnvelope)
        return MapReduceJob(
            job_id=job.id,
            name=job.name,
            queue=job.queue,
            user=job.user,
            state=job.state,
            submit_ms=instant(job.submitTime),
            start_ms=instant(job.startTime),
            finish_ms=instant(job.finishTime),
            maps_total=job.mapsTotal,
            maps_completed=job.mapsCompleted,
            reduces_total=job.reducesTotal,
            reduces_completed=job.reducesCompleted,
            avg_map_ms=job.avgMapTime,
            avg_shuffle_ms=job.avgShuffleTime,
            avg_merge_ms=job.avgMergeTime,
            avg_reduce_ms=job.avgReduceTime,
            counters={
                g.counterGroupName: {
                    c.name: Counter(c.totalCounterValue, c.mapCounterValue, c.reduceCounterValue)
                    for c in g.counter
                }
                for g in counters.jobCounters.counterGroup
            },
            tasks=tuple(
                TaskRun(
                    task_id=t.id,
                    kind=t.type.upper(),
                    state=t.state,
                    start_ms=instant(t.startTime),
                    finish_ms=instant(t.finishTime),
                    elapsed_ms=max(0, t.elapsedTime),
                )
                for t in (tasks.tasks.task if tasks.tasks is not None else [])
            ),
        )

    async def _get(self, path: str, model: type[Any]) -> Any:
        where = f"JobHistory server {redact_url(self.url)}"
        try:
            resp = await self._http.get(PREFIX + path)
        except httpx.HTTPError as exc:
            raise RMUnavailable(f"{where}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code == httpx.codes.NOT_FOUND:
            raise RMNotFound(resp.status_code, f"{where} does not know {path}")
        if resp.status_code >= 500:
            raise RMUnavailable(f"{where} answered {resp.status_code} to GET {path}")
        if resp.status_code >= 300:
            raise RMRejected(resp.status_code, f"{where} refused GET {path}")
        try:
            data = orjson.loads(resp.content)
        except orjson.JSONDecodeError as exc:
            raise RMProtocolError(f"{where} answered GET {path} with non-JSON") from exc
        return parse(model, data)
