"""Real MapReduce jobs on a mini cluster with the JobHistory server: the sidecar stores their
tasks, phases and counters, builds profiles per signature, and Fawkes' DD/TT/JS inputs follow the
load.

The cluster is this module's own (``run --jobhistory --nodemanagers 2 --node-labels ',fast'``),
not the session's RM. Jobs are Hadoop's ``WordCount`` (examples jar) over a generated 3 MB text
file and ``SleepJob`` (jobclient tests jar), submitted by the stock MapReduce client in its own
JVM, with ``profile:`` tags as their signatures.
"""

from __future__ import annotations

import asyncio
import json
import random
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.cli import main
from app.yarn import workload
from app.yarn.client import RMClient
from tests.integration.conftest import YarnCluster, started_cluster
from tests.integration.sidecar_app import FINAL_JOB_STATES, settings_for, sidecar

WORDS = ("alpha", "beta", "gamma", "delta", "yarn", "hadoop", "queue", "deadline")


def _two_free_ports(offset: int) -> int:
    """A port P that is free with P + ``offset`` free too (the JobHistory web port)."""
    for _ in range(200):
        port = random.randint(20_000, 65_535 - offset)
        try:
            for p in (port, port + offset):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    sock.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise RuntimeError("no free pair of ports")


@pytest.fixture(scope="module")
def mr_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[YarnCluster]:
    """RM, two NodeManagers (the second labelled ``fast``) and the JobHistory server."""
    port = _two_free_ports(11_800)
    options = ("--nodemanagers", "2", "--node-labels", ",fast", "--jobhistory")
    with started_cluster(tmp_path_factory.mktemp("yarn-mr"), port, *options) as cluster:
        yield cluster


def _details(cluster: YarnCluster) -> dict[str, Any]:
    assert cluster.cluster_json is not None
    details: dict[str, Any] = json.loads(cluster.cluster_json.read_text())
    return details


