"""Policy registry: every policy by name with its kind, paper and parameter schema.

Collected from each policy module's ``REGISTRY`` constant so the controller, the jobs service, the
simulator and the API look policies up in one place (``../shared/docs/style.md``, "Our shape").
Queue policies with a weighting (``fawkes:TD``) resolve to their base spec with the weighting
passed as a parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from app.policies.base import PolicyError, PolicySpec
from app.policies.fawkes import core as fawkes
from app.policies.hybridmr import core as hybridmr
from app.policies.justice import core as justice
from app.policies.ltrf import core as ltrf
from app.policies.prism import core as prism
from app.policies.rrf import core as rrf

_MODULES = (fawkes, ltrf, rrf, justice, hybridmr, prism)


def _collect() -> Mapping[str, PolicySpec]:
    specs: dict[str, PolicySpec] = {}
    for module in _MODULES:
        for spec in module.REGISTRY:
            if spec.name in specs:
                raise RuntimeError(f"policy {spec.name!r} registered twice")
            specs[spec.name] = spec
    return MappingProxyType(specs)


POLICIES: Mapping[str, PolicySpec] = _collect()


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
