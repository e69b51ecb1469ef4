"""The admission configuration: the start-up policy comes from the settings through the
registry, and switching policy keeps the Justice estimator learning with the right parameters."""

from __future__ import annotations

import pytest

from app.jobs.rounds import config_from_settings, policy_of, with_policy
from app.policies import registry
from app.policies.base import PolicyError
from app.settings import Settings


def _settings(**kw: object) -> Settings:
    return Settings(database_url="sqlite://", cluster_name="t", **kw)  # type: ignore[arg-type]


def test_each_settings_policy_takes_only_its_own_parameters() -> None:
    pythia = config_from_settings(_settings(admission_policy="pythia", admission_alpha=0.2))
    assert policy_of(pythia).name == "pythia" and pythia.params.variant == "pythia"
    assert pythia.params.alpha == 0.2 and pythia.promise is None
    promise = config_from_settings(
        _settings(admission_policy="promise", promise_quantile=0.8, admission_alpha=0.2)
    )
    assert policy_of(promise).name == "promise" and promise.promise is not None
    assert promise.promise["quantile"] == 0.8 and "alpha" not in promise.promise
    # Justice still learns under Promise, with the settings' smoothing and alpha
    assert (promise.params.variant, promise.params.alpha) == ("justice", 0.2)


def test_switching_back_and_forth_restores_the_learning_parameters() -> None:
    base = config_from_settings(_settings(admission_policy="justice", admission_alpha=0.2))
    to_promise = with_policy(base, registry.admission_policy("promise"))
    assert to_promise.params.alpha == 0.2 and to_promise.promise is not None
    to_pythia = with_policy(to_promise, registry.admission_policy("pythia", {"alpha": 0.7}))
    assert (to_pythia.params.variant, to_pythia.params.alpha) == ("pythia", 0.7)
    assert to_pythia.promise is None and policy_of(to_pythia).name == "pythia"


def test_a_config_without_a_policy_object_runs_the_one_its_parameters_describe() -> None:
    cfg = config_from_settings(_settings(admission_policy="pythia"))
    bare = type(cfg)(cfg.params, cfg.capacity_vcores, cfg.cluster_name, cfg.mode)
    assert policy_of(bare).name == "pythia"


def test_an_unknown_settings_policy_names_the_setting() -> None:
    settings = _settings()
    object.__setattr__(settings, "admission_policy", "fawkes")
    with pytest.raises(PolicyError) as exc:
        config_from_settings(settings)
    assert exc.value.field == "admission_policy"
