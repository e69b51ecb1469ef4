"""Real YARN workloads for development and integration tests (``docs/yarn.md`` sections 4.1, 4.2,
9.5).

Submits distributed-shell applications through the RM REST API (``new-application`` then
``POST /apps``, via ``RMClient``). Their ApplicationMaster really registers, asks for
``num_containers`` containers of the chosen size, runs ``sleep S`` in each and unregisters, so a
finished app ends FINISHED/SUCCEEDED with real ``vcoreSeconds``/``memorySeconds`` and elapsed
times. A bare ``sleep`` AM would never register and ends FAILED (``docs/yarn.md`` section 1, item
6).

The AM is Hadoop's ``org.apache.hadoop.yarn.applications.distributedshell.ApplicationMaster``.
It reads its shell command from a file named ``shellCommands`` in its working directory, written
with Java's ``DataOutput.writeUTF``; the file is shipped as an APPLICATION local resource. The
mini cluster (``hadoop-docker/minicluster/run``) uses the local ``file:///`` filesystem, so the
resource is a plain file in a staging directory the NodeManager can read; what the AM needs from
the cluster (classpath, JVM options) comes from the ``cluster.json`` the launcher writes.

Pure builders (``shell_command_bytes``, ``am_command``, ``build_submission_context``) are
separate from the I/O (``stage_shell_command``, ``submit``, ``submit_all``, ``wait_final``,
``kill_unfinished``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.model import AppRecord
from app.yarn.client import RMClient

AM_CLASS = "org.apache.hadoop.yarn.applications.distributedshell.ApplicationMaster"
SHELL_COMMAND_RESOURCE = "shellCommands"
DEFAULT_APP_TYPE = "SIDECAR-DSHELL"
_UTF_MAX_BYTES = 0xFFFF


@dataclass(frozen=True, slots=True)
class Harness:
    """What launching an AM needs from the running cluster (its ``cluster.json``).

    ``staging_dir`` must be readable by the NodeManagers under the same path (true for the
    local mini cluster, not for the Docker compose stack).
    """

    am_classpath: str
    am_java_opts: str
    staging_dir: Path

    @classmethod
    def from_cluster_json(cls, path: Path, staging_dir: Path | None = None) -> Harness:
        """Read the launcher's ``cluster.json``; staging defaults to ``<workdir>/staging``."""
        data = json.loads(path.read_text(encoding="utf-8"))
        workdir = Path(str(data["workdir"]))
        return cls(
            am_classpath=str(data["am_classpath"]),
            am_java_opts=str(data.get("am_java_opts") or ""),
            staging_dir=staging_dir if staging_dir is not None else workdir / "staging",
        )


@dataclass(frozen=True, slots=True)
class AppSpec:
    """One distributed-shell application: where it runs, how big, how long.

    ``sleep_s`` is each container's run time; the AM itself adds its JVM start-up (a few
    seconds) on top. Tags are lower-cased by the RM (``docs/yarn.md`` section 4.2).
    """

    queue: str
    sleep_s: float = 5.0
    num_containers: int = 1
    container_vcores: int = 1
    container_memory_mb: int = 256
    am_vcores: int = 1
    am_memory_mb: int = 256
    tags: tuple[str, ...] = ()
    name: str = "sidecar-workload"
    app_type: str = DEFAULT_APP_TYPE
    priority: int = 0

    def __post_init__(self) -> None:
        positive = {
            "num_containers": self.num_containers,
            "container_vcores": self.container_vcores,
            "container_memory_mb": self.container_memory_mb,
            "am_vcores": self.am_vcores,
            "am_memory_mb": self.am_memory_mb,
        }
        for key, value in positive.items():
            if value < 1:
                raise ValueError(f"{key} must be >= 1, got {value}")
        if self.sleep_s < 0:
            raise ValueError(f"sleep_s must be >= 0, got {self.sleep_s}")
        if not self.queue:
            raise ValueError("queue must not be empty")


@dataclass(frozen=True, slots=True)
class StagedFile:
    """A local file as a YARN ``LocalResource`` needs it: size and mtime must match exactly."""

    path: Path
    size: int
    timestamp_ms: int


# --- pure builders ----------------------------------------------------------------------------


def shell_command(spec: AppSpec) -> str:
    """The command each container runs."""
    return f"sleep {spec.sleep_s:g}"


def shell_command_bytes(command: str) -> bytes:
    """``command`` in Java ``DataOutput.writeUTF`` form: 2-byte big-endian length, then bytes.

    The AM reads the file with ``DataInputStream.readUTF``. Only ASCII is accepted, where
    modified UTF-8 equals plain UTF-8.
    """
    if not command.isascii() or "\x00" in command:
        raise ValueError("shell command must be ASCII without NUL")
    data = command.encode("ascii")
    if len(data) > _UTF_MAX_BYTES:
        raise ValueError("shell command longer than 65535 bytes")
    return struct.pack(">H", len(data)) + data


def am_command(spec: AppSpec, harness: Harness) -> str:
    """The AM container's command line; ``{{JAVA_HOME}}`` and ``<LOG_DIR>`` are NM-expanded."""
    args = [
        "--container_memory",
        str(spec.container_memory_mb),
        "--container_vcores",
        str(spec.container_vcores),
        "--num_containers",
        str(spec.num_containers),
        "--priority",
        "0",
    ]
    return " ".join(
        [
            "{{JAVA_HOME}}/bin/java",
            harness.am_java_opts,
            "-cp",
            shlex.quote(harness.am_classpath),
            AM_CLASS,
            *args,
            "1><LOG_DIR>/AppMaster.stdout",
            "2><LOG_DIR>/AppMaster.stderr",
        ]
    )


