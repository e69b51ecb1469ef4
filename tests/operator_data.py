"""A recorded hour of a small cluster for the operator's-view tests (metrics, dashboard, what-if).

Queue samples, node samples, polls and finished applications are written through the same repo
functions the poller uses; the controller's decisions, pushes, ledger and policy state are made
by running the real ``Controller`` against the RM answers recorded from Hadoop 3.5.0
(``tests/fixtures/rm``); jobs, job decisions and the estimator through ``jobs_repo``.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import httpx
from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from app.db import jobs_repo, repo
from app.db.jobs_models import Job, JobDecision
from app.db.models import PollRecord
from app.db.session import transaction
from app.domain import tags as t
from app.domain.model import NodeState, Resources
from app.policies.justice.core import EstimatorState
from tests.factories import app, queue

FIXTURES = Path(__file__).parent / "fixtures" / "rm"
CLUSTER = "test"
NOW_MS = 1_700_003_600_000
START_MS = NOW_MS - 3_600_000
STEP_MS = 60_000
TICK_MS = 300_000
LEAVES = {"default": 40.0, "etl": 20.0, "adhoc": 20.0, "deadline": 20.0}
NODE_VCORES = 32


class RecordedRM:
    """The recorded 3.5.0 answers (root.default 40, etl/adhoc/deadline 20), applying each
    scheduler-conf PUT to the configuration it serves and bumping its version, as the RM does."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        conf = json.loads((FIXTURES / "scheduler_conf.json").read_text())
        self.conf = {p["name"]: p["value"] for p in conf["property"]}
        self.version = 1

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/ws/v1/cluster")
        if request.method == "PUT" and path == "/scheduler-conf":
            self.writes.append(path)
            root = ElementTree.fromstring(request.content)
            for update in root.iter("update-queue"):
                name = update.findtext("queue-name")
                for entry in update.iter("entry"):
                    key = f"yarn.scheduler.capacity.{name}.{entry.findtext('key')}"
                    self.conf[key] = entry.findtext("value") or ""
            self.version += 1
            return httpx.Response(200, text="Configuration change successfully applied.")
        if request.method != "GET":
            self.writes.append(f"{request.method} {path}")
            return httpx.Response(200, text="ok")
        if path == "/scheduler-conf":
            props = [{"name": k, "value": v} for k, v in self.conf.items()]
            return httpx.Response(200, json={"property": props})
        if path == "/scheduler-conf/version":
            return httpx.Response(200, json={"configversion": {"versionID": self.version}})
        if path == "/scheduler":
            body = json.loads((FIXTURES / "scheduler.json").read_text())
            return httpx.Response(200, json=body)
        return httpx.Response(404, text="not recorded")


def etl_used(ms: int) -> int:
    """The etl queue's used vcores at ``ms``: a wave between 0 and 6."""
    return round(3 + 3 * math.sin((ms - START_MS) / 600_000))


