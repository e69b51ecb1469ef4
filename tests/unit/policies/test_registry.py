"""The policy registry: every issue-4 policy is registered with validated parameters."""

from __future__ import annotations

import pytest

from app.policies import registry
from app.policies.base import PolicyError


def test_every_policy_family_is_registered_by_kind() -> None:
    assert {"fawkes", "ltrf", "mlrf", "rrf"} <= set(registry.names("queue"))
    assert {"justice", "pythia"} <= set(registry.names("admission"))


def test_lookup_resolves_weighting_suffix_and_names_unknown_policies() -> None:
    assert registry.lookup("fawkes:TD").name == "fawkes"
    with pytest.raises(PolicyError) as exc:
        registry.lookup("drf-plus", field="policy.name")
    assert exc.value.field == "policy.name" and "drf-plus" in str(exc.value)


def test_parameters_validate_with_defaults_and_named_errors() -> None:
    ltrf = registry.lookup("ltrf")
    assert ltrf.validate({})["discount"] == ltrf.defaults()["discount"]
    with pytest.raises(PolicyError) as exc:
        ltrf.validate({"discount": -1})
    assert exc.value.field == "discount"
    with pytest.raises(PolicyError) as unknown:
        ltrf.validate({"discnt": 0.5})
    assert unknown.value.field == "discnt"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), True, "0.5"])
def test_non_finite_or_non_numeric_parameters_are_refused(bad: object) -> None:
    with pytest.raises(PolicyError) as exc:
        registry.lookup("ltrf").validate({"discount": bad})
    assert exc.value.field == "discount"


def test_placement_and_task_policies_are_registered() -> None:
    assert registry.names("placement") == ["hybridmr"]
    assert registry.names("task") == ["prism"]