def mr_job(cluster: YarnCluster, main: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
    """Submit a MapReduce job with the stock client in its own JVM (argument list, no shell)."""
    d = _details(cluster)
    cmd = [
        f"{d['java_home']}/bin/java",
        *shlex.split(d["am_java_opts"]),
        "-cp",
        d["am_classpath"],
        main,
        *args,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wordcount(cluster: YarnCluster, text: Path, out: Path, queue: str) -> subprocess.Popen[bytes]:
    return mr_job(
        cluster,
        "org.apache.hadoop.examples.WordCount",
        [
            "-Dmapreduce.job.tags=profile:wc",
            f"-Dmapreduce.job.queuename={queue}",
            "-Dmapreduce.input.fileinputformat.split.maxsize=1000000",
            str(text),
            str(out),
        ],
    )


def sleepjob(cluster: YarnCluster, queue: str) -> subprocess.Popen[bytes]:
    return mr_job(
        cluster,
        "org.apache.hadoop.mapreduce.SleepJob",
        [
            "-Dmapreduce.job.tags=profile:nap",
            f"-Dmapreduce.job.queuename={queue}",
            "-m",
            "2",
            "-r",
            "1",
            "-mt",
            "4000",
            "-rt",
            "1000",
        ],
    )


def _finish(proc: subprocess.Popen[bytes], timeout_s: float = 300) -> None:
    _, err = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]


async def _mr_apps(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    page = (await client.get("/apps", params={"limit": 1000})).json()
    return [a for a in page["items"] if a["app_type"] == "MAPREDUCE"]


async def _wait_history(
    client: httpx.AsyncClient, count: int, timeout_s: float
) -> list[dict[str, Any]]:
    """The details of every MapReduce app once ``count`` of them have their history stored."""
    deadline = time.monotonic() + timeout_s
    details: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        details = [
            (await client.get(f"/apps/{a['app_id']}")).json() for a in await _mr_apps(client)
        ]
        if sum(1 for d in details if (d["mapreduce"] or {}).get("status") == "ok") >= count:
            return details
        await asyncio.sleep(1)
    pytest.fail(f"history of {count} MapReduce jobs not stored in {timeout_s}s: {details}")


async def test_real_mapreduce_history_profiles_and_fawkes_inputs(
    mr_cluster: YarnCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = tmp_path / "in" / "words.txt"
    text.parent.mkdir()
    rnd = random.Random(7)
    text.write_text(
        "\n".join(" ".join(rnd.choice(WORDS) for _ in range(12)) for _ in range(40_000))
    )
    settings = settings_for(
        mr_cluster,
        tmp_path,
        "mr",
        jobhistory_url=_details(mr_cluster)["jobhistory_url"],
        policy="fawkes:DD",
        policy_interval_s=2,
        queue_floors={"*": 0},
    )
    async with sidecar(settings) as client:
        # history: one run of each signature, one after the other
        _finish(wordcount(mr_cluster, text, tmp_path / "out0", "etl"))
        _finish(sleepjob(mr_cluster, "adhoc"))
        details = await _wait_history(client, 2, timeout_s=120)
        by_profile = {d["tags"][0]: d for d in details}
        wc, nap = by_profile["profile:wc"]["mapreduce"], by_profile["profile:nap"]["mapreduce"]
        assert (wc["maps_completed"], wc["reduces_completed"]) == (3, 1)
        assert (nap["maps_completed"], nap["reduces_completed"]) == (2, 1)
        assert wc["input_bytes"] >= text.stat().st_size and nap["input_bytes"] == 0
        # SleepJob's maps sleep 4 s each, its reduce 1 s
        assert nap["phases"]["map"]["duration_ms"] >= 4000
        assert nap["phases"]["reduce"]["duration_ms"] >= 1000
        for job in (wc, nap):
            assert len(job["tasks"]) == job["maps_completed"] + job["reduces_completed"]
            cpu = job["counters"]["org.apache.hadoop.mapreduce.TaskCounter"]["CPU_MILLISECONDS"]
            assert cpu[0] > 0
        profiles = {p["signature"]: p for p in (await client.get("/profiles")).json()["items"]}
        assert profiles["p:wc"]["runs"] == profiles["p:nap"]["runs"] == 1
        assert profiles["p:wc"]["mean_input_bytes"] == wc["input_bytes"]

        # load: three word counts at once in etl, nothing new in adhoc
        procs = [wordcount(mr_cluster, text, tmp_path / f"out{k}", "etl") for k in (1, 2, 3)]
        seen: dict[str, list[dict[str, Any]]] = {"waiting": [], "slow": [], "tasks": []}
        read: set[int] = set()
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and not all(seen.values()):
            for item in (await client.get("/decisions", params={"limit": 20})).json()["items"]:
                if item["kind"] != "queue" or item["id"] in read:
                    continue
                read.add(item["id"])
                detail = (await client.get(f"/decisions/{item['id']}")).json()
                queues = detail["inputs"].get("policy_inputs", {}).get("queues", {})
                etl, adhoc = queues.get("root.etl", {}), queues.get("root.adhoc", {})
                if etl.get("waiting_input_bytes", 0) > 0:
                    seen["waiting"].append(detail)
                    assert adhoc.get("waiting_input_bytes", 0) == 0
                if etl.get("slowdowns"):
                    seen["slow"].append(detail)
                if etl.get("completed_tasks", 0) > 0:
                    seen["tasks"].append(detail)
            await asyncio.sleep(2)
        for proc in procs:
            _finish(proc)
        assert seen["waiting"], "no decision saw etl's waiting input bytes"
        assert seen["slow"], "no decision saw a running etl job's slowdown"
        assert seen["tasks"], "no decision saw etl's completed tasks"
        # DD: etl's waiting bytes are whole multiples of the profile's input size
        etl_inputs = seen["waiting"][0]["inputs"]["policy_inputs"]["queues"]["root.etl"]
        waiting = etl_inputs["waiting_input_bytes"]
        assert waiting / wc["input_bytes"] == pytest.approx(round(waiting / wc["input_bytes"]))
        await _wait_history(client, 5, timeout_s=120)
        profiles = {p["signature"]: p for p in (await client.get("/profiles")).json()["items"]}
        assert profiles["p:wc"]["runs"] == 4 and profiles["p:wc"]["error"]["samples"] == 3
        # Fawkes DD weighed etl by those bytes: its weight is above adhoc's, which had none
        weights = seen["waiting"][-1]["outputs"]["policy"]["details"]["weights"]
        assert weights["root.etl"] > weights.get("root.adhoc", 0.0)
    # PRISM's simulator replays the five recorded jobs against task-level containers
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("YARN_SIDECAR_CLUSTER_NAME", settings.cluster_name)
    capsys.readouterr()
    assert main(["simulate", "phases", "--from-db", "--nodes", "2"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert row[0] == "db" and int(row[2]) == 5, row


LABEL_QUEUE = """<sched-conf><update-queue><queue-name>root.deadline</queue-name><params>
<entry><key>accessible-node-labels</key><value>fast</value></entry>
<entry><key>accessible-node-labels.fast.capacity</key><value>100</value></entry>
</params></update-queue></sched-conf>"""


async def _label_deadline_queue(
    http: httpx.AsyncClient, conf: str
) -> tuple[list[dict[str, Any]], set[str]]:
    """Apply ``conf`` (root.deadline's label settings); the nodes and the labelled ones."""
    put = await http.put(
        "/ws/v1/cluster/scheduler-conf",
        params={"user.name": "yarn-sidecar"},
        content=conf,
        headers={"Content-Type": "application/xml"},
    )
    assert put.status_code == 200, put.text
    nodes: list[dict[str, Any]] = (await http.get("/ws/v1/cluster/nodes")).json()["nodes"]["node"]
    fast = {n["nodeHTTPAddress"] for n in nodes if "fast" in (n.get("nodeLabels") or [])}
    return nodes, fast


async def test_a_job_the_shared_partition_would_make_late_runs_on_the_labelled_node(
    mr_cluster: YarnCluster, tmp_path: Path
) -> None:
    rm = mr_cluster.rm_url
    async with httpx.AsyncClient(base_url=rm, timeout=30) as http:
        # the operator lets root.deadline use the fast partition (CapacityScheduler label capacity)
        _, fast = await _label_deadline_queue(http, LABEL_QUEUE)
        assert len(fast) == 1
        # history: one run of the signature, straight to YARN (no sidecar), 20 s of work
        assert mr_cluster.cluster_json is not None
        harness = workload.Harness.from_cluster_json(mr_cluster.cluster_json)
        async with RMClient([rm]) as rm_client:
            spec = workload.AppSpec(
                queue="default", sleep_s=20, num_containers=1, container_memory_mb=128,
                tags=("profile:place",), name="place-history",
            )  # fmt: skip
            history_id = await workload.submit(rm_client, spec, harness)
            (before,) = (await workload.wait_final(rm_client, [history_id], timeout_s=180)).values()
        assert before.state == "FINISHED"
        settings = settings_for(mr_cluster, tmp_path, "placement", placement_label="fast")
        async with sidecar(settings) as client:
            # the poller has the 20 s run before the job arrives
            deadline = time.monotonic() + 60
            while (await client.get(f"/apps/{history_id}")).status_code != 200:
                assert time.monotonic() < deadline, "the history run was never polled"
                await asyncio.sleep(1)
            body = {
                "name": "tight-place",
                "deadline": 15,
                "requested_tasks": 1,
                "tags": ["profile:place"],
                "run": {"kind": "sleep", "seconds": 2, "container_memory_mb": 128},
            }
            job = (await client.post("/jobs", json=body)).json()
            deadline = time.monotonic() + 120
            while True:
                current = (await client.get(f"/jobs/{job['id']}")).json()
                if current["state"] in FINAL_JOB_STATES or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1)
            deadline = time.monotonic() + 60
            while True:
                profile = (await client.get("/profiles/p:place")).json()
                if profile.get("runs") == 2 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1)
        assert current["state"] == "finished", current
        (placed,) = [d for d in current["decisions"] if d["action"] == "place"]
        numbers = placed["numbers"]
        # 15 s to the deadline against the signature's ~20 s on the shared partition
        assert (numbers["partition"], numbers["node_label"]) == ("native", "fast")
        assert numbers["estimate_s"] >= numbers["desired_s"]
        app = (await http.get(f"/ws/v1/cluster/apps/{current['app_id']}")).json()["app"]
        # the RM honoured it: the app's label and its AM's node
        assert app["appNodeLabelExpression"] == "fast"
        assert app["amHostHttpAddress"] in fast
        # and the history learnt it: one run of the signature on each partition
        assert (profile["partitions"], profile["runs"]) == ({"virtual": 1, "native": 1}, 2)
        assert profile["slowdown"] is not None and profile["slowdown"] > 0


FAST_QUEUE = """<sched-conf><update-queue><queue-name>root.deadline</queue-name><params>
<entry><key>accessible-node-labels</key><value>fast</value></entry>
<entry><key>accessible-node-labels.fast.capacity</key><value>100</value></entry>
<entry><key>default-node-label-expression</key><value>fast</value></entry>
</params></update-queue></sched-conf>"""


def _slow_sleepjob(
    cluster: YarnCluster, tags: str, maps: int, map_ms: int
) -> subprocess.Popen[bytes]:
    return mr_job(
        cluster,
        "org.apache.hadoop.mapreduce.SleepJob",
        [f"-Dmapreduce.job.tags={tags}", "-Dmapreduce.job.queuename=etl",
         "-m", str(maps), "-r", "1", "-mt", str(map_ms), "-rt", "1000"],
    )  # fmt: skip


async def test_an_observed_job_the_shared_partition_would_make_late_is_moved_to_the_fast_queue(
    mr_cluster: YarnCluster, tmp_path: Path
) -> None:
    """A SleepJob submitted straight to YARN with a ``deadline:`` tag its signature's shared
    run time would miss is moved into root.deadline, whose default node label is ``fast``: its
    task containers run on the labelled node."""
    rm = mr_cluster.rm_url
    async with httpx.AsyncClient(base_url=rm, timeout=30) as http:
        nodes, fast = await _label_deadline_queue(http, FAST_QUEUE)
        # history: one run of the signature on the shared partition (about 20 s)
        _finish(_slow_sleepjob(mr_cluster, "profile:slow", 1, 12_000))
        settings = settings_for(
            mr_cluster, tmp_path, "observed", mode="enforce", placement_queue="root.deadline"
        )
        async with sidecar(settings) as client:
            deadline = time.monotonic() + 60
            while not [a for a in await _mr_apps(client) if a["state"] == "FINISHED"]:
                assert time.monotonic() < deadline, "the history run was never polled"
                await asyncio.sleep(1)
            # the same job, due 10 s after it starts
            due = int(time.time()) + 10
            proc = _slow_sleepjob(mr_cluster, f"profile:slow,deadline:{due}", 2, 6_000)
            ran_on: dict[str, str] = {}
            until = time.monotonic() + 180
            while proc.poll() is None and time.monotonic() < until:
                for n in nodes:
                    listed = (
                        await http.get(f"http://{n['nodeHTTPAddress']}/ws/v1/node/containers")
                    ).json()
                    for c in (listed.get("containers") or {}).get("container") or []:
                        ran_on.setdefault(c["id"], n["nodeHTTPAddress"])
                await asyncio.sleep(0.5)
            _finish(proc)
            items = (await client.get("/decisions", params={"kind": "placement"})).json()
            (placed,) = items["items"]
            detail = (await client.get(f"/decisions/{placed['id']}")).json()
    print("placement", detail, "containers", ran_on)
    assert placed["status"] == "applied", detail
    assert detail["inputs"]["estimate_s"] >= detail["inputs"]["desired_s"]
    assert detail["outputs"]["queue"] == "root.deadline"
    # its ApplicationMaster was placed at submission; the tasks asked for after the move run on
    # the labelled node
    mine = "container_" + detail["inputs"]["app_id"].removeprefix("application_") + "_"
    tasks = {c: nm for c, nm in ran_on.items() if c.startswith(mine) and not c.endswith("_000001")}
    assert any(nm in fast for nm in tasks.values()), ran_on
