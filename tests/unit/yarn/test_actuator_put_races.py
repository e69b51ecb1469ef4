"""The actuator's PUT against writes it cannot see coming: a PUT that was sent and not answered
(the RM may still apply it), a PUT that reached no RM, and another write landing between the
tick's read and the PUT (the RM's mutation API has no compare-and-set)."""

from __future__ import annotations

import httpx
import pytest

from app.yarn import RMClient, SchedConfUpdate
from app.yarn.actuator import Actuator
from app.yarn.errors import RMUnavailable, RMUnreachable
from tests.unit.control.fakes import FakeRM, LateRM, no_sleep, two_queues

CHANGES = {
    "root.a": {"capacity": "60.00", "maximum-capacity": "100.00"},
    "root.b": {"capacity": "40.00", "maximum-capacity": "100.00"},
}
PREVIOUS = {
    "root.a": {"capacity": "50", "maximum-capacity": "100"},
    "root.b": {"capacity": "50", "maximum-capacity": "100"},
}
OPERATOR = {"root.a": {"capacity": "20"}, "root.b": {"capacity": "80"}}


def slow_rm() -> LateRM:
    """Every PUT is sent and times out on the client's side until ``land_late``."""
    rm = LateRM(two_queues().conf)
    rm.slow = True
    return rm


async def test_a_sent_unanswered_put_is_not_resent_and_stays_unverified() -> None:
    rm = slow_rm()
    result = await Actuator(rm, retries=3, sleep=no_sleep).push("root", CHANGES, PREVIOUS, 1)
    assert result.status == "unverified" and result.attempts == 1
    assert len(rm.puts) == 1 and rm.version == 1
    assert "may still apply them" in result.message
    rm.land_late()  # one copy was in flight, one lands
    assert rm.version == 2 and rm.conf["root.a"]["capacity"] == "60.00"


async def test_a_sent_unanswered_put_the_rm_holds_is_applied() -> None:
    rm = two_queues()
    rm.put_failures, rm.apply_before_failing = 1, True  # applied, then the answer is lost
    result = await Actuator(rm, retries=3, sleep=no_sleep).push("root", CHANGES, PREVIOUS, 1)
    assert result.status == "applied" and result.version_after == 2 and len(rm.puts) == 1
    assert "not by one" not in result.message


async def test_an_unreached_put_is_not_resent_over_a_write_made_during_the_backoff() -> None:
    rm = two_queues()
    rm.put_failures = 1  # the first PUT reaches no RM

    async def operator_edits_meanwhile(_: float) -> None:
        rm.hand_edit(OPERATOR)

    result = await Actuator(rm, retries=3, sleep=operator_edits_meanwhile).push(
        "root", CHANGES, PREVIOUS, 1
    )
    assert result.status == "conflict" and len(rm.puts) == 1
    assert "moved from 1 to 2" in result.message
    assert {q: v["capacity"] for q, v in rm.conf.items()} == {"root.a": "20", "root.b": "80"}


class OperatorEditsAfterValidation(FakeRM):
    """The operator's PUT lands after the tick's read, before the sidecar's PUT."""

    async def validate_scheduler_conf(self, update: SchedConfUpdate) -> None:
        await super().validate_scheduler_conf(update)
        self.hand_edit(OPERATOR)


async def test_a_write_after_the_ticks_read_is_not_overwritten() -> None:
    rm = OperatorEditsAfterValidation(two_queues().conf)
    result = await Actuator(rm, sleep=no_sleep).push("root", CHANGES, PREVIOUS, 1)
    assert result.status == "conflict" and result.attempts == 0 and rm.puts == []
    assert {q: v["capacity"] for q, v in rm.conf.items()} == {"root.a": "20", "root.b": "80"}
    assert rm.version == 2


class OperatorEditsJustBeforeOurPut(FakeRM):
    """The operator's PUT lands after the version check, just before the sidecar's PUT is
    applied: the window that remains without compare-and-set."""

    async def update_scheduler_conf(self, update: SchedConfUpdate) -> str:
        if not self.puts:
            self.hand_edit(OPERATOR)
        return await super().update_scheduler_conf(update)


async def test_a_write_in_the_remaining_window_is_reported_with_the_push() -> None:
    rm = OperatorEditsJustBeforeOurPut(two_queues().conf)
    result = await Actuator(rm, sleep=no_sleep).push("root", CHANGES, PREVIOUS, 1)
    assert result.status == "applied" and result.version_before == 1 and result.version_after == 3
    assert "moved from 1 to 3, not by one: another write landed" in result.message


def _refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


def _read_timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


async def _put_with(handler: httpx.MockTransport) -> None:
    async def sleep(_: float) -> None:
        return None

    async with RMClient(("http://rm1:8088",), transport=handler, sleep=sleep) as client:
        await client.update_scheduler_conf(SchedConfUpdate(update_queues=CHANGES))


async def test_the_client_tells_a_put_that_reached_no_rm_from_one_that_was_sent() -> None:
    with pytest.raises(RMUnreachable):
        await _put_with(httpx.MockTransport(_refused))
    with pytest.raises(RMUnavailable, match="may or may not have been applied") as sent:
        await _put_with(httpx.MockTransport(_read_timeout))
    assert not isinstance(sent.value, RMUnreachable)
