"""``RMClient`` against ``httpx.MockTransport``: HA, retries, error mapping, writes (docs/yarn.md
s.2-5).

Time is fake: the injected ``sleep`` records the delays instead of waiting.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest

from app.domain.model import Resources
from app.yarn import RMClient, SchedConfUpdate
from app.yarn.errors import RMNotFound, RMProtocolError, RMRejected, RMUnavailable
from tests.unit.yarn.samples import (
    CLUSTER_INFO,
    CLUSTER_METRICS,
    app_json,
    finished_app_json,
    leaf,
    node_json,
    recorded,
    scheduler_json,
)

RM1 = "http://rm1:8088"
RM2 = "http://rm2:8088"
RM3 = "http://rm3:8088"
Handler = Callable[[httpx.Request], httpx.Response]


class FakeSleep:
    """Records requested delays; never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


class Recorder:
    """A MockTransport handler that logs every request and delegates to ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.handler(request)

    @property
    def hosts(self) -> list[str]:
        return [r.url.host for r in self.requests]

    @property
    def calls(self) -> list[str]:
        """``host METHOD last-path-segment``, e.g. ``rm2 GET info``."""
        return [f"{r.url.host} {r.method} {r.url.path.rsplit('/', 1)[-1]}" for r in self.requests]


def make_client(
    handler: Handler, urls: tuple[str, ...] = (RM1,), **kwargs: Any
) -> tuple[RMClient, Recorder, FakeSleep]:
    recorder = Recorder(handler)
    sleep = FakeSleep()
    client = RMClient(urls, transport=httpx.MockTransport(recorder), sleep=sleep, **kwargs)
    return client, recorder, sleep


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


def standby_redirect(to: str) -> httpx.Response:
    # RMWebAppFilter: 307, Location = active RM + same URI, plain-text body.
    return httpx.Response(
        307,
        headers={"Location": to + "/ws/v1/cluster/metrics"},
        text="This is standby RM. The redirect url is: /ws/v1/cluster/metrics\n",
    )


def remote_exception(status: int, exception: str, message: str) -> httpx.Response:
    body = {
        "RemoteException": {
            "exception": exception,
            "message": message,
            "javaClassName": f"org.apache.hadoop.yarn.webapp.{exception}",
        }
    }
    return httpx.Response(status, json=body)


# --- HA ----------------------------------------------------------------------------------------


async def test_failover_to_second_rm_when_first_refuses_and_remember_it() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "rm1":
            return refused(request)
        return httpx.Response(200, json=CLUSTER_METRICS)

    client, rec, sleep = make_client(handler, (RM1, RM2))
    async with client:
        metrics = await client.metrics()
        assert metrics.total == Resources(vcores=16, memory_mb=8192)
        assert client.active_url == RM2
        await client.metrics()
    # rm2 is confirmed active once (``/info``), then trusted for reads
    assert rec.calls == ["rm1 GET info", "rm2 GET info", "rm2 GET metrics", "rm2 GET metrics"]
    assert sleep.delays == []


async def test_standby_redirect_is_not_followed_but_remembered() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "rm1":
            return standby_redirect(RM2)
        return httpx.Response(200, json=CLUSTER_METRICS)

    client, rec, _ = make_client(handler, (RM1, RM2))
    async with client:
        await client.metrics()
        await client.metrics()
    assert rec.calls == ["rm1 GET info", "rm2 GET info", "rm2 GET metrics", "rm2 GET metrics"]
    assert client.active_url == RM2


async def test_standby_location_jumps_to_the_named_rm() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "rm1":
            return standby_redirect(RM3)
        if request.url.host == "rm3":
            return httpx.Response(200, json=CLUSTER_METRICS)
        raise AssertionError("rm2 must not be asked: rm1 said rm3 is active")

    client, rec, _ = make_client(handler, (RM1, RM2, RM3))
    async with client:
        await client.metrics()
    assert rec.calls == ["rm1 GET info", "rm3 GET info", "rm3 GET metrics"]
    assert client.active_url == RM3


async def test_info_on_standby_reports_standby_and_client_moves_on() -> None:
    standby = json.loads(json.dumps(CLUSTER_INFO))
    standby["clusterInfo"]["haState"] = "STANDBY"

    def handler(request: httpx.Request) -> httpx.Response:
        body = standby if request.url.host == "rm1" else CLUSTER_INFO
        return httpx.Response(200, json=body)

    client, rec, _ = make_client(handler, (RM1, RM2))
    async with client:
        info = await client.cluster_info()
    assert info.ha_state == "ACTIVE"
    assert rec.hosts == ["rm1", "rm2"]
    assert client.active_url == RM2


def _non_redirecting(active: list[str]) -> Handler:
    """RMs that each answer for themselves (a ``MiniYARNCluster``): only ``/info`` tells which
    is active (``active[-1]``); a standby even says a scheduler-configuration PUT was applied."""

    def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if request.url.path.endswith("/info"):
            body = json.loads(json.dumps(CLUSTER_INFO))
            body["clusterInfo"]["haState"] = "ACTIVE" if host == active[-1] else "STANDBY"
            return httpx.Response(200, json=body)
        if request.method == "PUT":
            return httpx.Response(200, text="Configuration change successfully applied.")
        return httpx.Response(200, json=CLUSTER_METRICS)

    return handler


async def test_a_write_never_goes_to_a_standby_that_does_not_redirect() -> None:
    active = ["rm2"]
    client, rec, _ = make_client(_non_redirecting(active), (RM1, RM2))
    update = SchedConfUpdate(update_queues={"root.a": {"capacity": "60"}})
    async with client:
        await client.update_scheduler_conf(update)
        assert client.active_url == RM2
        # rm2 fails over to rm1 without redirecting: the next write asks again and follows
        active.append("rm1")
        await client.update_scheduler_conf(update)
        assert client.active_url == RM1
    puts = [c for c in rec.calls if " PUT " in c]
    assert puts == ["rm2 PUT scheduler-conf", "rm1 PUT scheduler-conf"]
    assert rec.calls == [
        "rm1 GET info", "rm2 GET info", "rm2 PUT scheduler-conf",
        "rm2 GET info", "rm1 GET info", "rm1 PUT scheduler-conf",
    ]  # fmt: skip
    assert client.failovers == 1


async def test_reads_ask_info_again_only_after_the_confirmed_rm_failed() -> None:
    down: set[str] = set()
    healthy = _non_redirecting(["rm1"])

    def handler(request: httpx.Request) -> httpx.Response:
        return refused(request) if request.url.host in down else healthy(request)

    client, rec, _ = make_client(handler, (RM1, RM2))
    async with client:
        await client.metrics()
        await client.metrics()
        down.add("rm1")
        with pytest.raises(RMUnavailable):
            await client.metrics()
        down.clear()
        await client.metrics()
    assert rec.calls == [
        "rm1 GET info", "rm1 GET metrics", "rm1 GET metrics",
        "rm1 GET metrics", "rm2 GET info", "rm1 GET info", "rm2 GET info", "rm1 GET info",
        "rm2 GET info", "rm1 GET info", "rm1 GET metrics",
    ]  # fmt: skip


async def test_only_standbys_without_active_is_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "rm1":
            return httpx.Response(
                307, headers={"Refresh": "5;url=http://rm1:8088/ws/v1/cluster/apps?next=1"}
            )
        return httpx.Response(200, text="There is no active RM right now.\nHA Zookeeper ...")

    client, rec, sleep = make_client(handler, (RM1, RM2), retries=1)
    async with client:
        with pytest.raises(RMUnavailable):
            await client.apps()
    assert rec.hosts == ["rm1", "rm2", "rm1", "rm2"]
    assert sleep.delays == [0.5]


async def test_all_refused_is_unavailable_after_backoff_rounds() -> None:
    client, rec, sleep = make_client(refused, (RM1, RM2))
    async with client:
        with pytest.raises(RMUnavailable, match="Connection refused"):
            await client.metrics()
    # retries=2 -> 3 rounds over both RMs, backoff 0.5 * 2**k between rounds.
    assert rec.hosts == ["rm1", "rm2"] * 3
    assert sleep.delays == [0.5, 1.0]


# --- retries and error mapping ----------------------------------------------------------------


async def test_retry_on_503_then_success_with_exponential_backoff() -> None:
    answers = iter([503, 503, 200])

    def handler(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        if status == 503:
            return remote_exception(503, "WebApplicationException", "busy")
        return httpx.Response(200, json=CLUSTER_METRICS)

    client, rec, sleep = make_client(handler, backoff_s=0.25)
    async with client:
        await client.metrics()
    assert len(rec.requests) == 3
    assert sleep.delays == [0.25, 0.5]


async def test_timeouts_are_temporary() -> None:
    answers = iter(["timeout", "ok"])

    def handler(request: httpx.Request) -> httpx.Response:
        if next(answers) == "timeout":
            raise httpx.ReadTimeout("timed out", request=request)
        return httpx.Response(200, json=CLUSTER_METRICS)

    client, rec, sleep = make_client(handler)
    async with client:
        await client.metrics()
    assert len(rec.requests) == 2
    assert sleep.delays == [0.5]


async def test_no_retry_on_400() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return remote_exception(400, "BadRequestException", "Invalid application-state foo")

    client, rec, sleep = make_client(handler, (RM1, RM2))
    async with client:
        with pytest.raises(RMRejected) as caught:
            await client.apps(states=["foo"])
    assert (caught.value.status, caught.value.message) == (400, "Invalid application-state foo")
    assert rec.hosts == ["rm1"]
    assert sleep.delays == []


async def test_404_is_not_found_with_the_rm_message() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return remote_exception(
            404, "NotFoundException", "app with id: application_1_0009 not found"
        )

    client, _, _ = make_client(handler)
    async with client:
        with pytest.raises(RMNotFound) as caught:
            await client.app("application_1_0009")
    assert caught.value.status == 404
    assert caught.value.message == "app with id: application_1_0009 not found"


async def test_plain_text_400_is_rejected_with_that_text() -> None:
    text = (
        "Failed to re-init queues : Illegal capacity sum of 0.9 for children of queue root "
        "for label=. It should be either 0 or 1.0"
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, text=text, headers={"Content-Type": "application/json"})

    client, rec, _ = make_client(handler)
    async with client:
        with pytest.raises(RMRejected) as caught:
            await client.update_scheduler_conf(SchedConfUpdate(update_queues={"root.a": {}}))
    assert caught.value.message == text
    assert len(rec.requests) == 1


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="<html><body>Cluster</body></html>"),
        httpx.Response(200, json={"unexpected": True}),
        httpx.Response(200, json={"clusterMetrics": {"appsSubmitted": "many"}}),
    ],
)
async def test_garbage_200_is_a_protocol_error(response: httpx.Response) -> None:
    client, rec, sleep = make_client(lambda request: response)
    async with client:
        with pytest.raises(RMProtocolError):
            await client.metrics()
    assert len(rec.requests) == 1
    assert sleep.delays == []


# --- writes ------------------------------------------------------------------------------------


async def test_every_write_carries_user_name_and_reads_do_not() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/new-application"):
            body = {
                "application-id": "application_1_0001",
                "maximum-resource-capability": {"memory": 8192, "vCores": 4},
            }
            return httpx.Response(200, json=body)
        if path.endswith("/state"):
            return httpx.Response(200, json={"state": "KILLED"})
        if path.endswith("/apps") and request.method == "GET":
            return httpx.Response(200, json={"apps": {}})
        if path.endswith("/apps"):
            return httpx.Response(202)
        if path.endswith("/scheduler-conf"):
            return httpx.Response(200, text="Configuration change successfully applied.")
        return httpx.Response(200, json={})

    client, rec, _ = make_client(handler, user="svc")
    update = SchedConfUpdate(update_queues={"root.a": {"capacity": "50"}})
    async with client:
        new = await client.new_application()
        await client.submit_application({"application-id": new.app_id})
        await client.kill_application(new.app_id)
        await client.set_application_timeout(new.app_id, 1_800_000_000_000)
        await client.validate_scheduler_conf(update)
        await client.update_scheduler_conf(update)
        await client.apps()
    writes, read = rec.requests[:-1], rec.requests[-1]
    assert [r.method for r in writes] == ["POST", "POST", "PUT", "PUT", "POST", "PUT"]
    assert all(r.url.params.get("user.name") == "svc" for r in writes)
    assert "user.name" not in read.url.params
    assert new.max_resources == Resources(vcores=4, memory_mb=8192)


async def test_kill_loops_on_202_until_200() -> None:
    answers = iter([(202, "ACCEPTED"), (202, "KILLING"), (200, "KILLED")])
    bodies: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        status, state = next(answers)
        return httpx.Response(status, json={"state": state})

    client, rec, sleep = make_client(handler)
    async with client:
        final = await client.kill_application("application_1_0001", diagnostics="over deadline")
    assert final == "KILLED"
    assert bodies == [{"state": "KILLED", "diagnostics": "over deadline"}] * 3
    assert rec.requests[0].url.path == "/ws/v1/cluster/apps/application_1_0001/state"
    assert sleep.delays == [0.5, 0.5]


async def test_kill_gives_up_after_wait_and_returns_the_last_state() -> None:
    client, rec, sleep = make_client(lambda r: httpx.Response(202, json={"state": "ACCEPTED"}))
    async with client:
        assert await client.kill_application("application_1_0001", wait_s=1.0) == "ACCEPTED"
    # 1.0 s at one poll per 0.5 s: the first PUT plus two more.
    assert len(rec.requests) == 3
    assert sleep.delays == [0.5, 0.5]


async def test_submit_fails_over_only_when_the_request_was_not_sent() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "rm1":
            return refused(request)
        return httpx.Response(202, headers={"Location": RM2 + "/ws/v1/cluster/apps/a"})

    client, rec, _ = make_client(handler, (RM1, RM2))
    async with client:
        await client.submit_application({"application-id": "application_1_0001"})
    assert rec.calls == ["rm1 GET info", "rm2 GET info", "rm2 POST apps"]
    assert json.loads(rec.requests[2].content) == {"application-id": "application_1_0001"}


@pytest.mark.parametrize(
    "failure",
    [
        lambda r: (_ for _ in ()).throw(httpx.ReadTimeout("timed out", request=r)),
        lambda r: httpx.Response(503, text="busy"),
    ],
)
async def test_submit_is_not_retried_once_sent(failure: Handler) -> None:
    client, rec, sleep = make_client(failure, (RM1, RM2))
    async with client:
        with pytest.raises(RMUnavailable, match="may or may not have been applied"):
            await client.submit_application({"application-id": "application_1_0001"})
    assert rec.hosts == ["rm1"]
    assert sleep.delays == []


async def test_set_timeout_body_uses_iso8601_with_colonless_offset() -> None:
    client, rec, _ = make_client(lambda r: httpx.Response(200, json={"timeout": {}}))
    expiry = datetime(2026, 7, 1, 12, 0, 0, tzinfo=UTC)
    expiry_ms = int(expiry.timestamp()) * 1000 + 123
    async with client:
        await client.set_application_timeout("application_1_0001", expiry_ms)
    request = rec.requests[0]
    assert request.method == "PUT"
    assert request.url.path == "/ws/v1/cluster/apps/application_1_0001/timeout"
    assert json.loads(request.content) == {
        "timeout": {"type": "LIFETIME", "expiryTime": "2026-07-01T12:00:00.123+0000"}
    }


async def test_move_application_puts_the_queue_as_the_user_and_returns_the_rms() -> None:
    # Hadoop 3.5.0 answers the move with the full path of the queue the app is now in
    client, rec, _ = make_client(lambda r: httpx.Response(200, json={"queue": "root.fast"}))
    async with client:
        assert await client.move_application("application_1_0001", "fast") == "root.fast"
    request = rec.requests[0]
    assert (request.method, request.url.path) == (
        "PUT",
        "/ws/v1/cluster/apps/application_1_0001/queue",
    )
    assert json.loads(request.content) == {"queue": "fast"}
    assert "user.name" in request.url.params


async def test_update_scheduler_conf_sends_xml_and_returns_rm_text() -> None:
    client, rec, _ = make_client(
        lambda r: httpx.Response(200, text="Configuration change successfully applied.\n")
    )
    update = SchedConfUpdate(update_queues={"root.a": {"capacity": "40"}})
    async with client:
        text = await client.update_scheduler_conf(update)
    assert text == "Configuration change successfully applied."
    request = rec.requests[0]
    assert request.headers["Content-Type"] == "application/xml"
    assert ElementTree.fromstring(request.content).findtext("update-queue/queue-name") == "root.a"


async def test_validate_raises_rejected_with_rm_text() -> None:
    text = "CapacityScheduler configuration validation failed:java.io.IOException: bad"
    client, rec, _ = make_client(lambda r: httpx.Response(400, text=text))
    async with client:
        with pytest.raises(RMRejected) as caught:
            await client.validate_scheduler_conf(SchedConfUpdate(remove_queues=["root.a"]))
    assert caught.value.message == text
    assert rec.requests[0].url.path == "/ws/v1/cluster/scheduler-conf/validate"


async def test_scheduler_conf_read_and_version() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/version"):
            return httpx.Response(200, json={"versionID": "3"})
        props = [{"name": "yarn.scheduler.capacity.root.queues", "value": "a,b"}]
        return httpx.Response(200, json={"property": props})

    client, _, _ = make_client(handler)
    async with client:
        assert await client.scheduler_conf() == {"yarn.scheduler.capacity.root.queues": "a,b"}
        assert await client.scheduler_conf_version() == 3


# --- reads and snapshot ------------------------------------------------------------------------


async def test_apps_query_parameters() -> None:
    client, rec, _ = make_client(lambda r: httpx.Response(200, json={"apps": None}))
    async with client:
        apps = await client.apps(
            states=["RUNNING", "ACCEPTED"],
            finished_time_begin_ms=10,
            finished_time_end_ms=20,
            queue="root.a",
            user="alice",
            tags=["x", "y"],
            limit=5,
        )
    assert apps == ()
    assert dict(rec.requests[0].url.params) == {
        "states": "RUNNING,ACCEPTED",
        "finishedTimeBegin": "10",
        "finishedTimeEnd": "20",
        "queue": "root.a",
        "user": "alice",
        "applicationTags": "x,y",
        "limit": "5",
    }


async def test_snapshot_composes_every_read() -> None:
    running = app_json()
    done = finished_app_json()
    # The running app finished between the two queries: it must appear once, finished.
    done_too = app_json(state="FINISHED", finishedTime=1476912790000, allocatedMB=-1)

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/ws/v1/cluster")
        states = request.url.params.get("states", "")
        bodies: dict[str, Any] = {
            "/info": CLUSTER_INFO,
            "/metrics": CLUSTER_METRICS,
            "/scheduler": scheduler_json([leaf("a"), leaf("b")]),
            "/nodes": {"nodes": {"node": [node_json()]}},
        }
        if path == "/apps" and "RUNNING" in states:
            return httpx.Response(200, json={"apps": {"app": [running]}})
        if path == "/apps":
            assert request.url.params["finishedTimeBegin"] == "1476912750000"
            return httpx.Response(200, json={"apps": {"app": [done, done_too]}})
        return httpx.Response(200, json=bodies[path])

    client, _, _ = make_client(handler)
    async with client:
        snap = await client.snapshot(1476912800000, finished_since_ms=1476912750000)
    assert snap.taken_ms == 1476912800000
    assert snap.rm_url == RM1
    assert snap.scheduler_type == "capacityScheduler"
    assert [q.path for q in snap.leaf_queues()] == ["root.a", "root.b"]
    by_id = {a.app_id: a for a in snap.apps}
    assert len(snap.apps) == 2
    assert by_id["application_1476912658570_0001"].state == "FINISHED"
    assert [n.node_id for n in snap.nodes] == ["host1:45454"]


async def test_app_id_cannot_escape_its_path_segment() -> None:
    client, rec, _ = make_client(lambda r: httpx.Response(200, json={"app": app_json()}))
    async with client:
        await client.app("../scheduler")
    assert rec.requests[0].url.raw_path.startswith(b"/ws/v1/cluster/apps/..%2Fscheduler")


def test_constructor_refuses_bad_urls() -> None:
    with pytest.raises(ValueError):
        RMClient([])
    with pytest.raises(ValueError):
        RMClient(["rm1:8088"])


async def test_queue_acls_reads_the_scheduler_not_the_mutable_store() -> None:
    body = recorded("scheduler_acls_file_store.json")
    client, rec, _ = make_client(lambda r: httpx.Response(200, json=body))
    async with client:
        acls = await client.queue_acls()
    assert [r.url.path for r in rec.requests] == ["/ws/v1/cluster/scheduler"]
    assert acls is not None
    assert acls["yarn.scheduler.capacity.root.deadline.acl_submit_applications"] == (
        "alice,bob deadliners"
    )
