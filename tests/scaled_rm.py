"""A ResourceManager at scale, built from the recorded Hadoop 3.5.0 responses (scale testing).

The recorded answers in ``tests/fixtures/rm`` come from a one-node, four-queue mini cluster. This
module multiplies them: ``ScaledCluster(nodes, queues, running, finished)`` holds N NodeManagers,
Q leaf queues under ``root`` and A running plus F finished applications, each a copy of a
recorded object with its identity and counters rewritten, so every body has the exact shape (and
roughly the byte size) a real RM of that size answers with. ``advance()`` moves the cluster on by
one poll interval the way a busy cluster changes: running apps accrue resource-seconds, a few
percent finish and are replaced by new submissions (ACCEPTED first; each starts RUNNING at a
later interval with probability one half), a few nodes change their usage. ``/apps`` honours
``states``, ``startedTimeBegin``/``End``, ``finishedTimeBegin`` and ``deSelects``;
``/apps/{id}`` answers one app.

Standard library only: the scale benchmark loads it by path to drive older checkouts too.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rm"
CLUSTER_TS = 1795315000000


def _without(obj: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}


def _load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


class ScaledCluster:
    """The state of a fake RM; ``body(path, query)`` is what it answers."""

    def __init__(
        self,
        nodes: int,
        queues: int,
        running: int,
        finished: int,
        *,
        seed: int = 1,
        churn: float = 0.02,
        start_ms: int = CLUSTER_TS,
        drop_fields: tuple[str, ...] = (),
    ) -> None:
        self.rng = random.Random(seed)
        self.n_nodes, self.n_queues = nodes, queues
        self.churn = churn
        self.now_ms = start_ms
        self.next_app = 1
        # ``drop_fields``: leave these out of every app from the start (a lean test that always
        # asks with ``deSelects`` for them gets the same body without filtering per request).
        self._run_tpl = _without(_load("apps_running.json")["apps"]["app"][0], drop_fields)
        self._fin_tpl = _without(_load("apps_finished.json")["apps"]["app"][0], drop_fields)
        self._node_tpl = _load("nodes.json")["nodes"]["node"][0]
        sched = _load("scheduler.json")
        self._sched_root = sched["scheduler"]["schedulerInfo"]
        self._leaf_tpl = self._sched_root["queues"]["queue"][0]
        self.queue_names = [f"q{i:03d}" for i in range(queues)]
        self.running: dict[str, dict[str, Any]] = {}
        self.finished: dict[str, dict[str, Any]] = {}
        for _ in range(running):
            # The apps running at the start were submitted over the past hours.
            self._submit(age_ms=self.rng.randint(1000, 4 * 3600 * 1000))
        for _ in range(finished):
            app = self._submit()
            self._finish(app)
        self.nodes = [self._node(i) for i in range(nodes)]

    # --- state ---------------------------------------------------------------------------------

    def _submit(self, state: str = "RUNNING", age_ms: int = 1000) -> dict[str, Any]:
        n = self.next_app
        self.next_app += 1
        # Shallow copies: only top-level values change; nested objects are shared, read-only.
        app = dict(self._run_tpl)
        app_id = f"application_{CLUSTER_TS}_{n:07d}"
        queue = self.queue_names[n % self.n_queues]
        app.update(
            id=app_id,
            user=f"user{n % 50}",
            name=f"job-{n}",
            queue=queue,
            applicationTags=f"team-{n % 7}",
            startedTime=self.now_ms - age_ms,
            launchTime=self.now_ms - age_ms + 100,
            elapsedTime=age_ms,
            vcoreSeconds=1,
            memorySeconds=1024,
            allocatedVCores=2,
            allocatedMB=2048,
            runningContainers=2,
            progress=0.0,
            state=state,
        )
        if state != "RUNNING":
            app.update(launchTime=0, allocatedVCores=1, allocatedMB=1024, runningContainers=1)
        self.running[app_id] = app
        return app

    def _finish(self, app: dict[str, Any]) -> None:
        done = dict(self._fin_tpl)
        for key in ("id", "user", "name", "queue", "applicationTags", "startedTime", "launchTime"):
            done[key] = app[key]
        done.update(
            finishedTime=self.now_ms,
            elapsedTime=self.now_ms - app["startedTime"],
            vcoreSeconds=app["vcoreSeconds"],
            memorySeconds=app["memorySeconds"],
        )
        self.running.pop(app["id"], None)
        self.finished[app["id"]] = done

    def _node(self, i: int) -> dict[str, Any]:
        node = dict(self._node_tpl)
        host = f"nm{i:05d}.example.com"
        node.update(
            id=f"{host}:8041",
            nodeHostName=host,
            nodeHTTPAddress=f"{host}:8042",
            rack=f"/rack{i // 40:03d}",
            usedVirtualCores=4,
            availableVirtualCores=4,
            usedMemoryMB=4096,
            availMemoryMB=4096,
            numContainers=2,
        )
        return node

    def advance(self, interval_ms: int = 10_000) -> None:
        """One poll interval later: counters grow, ``churn`` of the running apps finish and as
        many new ones arrive, ``churn`` of the nodes change usage."""
        self.now_ms += interval_ms
        secs = interval_ms // 1000
        for app in self.running.values():
            if app["state"] != "RUNNING":
                if self.rng.random() < 0.5:
                    app.update(state="RUNNING", launchTime=self.now_ms - 500)
                continue
            app["elapsedTime"] += interval_ms
            app["vcoreSeconds"] += app["allocatedVCores"] * secs
            app["memorySeconds"] += app["allocatedMB"] * secs
            app["progress"] = min(99.0, app["progress"] + 1.0)
        k = int(len(self.running) * self.churn)
        for app_id in self.rng.sample(sorted(self.running), k):
            self._finish(self.running[app_id])
            self._submit("ACCEPTED")
        # The RM keeps a bounded number of finished apps (max-completed-applications).
        for app_id in list(self.finished)[: max(0, len(self.finished) - 10_000)]:
            del self.finished[app_id]
        for node in self.rng.sample(self.nodes, int(len(self.nodes) * self.churn)):
            used = self.rng.randint(0, 8)
            node.update(usedVirtualCores=used, availableVirtualCores=8 - used, numContainers=used)

    # --- answers --------------------------------------------------------------------------------

    def scheduler(self) -> dict[str, Any]:
        root = copy.deepcopy(self._sched_root)
        per = 100.0 / self.n_queues
        leaves = []
        counts: dict[str, int] = {}
        for app in self.running.values():
            counts[app["queue"]] = counts.get(app["queue"], 0) + 1
        for name in self.queue_names:
            leaf = copy.deepcopy(self._leaf_tpl)
            leaf.update(
                queueName=name,
                queuePath=f"root.{name}",
                capacity=per,
                absoluteCapacity=per,
                numActiveApplications=counts.get(name, 0),
                numApplications=counts.get(name, 0),
                numPendingApplications=0,
            )
            leaves.append(leaf)
        root["queues"] = {"queue": leaves}
        return {"scheduler": {"schedulerInfo": root}}

    def scheduler_conf(self) -> dict[str, Any]:
        prefix = "yarn.scheduler.capacity.root"
        props = [{"name": f"{prefix}.queues", "value": ",".join(self.queue_names)}]
        per = 100.0 / self.n_queues
        for name in self.queue_names:
            props.append({"name": f"{prefix}.{name}.capacity", "value": f"{per:g}"})
            props.append({"name": f"{prefix}.{name}.maximum-capacity", "value": "100"})
        return {"property": props}

    def apps(self, query: dict[str, list[str]]) -> dict[str, Any]:
        states = set(",".join(query.get("states", [])).split(",")) - {""}
        begin = int(query.get("finishedTimeBegin", ["0"])[0])
        s_begin = int(query.get("startedTimeBegin", ["0"])[0])
        s_end = int(query.get("startedTimeEnd", [str(2**63)])[0])
        # A real 3.5.0 RM answers 400 to these; a poll must never send them.
        for name, value in (("startedTimeBegin", s_begin), ("startedTimeEnd", s_end)):
            if value < 0:
                raise ValueError(f"{name} must be greater than 0")
        if s_begin > s_end:
            raise ValueError("startedTimeEnd must be greater than startTimeBegin")
        deselect = set(",".join(query.get("deSelects", [])).split(",")) - {""}

        def wanted(app: dict[str, Any]) -> bool:
            return (not states or app["state"] in states) and s_begin <= app["startedTime"] <= s_end

        out = [a for a in self.running.values() if wanted(a)]
        out.extend(a for a in self.finished.values() if a["finishedTime"] >= begin and wanted(a))
        if deselect & (self._run_tpl.keys() | self._fin_tpl.keys()):
            out = [{k: v for k, v in a.items() if k not in deselect} for a in out]
        return {"apps": {"app": out} if out else {}}

    def body(self, path: str, query_string: str = "") -> bytes | None:
        """The JSON an RM answers at ``/ws/v1/cluster`` + ``path``; ``None``: not served."""
        query = parse_qs(query_string)
        if path == "/info":
            obj: Any = _load("info.json")
        elif path == "/metrics":
            obj = _load("metrics.json")
        elif path == "/scheduler":
            obj = self.scheduler()
        elif path == "/apps":
            obj = self.apps(query)
        elif path.startswith("/apps/"):
            app = self.running.get(path[6:]) or self.finished.get(path[6:])
            if app is None:
                return None
            obj = {"app": app}
        elif path == "/nodes":
            obj = {"nodes": {"node": self.nodes}}
        elif path == "/scheduler-conf":
            obj = self.scheduler_conf()
        elif path == "/scheduler-conf/version":
            obj = _load("scheduler_conf_version.json")
        else:
            return None
        return json.dumps(obj, separators=(",", ":")).encode()


RUNNING_STATES = frozenset({"NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING"})


def serve(cluster: ScaledCluster, port: int) -> None:  # pragma: no cover - benchmark helper
    """Answer HTTP on 127.0.0.1:``port`` until killed; ``POST /_advance`` moves the cluster on.

    The large bodies (running apps, nodes, scheduler) are serialised when the state changes, not
    per request, so what a client measures is the transfer and its own parsing.
    """
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    lock = threading.Lock()
    cache: dict[str, bytes] = {}
    prefix = "/ws/v1/cluster"

    def warm() -> None:
        cache.clear()
        running = ",".join(sorted(RUNNING_STATES))
        pending = ",".join(sorted(RUNNING_STATES - {"RUNNING"}))
        for path, qs in (
            ("/apps", f"states={running}"),
            ("/apps", f"states={running}&deSelects=resourceInfo"),
            ("/apps", f"states={pending}&deSelects=resourceInfo"),
            ("/nodes", ""),
            ("/scheduler", ""),
        ):
            cache[_key(path, qs)] = cluster.body(path, qs) or b""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            path, _, qs = self.path.partition("?")
            if not path.startswith(prefix):
                self._send(404, b"{}")
                return
            path = path[len(prefix) :]
            with lock:
                body = cache.get(_key(path, qs))
                if body is None:
                    body = cluster.body(path, qs)
            if body is None:
                self._send(404, b'{"RemoteException":{"message":"not served"}}')
            else:
                self._send(200, body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if self.path == "/_advance":
                with lock:
                    cluster.advance()
                    warm()
                self._send(200, json.dumps({"now_ms": cluster.now_ms}).encode())
            else:
                self._send(404, b"{}")

    warm()
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def _key(path: str, query_string: str) -> str:
    query = parse_qs(query_string)
    query.pop("user.name", None)
    # Comma lists in any order are one query (the client sends states unsorted).
    parts = {k: ",".join(sorted(",".join(v).split(","))) for k, v in query.items()}
    return path + "?" + "&".join(f"{k}={v}" for k, v in sorted(parts.items()))


if __name__ == "__main__":  # pragma: no cover - benchmark helper
    import sys

    port, nodes, queues, running, finished = (int(x) for x in sys.argv[1:6])
    serve(ScaledCluster(nodes, queues, running, finished), port)
