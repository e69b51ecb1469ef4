"""Models of deadline-tagged jobs (issue 6): jobs, admission decisions, estimator state."""

from __future__ import annotations
