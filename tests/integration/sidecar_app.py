"""The whole sidecar in the test process (``create_app`` with its lifespan and loops, over HTTP
through ASGI) against the session's RM, for the deadline-job integration tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.db.migrate import upgrade
from app.jobs import rounds
from app.main import create_app
from app.services import admission
from app.settings import Settings
from tests.integration.conftest import YarnCluster


def settings_for(cluster: YarnCluster, tmp_path: Path, name: str, **overrides: Any) -> Settings:
    """A sidecar on a fresh migrated SQLite file: 1 s poll and admission rounds, the cluster's
    distributed-shell harness for the ``sleep`` template; ``overrides`` win."""
    assert cluster.cluster_json is not None
    db_url = f"sqlite:///{tmp_path}/sidecar.db"
    upgrade(db_url)
    values: dict[str, Any] = {
        "rm_urls": (cluster.rm_url,),
        "database_url": db_url,
        "cluster_name": name,
        "mode": "advise",
        "poll_interval_s": 1,
        "admission_interval_s": 1,
        "dshell_harness": cluster.cluster_json,
    }
    values.update(overrides)
    return Settings(**values)


def learn_at_first_final_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    """Learning from a finished app at the first poll that sees it final.

    Production waits out the poller's re-read of a finished app (``FINISHED_GRACE_MS``, 120 s),
    which would make a learning test wait minutes per run; the grace itself is covered by
    ``tests/unit/services/test_admission_recovery.py``."""

    def config(settings: Settings) -> rounds.AdmissionConfig:
        return replace(rounds.config_from_settings(settings), finished_grace_ms=0)

    monkeypatch.setattr(admission, "config_from_settings", config)


@asynccontextmanager
async def sidecar(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """One sidecar process: the app, its lifespan (poller, controller, admission loops)."""
    api = create_app(settings)
    async with api.router.lifespan_context(api):
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://sidecar", timeout=60
        ) as client:
            yield client


async def jobs(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """Every job by name."""
    page = (await client.get("/jobs", params={"limit": 1000})).json()
    return {j["name"]: j for j in page["items"]}


FINAL_JOB_STATES = ("finished", "failed", "killed", "dropped", "cancelled")


async def wait_all_final(
    client: httpx.AsyncClient, names: Collection[str], timeout_s: float
) -> dict[str, dict[str, Any]]:
    """Every job by name once ``names`` have all ended, or as they stand at ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        current = await jobs(client)
        if all(n in current and current[n]["state"] in FINAL_JOB_STATES for n in names):
            return current
        await asyncio.sleep(1)
    return await jobs(client)
