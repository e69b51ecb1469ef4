"""The poller against a real YARN RM: real applications recorded through their whole life,
on both database engines, across a sidecar restart, and an RM that goes away."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import func, select

from app.db.models import Application, Cluster, PollRecord, Queue, QueueSample
from app.observability import whatif
from app.services.poller import Poller
from app.yarn import workload
from app.yarn.client import RMClient
from tests.conftest import Db


def _poller(client: RMClient, db: Db, rm_url: str) -> Poller:
    return Poller(client, db.sessions, cluster_name="it", rm_urls=(rm_url,), interval_s=1)


def _now() -> int:
    return int(time.time() * 1000)


async def test_poller_records_real_apps_from_submission_to_finish(
    rm_url: str, rm_client: RMClient, harness: workload.Harness, db: Db
) -> None:
    tag = f"poller-it-{_now()}"
    specs = [
        workload.AppSpec(queue="root.etl", sleep_s=4, num_containers=2, tags=(tag,)),
        workload.AppSpec(queue="root.adhoc", sleep_s=4, num_containers=1, tags=(tag,)),
    ]
    ids = await workload.submit_all(rm_client, specs, harness)
    poller = _poller(rm_client, db, rm_url)
    await workload.wait_state(rm_client, ids, frozenset({"RUNNING"}), timeout_s=120)
    running = await poller.poll(_now())
    assert running.ok, running.error
    with db.sessions() as s:
        seen = {
            a.app_id: a for a in s.scalars(select(Application).where(Application.app_id.in_(ids)))
        }
        assert set(seen) == set(ids)
        assert {a.queue for a in seen.values()} == {"root.etl", "root.adhoc"}
        assert all(tag in a.tags for a in seen.values())

    final = await workload.wait_final(rm_client, ids, timeout_s=180)
    assert {r.final_status for r in final.values()} == {"SUCCEEDED"}
    done = await poller.poll(_now())
    assert done.ok and done.watermark_ms == max(r.finished_ms or 0 for r in final.values())

    # A restarted sidecar (new poller, same database) polls until the RM's accounting held
    # still across a whole poll (it grows while the AM container exits): nothing is duplicated
    # and the stored vcoreSeconds are what the RM reported around that poll. (Read again later,
    # the RM may report a second more: its accounting can still move after one quiet poll.)
    restarted = _poller(rm_client, db, rm_url)
    for _ in range(30):
        before = {i: (await rm_client.app(i)).vcore_seconds for i in ids}
        assert (await restarted.poll(_now())).ok
        after = {i: (await rm_client.app(i)).vcore_seconds for i in ids}
        if before == after:
            break
        await asyncio.sleep(1)
    else:
        pytest.fail("the RM's vcoreSeconds kept changing for 30 polls")
    with db.sessions() as s:
        rows = list(s.scalars(select(Application).where(Application.app_id.in_(ids))))
        assert len(rows) == 2
        for row in rows:
            assert row.state == "FINISHED" and row.final_status == "SUCCEEDED"
            assert row.vcore_seconds == after[row.app_id] > 0
            assert row.memory_seconds > 0 and row.finished_ms and row.elapsed_ms > 0
        leaves = set(s.scalars(select(Queue.path).where(Queue.is_leaf)))
        assert {"root.default", "root.etl", "root.adhoc", "root.deadline"} <= leaves
        polls = s.scalar(select(func.count()).select_from(PollRecord).where(PollRecord.ok))
        queues = s.scalar(select(func.count()).select_from(Queue))
        # History, not state: one sample per queue per good poll.
        assert s.scalar(select(func.count()).select_from(QueueSample)) == polls * queues

    # The what-if replays this recorded history (what the real RM ran, including the apps of
    # earlier tests on the same RM) under another policy.
    spec = whatif.WhatIfSpec(policy="ltrf")
    with db.sessions() as s:
        history = whatif.load_history(s, "it", spec)
    replayed = {j.job_id for j in history.jobs}
    assert set(ids) <= replayed and history.capacity > 0
    outcome = whatif.run(history, spec)
    assert {"root.etl", "root.adhoc"} <= set(outcome.actual["mean_slowdown"])
    assert outcome.replay["jobs"] == len(replayed)
    assert {"root.etl", "root.adhoc"} <= set(outcome.replay["mean_slowdown"])


async def test_poller_survives_an_unreachable_rm_and_recovers(rm_url: str, db: Db) -> None:
    dead = "http://127.0.0.1:9"
    async with RMClient([dead], retries=0, timeout_s=2) as client:
        poller = _poller(client, db, dead)
        bad = await poller.poll(_now())
    assert not bad.ok and "RMUnavailable" in (bad.error or "")
    async with RMClient([dead, rm_url], retries=0, timeout_s=5) as client:
        poller = _poller(client, db, rm_url)
        good = await poller.poll(_now(), force=True)
        assert good.ok and client.active_url == rm_url
    with db.sessions() as s:
        cluster = s.scalar(select(Cluster))
        assert cluster is not None and cluster.last_error is None and cluster.last_good_poll_ms
