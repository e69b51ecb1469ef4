"""RRF's queue adapter through the controller's decide step (``docs/policies.md``, Table 9.3)."""

from __future__ import annotations

from app.control.config import ControlConfig
from app.control.decide import run_policy
from app.domain.observation import ClusterTotals
from tests.unit.policies.view import inputs, q


def test_rrf_table_9_3_as_absolute_capacities() -> None:
    # docs/policies.md: RRF gives VM1 <5, 2.5>, VM2 <7, 1>, VM3 <8, 6.5>; memory 2.5 + 1 + 6.5 = 10
    # units rounds by largest remainder (tie 0.5: by name, vm1) to 3, 1, 6
    cfg = ControlConfig(
        policy="rrf",
        params={"algorithm": "rrf"},
        weights={"root.vm1": 1, "root.vm2": 1, "root.vm3": 2},
    )
    ins = inputs(
        ClusterTotals(20, 10),
        vm1=q(used_v=6, used_m=3),
        vm2=q(used_v=8, used_m=1),
        vm3=q(used_v=8, used_m=8),
    )
    out = run_policy(cfg, ins, ["root.vm1", "root.vm2", "root.vm3"], {})
    assert out.amounts == {
        "root.vm1": {"vcores": 5, "memory": 2.5},
        "root.vm2": {"vcores": 7, "memory": 1},
        "root.vm3": {"vcores": 8, "memory": 6.5},
    }
    assert out.absolute == {
        "root.vm1": "[memory=3,vcores=5]",
        "root.vm2": "[memory=1,vcores=7]",
        "root.vm3": "[memory=6,vcores=8]",
    }
