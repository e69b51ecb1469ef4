"""Fawkes' queue adapter through the controller's decide step (``docs/policies.md``, Fawkes)."""

from __future__ import annotations

import pytest

from app.control.config import ControlConfig
from app.control.decide import run_policy
from tests.unit.policies.view import inputs, q


def test_fawkes_td_first_decision_waterfills_from_pending_containers() -> None:
    cfg = ControlConfig(
        policy="fawkes:TD", params={"weighting": "TD", "tau": 10.0, "interval_s": 60.0}
    )
    out = run_policy(cfg, inputs(a=q(pend_c=30), b=q(pend_c=10)), ["root.a", "root.b"], {})
    # w = 30/40, 10/40; first decision: shares = weights (no minimums)
    assert out.shares == pytest.approx({"root.a": 0.75, "root.b": 0.25})
    assert out.details["weights"] == pytest.approx({"root.a": 0.75, "root.b": 0.25})
    assert out.state is not None and out.state["admitted"] == ["root.a", "root.b"]
    assert out.min_change_applies is False
