"""The prism policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""

from app.policies.prism.core import REGISTRY

__all__ = ["REGISTRY"]
