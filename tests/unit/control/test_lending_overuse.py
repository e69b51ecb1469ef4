"""The measured ledger when usage exceeds the running NodeManagers' capacity (a node being
decommissioned still runs containers): what nobody could lend is no debt, and the debts of all
queues still sum to 0."""

from __future__ import annotations

import pytest

from app.control.ledger import LedgerState, Poll, integrate
from app.control.lending import loans
from app.domain.observation import ClusterTotals, SamplePoint


def test_a_borrower_is_charged_only_what_was_lent() -> None:
    # entitlements 4/4; a uses 6 (2 beyond), b 4: nobody has spare, nothing was lent
    idle_lenders = loans({"a": 6.0, "b": 4.0}, {"a": 4.0, "b": 4.0})
    assert idle_lenders.borrowed == {"a": 0.0, "b": 0.0}
    # 4/4/4 entitled, a uses 8 (4 beyond), b 3 (1 spare), c 4: b lends its 1, a is charged 1
    some = loans({"a": 8.0, "b": 3.0, "c": 4.0}, {"a": 4.0, "b": 4.0, "c": 4.0})
    assert some.lent == pytest.approx({"a": 0.0, "b": 1.0, "c": 0.0})
    assert some.borrowed == pytest.approx({"a": 1.0, "b": 0.0, "c": 0.0})


def test_debts_sum_to_zero_when_usage_exceeds_the_running_capacity() -> None:
    def poll(t_ms: int) -> Poll:
        used = {"root.a": 6.0, "root.b": 3.0}  # 9 vcores in use, 8 running
        points = {q: SamplePoint(t_ms, used_vcores=u) for q, u in used.items()}
        return Poll(t_ms, ClusterTotals(8.0, 8192.0), points)

    step = integrate(
        LedgerState(),
        [poll(t) for t in range(0, 70_000, 10_000)],
        {"root.a": 1, "root.b": 1},
        1.0,
        30_000,
    )
    assert step is not None
    # b's 1 spare vcore for 60 s is lent to a; a's other vcore beyond 4 came from no queue
    assert step.state.debt == pytest.approx({"root.a": -60.0, "root.b": 60.0})
    assert sum(step.state.debt.values()) == pytest.approx(0.0)
