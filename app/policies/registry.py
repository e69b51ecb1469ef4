"""Policy registry: every policy by name with its kind, paper and parameter schema.

Collected from each policy module's ``REGISTRY`` constant so the controller, the jobs service, the
simulator and the API look policies up in one place (``docs/style.md``, "Our shape").
Queue policies with a weighting (``fawkes:TD``) resolve to their base spec with the weighting
passed as a parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Any

from app.policies import fawkes, hybridmr, justice, ltrf, prism, promise, proportional, rrf
from app.policies.base import AdmissionPolicy, PolicyError, PolicySpec

# One entry per policy folder (each exports ``REGISTRY``); adding a policy family is one line here.
_FAMILIES: tuple[ModuleType, ...] = (
    fawkes,
    ltrf,
    rrf,
    justice,
    hybridmr,
    prism,
    proportional,
    promise,
)


def _collect() -> tuple[Mapping[str, PolicySpec], Mapping[str, str]]:
    specs: dict[str, PolicySpec] = {}
    family: dict[str, str] = {}
    for module in _FAMILIES:
        for spec in module.REGISTRY:
            if spec.name in specs:
                raise RuntimeError(f"policy {spec.name!r} registered twice")
            specs[spec.name] = spec
            family[spec.name] = module.__name__
    return MappingProxyType(specs), MappingProxyType(family)


POLICIES, _FAMILY_OF = _collect()


def names(kind: str | None = None) -> list[str]:
    """Registered policy names, optionally of one kind (``queue``, ``admission``, ``placement``
    or ``task``)."""
    return sorted(n for n, s in POLICIES.items() if kind is None or s.kind == kind)


def lookup(name: str, field: str = "policy") -> PolicySpec:
    """The spec for ``name`` (``fawkes:TD`` resolves to ``fawkes``); ``PolicyError`` naming
    ``field`` when unknown."""
    base = name.split(":", 1)[0]
    spec = POLICIES.get(base)
    if spec is None:
        raise PolicyError(field, f"unknown policy {name!r}; known: {', '.join(names())}")
    return spec


def family(name: str, field: str = "policy") -> str:
    """The package of the folder that owns ``name`` (``app.policies.ltrf`` for ``mlrf``)."""
    return _FAMILY_OF[lookup(name, field).name]


# ---- admission policies ------------------------------------------------------------------------


def admission_names() -> list[str]:
    """Policies the admission service can run (those with an admission adapter)."""
    return sorted(n for n, s in POLICIES.items() if s.admission is not None)


def admission_policy(
    name: str, values: Mapping[str, Any] | None = None, field: str = "policy"
) -> AdmissionPolicy:
    """The admission policy ``name`` with ``values`` validated by its spec; ``PolicyError``
    naming ``field`` (or ``params.<name>``) when the name or a parameter is wrong."""
    spec = POLICIES.get(name)
    if spec is None or spec.admission is None:
        raise PolicyError(
            field, f"unknown admission policy {name!r}; known: {', '.join(admission_names())}"
        )
    return spec.admission(spec.validate(values or {}, prefix="params."))
