"""Promise: deadline admission from per-signature history (signature, estimator, planner)."""

from app.policies.promise.core import REGISTRY

__all__ = ["REGISTRY"]
