"""The hybridmr policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""

from app.policies.hybridmr.core import REGISTRY

__all__ = ["REGISTRY"]
