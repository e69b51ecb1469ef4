"""A submission while the deadline capacity is unknown (no NodeManager polled yet and
``YARN_SIDECAR_DEADLINE_CAPACITY_VCORES`` 0): the job waits queued, and, whatever the admission
policy, its first decision is stored before the answer and says why."""

from __future__ import annotations

import pytest

from app.db import jobs_repo, repo
from app.db.session import transaction
from app.domain.model import NodeState, Resources
from tests.conftest import Db
from tests.unit.jobs.fakes import FakeRM
from tests.unit.services.test_admission import Clock, Env, actions, load, new_job

UNKNOWN = (
    "queued: deadline capacity unknown (no NodeManager polled yet and "
    "YARN_SIDECAR_DEADLINE_CAPACITY_VCORES is 0)"
)


@pytest.mark.parametrize("policy", ["justice", "pythia", "promise"])
def test_a_submission_before_any_capacity_is_known_stores_its_queue_decision(
    db: Db, policy: str
) -> None:
    env = Env(db, FakeRM(), Clock(), capacity=0)  # capacity from the poll; none yet
    service = env.service()
    service.set_policy(policy, {}, env.clock.now)
    now = env.clock.now
    result = service.create_job(new_job(4, 100, now), now)
    assert result.job.state == "queued"
    decision = result.decision
    assert decision is not None
    assert (decision.action, decision.policy, decision.cpus) == ("queue", policy, 0)
    assert decision.reason == UNKNOWN
    with env.db.sessions() as s:
        stored = jobs_repo.decisions_of(s, result.job.id)
    assert [(d.id, d.action, d.reason) for d in stored] == [(decision.id, "queue", UNKNOWN)]


async def test_a_promise_job_queued_on_unknown_capacity_is_admitted_once_it_is_known(
    db: Db,
) -> None:
    env = Env(db, FakeRM(), Clock(), capacity=0)
    service = env.service()
    service.set_policy("promise", {}, env.clock.now)
    now = env.clock.now
    job = service.create_job(new_job(1, 600, now), now).job
    node = NodeState("n1:1", "n1", "/r", "RUNNING", (), Resources(8, 8192), Resources(0, 0), 0)
    with transaction(env.db.sessions) as s:
        cluster = repo.ensure_cluster(s, "test", ["http://rm:8088"], now)
        repo.add_node_samples(s, cluster.id, [node], now)
    env.clock.advance(1)
    await service.run_once(env.clock.now)
    assert actions(env, job.id)[:2] == ["queue", "admit"]
    assert load(env, job.id).state == "submitted"
