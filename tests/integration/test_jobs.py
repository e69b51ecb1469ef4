"""Deadline jobs on the real ResourceManager (seed 004 Algorithms 3 and 6).

The whole sidecar (``create_app`` with its lifespan and loops, over HTTP through ASGI) against
the session's Hadoop RM. A burst of distributed-shell ``sleep`` jobs larger than the sidecar's
4-vcore deadline capacity: two are admitted at once (bootstrap grants ``min(tasks, capacity)``),
the rest wait in the database and are admitted as jobs finish; a job whose deadline is too short
to wait for a slot is dropped without ever reaching YARN; finished apps (the sidecar's and one
submitted straight to YARN with a ``deadline:`` tag) teach the estimator. Half-way the sidecar
is torn down and rebuilt on the same database: no job is lost, none gets two YARN apps.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.db import jobs_repo
from app.db.session import make_engine, make_session_factory, transaction
from app.jobs.contexts import JobLaunch, build_context
from app.yarn import workload
from app.yarn.client import RMClient
from tests.integration.conftest import YarnCluster
from tests.integration.sidecar_app import (
    FINAL_JOB_STATES,
    jobs,
    learn_at_first_final_poll,
    settings_for,
    sidecar,
)

pytestmark = pytest.mark.yarn

CAPACITY = 4
WAIT_S = 200.0
# Learning at the first poll that sees an app final (``sidecar_app``): with the production grace
# the jobs admitted at a completion could not use what it teaches, and this test checks that they
# do (``min(grants) < 2``).
LEARN_GRACE_MS = 0


@pytest.fixture(autouse=True)
def short_learning_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    learn_at_first_final_poll(monkeypatch)


SLEEP = {"kind": "sleep", "seconds": 3, "container_memory_mb": 128}


async def wait_until(client: httpx.AsyncClient, done: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        current = await jobs(client)
        if done(current):
            return current
        await asyncio.sleep(1)
    states = {n: (j["state"], j["app_state"]) for n, j in (await jobs(client)).items()}
    raise AssertionError(f"timed out waiting for {what}: {states}")


def _final(job: dict[str, Any]) -> bool:
    return job["state"] in FINAL_JOB_STATES


async def test_burst_restart_and_learning_on_a_real_rm(
    yarn_cluster: YarnCluster, harness: workload.Harness, tmp_path: Path
) -> None:
    settings = settings_for(yarn_cluster, tmp_path, "it-jobs", deadline_capacity_vcores=CAPACITY)
    db_url = settings.database_url
    names = [f"ok-{i}" for i in range(6)]
    async with RMClient([yarn_cluster.rm_url], timeout_s=30) as rm:
        start = int(time.time())
        # Submitted straight to YARN: learned from through its deadline: tag.
        external = await workload.submit(
            rm,
            workload.AppSpec(
                queue="default",
                sleep_s=2,
                num_containers=1,
                container_memory_mb=128,
                tags=(f"deadline:{start + 300}", "tasks:2"),
                name="external-deadline",
            ),
            harness,
        )
        async with sidecar(settings) as client:
            burst = [
                {"name": n, "deadline": 200, "requested_tasks": 2, "run": SLEEP} for n in names
            ]
            answers = await asyncio.gather(*(client.post("/jobs", json=b) for b in burst))
            # After the burst the cluster is full, so this one has to wait.
            tight = {"name": "tight", "deadline": 6, "requested_tasks": 2, "run": SLEEP}
            answers.append(await client.post("/jobs", json=tight))
            assert all(a.status_code == 202 for a in answers)
            first = {a.json()["name"]: a.json()["decision"] for a in answers}
            # Bootstrap: each asks min(2, 4) = 2 vcores; whole requests only -> 2 run, 5 wait.
            assert sorted(d["action"] for d in first.values()) == ["admit"] * 2 + ["queue"] * 5
            assert first["tight"]["action"] == "queue"
            # Restart while the first two run on YARN and the rest wait in the database.
            before = await wait_until(
                client,
                lambda js: sum(j["state"] == "submitted" for j in js.values()) == 2,
                "the two admitted jobs to be on YARN",
            )
        waiting = sorted(n for n in names if before[n]["state"] == "queued")
        assert len(waiting) == 4
        adopt, resubmit = (before[n]["id"] for n in waiting[:2])
        applied, reserved = await simulate_crash(rm, db_url, harness, adopt, resubmit)

        async with sidecar(settings) as client:
            after = await wait_until(
                client, lambda js: all(_final(j) for j in js.values()), "every job to end"
            )
            await asyncio.sleep(LEARN_GRACE_MS / 1000 + 3)  # the last jobs' learning grace
            estimator = (await client.get("/estimator")).json()
            observations = (await client.get("/estimator/observations")).json()["items"]
            details = {n: (await client.get(f"/jobs/{j['id']}")).json() for n, j in after.items()}
            tagged = [o for o in observations if o["app_id"] == external]
            if not tagged:  # the external app may end after the last sidecar job
                await workload.wait_final(rm, [external], timeout_s=60)
                await asyncio.sleep(LEARN_GRACE_MS / 1000 + 3)
                observations = (await client.get("/estimator/observations")).json()["items"]
                tagged = [o for o in observations if o["app_id"] == external]

        _print_summary(after, details, estimator)
        # Every job has a record and ended; the tight one was dropped without reaching YARN.
        assert set(after) == {*names, "tight"}
        assert after["tight"]["state"] == "dropped" and after["tight"]["app_id"] is None
        assert after["tight"]["reason"] == "time to deadline is gone"
        for name in names:
            job = after[name]
            assert job["state"] == "finished", (name, job["reason"])
            assert job["met_deadline"] is True
            assert job["vcore_seconds"] > 0
            steps = [d["action"] for d in details[name]["decisions"]]
            assert steps[-1] == "finish"
            assert "submit" in steps or "adopt" in steps
        by_id = {j["id"]: j for j in after.values()}
        # Crash after POST /apps: the restarted sidecar adopted the app instead of submitting again.
        assert by_id[adopt]["app_id"] == applied
        assert "adopt" in [d["action"] for d in details[by_id[adopt]["name"]]["decisions"]]
        # Crash between new-application and POST /apps: the reserved id itself was submitted (a
        # fresh one could run next to it had the first POST only been delayed).
        assert by_id[resubmit]["app_id"] == reserved
        assert (await rm.app(reserved)).state == "FINISHED"
        admitted_later = [
            n for n in waiting if by_id[adopt]["name"] != n != by_id[resubmit]["name"]
        ]
        assert all(
            "admit" in [d["action"] for d in details[n]["decisions"]] for n in admitted_later
        )
        # No job owns two YARN applications, and each app carries exactly one job's tag.
        for name in names:
            tag = f"sidecar-job:{after[name]['id']}"
            assert [a.app_id for a in await rm.apps(tags=[tag])] == [after[name]["app_id"]]
        assert await rm.apps(tags=[f"sidecar-job:{after['tight']['id']}"]) == ()
        # Learning: the sidecar's finished jobs and the tagged external app, each once.
        learned = [o for o in observations if o["learned"]]
        assert estimator["observations"] == len(learned) >= len(names)
        assert estimator["min_cpu_frac"] is not None and estimator["min_cpu_frac"] > 0
        assert estimator["max_cpu_frac"] >= estimator["min_cpu_frac"]
        assert estimator["fraction"] is not None and estimator["fraction"] < 1
        assert len({o["app_id"] for o in observations}) == len(observations)
        assert tagged and tagged[0]["learned"] and tagged[0]["source"] == "tagged"
        # After two completions Justice grants fractions: later jobs got fewer than 2 vcores.
        grants = [after[n]["granted_cpus"] for n in admitted_later]
        assert min(grants) < 2


async def simulate_crash(
    rm: RMClient, db_url: str, harness: workload.Harness, adopt: str, resubmit: str
) -> tuple[str, str]:
    """Leave two queued jobs as a sidecar killed mid-submission would (state ``submitting``).

    ``adopt``: the id was reserved and ``POST /apps`` went through, the answer was lost.
    ``resubmit``: the id was reserved, the process died before ``POST /apps`` (the restarted
    sidecar submits that same id).
    Returns (the applied app id, the reserved-only app id).
    """
    applied = (await rm.new_application()).app_id
    reserved = (await rm.new_application()).app_id
    engine = make_engine(db_url)
    try:
        sessions = make_session_factory(engine)
        now = int(time.time() * 1000)
        with transaction(sessions) as session:
            for job_id, app_id in ((adopt, applied), (resubmit, reserved)):
                assert jobs_repo.transition(
                    session, job_id, ["queued"], now,
                    state="submitting", app_id=app_id, granted_cpus=1, admitted_ms=now,
                )  # fmt: skip
            row = jobs_repo.get_job(session, adopt)
            assert row is not None
            launch = JobLaunch(
                row.id, row.name, row.queue, row.deadline_ms, 1, row.run, [str(t) for t in row.tags]
            )
        context = build_context(launch, applied, harness)
        await rm.submit_application(context)
        # The RM answers a re-submit of a known id with success and ignores it (ClientRMService):
        # what the sidecar relies on when it re-submits an id whose first POST was ambiguous.
        await rm.submit_application(context)
    finally:
        engine.dispose()
    return applied, reserved


def _print_summary(
    after: dict[str, dict[str, Any]], details: dict[str, Any], estimator: dict[str, Any]
) -> None:
    """What happened, for ``pytest -s`` (the numbers quoted in reports come from here)."""
    for name, job in sorted(after.items()):
        steps = [f"{d['action']}({d['cpus']})" for d in details[name]["decisions"]]
        print(
            f"{name:6} {job['state']:9} granted={job['granted_cpus']} app={job['app_id']} "
            f"vcore_s={job['vcore_seconds']} elapsed_ms={job['elapsed_ms']} "
            f"met={job['met_deadline']} steps={' '.join(steps)}"
        )
    keys = ("observations", "min_cpu_frac", "max_cpu_frac", "last_cpu_frac", "correction")
    print("estimator", {k: estimator[k] for k in (*keys, "fraction", "version")})


async def test_kill_rule_and_cancel_on_a_real_rm(
    yarn_cluster: YarnCluster, harness: workload.Harness, tmp_path: Path
) -> None:
    """A running job past its deadline with tasks > drop_threshold is killed through the RM
    (``docs/policies.md``; ``docs/yarn.md`` 4.3); ``DELETE /jobs/{id}`` kills a running job's
    app."""
    settings = settings_for(
        yarn_cluster,
        tmp_path,
        "it-kill",
        mode="enforce",
        deadline_capacity_vcores=CAPACITY,
        drop_threshold=1,
    )
    long_sleep = {"kind": "sleep", "seconds": 120, "container_memory_mb": 128}
    async with RMClient([yarn_cluster.rm_url], timeout_s=30) as rm, sidecar(settings) as client:
        violator = (
            await client.post(
                "/jobs",
                json={"name": "violator", "deadline": 12, "requested_tasks": 2, "run": long_sleep},
            )
        ).json()
        unwanted = (
            await client.post(
                "/jobs",
                json={"name": "unwanted", "deadline": 300, "requested_tasks": 1, "run": long_sleep},
            )
        ).json()
        running = await wait_until(
            client,
            lambda js: js["unwanted"]["app_state"] == "RUNNING",
            "the unwanted job to run",
        )
        cancel = await client.delete(f"/jobs/{unwanted['id']}")
        assert cancel.status_code == 200 and cancel.json()["state"] == "cancelled"
        assert (await client.delete(f"/jobs/{unwanted['id']}")).status_code == 200
        assert (await rm.app(running["unwanted"]["app_id"])).state == "KILLED"

        ended = await wait_until(
            client, lambda js: js["violator"]["state"] == "killed", "the violator to be killed"
        )
        detail = (await client.get(f"/jobs/{violator['id']}")).json()
        app = await rm.app(ended["violator"]["app_id"])
        assert app.state == "KILLED"
        kill = [d for d in detail["decisions"] if d["action"] == "kill"]
        # 2 tasks > drop_threshold 1: the LIFETIME timeout (set at the deadline for such jobs)
        # and the sidecar's kill rule race; either way the app dies right after the deadline.
        if kill:
            assert "drop_threshold 1" in kill[0]["reason"]
        else:
            assert "lifetime" in app.diagnostics.lower()
        assert detail["lifetime_expiry_at"] == detail["deadline_at"]
        deadline_ms = int(dt.datetime.fromisoformat(detail["deadline_at"]).timestamp() * 1000)
        assert app.finished_ms is not None
        assert 0 <= app.finished_ms - deadline_ms < 30_000
        # Killed apps do not teach: their vcoreSeconds stop at the kill.
        observed = (await client.get("/estimator/observations")).json()["items"]
        ours = {ended["violator"]["app_id"], running["unwanted"]["app_id"]}
        assert not [o for o in observed if o["app_id"] in ours and o["learned"]]
