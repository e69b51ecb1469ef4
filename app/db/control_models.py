"""Models of the control loop (issue 5): policy configuration, LTRF ledger, pushed configuration."""

from __future__ import annotations
