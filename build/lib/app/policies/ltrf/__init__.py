"""The ltrf policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""

from app.policies.ltrf.core import REGISTRY

__all__ = ["REGISTRY"]
