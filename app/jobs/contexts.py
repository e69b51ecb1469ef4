"""YARN submission contexts of admitted jobs (``docs/yarn.md`` section 4.2).

A job's ``run`` is stored as the API validated it, one of:

* ``{"kind": "sleep", "seconds": S, "container_memory_mb": M}``: the built-in demo template, a
  distributed-shell application (``app.yarn.workload``): the job's ``n`` requested tasks of ``S``
  seconds each run on its ``g`` granted containers in ``ceil(n / g)`` waves, so a smaller grant
  takes longer, as it does for a real MapReduce or Spark job;
* ``{"kind": "application", "command": ..., "resource": {"memory_mb", "vcores"}, "environment":
  {...}, "local_resources": [...], "application_type": ..., "max_app_attempts": n, "priority":
  p}``: an ApplicationMaster the user brings.

Every context carries the job's tags (``sidecar-job:<id>``, ``deadline:<epoch s>``, the user's)
and the environment variables ``SIDECAR_GRANTED_VCORES``, ``SIDECAR_JOB_ID`` and
``SIDECAR_DEADLINE_EPOCH_S``; the sidecar's variables win over a user's of the same name, so an
application can trust them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.tags import deadline_tag, job_tag
from app.yarn.workload import AppSpec, Harness, build_submission_context, stage_shell_command

SLEEP = "sleep"
APPLICATION = "application"
GRANTED_VCORES_ENV = "SIDECAR_GRANTED_VCORES"
# The YARN user a job runs as (the API caller), in its stored run and in the context handed to
# RMClient.submit_application, which sends it as user.name / doAs instead of the sidecar's user.
RUN_AS = "run_as"


class TemplateUnavailable(RuntimeError):
    """The built-in template needs a distributed-shell harness the sidecar was not given."""


@dataclass(frozen=True, slots=True)
class JobLaunch:
    """What a submission needs of a job row."""

    job_id: str
    name: str
    queue: str
    deadline_ms: int
    granted_cpus: int
    run: Mapping[str, Any]
    user_tags: Sequence[str]
    # The job's requested tasks (0: one per granted container).
    tasks: int = 0
    # The node label of the partition the job was placed on; None: the shared default partition.
    node_label: str | None = None


def app_tags(launch: JobLaunch) -> list[str]:
    """The job's YARN tags: ours first, then the user's, lower-cased as the RM stores them."""
    ours = [job_tag(launch.job_id), deadline_tag(launch.deadline_ms)]
    return ours + [t.lower() for t in launch.user_tags if t.lower() not in ours]


def sidecar_environment(launch: JobLaunch) -> dict[str, str]:
    """The variables every job's AM gets from the sidecar."""
    return {
        GRANTED_VCORES_ENV: str(launch.granted_cpus),
        "SIDECAR_JOB_ID": launch.job_id,
        "SIDECAR_DEADLINE_EPOCH_S": str(launch.deadline_ms // 1000),
    }


def _entries(mapping: Mapping[str, str]) -> dict[str, list[dict[str, str]]]:
    return {"entry": [{"key": k, "value": v} for k, v in sorted(mapping.items())]}


def build_context(launch: JobLaunch, app_id: str, harness: Harness | None = None) -> dict[str, Any]:
    """The ``application-submission-context`` for ``POST /apps``."""
    kind = launch.run.get("kind")
    if kind == SLEEP:
        context = _sleep_context(launch, app_id, harness)
    elif kind == APPLICATION:
        context = _application_context(launch, app_id)
    else:
        raise ValueError(f"unknown run kind {kind!r}")
    if launch.run.get(RUN_AS):
        context[RUN_AS] = str(launch.run[RUN_AS])
    if launch.node_label:
        # The app's default label expression: every container it asks for without its own
        # expression, the AM's included, runs on that partition.
        context["app-node-label-expression"] = launch.node_label
    return context


def _sleep_context(launch: JobLaunch, app_id: str, harness: Harness | None) -> dict[str, Any]:
    if harness is None:
        raise TemplateUnavailable(
            "the sleep template needs a distributed-shell harness (YARN_SIDECAR_DSHELL_HARNESS)"
        )
    containers = max(launch.granted_cpus, 1)
    waves = max(1, -(-launch.tasks // containers))
    spec = AppSpec(
        queue=launch.queue,
        sleep_s=float(launch.run["seconds"]) * waves,
        num_containers=containers,
        container_memory_mb=int(launch.run.get("container_memory_mb", 256)),
        tags=tuple(app_tags(launch)),
        name=launch.name,
    )
    staged = stage_shell_command(harness.staging_dir, app_id, f"sleep {spec.sleep_s:g}")
    context = build_submission_context(app_id, spec, harness, staged)
    context["am-container-spec"]["environment"] = _entries(sidecar_environment(launch))
    return context


def _local_resources(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    entries = [
        {
            "key": item["name"],
            "value": {
                "resource": item["resource"],
                "type": item.get("type", "FILE"),
                "visibility": item.get("visibility", "APPLICATION"),
                "size": int(item["size"]),
                "timestamp": int(item["timestamp"]),
            },
        }
        for item in items
    ]
    return {"entry": entries}


def _application_context(launch: JobLaunch, app_id: str) -> dict[str, Any]:
    run = launch.run
    resource = run.get("resource") or {}
    environment = {**dict(run.get("environment") or {}), **sidecar_environment(launch)}
    spec: dict[str, Any] = {
        "commands": {"command": str(run["command"])},
        "environment": _entries(environment),
    }
    if run.get("local_resources"):
        spec["local-resources"] = _local_resources(run["local_resources"])
    return {
        "application-id": app_id,
        "application-name": launch.name,
        "application-type": str(run.get("application_type", "YARN")),
        "queue": launch.queue,
        "priority": int(run.get("priority", 0)),
        "max-app-attempts": int(run.get("max_app_attempts", 1)),
        "resource": {
            "memory": int(resource.get("memory_mb", 512)),
            "vCores": int(resource.get("vcores", 1)),
        },
        "application-tags": {"tag": app_tags(launch)},
        "am-container-spec": spec,
    }
