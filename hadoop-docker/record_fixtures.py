"""Record real ResourceManager responses into ``tests/fixtures/rm/`` (``docs/yarn.md`` sections 3-5, 12).

Run against a freshly started mini cluster (``hadoop-docker/minicluster/run``) so the app list
starts empty:

    .venv/bin/python hadoop-docker/record_fixtures.py --cluster-json <workdir>/cluster.json

Bodies are stored as the RM sent them, JSON re-indented for review (values untouched). Non-2xx
statuses are part of the file name. It also probes the section 12 questions (JSON body for
``PUT /scheduler-conf``, ``expiryTime`` offsets) and records what the RM answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from app.yarn import workload
from app.yarn.client import RMClient

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "rm"
API = "/ws/v1/cluster"
USER = {"user.name": "yarn-sidecar"}
TAG = "fixture-recording"
BAD_CAPACITY_XML = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><sched-conf>'
    "<update-queue><queue-name>root.etl</queue-name><params>"
    "<entry><key>capacity</key><value>30</value></entry></params></update-queue></sched-conf>"
)


def save_json(name: str, resp: httpx.Response) -> Any:
    """Store ``resp``'s JSON body as ``name`` and return it."""
    data = resp.json()
    (OUT / name).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"{name}: HTTP {resp.status_code}, {len(resp.content)} bytes")
    return data


def save_text(name: str, resp: httpx.Response) -> None:
    """Store ``resp``'s body verbatim as ``name``."""
    (OUT / name).write_text(resp.text, encoding="utf-8")
    print(f"{name}: HTTP {resp.status_code}, content-type {resp.headers.get('content-type')}")


def record_idle(http: httpx.Client) -> None:
    """Endpoints that need no applications."""
    save_json("info.json", http.get(f"{API}/info"))
    save_json("apps_empty.json", http.get(f"{API}/apps"))
    save_json("app_not_found_404.json", http.get(f"{API}/apps/application_1_0001"))
    save_json("nodes.json", http.get(f"{API}/nodes"))
    save_json("scheduler_conf.json", http.get(f"{API}/scheduler-conf", params=USER))
    save_json("scheduler_conf_version.json", http.get(f"{API}/scheduler-conf/version", params=USER))
    save_json("scheduler_idle.json", http.get(f"{API}/scheduler"))
    save_json("new_application.json", http.post(f"{API}/apps/new-application", params=USER))


def record_conf_mutations(http: httpx.Client, probes: dict[str, Any]) -> None:
    """The 400 refusal (XML body) and what a JSON body does (``docs/yarn.md`` section 12, item 5)."""
    bad = http.put(
        f"{API}/scheduler-conf",
        params=USER,
        content=BAD_CAPACITY_XML,
        headers={"Content-Type": "application/xml"},
    )
    save_text(f"scheduler_conf_rejected_{bad.status_code}.txt", bad)
    json_body = {
        "update-queue": [
            {
                "queue-name": "root.etl",
                "params": {"entry": [{"key": "maximum-capacity", "value": "90"}]},
            }
        ]
    }
    as_json = http.put(f"{API}/scheduler-conf", params=USER, json=json_body)
    probes["put_scheduler_conf_json_body"] = {"status": as_json.status_code, "body": as_json.text}
    conf = {
        p["name"]: p["value"]
        for p in http.get(f"{API}/scheduler-conf", params=USER).json()["property"]
    }
    probes["after_json_put_etl_maximum_capacity"] = conf.get(
        "yarn.scheduler.capacity.root.etl.maximum-capacity"
    )
    restore = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><sched-conf>'
        "<update-queue><queue-name>root.etl</queue-name><params>"
        "<entry><key>maximum-capacity</key><value>100</value></entry></params></update-queue>"
        "</sched-conf>"
    )
    ok = http.put(
        f"{API}/scheduler-conf",
        params=USER,
        content=restore,
        headers={"Content-Type": "application/xml"},
    )
    save_text(f"scheduler_conf_put_{ok.status_code}.txt", ok)
    save_json(
        "scheduler_conf_version_after_put.json",
        http.get(f"{API}/scheduler-conf/version", params=USER),
    )


def probe_timeouts(http: httpx.Client, app_id: str, probes: dict[str, Any]) -> None:
    """``expiryTime`` with ``+0000`` and ``+00:00`` (``docs/yarn.md`` section 12, item 6)."""
    save_json("app_timeouts.json", http.get(f"{API}/apps/{app_id}/timeouts"))
    far = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 3600))
    for label, suffix in (("plus0000", ".000+0000"), ("plus00colon00", ".000+00:00")):
        body = {"timeout": {"type": "LIFETIME", "expiryTime": far + suffix}}
        resp = http.put(f"{API}/apps/{app_id}/timeout", params=USER, json=body)
        probes[f"put_timeout_{label}"] = {"status": resp.status_code, "body": resp.text}
    save_json("app_timeouts_set.json", http.get(f"{API}/apps/{app_id}/timeouts"))


async def run_apps(
    rm_url: str, harness: workload.Harness, http: httpx.Client, probes: dict[str, Any]
) -> None:
    """Apps in all four queues: record while they run, then once they finished."""
    specs = [
        workload.AppSpec(queue="etl", sleep_s=20, num_containers=2, tags=(TAG, "etl")),
        workload.AppSpec(
            queue="adhoc",
            sleep_s=20,
            container_vcores=2,
            container_memory_mb=512,
            tags=(TAG, "adhoc"),
        ),
        workload.AppSpec(queue="deadline", sleep_s=20, num_containers=3, tags=(TAG,)),
        workload.AppSpec(queue="default", sleep_s=20, tags=(TAG,)),
    ]
    async with RMClient([rm_url]) as client:
        ids = await workload.submit_all(client, specs, harness)
        await workload.wait_state(client, ids, frozenset({"RUNNING"}), timeout_s=60)
        await asyncio.sleep(6)  # let the AMs get their containers
        save_json("apps_running.json", http.get(f"{API}/apps", params={"states": "RUNNING"}))
        save_json("app_running.json", http.get(f"{API}/apps/{ids[0]}"))
        save_json("scheduler.json", http.get(f"{API}/scheduler"))
        save_json("metrics.json", http.get(f"{API}/metrics"))
        save_json("app_attempts.json", http.get(f"{API}/apps/{ids[0]}/appattempts"))
        probe_timeouts(http, ids[3], probes)
        await workload.wait_final(client, ids, timeout_s=120)
    save_json("apps_finished.json", http.get(f"{API}/apps", params={"states": "FINISHED"}))
    save_json("app.json", http.get(f"{API}/apps/{ids[0]}"))
    save_json("metrics_idle.json", http.get(f"{API}/metrics"))


def main(argv: list[str]) -> int:
    """Record everything; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cluster-json", type=Path, required=True)
    args = parser.parse_args(argv)
    cluster: Mapping[str, Any] = json.loads(args.cluster_json.read_text(encoding="utf-8"))
    rm_url = str(cluster["rm_url"])
    harness = workload.Harness.from_cluster_json(args.cluster_json)
    OUT.mkdir(parents=True, exist_ok=True)
    probes: dict[str, Any] = {"hadoop_version": cluster.get("hadoop_version")}
    headers = {"Accept": "application/json"}
    with httpx.Client(base_url=rm_url, headers=headers, timeout=30, trust_env=False) as http:
        record_idle(http)
        record_conf_mutations(http, probes)
        asyncio.run(run_apps(rm_url, harness, http, probes))
    (OUT / "probes.json").write_text(json.dumps(probes, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(probes, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
