"""The actuator against a constructed RM: one PUT, validation first, retries, read-back, restore."""

from __future__ import annotations

from app.yarn.actuator import Actuator
from tests.unit.control.fakes import no_sleep, two_queues

CHANGES = {
    "root.a": {"capacity": "60.00", "maximum-capacity": "100.00"},
    "root.b": {"capacity": "40.00", "maximum-capacity": "100.00"},
}
PREVIOUS = {
    "root.a": {"capacity": "50", "maximum-capacity": "100"},
    "root.b": {"capacity": "50", "maximum-capacity": "100"},
}


async def test_read_live_reports_children_and_version() -> None:
    rm = two_queues()
    live = await Actuator(rm).read_live("root")
    assert live.version == 1 and sorted(live.values) == ["root.a", "root.b"]
    assert live.values["root.a"] == {"capacity": "50", "maximum-capacity": "100"}


async def test_push_is_one_put_verified_by_read_back() -> None:
    rm = two_queues()
    result = await Actuator(rm, sleep=no_sleep).push("root", CHANGES, PREVIOUS, 1)
    assert result.status == "applied" and result.version_after == 2
    assert len(rm.puts) == 1 and rm.validations == 1
    assert rm.conf["root.a"]["capacity"] == "60.00"


async def test_rejected_validation_sends_no_put_and_keeps_the_rm_message() -> None:
    rm = two_queues()
    broken = {"root.a": {"capacity": "70.00"}}  # 70 + 50 != 100
    result = await Actuator(rm, sleep=no_sleep).push("root", broken, PREVIOUS, 1)
    assert result.status == "rejected" and "Illegal capacity sum of 1.2" in result.message
    assert rm.puts == [] and rm.conf["root.a"]["capacity"] == "50"


async def test_unavailable_put_is_retried_with_backoff() -> None:
    rm = two_queues()
    rm.put_failures = 2
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    result = await Actuator(rm, retries=3, backoff_s=1.0, sleep=sleep).push(
        "root", CHANGES, PREVIOUS, 1
    )
    assert result.status == "applied" and result.attempts == 3
    assert slept == [1.0, 2.0] and len(rm.puts) == 3


async def test_a_put_whose_answer_was_lost_is_not_sent_again() -> None:
    rm = two_queues()
    rm.put_failures, rm.apply_before_failing = 1, True
    result = await Actuator(rm, sleep=no_sleep).push("root", CHANGES, PREVIOUS, 1)
    assert result.status == "applied" and len(rm.puts) == 1 and rm.version == 2


async def test_rm_down_leaves_the_configuration_wholly_old() -> None:
    rm = two_queues()
    rm.put_failures = 10
    result = await Actuator(rm, retries=2, sleep=no_sleep).push("root", CHANGES, PREVIOUS, 1)
    assert result.status == "unavailable" and len(rm.puts) == 3
    assert rm.conf["root.a"]["capacity"] == "50" and rm.version == 1


async def test_read_back_mismatch_restores_the_previous_values() -> None:
    rm = two_queues()
    rm.corrupt = {"root.a": "60.5"}  # the RM ends up holding something else than was sent
    result = await Actuator(rm, sleep=no_sleep).push(
        "root",
        {"root.a": {"capacity": "60.00"}, "root.b": {"capacity": "40.00"}},
        PREVIOUS,
        1,
    )
    assert result.status == "reverted"
    assert result.mismatches["root.a"]["capacity"] == {"expected": "60.00", "live": "60.5"}
    assert len(rm.puts) == 2 and rm.puts[1] == PREVIOUS
    assert {q: v["capacity"] for q, v in rm.conf.items()} == {"root.a": "50", "root.b": "50"}
