"""Submission contexts of admitted jobs (``app.jobs.contexts``; ``docs/yarn.md`` section 4.2)."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest

from app.jobs.contexts import JobLaunch, TemplateUnavailable, app_tags, build_context
from app.yarn.workload import Harness

DEADLINE_MS = 1_700_000_100_500


def _launch(
    run: dict[str, object], cpus: int = 3, tags: tuple[str, ...] = ("Team-A",)
) -> JobLaunch:
    return JobLaunch("abc123", "nightly", "root.deadline", DEADLINE_MS, cpus, run, tags)


def _env(context: dict[str, object]) -> dict[str, str]:
    spec = context["am-container-spec"]
    assert isinstance(spec, dict)
    return {e["key"]: e["value"] for e in spec["environment"]["entry"]}


def test_tags_are_ours_first_then_the_users_lower_cased() -> None:
    assert app_tags(_launch({"kind": "application"})) == [
        "sidecar-job:abc123",
        "deadline:1700000100",
        "team-a",
    ]


def test_application_context_carries_tags_resources_and_granted_vcores() -> None:
    run = {
        "kind": "application",
        "command": "python3 job.py",
        "resource": {"memory_mb": 1024, "vcores": 2},
        "environment": {"SIDECAR_GRANTED_VCORES": "999", "MODE": "fast"},
        "local_resources": [
            {
                "name": "job.py",
                "resource": "hdfs://nn/apps/job.py",
                "type": "FILE",
                "visibility": "APPLICATION",
                "size": 10,
                "timestamp": 5,
            }
        ],
        "application_type": "SPARK",
        "max_app_attempts": 2,
        "priority": 1,
    }
    ctx = build_context(_launch(run), "application_1_0007")
    assert ctx["application-id"] == "application_1_0007"
    assert ctx["queue"] == "root.deadline"
    assert ctx["resource"] == {"memory": 1024, "vCores": 2}
    assert ctx["application-tags"] == {
        "tag": ["sidecar-job:abc123", "deadline:1700000100", "team-a"]
    }
    assert (ctx["application-type"], ctx["max-app-attempts"], ctx["priority"]) == ("SPARK", 2, 1)
    assert ctx["am-container-spec"]["commands"] == {"command": "python3 job.py"}
    env = _env(ctx)
    # The sidecar's grant wins over a user variable of the same name.
    assert env["SIDECAR_GRANTED_VCORES"] == "3"
    assert env["MODE"] == "fast"
    assert env["SIDECAR_DEADLINE_EPOCH_S"] == "1700000100"
    (entry,) = ctx["am-container-spec"]["local-resources"]["entry"]
    assert entry["key"] == "job.py"
    assert entry["value"]["resource"] == "hdfs://nn/apps/job.py"


def test_sleep_template_runs_one_container_per_granted_vcore(tmp_path: Path) -> None:
    harness = Harness("/cp/*", "-Xmx128m", tmp_path / "staging")
    run = {"kind": "sleep", "seconds": 4, "container_memory_mb": 128}
    ctx = build_context(_launch(run, cpus=5), "application_1_0009", harness)
    command = ctx["am-container-spec"]["commands"]["command"]
    assert "--num_containers 5" in command
    assert "--container_memory 128" in command
    assert _env(ctx)["SIDECAR_GRANTED_VCORES"] == "5"
    assert "sidecar-job:abc123" in ctx["application-tags"]["tag"]
    staged = tmp_path / "staging" / "application_1_0009" / "shellCommands"
    # DataOutput.writeUTF: 2-byte length, then the command.
    assert staged.read_bytes() == struct.pack(">H", 7) + b"sleep 4"


@pytest.mark.parametrize(
    ("tasks", "cpus", "sleep"),
    [(7, 3, b"sleep 12"), (6, 3, b"sleep 8"), (2, 3, b"sleep 4"), (0, 3, b"sleep 4")],
)
def test_sleep_template_runs_the_requested_tasks_in_waves_on_the_grant(
    tmp_path: Path, tasks: int, cpus: int, sleep: bytes
) -> None:
    """7 tasks of 4 s on 3 containers: 3 waves; fewer tasks than containers: one."""
    harness = Harness("/cp/*", "-Xmx128m", tmp_path / "staging")
    run = {"kind": "sleep", "seconds": 4, "container_memory_mb": 128}
    launch = _launch(run, cpus=cpus)
    launch = dataclasses.replace(launch, tasks=tasks)
    ctx = build_context(launch, "application_1_0010", harness)
    assert f"--num_containers {cpus}" in ctx["am-container-spec"]["commands"]["command"]
    staged = tmp_path / "staging" / "application_1_0010" / "shellCommands"
    assert staged.read_bytes() == struct.pack(">H", len(sleep)) + sleep


def test_sleep_template_without_harness_is_refused() -> None:
    with pytest.raises(TemplateUnavailable):
        build_context(_launch({"kind": "sleep", "seconds": 1}), "application_1_0001")
    with pytest.raises(ValueError):
        build_context(_launch({"kind": "mystery"}), "application_1_0001")


def test_a_placed_job_asks_for_its_partition_and_an_unplaced_one_for_none() -> None:
    run = {"kind": "application", "command": "true"}
    placed = dataclasses.replace(_launch(run), node_label="fast")
    assert build_context(placed, "application_1_0008")["app-node-label-expression"] == "fast"
    assert "app-node-label-expression" not in build_context(_launch(run), "application_1_0009")
