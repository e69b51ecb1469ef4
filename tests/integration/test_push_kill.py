"""A sidecar killed (SIGKILL) at any point of a scheduler-configuration push, on the real RM.

The sidecar runs as a real ``yarn-sidecar serve`` process in ``enforce`` mode and reaches the RM
through a forwarding proxy in this test, which holds the exchange at one point of the push and
tells the test, which then kills the sidecar there:

- ``before``: the PUT has left the sidecar but is held before the RM sees it;
- ``during``: the RM has applied the PUT, its answer is held before the sidecar reads it;
- ``after``: the sidecar has the RM's answer; its read-back of the result is held.

Each time the RM is wholly old or wholly new (every managed queue, and the configuration
version), the push's decision was written before the PUT, and once the sidecar is started again
on the same database the push and its decision say which (``not_applied`` or ``applied``).
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from tests.integration.rm_proxy import (
    HoldingProxy,
    Sidecar,
    live_capacities,
    restore,
    same,
    shifted_baseline,
)


def _pushes(db: Path) -> list[tuple[int, str, int | None, str | None, str | None]]:
    """(push id, push status, version_before, decision status, decision reason)."""
    with sqlite3.connect(db) as conn:
        return list(
            conn.execute(
                "SELECT p.id, p.status, p.version_before, d.status, d.reason FROM config_pushes p "
                "LEFT JOIN decisions d ON d.id = p.decision_id ORDER BY p.id"
            )
        )


def _wait(predicate: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.mark.parametrize(
    ("point", "rm_after", "settled"),
    [("before", "old", "not_applied"), ("during", "new", "applied"), ("after", "new", "applied")],
)
def test_a_kill_at_any_point_of_a_push_leaves_the_rm_whole_and_the_record_says_which(
    proxy: HoldingProxy, rm_url: str, tmp_path: Path, point: str, rm_after: str, settled: str
) -> None:
    initial, version0 = asyncio.run(live_capacities(rm_url))
    # The cluster is idle, so the controller moves the queues toward the operator's baseline:
    # 6 points from root.etl to root.default (one push within the step limit), from wherever
    # earlier tests left the RM.
    baseline = shifted_baseline(initial)
    target_default = baseline["root.default"]
    db, log = tmp_path / "sidecar.db", tmp_path / "sidecar.log"
    proxy.arm(point)
    sidecar = Sidecar(db, proxy.url, log)
    try:
        body = {"mode": "enforce", "baseline": baseline}
        r = httpx.put(f"{sidecar.base}/policy", json=body, timeout=30)
        assert r.status_code == 200, r.text
        reached = proxy.held.wait(90)
        assert reached, f"the push never reached the {point} point: {log.read_text()[-3000:]}"
        sidecar.kill()
        # Killed: the RM holds the old or the new configuration, nothing in between.
        live, version = asyncio.run(live_capacities(rm_url))
        (push,) = _pushes(db)
        push_id, status, version_before, decision_status, _ = push
        assert (status, decision_status) == ("pending", "pushing"), push
        assert version_before == version0
        if rm_after == "old":
            assert live == initial and version == version0, (live, initial)
        else:
            assert version == version0 + 1 if version0 is not None else True
            assert same(live["root.default"], str(target_default)), live
            assert same(live["root.etl"], str(baseline["root.etl"])), live
        proxy.pass_through()
        # Started again on the same database (straight to the RM): the push is settled by what
        # the RM's configuration version and values show, and its decision says so.
        again = Sidecar(db, rm_url, log)
        try:
            _wait(lambda: _pushes(db)[0][1] != "pending", "the dead push to be settled")
            first = _pushes(db)[0]
            assert first[0] == push_id and first[1] == settled, first
            assert first[3] == {"applied": "pushed", "not_applied": "not_applied"}[settled]
            assert first[4].startswith("settled by a later tick"), first
            listed = httpx.get(f"{again.base}/pushes", timeout=10).json()["items"]
            assert {p["id"]: p["status"] for p in listed}[push_id] == settled
        finally:
            again.kill(signal.SIGTERM)
    finally:
        sidecar.kill()
        proxy.pass_through()
        asyncio.run(restore(rm_url, initial))
