"""The development YARN cluster really works (``docs/yarn.md`` sections 4.2, 5.2-5.4, 9).

(a) distributed-shell apps from ``app.yarn.workload`` run in two queues and finish
FINISHED/SUCCEEDED with real resource-seconds; (b) a capacity change through
``PUT /scheduler-conf`` is read back from ``/scheduler``; (c) a mutation that breaks the
sibling-sum rule is refused with the RM's 400 text and changes nothing. Queue numbers are the ones
in ``hadoop-docker/conf/capacity-scheduler.xml`` (default 40, etl/adhoc/deadline 20 each).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.domain.model import QueueState
from app.yarn import workload
from app.yarn.client import RMClient
from app.yarn.errors import RMRejected
from app.yarn.wire import SchedConfUpdate

pytestmark = pytest.mark.yarn

INITIAL_CAPACITY = {
    "root.default": 40.0,
    "root.etl": 20.0,
    "root.adhoc": 20.0,
    "root.deadline": 20.0,
}
RESTORE = SchedConfUpdate(
    update_queues={"root.etl": {"capacity": "20"}, "root.adhoc": {"capacity": "20"}}
)


def test_shell_command_is_java_write_utf() -> None:
    # DataOutput.writeUTF: unsigned 16-bit big-endian byte count, then the bytes.
    assert workload.shell_command_bytes("sleep 5") == b"\x00\x07sleep 5"
    assert workload.shell_command(workload.AppSpec(queue="etl", sleep_s=2.5)) == "sleep 2.5"
    with pytest.raises(ValueError):
        workload.shell_command_bytes("sl\u00e9ep")


def test_submission_context_shape() -> None:
    harness = workload.Harness(
        am_classpath="/c/am-conf:/c/a.jar", am_java_opts="-Xmx128m", staging_dir=Path("/s")
    )
    spec = workload.AppSpec(
        queue="etl", num_containers=3, container_vcores=2, container_memory_mb=512, tags=("x",)
    )
    staged = workload.StagedFile(Path("/s/app_1/shellCommands"), size=9, timestamp_ms=1000)
    body = workload.build_submission_context("application_1_0001", spec, harness, staged)
    assert body["application-id"] == "application_1_0001"
    assert (body["queue"], body["max-app-attempts"]) == ("etl", 1)
    assert body["resource"] == {"memory": 256, "vCores": 1}
    assert body["application-tags"] == {"tag": ["x"]}
    entry = body["am-container-spec"]["local-resources"]["entry"][0]
    assert entry["key"] == "shellCommands"
    assert entry["value"] == {
        "resource": "file:///s/app_1/shellCommands",
        "type": "FILE",
        "visibility": "APPLICATION",
        "size": 9,
        "timestamp": 1000,
    }
    command = body["am-container-spec"]["commands"]["command"]
    assert command.startswith("{{JAVA_HOME}}/bin/java -Xmx128m -cp /c/am-conf:/c/a.jar ")
    assert "--num_containers 3" in command
    assert "--container_vcores 2" in command
    assert "--container_memory 512" in command


def test_app_spec_rejects_empty_sizes() -> None:
    with pytest.raises(ValueError):
        workload.AppSpec(queue="etl", num_containers=0)
    with pytest.raises(ValueError):
        workload.AppSpec(queue="")


def _capacities(queues: tuple[QueueState, ...]) -> dict[str, float]:
    # The RM reports float32 arithmetic (30 comes back as 30.000002): round to 0.001 %.
    return {q.path: round(q.capacity, 3) for q in queues if q.path in INITIAL_CAPACITY}


@pytest.fixture
async def restored_capacities(rm_client: RMClient) -> AsyncIterator[RMClient]:
    """Yields the client; afterwards puts etl/adhoc back to 20/20 and checks the whole tree."""
    yield rm_client
    current = _capacities(await rm_client.scheduler())
    if current != INITIAL_CAPACITY:
        await rm_client.update_scheduler_conf(RESTORE)
    assert _capacities(await rm_client.scheduler()) == INITIAL_CAPACITY


async def test_workload_apps_finish_in_two_queues(
    rm_client: RMClient, harness: workload.Harness
) -> None:
    tag = f"it-{uuid.uuid4().hex[:8]}"
    specs = [
        workload.AppSpec(queue="etl", sleep_s=3, num_containers=2, tags=(tag, "Two-Queues")),
        workload.AppSpec(
            queue="adhoc", sleep_s=3, container_vcores=2, container_memory_mb=384, tags=(tag,)
        ),
    ]
    ids = await workload.submit_all(rm_client, specs, harness)
    try:
        records = await workload.wait_final(rm_client, ids, timeout_s=120)
    finally:
        await workload.kill_unfinished(rm_client, app_ids=ids)
    for app_id, spec in zip(ids, specs, strict=True):
        rec = records[app_id]
        assert (rec.state, rec.final_status) == ("FINISHED", "SUCCEEDED"), rec.diagnostics
        assert rec.queue in (spec.queue, f"root.{spec.queue}")
        assert tag in rec.tags
        # Every container holds its resources for at least sleep_s, and so does the AM, which
        # waits for them: a lower bound computed from the spec alone.
        vcores = spec.num_containers * spec.container_vcores + spec.am_vcores
        memory = spec.num_containers * spec.container_memory_mb + spec.am_memory_mb
        assert rec.vcore_seconds >= vcores * spec.sleep_s
        assert rec.memory_seconds >= memory * spec.sleep_s
        assert rec.elapsed_ms >= spec.sleep_s * 1000
    assert "two-queues" in records[ids[0]].tags  # the RM lower-cases tags
    tagged = await rm_client.apps(states=["FINISHED"], tags=[tag])
    assert sorted(r.app_id for r in tagged) == sorted(ids)


async def test_capacity_change_is_read_back(restored_capacities: RMClient) -> None:
    client = restored_capacities
    assert _capacities(await client.scheduler()) == INITIAL_CAPACITY
    version = await client.scheduler_conf_version()
    message = await client.update_scheduler_conf(
        SchedConfUpdate(
            update_queues={"root.etl": {"capacity": "30"}, "root.adhoc": {"capacity": "10"}}
        )
    )
    assert message == "Configuration change successfully applied."
    expected = {**INITIAL_CAPACITY, "root.etl": 30.0, "root.adhoc": 10.0}
    assert _capacities(await client.scheduler()) == expected
    conf = await client.scheduler_conf()
    assert conf["yarn.scheduler.capacity.root.etl.capacity"] == "30"
    assert await client.scheduler_conf_version() == version + 1


async def test_capacity_sum_violation_is_refused(restored_capacities: RMClient) -> None:
    client = restored_capacities
    version = await client.scheduler_conf_version()
    # 40 + 30 + 20 + 20 = 110: siblings must sum to 100 in percentage mode (CSDOC).
    with pytest.raises(RMRejected) as refused:
        await client.update_scheduler_conf(
            SchedConfUpdate(update_queues={"root.etl": {"capacity": "30"}})
        )
    assert refused.value.status == 400
    assert "Illegal capacity sum of 1.1 for children of queue root" in refused.value.message
    assert _capacities(await client.scheduler()) == INITIAL_CAPACITY
    conf = await client.scheduler_conf()
    assert conf["yarn.scheduler.capacity.root.etl.capacity"] == "20"
    assert await client.scheduler_conf_version() == version
