"""Justice and PYTHIA behind the admission seam: the registry builds them, and they decide and
learn exactly as ``core`` does with the same parameters."""

from __future__ import annotations

import pytest

from app.policies import registry
from app.policies.base import AdmissionPolicy, PolicyError
from app.policies.justice import core

WAITING = [core.Job("a", 4, 100.0, 0.0), core.Job("b", 40, 30.0, 1.0), core.Job("c", 2, 50.0, 2.0)]
RUNNING = [core.RunningJob("r", 3, 80.0, 0.0, 3)]


def _learned(params: core.JusticeParams) -> core.EstimatorState:
    state = core.EstimatorState()
    for i, (comp, ok) in enumerate([(200.0, True), (600.0, False), (300.0, True)]):
        state = core.track_job(state, core.JobOutcome(f"o{i}", 8, 100.0, comp, 4, ok), 10, params)
    return state


@pytest.mark.parametrize("variant", ["justice", "pythia"])
def test_admit_and_learn_are_core_with_the_validated_parameters(variant: str) -> None:
    policy = registry.admission_policy(variant, {"alpha": 0.3, "smoothing": "ewma"})
    params = core.make_params(variant, {"alpha": 0.3, "smoothing": "ewma"})
    assert policy.name == variant and policy.estimator_source == "state"
    assert policy.params["alpha"] == 0.3 and policy.params["drop_threshold"] == 1000
    state = _learned(params)
    assert _learned_by(policy) == state
    got = policy.admit(WAITING, RUNNING, 7, 10, 5.0, state)
    assert got == core.admit(state, WAITING, RUNNING, 7, 10, 5.0, params)
    assert any(d.action == "admit" for d in got)
    assert policy.booked(RUNNING) == 3


def _learned_by(policy: AdmissionPolicy) -> core.EstimatorState:
    state = core.EstimatorState()
    for i, (comp, ok) in enumerate([(200.0, True), (600.0, False), (300.0, True)]):
        state = policy.learn(state, core.JobOutcome(f"o{i}", 8, 100.0, comp, 4, ok), 10)
    return state


def test_the_variants_differ_once_learned() -> None:
    # PYTHIA grants max(minReqRate), Justice the corrected fraction: with the same history they
    # must not grant the same CPUs, or the switch between them would change nothing.
    justice = registry.admission_policy("justice")
    pythia = registry.admission_policy("pythia")
    state = _learned(core.make_params("justice"))
    grants = [
        {d.job_id: d.cpus for d in p.admit(WAITING, [], 10, 10, 5.0, state)}
        for p in (justice, pythia)
    ]
    assert grants[0] != grants[1]


def test_bad_parameters_name_the_field() -> None:
    with pytest.raises(PolicyError) as exc:
        registry.admission_policy("pythia", {"alpha": 2})
    assert exc.value.field == "params.alpha"
