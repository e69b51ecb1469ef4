"""Promise: deadline admission from per-signature history (signature, estimator, planner)."""