def seed_history(sessions: sessionmaker[Session], start_ms: int = START_MS) -> None:
    """An hour of polls every minute and 40 finished applications across three queues."""
    size = Resources(NODE_VCORES, NODE_VCORES * 1024)
    node = NodeState("n:1", "n", "/r", "RUNNING", (), size, Resources(0, 0), 0)
    for ms in range(start_ms, start_ms + 3_600_001, STEP_MS):
        qs = [queue("root", capacity=100, leaf=False)]
        for name, cap in LEAVES.items():
            used = {"etl": etl_used(ms), "adhoc": 1 if (ms // STEP_MS) % 3 == 0 else 0}.get(name, 0)
            q = queue(f"root.{name}", capacity=cap, used_vcores=used)
            pending = {"etl": 30, "adhoc": 10}.get(name, 0)
            used_cap = 100.0 * used / (NODE_VCORES * cap / 100)
            qs.append(
                replace(
                    q,
                    pending_containers=pending,
                    num_active_apps=1 if used else 0,
                    used_capacity=used_cap,
                    absolute_used_capacity=100.0 * used / NODE_VCORES,
                )
            )
        with transaction(sessions) as s:
            cluster = repo.ensure_cluster(s, CLUSTER, ["http://rm:8088"], ms)
            ids = repo.upsert_queues(s, cluster.id, qs, ms)
            repo.add_queue_samples(s, ids, qs, ms)
            repo.add_node_samples(s, cluster.id, [node], ms)
            repo.record_poll(
                s,
                PollRecord(
                    cluster_id=cluster.id,
                    started_ms=ms,
                    duration_ms=40 + (ms // STEP_MS) % 7 * 10,
                    ok=True,
                    rm_url="http://rm:8088",
                    queues_sampled=len(qs),
                ),
            )
            cluster.last_poll_ms = ms
            cluster.last_good_poll_ms = ms
    apps = []
    for i in range(40):
        submitted = start_ms + i * 80_000
        qname = ("etl", "adhoc", "default")[i % 3]
        apps.append(
            app(
                f"application_1700000000000_{i + 1:04d}",
                queue=f"root.{qname}",
                state="FINISHED",
                submitted_ms=submitted,
                finished_ms=submitted + 60_000 + (i % 5) * 30_000,
                vcore_seconds=120 + (i % 4) * 60,
                user=("alice", "bob")[i % 2],
            )
        )
    with transaction(sessions) as s:
        cluster = repo.ensure_cluster(s, CLUSTER, ["http://rm:8088"], start_ms)
        repo.upsert_apps(s, cluster.id, apps, start_ms + 3_600_000)


def seed_jobs(sessions: sessionmaker[Session], count: int = 12, now_ms: int = NOW_MS) -> None:
    """Deadline jobs in every interesting state with their decisions and YARN applications
    (finished ones with their times, submitted ones running at 40 %), and a learned estimator."""
    states = (t.FINISHED, t.FINISHED, t.FINISHED, t.QUEUED, t.SUBMITTED, t.DROPPED, t.KILLED)
    apps = []
    with transaction(sessions) as s:
        for i in range(count):
            state = states[i % len(states)]
            submitted = now_ms - 3_000_000 + i * 20_000
            finished = state in (t.FINISHED, t.KILLED)
            with_app = finished or state == t.SUBMITTED
            app_id = f"application_1700000000001_{i + 1:04d}" if with_app else None
            finished_ms = submitted + 500_000 + (i % 3) * 100_000 if finished else None
            if app_id is not None:
                rec = app(
                    app_id,
                    queue="root.deadline",
                    state={t.FINISHED: "FINISHED", t.KILLED: "KILLED"}.get(state, "RUNNING"),
                    submitted_ms=submitted,
                    finished_ms=finished_ms,
                    vcore_seconds=((finished_ms or now_ms) - submitted) // 1000,  # one vcore
                    tags=(f"sidecar-job:{i:032x}",),
                )
                apps.append(rec if finished else replace(rec, progress=40.0))
            job = Job(
                id=f"{i:032x}",
                name=f"report-{i}",
                queue="root.deadline",
                state=state,
                requested_tasks=4 + i % 4,
                input_bytes=None,
                block_size=None,
                deadline_s=600.0,
                deadline_ms=submitted + 600_000,
                submitted_ms=submitted,
                run={},
                tags=[],
                request_hash="0" * 64,
                granted_cpus=2 if state != t.QUEUED else None,
                admitted_ms=submitted + 5_000 if state != t.QUEUED else None,
                app_id=app_id,
                finished_ms=finished_ms,
                met_deadline=(i % 3 != 2) if state == t.FINISHED else None,
                reason="",
                updated_ms=now_ms,
            )
            jobs_repo.add_job(s, job)
            s.flush()
            action = {t.QUEUED: "queue", t.DROPPED: "drop", t.KILLED: "kill"}.get(state, "admit")
            reason = {
                "queue": "request of 4 CPUs does not fit in 2 free",
                "drop": "needs 9 CPUs > min(tasks, capacity) = 8",
                "kill": "past its deadline",
            }.get(action, f"whole request of {2 + i % 2} CPUs fits")
            jobs_repo.add_decision(
                s,
                JobDecision(
                    job_id=job.id,
                    created_ms=submitted + 5_000,
                    action=action,
                    policy="justice",
                    cpus=2,
                    req_cpus=2,
                    fraction=0.5,
                    reason=reason,
                    numbers={"free_cpus": 4},
                ),
            )
        row = jobs_repo.lock_estimator(s, now_ms)
        est = EstimatorState(
            completed=5, min_frac=0.25, max_frac=0.75, last_frac=0.5, error_sum=0.2, error_ewma=0.05
        )
        jobs_repo.save_estimator(s, row, est, now_ms)
        cluster = repo.ensure_cluster(s, CLUSTER, ["http://rm:8088"], now_ms)
        repo.upsert_apps(s, cluster.id, apps, now_ms)


async def run_ticks(api: FastAPI, policies: tuple[str, ...] = ("ltrf", "fawkes:TD")) -> None:
    """Run the real controller over the recorded hour: each policy in turn, a tick every five
    minutes, in enforce mode (the recorded RM applies every PUT)."""
    controller = api.state.sidecar.controller
    ms = START_MS + 5 * STEP_MS
    per = (NOW_MS - ms) // TICK_MS // len(policies)
    for policy in policies:
        await controller.set_policy({"policy": policy, "mode": "enforce"}, ms)
        for _ in range(per):
            ms += TICK_MS
            await controller.run_once(ms)
