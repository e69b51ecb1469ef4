"""What a poll decides to write (``app.db.poll_writes.plan``): pure, no database."""

from __future__ import annotations

from dataclasses import replace

from app.db.poll_writes import PollMemory, plan
from app.domain.model import NodeState, Resources
from tests.factories import app

T0 = 1_000_000_000


def test_running_counters_are_refreshed_once_per_window_spread_over_the_polls() -> None:
    apps = [app(f"application_1_{i:04d}") for i in range(600)]
    memory = plan(PollMemory(), 1, apps, [], T0, 60_000).memory
    written: dict[str, int] = {a.app_id: 0 for a in apps}
    per_poll = []
    for k in range(1, 7):  # six polls, 10 s apart: one refresh window
        apps = [replace(a, vcore_seconds=a.vcore_seconds + 10) for a in apps]
        writes = plan(memory, 1, apps, [], T0 + k * 10_000, 60_000)
        memory = writes.memory
        # Only the counters moved: narrow counter updates, no full rows.
        assert writes.app_rows == []
        per_poll.append(len(writes.counter_rows))
        for row in writes.counter_rows:
            written[row["b_app_id"]] += 1
    # Every app's counters reached the history exactly once in the window ...
    assert set(written.values()) == {1}
    # ... and no poll carried the whole cluster (600 / 6 = 100 each on average).
    assert max(per_poll) < 200


def test_lifecycle_changes_final_states_and_disappearances_are_written_at_once() -> None:
    running, other = app("application_1_0001"), app("application_1_0002")
    memory = plan(PollMemory(), 1, [running, other], [], T0, 60_000).memory
    done = replace(running, state="FINISHED", final_status="SUCCEEDED", finished_ms=T0 + 5)
    writes = plan(memory, 1, [done], [], T0 + 1_000, 60_000)
    assert [r["app_id"] for r in writes.app_rows] == ["application_1_0001"]
    assert writes.app_rows[0]["state"] == "FINISHED"
    assert writes.gone == ["application_1_0002"]
    # Nothing changed: nothing written, nothing gone (the finished app is not "gone" later).
    again = plan(writes.memory, 1, [], [], T0 + 2_000, 60_000)
    assert again.app_rows == [] and again.gone == []


def test_only_new_or_changed_nodes_get_a_raw_row() -> None:
    a = NodeState("a:1", "a", "/r", "RUNNING", (), Resources(8, 8192), Resources(0, 0), 0)
    b = replace(a, node_id="b:1", host="b")
    first = plan(PollMemory(), 1, [], [a, b], T0, 60_000)
    assert [n.node_id for n in first.node_rows] == ["a:1", "b:1"]
    busy = replace(b, used=Resources(2, 2048), num_containers=1)
    second = plan(first.memory, 1, [], [a, busy], T0 + 10_000, 60_000)
    assert [n.node_id for n in second.node_rows] == ["b:1"]
