"""LTRF's and MLRF's queue adapter through the controller's decide step (hand computations
from ``docs/policies.md``, LTRF)."""

from __future__ import annotations

import pytest

from app.control.config import ControlConfig
from app.control.decide import run_policy
from app.policies.ltrf import core as ltrf
from tests.unit.policies.view import inputs, q


def test_ltrf_serves_the_smaller_history_first_and_mlrf_splits_evenly() -> None:
    # R = 8, demand a 8, b 6, entitlements 4 each, horizon 10 s; counted a 100, b 20.
    # LTRF raises b from 20 until its demand 6 (20 + 60 = 80 < 100), a gets the 2 left.
    cfg = ControlConfig(policy="ltrf", params={"discount": 1.0}, interval_s=10)
    ins = inputs(a=q(used_v=4, pend_v=4), b=q(used_v=2, pend_v=4))
    ledger = ltrf.LtrfState(counted={"root.a": 100, "root.b": 20})
    out = run_policy(cfg, ins, ["root.a", "root.b"], {}, ledger)
    assert out.details["alloc"] == pytest.approx({"root.a": 2, "root.b": 6})
    assert out.shares == pytest.approx({"root.a": 0.25, "root.b": 0.75})
    # MLRF ignores history: 4 and 4
    mlrf = run_policy(
        ControlConfig(policy="mlrf", interval_s=10), ins, ["root.a", "root.b"], {}, ledger
    )
    assert mlrf.shares == pytest.approx({"root.a": 0.5, "root.b": 0.5})
