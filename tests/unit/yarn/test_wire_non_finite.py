"""A number the RM reports as not finite (Jackson's quoted ``"NaN"`` / ``"Infinity"``) is read
as absent: the field's neutral default, never a NaN or an infinity in the snapshot."""

from __future__ import annotations

import copy
import dataclasses
import math

import orjson
import pytest

from app.domain.model import QueueState
from app.yarn import mapping, wire
from app.yarn.errors import RMProtocolError
from tests.unit.yarn.samples import recorded


def _queues(body: object) -> dict[str, QueueState]:
    """The mapped queues of a ``/scheduler`` answer, by path, parsed as the client parses it."""
    envelope = wire.parse(wire.SchedulerEnvelope, orjson.loads(orjson.dumps(body)))
    return {q.path: q for q in mapping.queues(envelope.scheduler.schedulerInfo)}


def test_non_finite_queue_numbers_map_to_defaults_and_leave_the_other_queues_alone() -> None:
    body = recorded("scheduler.json")
    odd = copy.deepcopy(body)
    leaves = odd["scheduler"]["schedulerInfo"]["queues"]["queue"]
    adhoc = next(q for q in leaves if q["queueName"] == "adhoc")
    adhoc.update(
        usedCapacity="NaN",
        absoluteUsedCapacity="Infinity",
        absoluteCapacity="-Infinity",
        weight="NaN",
    )

    before, after = _queues(body), _queues(odd)

    queue = after["root.adhoc"]
    # Absent: usedCapacity 0, the absolute values fall back to the relative ones, no weight.
    assert queue.used_capacity == 0.0
    assert queue.absolute_used_capacity == 0.0
    assert queue.absolute_capacity == queue.capacity
    assert queue.weight == -1.0
    for state in after.values():
        for name, value in dataclasses.asdict(state).items():
            if isinstance(value, float):
                assert math.isfinite(value), (state.path, name)
    assert {p: q for p, q in after.items() if p != "root.adhoc"} == {
        p: q for p, q in before.items() if p != "root.adhoc"
    }


@pytest.mark.parametrize("progress", ["NaN", "Infinity", "-Infinity", "nan", " inf "])
def test_a_non_finite_app_progress_reads_as_no_progress(progress: str) -> None:
    body = recorded("apps_running.json")
    body["apps"]["app"][0]["progress"] = progress
    apps = wire.parse(wire.AppsEnvelope, orjson.loads(orjson.dumps(body))).items()
    assert mapping.app_record(apps[0]).progress == 0.0


def test_a_non_finite_value_where_a_whole_number_is_required_is_still_refused() -> None:
    with pytest.raises(RMProtocolError, match=r"clusterInfo\.id"):
        wire.parse(
            wire.ClusterInfoEnvelope,
            {"clusterInfo": {"id": "NaN", "startedOn": 1, "state": "STARTED", "haState": "A"}},
        )
