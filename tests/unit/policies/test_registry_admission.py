"""The registry's admission side: which policies the admission service can run, and the named
errors of a wrong name or parameter."""

from __future__ import annotations

import pytest

from app.policies import registry
from app.policies.base import PolicyError


def test_admission_policies_are_those_with_an_adapter() -> None:
    assert registry.admission_names() == ["justice", "promise", "pythia"]
    assert all(registry.lookup(n).kind == "admission" for n in registry.admission_names())
    assert registry.lookup("fawkes").admission is None


@pytest.mark.parametrize("name", ["fawkes", "hybridmr", "nosuch"])
def test_a_policy_without_an_adapter_is_refused_naming_the_field(name: str) -> None:
    with pytest.raises(PolicyError) as exc:
        registry.admission_policy(name, field="admission_policy")
    assert exc.value.field == "admission_policy" and "justice, promise, pythia" in str(exc.value)


def test_unknown_parameters_are_named() -> None:
    with pytest.raises(PolicyError) as exc:
        registry.admission_policy("justice", {"quantile": 0.9})
    assert exc.value.field == "params.quantile"
