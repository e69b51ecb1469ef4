"""The justice policy family: ``core`` (the algorithm), ``admission`` (its admission adapter),
``scenario`` (playground reader)."""

from dataclasses import replace

from app.policies.justice import admission, core

# The specs of ``core`` with their admission hook (``core`` stays free of its adapter).
REGISTRY = tuple(replace(spec, admission=admission.factory(spec.name)) for spec in core.REGISTRY)

__all__ = ["REGISTRY"]
