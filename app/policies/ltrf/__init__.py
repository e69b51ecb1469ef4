"""The ltrf policy family (LTRF and its memoryless baseline MLRF): ``core`` (the algorithm),
``queue`` (its controller adapter) and ``scenario`` (its playground reader)."""

from dataclasses import replace

from app.policies.base import PolicySpec
from app.policies.ltrf import core, queue

_ADAPTERS = {"ltrf": queue.decide_ltrf, "mlrf": queue.decide_mlrf}

REGISTRY: tuple[PolicySpec, ...] = tuple(
    replace(spec, decide=_ADAPTERS[spec.name]) for spec in core.REGISTRY
)

__all__ = ["REGISTRY"]
