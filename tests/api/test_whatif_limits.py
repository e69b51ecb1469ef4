"""What-if runs are bounded: past a few queued or running, ``POST /whatif`` answers 429 with
``Retry-After`` instead of queueing without end, and no replay runs for a run the API no longer
shows."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.observability import whatif, whatif_runs
from app.observability.whatif_runs import KEEP, WhatIfRuns
from app.settings import Settings
from tests.conftest import Db


class FakeReplay:
    """Stands for the simulator: records which runs replayed; blocks while ``gate`` is closed."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.replayed: list[whatif.WhatIfSpec] = []
        self.lock = threading.Lock()

    def load_history(self, session: Any, cluster: str, spec: whatif.WhatIfSpec) -> Any:
        return type("History", (), {"jobs": []})()

    def run(self, history: Any, spec: whatif.WhatIfSpec, progress: Any) -> Any:
        assert self.gate.wait(timeout=30), "the test never opened the gate"
        with self.lock:
            self.replayed.append(spec)
        return type("Outcome", (), {"to_dict": lambda self: {}})()


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeReplay]:
    fake = FakeReplay()
    monkeypatch.setattr(whatif, "load_history", fake.load_history)
    monkeypatch.setattr(whatif, "run", fake.run)
    monkeypatch.setattr(whatif, "html_report", lambda outcome, plots: "<html></html>")
    yield fake
    fake.gate.set()  # never leave the worker thread blocked


@pytest.fixture
async def client(db: Db, replay: FakeReplay) -> AsyncIterator[httpx.AsyncClient]:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    settings = Settings(database_url=db.url, cluster_name="test")
    api: FastAPI = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(refuse))
    async with api.router.lifespan_context(api):
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as c:
            yield c


def _wait(check: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _no_db() -> contextlib.nullcontext[None]:
    return contextlib.nullcontext()  # the fake replay reads no database


def _spec(n: int) -> whatif.WhatIfSpec:
    return whatif.WhatIfSpec(policy="ltrf", until_ms=1_700_000_000_000 + n)


async def test_post_whatif_answers_429_once_the_queue_is_full(
    client: httpx.AsyncClient, replay: FakeReplay
) -> None:
    answers = [await client.post("/whatif", json={"policy": "ltrf"}) for _ in range(KEEP + 10)]
    accepted = [r.json()["id"] for r in answers if r.status_code == 202]
    refused = [r for r in answers if r.status_code == 429]
    assert len(accepted) + len(refused) == len(answers)
    assert 1 <= len(accepted) < KEEP and refused, [r.status_code for r in answers]
    for r in refused:
        assert set(r.json()) == {"detail"}  # the API's one error shape
        assert r.json()["detail"].startswith("whatif: ")
        assert "queued or running" in r.json()["detail"]
        assert int(r.headers["Retry-After"]) > 0
    # Every accepted run stays visible while it waits.
    for run_id in accepted:
        assert (await client.get(f"/whatif/{run_id}")).status_code == 200
    replay.gate.set()
    _wait(lambda: len(replay.replayed) == len(accepted))
    for run_id in accepted:
        body = (await client.get(f"/whatif/{run_id}")).json()
        assert body["status"] == "done"
    # Room again once they are done.
    assert (await client.post("/whatif", json={"policy": "ltrf"})).status_code == 202


def test_only_runs_still_kept_are_replayed(replay: FakeReplay) -> None:
    runs = WhatIfRuns(_no_db, "test", plots=False)  # type: ignore[arg-type]
    try:
        accepted: list[whatif_runs.WhatIfRun] = []
        refused = 0
        for n in range(2 * KEEP + 5):
            try:
                accepted.append(runs.start(_spec(n)))
            except whatif_runs.WhatIfBusy:
                refused += 1
        replay.gate.set()
        _wait(lambda: all(r.status == "done" for r in accepted))
        runs._pool.submit(lambda: None).result(timeout=10)  # the worker's queue is drained
        # Each replay was of an accepted run the API still shows; none of a dropped one.
        assert [r for r in accepted if runs.get(r.id) is not r] == []
        assert sorted(s.until_ms or 0 for s in replay.replayed) == [
            r.spec.until_ms for r in accepted
        ]
        assert refused > 0
    finally:
        runs.close()


def test_finished_runs_make_room_and_unfinished_ones_are_never_dropped(
    replay: FakeReplay,
) -> None:
    runs = WhatIfRuns(_no_db, "test", plots=False)  # type: ignore[arg-type]
    try:
        replay.gate.set()
        done: list[whatif_runs.WhatIfRun] = []
        for n in range(KEEP):
            done.append(runs.start(_spec(n)))
            _wait(lambda: done[-1].status == "done")
        replay.gate.clear()
        waiting: list[whatif_runs.WhatIfRun] = []
        with pytest.raises(whatif_runs.WhatIfBusy):
            while True:
                waiting.append(runs.start(_spec(KEEP + len(waiting))))
        kept = runs.recent()
        assert len(kept) == KEEP
        # The newest runs are the unfinished ones, all kept; the oldest finished ones made room.
        assert kept[: len(waiting)] == list(reversed(waiting))
        assert kept[len(waiting) :] == list(reversed(done))[: KEEP - len(waiting)]
        replay.gate.set()
        _wait(lambda: all(r.status == "done" for r in waiting))
        # A dropped run, or any after close(), is not replayed.
        replay.gate.clear()
        first = runs.start(_spec(1000))
        _wait(lambda: first.status == "running")
        queued = runs.start(_spec(1001))
        runs.close()
        replay.gate.set()
        _wait(lambda: first.status == "done")
        time.sleep(0.05)
        assert queued.status == "queued"
        assert [s.until_ms for s in replay.replayed][-1] == first.spec.until_ms
    finally:
        runs.close()
