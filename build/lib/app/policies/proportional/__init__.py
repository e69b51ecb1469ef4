"""The proportional queue policy: ``core`` (the rule), ``queue`` (its controller adapter) and
``scenario`` (its playground reader)."""

from dataclasses import replace

from app.policies.base import PolicySpec
from app.policies.proportional import core, queue

REGISTRY: tuple[PolicySpec, ...] = (replace(core.SPEC, decide=queue.decide),)

__all__ = ["REGISTRY"]
