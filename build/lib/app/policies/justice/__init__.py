"""The justice policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""

from app.policies.justice.core import REGISTRY

__all__ = ["REGISTRY"]
