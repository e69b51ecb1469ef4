"""The admission policy a round runs (``app.services.admission.policy``): the stored
``PUT /admission`` choice, read by every round and every replica, and the settings' policy when
the stored one no longer validates."""

from __future__ import annotations

import pytest

from app.db import jobs_repo
from app.db.session import transaction
from app.jobs.rounds import policy_of
from app.policies.base import PolicyError
from tests.conftest import Db
from tests.unit.jobs.fakes import FakeRM
from tests.unit.services.test_admission import T0, Clock, Env, new_job


@pytest.fixture
def env(db: Db) -> Env:
    return Env(db, FakeRM(), Clock())


def test_a_replica_follows_the_stored_choice_at_its_next_round(env: Env) -> None:
    leader, follower = env.service(), env.service()
    leader.set_policy("pythia", {"drop_threshold": 20}, T0)
    # The follower was never told: it reads the database at its next round.
    submitted = follower.create_job(new_job(30, 600, T0), T0)
    assert submitted.decision is not None and submitted.decision.policy == "pythia"
    # Its parameters apply too: 30 tasks are above the new drop threshold (20, not the settings'
    # 1000), so the job's app is timed out at the deadline itself, without overrun.
    assert follower.cfg.params.drop_threshold == 20
    assert follower.lifetime_expiry_ms(submitted.job) == submitted.job.deadline_ms


def test_a_stored_choice_that_no_longer_validates_falls_back_to_the_settings(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    service = env.service()
    with transaction(env.db.sessions) as session:
        jobs_repo.save_admission_setting(session, "test", "pythia", {"alpha": 9}, T0)
    with env.db.sessions() as session:
        cfg = service.current_cfg(session)
    assert policy_of(cfg).name == "justice"
    assert "stored admission policy 'pythia' is invalid" in caplog.text


def test_a_bad_choice_is_refused_and_nothing_is_stored(env: Env) -> None:
    service = env.service()
    with pytest.raises(PolicyError) as exc:
        service.set_policy("promise", {"window": 0}, T0)
    assert exc.value.field == "params.window"
    with env.db.sessions() as session:
        assert jobs_repo.admission_setting(session, "test") is None
        assert service.policy_source(session) == "settings"
