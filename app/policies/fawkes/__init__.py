"""The fawkes policy family: ``core`` (the algorithm), ``queue`` (its controller adapter) and
``scenario`` (its playground reader)."""

from dataclasses import replace

from app.policies.base import PolicySpec
from app.policies.fawkes import core, queue

REGISTRY: tuple[PolicySpec, ...] = (
    replace(
        core.REGISTRY[0],
        decide=queue.decide,
        suffix_param="weighting",
        reserved_share=0.5,
        needs=queue.needs,
    ),
)

__all__ = ["REGISTRY"]