def build_submission_context(
    app_id: str, spec: AppSpec, harness: Harness, staged: StagedFile
) -> dict[str, Any]:
    """The ``application-submission-context`` JSON body for ``POST /apps`` (section 4.2).

    ``max-app-attempts`` is 1 so a broken AM shows as FAILED at once instead of being retried.
    """
    local_resource = {
        "resource": staged.path.resolve().as_uri(),
        "type": "FILE",
        "visibility": "APPLICATION",
        "size": staged.size,
        "timestamp": staged.timestamp_ms,
    }
    return {
        "application-id": app_id,
        "application-name": spec.name,
        "application-type": spec.app_type,
        "queue": spec.queue,
        "priority": spec.priority,
        "max-app-attempts": 1,
        "resource": {"memory": spec.am_memory_mb, "vCores": spec.am_vcores},
        "application-tags": {"tag": list(spec.tags)},
        "am-container-spec": {
            "local-resources": {
                "entry": [{"key": SHELL_COMMAND_RESOURCE, "value": local_resource}],
            },
            "commands": {"command": am_command(spec, harness)},
        },
    }


# --- I/O ----------------------------------------------------------------------------------------


def stage_shell_command(staging_dir: Path, app_id: str, command: str) -> StagedFile:
    """Write ``<staging_dir>/<app_id>/shellCommands`` for the AM to localize.

    The mtime is set to a whole second so it reads the same at millisecond and second precision
    (the NM refuses a resource whose timestamp differs: "changed on src filesystem").
    """
    target = staging_dir / app_id / SHELL_COMMAND_RESOURCE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(shell_command_bytes(command))
    whole_second = int(time.time())
    os.utime(target, (whole_second, whole_second))
    stat = target.stat()
    return StagedFile(path=target, size=stat.st_size, timestamp_ms=stat.st_mtime_ns // 1_000_000)


async def submit(client: RMClient, spec: AppSpec, harness: Harness) -> str:
    """Ask for an id, stage the command, submit; returns the application id."""
    new = await client.new_application()
    staged = stage_shell_command(harness.staging_dir, new.app_id, shell_command(spec))
    await client.submit_application(build_submission_context(new.app_id, spec, harness, staged))
    return new.app_id


async def submit_all(client: RMClient, specs: Sequence[AppSpec], harness: Harness) -> list[str]:
    """Submit ``specs`` concurrently; ids come back in the order of ``specs``."""
    return list(await asyncio.gather(*(submit(client, spec, harness) for spec in specs)))


async def wait_final(
    client: RMClient,
    app_ids: Iterable[str],
    *,
    timeout_s: float,
    poll_s: float = 1.0,
) -> dict[str, AppRecord]:
    """Poll until every app is FINISHED, FAILED or KILLED; raises ``TimeoutError`` otherwise."""
    pending = set(app_ids)
    done: dict[str, AppRecord] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while pending:
        records = await asyncio.gather(*(client.app(app_id) for app_id in sorted(pending)))
        for record in records:
            if record.is_finished:
                done[record.app_id] = record
                pending.discard(record.app_id)
        if not pending:
            break
        if loop.time() >= deadline:
            states = {r.app_id: r.state for r in records if r.app_id in pending}
            raise TimeoutError(f"apps not final after {timeout_s}s: {states}")
        await asyncio.sleep(poll_s)
    return done


async def wait_state(
    client: RMClient,
    app_ids: Iterable[str],
    states: frozenset[str],
    *,
    timeout_s: float,
    poll_s: float = 0.5,
) -> dict[str, AppRecord]:
    """Poll until every app is in one of ``states`` (or final); raises ``TimeoutError``."""
    wanted = set(app_ids)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        records = await asyncio.gather(*(client.app(app_id) for app_id in sorted(wanted)))
        if all(r.state in states or r.is_finished for r in records):
            return {r.app_id: r for r in records}
        if loop.time() >= deadline:
            seen = {r.app_id: r.state for r in records}
            raise TimeoutError(f"apps not in {sorted(states)} after {timeout_s}s: {seen}")
        await asyncio.sleep(poll_s)


async def kill_unfinished(
    client: RMClient, *, tags: Sequence[str] = (), app_ids: Sequence[str] = ()
) -> list[str]:
    """Kill every unfinished app with one of ``tags`` or in ``app_ids``; returns the killed ids."""
    targets: set[str] = set(app_ids)
    if tags:
        running = await client.apps(
            states=("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING"),
            tags=[tag.lower() for tag in tags],
        )
        targets.update(record.app_id for record in running)
    killed: list[str] = []
    for app_id in sorted(targets):
        record = await client.app(app_id)
        if not record.is_finished:
            await client.kill_application(app_id, diagnostics="workload cleanup")
            killed.append(app_id)
    return killed


def summarize(records: Mapping[str, AppRecord]) -> list[dict[str, object]]:
    """A JSON-friendly per-app line (queue, state, elapsed, resource-seconds) for reports."""
    return [
        {
            "app_id": r.app_id,
            "queue": r.queue,
            "state": r.state,
            "final_status": r.final_status,
            "elapsed_ms": r.elapsed_ms,
            "vcore_seconds": r.vcore_seconds,
            "memory_seconds": r.memory_seconds,
        }
        for r in sorted(records.values(), key=lambda rec: rec.app_id)
    ]
