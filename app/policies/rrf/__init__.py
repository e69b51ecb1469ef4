"""The rrf policy family: ``core`` (the algorithm), ``queue`` (its controller adapter) and
``scenario`` (its playground reader)."""

from dataclasses import replace

from app.policies.base import PolicySpec
from app.policies.rrf import core, queue

REGISTRY: tuple[PolicySpec, ...] = (replace(core.REGISTRY[0], decide=queue.decide, absolute=True),)

__all__ = ["REGISTRY"]
