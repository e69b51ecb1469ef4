"""The fawkes policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""

from app.policies.fawkes.core import REGISTRY

__all__ = ["REGISTRY"]
