"""Promise on the real ResourceManager: it learns per signature (``app/policies/promise``).

Two recurring jobs (``profile:short``: 2 tasks of 2 s, ``profile:long``: 2 tasks of 20 s) are
submitted one after the other through the whole sidecar (``create_app`` with its loops) with a
40 s deadline. With no history the first gets the bootstrap grant (the whole deadline at full
parallelism); once each signature has runs of its own, each job's work bound comes from its own
signature (the long one's well above the short one's: two runs suffice with a 0.6 quantile, as
19 do at the default 0.95), the grants diverge (the short job's two
waves fit one container; the long one's, 40 s of tasks after its start-up, do not), and each
job's predicted finish (the ETA of its admission) moves toward when YARN really finished it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import shlex
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.yarn import workload
from tests.integration.conftest import YarnCluster
from tests.integration.sidecar_app import learn_at_first_final_poll, settings_for, sidecar

pytestmark = pytest.mark.yarn

WAIT_S = 120.0


@pytest.fixture(autouse=True)
def no_learning_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    learn_at_first_final_poll(monkeypatch)


async def ended(client: httpx.AsyncClient, job_id: str, until: float) -> dict[str, Any]:
    """The job once it has ended, or as it stands at ``until`` (monotonic seconds)."""
    while True:
        detail: dict[str, Any] = (await client.get(f"/jobs/{job_id}")).json()
        if detail["state"] in ("finished", "failed", "killed", "dropped"):
            return detail
        if time.monotonic() >= until:
            return detail
        await asyncio.sleep(1)


async def run_one(client: httpx.AsyncClient, profile: str, seconds: int, i: int) -> dict[str, Any]:
    """Submit one job, wait for it to end and be learned, return its admission ETA and outcome."""
    body = {
        "name": f"{profile}-{i}",
        "deadline": 40,
        "requested_tasks": 2,
        "tags": [f"profile:{profile}"],
        "run": {"kind": "sleep", "seconds": seconds, "container_memory_mb": 128},
    }
    r = await client.post("/jobs", json=body)
    assert r.status_code == 202, r.text
    job = r.json()
    learned_before = (await client.get("/estimator")).json()["prediction_error"]
    deadline = time.monotonic() + WAIT_S
    detail = await ended(client, job["id"], deadline)
    assert detail["state"] == "finished", detail["reason"]
    # wait for the learning pass to store it (the next polls after the app ended)
    while time.monotonic() < deadline:
        err = (await client.get("/estimator")).json()["prediction_error"]
        if err != learned_before:
            break
        await asyncio.sleep(1)
    eta = job["eta"]
    finished = dt.datetime.fromisoformat(detail["finished_at"]).timestamp()
    return {
        "grant": job["granted_cpus"],
        "bound": eta["work_bound"],
        "eta_error_s": abs(eta["finish_point_s"] - finished),
        "source": eta["source"],
    }


async def test_promise_learns_per_signature_on_a_real_rm(
    yarn_cluster: YarnCluster, tmp_path: Path
) -> None:
    settings = settings_for(
        yarn_cluster,
        tmp_path,
        "it-promise",
        deadline_capacity_vcores=4,
        admission_policy="promise",
        # Two runs per signature are enough to learn from here: a 0.6 quantile is one of two
        # samples (2 >= 0.6 / 0.4), the largest, as 0.95 is one of 19.
        promise_min_samples=2,
        promise_quantile=0.6,
    )
    runs: dict[str, list[dict[str, Any]]] = {"short": [], "long": []}
    async with sidecar(settings) as client:
        for i in range(3):
            for profile, seconds in (("short", 2), ("long", 20)):
                runs[profile].append(await run_one(client, profile, seconds, i))
        signatures = (await client.get("/estimator")).json()["signatures"]
    for profile, rs in runs.items():
        print(profile, rs)
    # No history at all: the first job is bootstrapped to its full parallelism.
    assert runs["short"][0]["grant"] == 2 and runs["short"][0]["source"] == "bootstrap"
    # Learned per signature: each job is now bounded by its own signature's runs, and the long
    # job's bound is well above the short one's (20 s vs 2 s of sleep per task).
    # The template runs the 2 tasks in waves on the grant, so the grants diverge: one container
    # (two waves) meets the 40 s deadline for the short job; the long one's two waves of 20 s
    # after its learned start-up do not, so it needs two.
    assert runs["short"][-1]["source"].endswith("p:short")
    assert runs["long"][-1]["source"].endswith("p:long")
    assert runs["long"][-1]["bound"] > 2 * runs["short"][-1]["bound"]
    assert runs["short"][-1]["grant"] == 1
    assert runs["long"][-1]["grant"] == 2
    assert signatures["p:short"]["samples"] == 3 and signatures["p:long"]["samples"] == 3
    # each learned the seconds from its admission to its first task (AM allocation and launch)
    assert signatures["p:short"]["overhead_s_upper"] > 0
    assert signatures["p:long"]["overhead_s_upper"] > 0
    # The ETA error shrinks from the first run's (the bootstrap's whole deadline, or a borrowed
    # signature's) once each job's own history is used.
    assert runs["short"][-1]["eta_error_s"] < runs["short"][0]["eta_error_s"] / 3
    assert runs["long"][-1]["eta_error_s"] < runs["long"][0]["eta_error_s"] / 2


async def test_a_job_whose_first_wave_shows_a_miss_is_killed_before_its_deadline(
    yarn_cluster: YarnCluster, harness: workload.Harness, tmp_path: Path
) -> None:
    """Two runs of ``profile:fw`` teach 2 s tasks. The fourth, a distributed-shell app the user
    brings (``task_containers``: one task per container), declares 4 such tasks but its first
    sleeps 120 s. Promised one vcore (4 waves of 2 s fit its 60 s easily), it is
    timed from the RM's container list: once its task has run 15 s without ending, 4 waves cannot
    end by the deadline, and it is killed then, not at its deadline."""
    settings = settings_for(
        yarn_cluster, tmp_path, "it-first-wave", deadline_capacity_vcores=4,
        admission_policy="promise", promise_min_samples=2, promise_quantile=0.6,
        resource_roots=(harness.staging_dir.resolve().as_uri() + "/",),
    )  # fmt: skip
    staged = workload.stage_shell_command(harness.staging_dir, "first-wave", "sleep 120")
    spec = workload.AppSpec(queue="default", num_containers=1, container_memory_mb=128)
    # the AM's classpath is longer than a job's command may be: it goes in the environment
    command = workload.am_command(spec, harness).replace(
        f"-cp {shlex.quote(harness.am_classpath)} ", ""
    )
    run = {
        "kind": "application",
        "command": command,
        "environment": {"CLASSPATH": harness.am_classpath},
        "resource": {"memory_mb": 256, "vcores": 1},
        "local_resources": [
            {
                "name": workload.SHELL_COMMAND_RESOURCE,
                "resource": staged.path.resolve().as_uri(),
                "size": staged.size,
                "timestamp": staged.timestamp_ms,
            }
        ],
        "task_containers": True,
    }
    async with sidecar(settings) as client:
        for i in range(2):  # two runs suffice at a 0.6 quantile (see the test above)
            await run_one(client, "fw", 2, i)
        body = {
            "name": "fw-slow", "deadline": 60, "requested_tasks": 4, "tags": ["profile:fw"],
            "run": run,
        }  # fmt: skip
        r = await client.post("/jobs", json=body)
        assert r.status_code == 202, r.text
        job = r.json()
        assert (job["state"], job["granted_cpus"]) == ("admitted", 1), job["decision"]
        admitted = dt.datetime.fromisoformat(job["admitted_at"]).timestamp()
        detail = await ended(client, job["id"], time.monotonic() + WAIT_S)
    assert detail["state"] == "killed", detail
    kill = next(d for d in detail["decisions"] if d["action"] == "kill")
    print(kill["reason"])
    assert "first tasks ran" in kill["reason"] and "4 waves" in kill["reason"]
    assert detail["task_floor_s"] > 15
    # its progress was read from the RM too (a distributed-shell AM counts only finished
    # containers, so it stayed at 0 and projected nothing)
    assert detail["progress"] == 0.0
    # killed well before its deadline: the first wave showed the miss
    killed_at = dt.datetime.fromisoformat(kill["at"]).timestamp()
    assert killed_at < admitted + 45
