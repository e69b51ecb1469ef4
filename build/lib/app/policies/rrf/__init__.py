"""The rrf policy family: ``core`` (the algorithm), ``scenario`` (playground reader)."""

from app.policies.rrf.core import REGISTRY

__all__ = ["REGISTRY"]
