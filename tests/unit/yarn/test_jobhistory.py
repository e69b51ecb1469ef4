"""The JobHistory client on recorded 3.5.0 answers (``tests/fixtures/jhs``): a job with its tasks
and counters, the one-element-list quirk, 404 as "not known yet", and errors mapped at the edge."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from app.domain.history import job_id_of
from app.yarn.errors import RMProtocolError, RMUnavailable
from app.yarn.jobhistory import JobHistoryClient

JHS = Path(__file__).resolve().parents[2] / "fixtures" / "jhs"
WORDCOUNT = "application_1795503910605_0002"
SLEEP = "application_1795503910605_0001"
FILES = {
    "job_1795503910605_0002": "wordcount",
    "job_1795503910605_0001": "sleep",
}


def recorded(request: httpx.Request) -> httpx.Response:
    """Serve the recorded JHS answers by path."""
    parts = request.url.path.removeprefix("/ws/v1/history/mapreduce/jobs/").split("/")
    name = FILES.get(parts[0])
    if name is None:
        return httpx.Response(404, content=(JHS / "job_not_found_404.json").read_bytes())
    kind = parts[1] if len(parts) > 1 else "job"
    return httpx.Response(200, content=(JHS / f"{kind}_{name}.json").read_bytes())


def client(handler: object = recorded) -> JobHistoryClient:
    return JobHistoryClient("http://jhs:19888", transport=httpx.MockTransport(handler))  # type: ignore[arg-type]


async def test_a_finished_wordcount_job_with_tasks_and_counters() -> None:
    async with client() as jhs:
        job = await jhs.job_of_app(WORDCOUNT)
    assert job is not None
    assert (job.job_id, job.name, job.queue, job.state) == (
        "job_1795503910605_0002",
        "word count",
        "root.default",
        "SUCCEEDED",
    )
    assert (job.maps_total, job.reduces_total, job.avg_shuffle_ms) == (3, 1, 1989)
    assert sorted(t.kind for t in job.tasks) == ["MAP", "MAP", "MAP", "REDUCE"]
    # the FileInputFormatCounter group holds one counter, sent as a bare object
    bytes_read = job.counter(
        "org.apache.hadoop.mapreduce.lib.input.FileInputFormatCounter", "BYTES_READ"
    )
    assert bytes_read is not None and bytes_read.total == 3015609
    cpu = job.counter("org.apache.hadoop.mapreduce.TaskCounter", "CPU_MILLISECONDS")
    assert cpu is not None and (cpu.total, cpu.map, cpu.reduce) == (2060, 1770, 290)


async def test_unknown_job_and_non_mapreduce_ids_are_none() -> None:
    async with client() as jhs:
        assert await jhs.job_of_app("application_1795503910605_0099") is None
        assert await jhs.job_of_app("not-an-app") is None
    assert job_id_of("application_17_0003") == "job_17_0003"


async def test_server_errors_and_garbage_map_to_yarn_errors() -> None:
    async with client(lambda r: httpx.Response(503, text="busy")) as jhs:
        with pytest.raises(RMUnavailable, match="503"):
            await jhs.job_of_app(SLEEP)

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with client(refuse) as jhs:
        with pytest.raises(RMUnavailable, match="ConnectError"):
            await jhs.job_of_app(SLEEP)
    async with client(lambda r: httpx.Response(200, text="<html>")) as jhs:
        with pytest.raises(RMProtocolError, match="non-JSON"):
            await jhs.job_of_app(SLEEP)
    async with client(lambda r: httpx.Response(200, json={"job": {"name": "x"}})) as jhs:
        with pytest.raises(RMProtocolError, match=r"job\.id"):
            await jhs.job_of_app(SLEEP)
