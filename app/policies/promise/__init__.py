"""Promise: deadline admission from per-signature history (signature, estimator, planner, and
``admission``, its admission adapter)."""

from dataclasses import replace

from app.policies.promise import admission, core

REGISTRY = tuple(replace(spec, admission=admission.make) for spec in core.REGISTRY)

__all__ = ["REGISTRY"]
