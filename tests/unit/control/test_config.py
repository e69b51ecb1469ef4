"""The controller configuration: registry validation with named fields, overlays (PUT /policy),
and value comparison for drift."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.control.config import overlay, resolve
from app.control.drift import differences, normalise, same_value
from app.policies.base import PolicyError

BASE: dict[str, Any] = {
    "policy": "static",
    "params": {},
    "mode": "advise",
    "bounds": {},
    "weights": {},
    "max_step_pp": 10.0,
    "min_change_pp": 1.0,
    "allow_drift_overwrite": False,
    "managed_parent": "root",
    "interval_s": 60.0,
}


def cfg(**changes: Any) -> Any:
    return resolve(**{**BASE, **changes})


def test_fawkes_names_carry_the_weighting_and_take_t_from_the_interval() -> None:
    c = cfg(policy="fawkes", params={"weighting": "JD"})
    assert c.policy == "fawkes:JD" and c.params["weighting"] == "JD"
    assert c.params["interval_s"] == 60.0  # T defaults to the controller interval
    assert cfg(policy="fawkes:PU").params["weighting"] == "PU"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"policy": "nope"}, "policy"),
        ({"policy": "fawkes:XX"}, "policy"),
        ({"policy": "fawkes:TD", "params": {"weighting": "JD"}}, "params.weighting"),
        ({"policy": "ltrf:TD"}, "policy"),
        ({"policy": "pythia"}, "policy"),
        ({"policy": "static", "params": {"tau": 1}}, "params.tau"),
        ({"policy": "fawkes:TD", "params": {"tau": -1}}, "params.tau"),
        ({"policy": "rrf", "params": {"algorithm": "fifo"}}, "params.algorithm"),
        ({"mode": "push"}, "mode"),
        ({"weights": {"root.a": 0}}, "weights.root.a"),
        ({"bounds": {"root.a": {"min": 60}, "root.b": {"min": 50}}}, "bounds"),
        ({"min_change_pp": -1}, "min_change_pp"),
        ({"allow_drift_overwrite": "yes"}, "allow_drift_overwrite"),
        ({"policy": "rrf", "bounds": {"root.a": {"min": 10}}}, "bounds"),
    ],
)
def test_invalid_values_name_their_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(PolicyError) as exc:
        cfg(**changes)
    assert exc.value.field == field


def test_overlay_keeps_what_is_not_given_and_resets_params_on_a_new_policy() -> None:
    base = cfg(policy="ltrf", params={"discount": 0.5}, bounds={"root.a": {"min": 10}})
    same = overlay(base, {"mode": "enforce"})
    params = {"discount": 0.5, "lending": "used"}
    assert (same.policy, same.params, same.mode) == ("ltrf", params, "enforce")
    assert same.bounds == base.bounds
    other = overlay(base, {"policy": "fawkes:TD"})
    assert other.params["tau"] == 10.0 and "discount" not in other.params
    # a new weighting through the parameters renames the policy
    assert overlay(other, {"params": {"weighting": "JD"}}).policy == "fawkes:JD"
    with pytest.raises(PolicyError) as exc:
        overlay(base, {"colour": "red"})
    assert exc.value.field == "colour"


def test_values_compare_as_the_scheduler_reads_them() -> None:
    assert same_value("40", "40.00") and same_value("-1", "100") and not same_value("40", "40.01")
    assert same_value("[memory=1024,vcores=2]", "[vcores=2, memory=1024]")
    assert normalise(None) is None and normalise("RUNNING") == "RUNNING"
    diff = differences(
        {"root.a": {"capacity": "60.00"}, "root.b": {"capacity": "40.00"}},
        {"root.a": {"capacity": "55"}, "root.b": {"capacity": "40"}},
    )
    assert diff == {"root.a": {"capacity": {"expected": "60.00", "live": "55"}}}


def test_settings_refuse_an_invalid_controller_configuration_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.settings import SettingsError, load_settings

    monkeypatch.setenv("YARN_SIDECAR_POLICY", "ltrf")
    monkeypatch.setenv("YARN_SIDECAR_POLICY_PARAMS", '{"discount": 0.5}')
    monkeypatch.setenv("YARN_SIDECAR_QUEUE_BOUNDS", '{"root.etl": {"min": 10, "max": 60}}')
    good = load_settings().control_config()
    assert (good.policy, good.params["discount"], good.bounds["root.etl"].max_h) == (
        "ltrf",
        0.5,
        6000,
    )
    monkeypatch.setenv("YARN_SIDECAR_POLICY_PARAMS", '{"discount": 3}')
    with pytest.raises(
        SettingsError, match=re.escape("YARN_SIDECAR_POLICY_PARAMS (params.discount)")
    ):
        load_settings()
    monkeypatch.setenv("YARN_SIDECAR_POLICY_PARAMS", "{}")
    monkeypatch.setenv("YARN_SIDECAR_QUEUE_BOUNDS", '{"root.etl": {"min": 70, "max": 60}}')
    with pytest.raises(
        SettingsError, match=re.escape("YARN_SIDECAR_QUEUE_BOUNDS (bounds.root.etl.min)")
    ):
        load_settings()
