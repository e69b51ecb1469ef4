"""The control-loop endpoints through httpx.ASGITransport with the lifespan, on both engines:
``/policy`` (GET, PUT, preview), ``/decisions``, ``/ledger``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.control.ledger import LedgerRow
from app.db import control_repo, repo
from app.db.models import Decision
from app.db.session import transaction
from app.domain.model import NodeState, Resources
from app.main import create_app
from app.services.controller import MAX_PREVIEWS, PREVIEW_RETRY_AFTER_S
from app.settings import Settings
from tests.conftest import Db
from tests.factories import queue

FIXTURES = Path(__file__).parents[1] / "fixtures" / "rm"
NOW_MS = 1_700_000_060_000


class RecordedRM:
    """The recorded 3.5.0 answers (root.default 40, etl/adhoc/deadline 20); counts writes."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/ws/v1/cluster")
        if request.method != "GET":
            self.writes.append(f"{request.method} {path}")
            return httpx.Response(200, text="Configuration change successfully applied.")
        files = {
            "/scheduler": "scheduler.json",
            "/scheduler-conf": "scheduler_conf.json",
            "/scheduler-conf/version": "scheduler_conf_version.json",
        }
        if path not in files:
            return httpx.Response(404, text="not recorded")
        return httpx.Response(200, json=json.loads((FIXTURES / files[path]).read_text()))


def _settings(db: Db, **extra: object) -> Settings:
    return Settings(
        database_url=db.url,
        cluster_name="test",
        poll_interval_s=10,
        policy="fawkes:TD",
        mode="advise",
        # floors off: on the recorded 8-vcore cluster the default floor (2 containers) is 25 %
        # for each of the four queues, which would leave nothing to move
        queue_floors={"*": 0},
        **extra,  # type: ignore[arg-type]
    )


async def _client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            yield client


@pytest.fixture
def rm() -> RecordedRM:
    return RecordedRM()


@pytest.fixture
async def served(db: Db, rm: RecordedRM) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    app = create_app(_settings(db), run_loops=False, rm_transport=httpx.MockTransport(rm))
    async for client in _client(app):
        # the samples are stored at NOW_MS: the controller's clock reads that instant
        app.state.sidecar.controller.clock = lambda: NOW_MS
        yield client, app


@pytest.fixture
def api(served: tuple[httpx.AsyncClient, FastAPI]) -> httpx.AsyncClient:
    return served[0]


def _seed_polls(db: Db) -> None:
    """Six polls, etl with 30 pending containers and adhoc with 10 (TD weights 0.75 / 0.25)."""
    for t in range(NOW_MS - 50_000, NOW_MS + 1, 10_000):
        qs = [queue("root", capacity=100, leaf=False)]
        for name, cap in (("default", 40), ("etl", 20), ("adhoc", 20), ("deadline", 20)):
            q = queue(f"root.{name}", capacity=cap)
            pending = {"etl": 30, "adhoc": 10}.get(name, 0)
            qs.append(replace(q, pending_containers=pending, num_active_apps=1 if pending else 0))
        node = NodeState("n:1", "n", "/r", "RUNNING", (), Resources(8, 8192), Resources(0, 0), 0)
        with transaction(db.sessions) as s:
            cluster = repo.ensure_cluster(s, "test", ["http://rm:8088"], t)
            ids = repo.upsert_queues(s, cluster.id, qs, t)
            repo.add_queue_samples(s, ids, qs, t)
            repo.add_node_samples(s, cluster.id, [node], t)
            cluster.last_good_poll_ms = t


async def test_get_policy_shows_the_settings(api: httpx.AsyncClient) -> None:
    r = await api.get("/policy")
    assert r.status_code == 200
    body = r.json()
    assert (body["policy"], body["mode"], body["source"]) == ("fawkes:TD", "advise", "settings")
    assert body["params"]["tau"] == 10.0 and body["max_step_pp"] == 10.0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"policy": "drf-plus"}, "policy: unknown policy 'drf-plus'"),
        ({"policy": "ltrf", "params": {"discount": 2}}, "params.discount: must be <= 1.0"),
        ({"params": {"tua": 3}}, "params.tua: unknown parameter"),
        ({"mode": "yolo"}, "mode: must be one of observe, advise, enforce"),
        ({"bounds": {"root.etl": {"min": 70, "max": 60}}}, "bounds.root.etl.min: is above max"),
        ({"policy": "justice"}, "policy: 'justice' is an admission policy"),
        ({"max_step_pp": 0}, "max_step_pp: must be within"),
        # the RM reports no input bytes, task completions or slowdowns: no deciding on zeros
        ({"policy": "fawkes:DD"}, "policy: fawkes:DD decides on the input bytes of waiting jobs"),
        ({"policy": "fawkes:TT"}, "policy: fawkes:TT decides on the tasks completed"),
        ({"policy": "fawkes", "params": {"weighting": "JS"}}, "policy: fawkes:JS decides on"),
    ],
)
async def test_put_policy_rejects_invalid_values_naming_the_field(
    api: httpx.AsyncClient, body: dict[str, object], field: str
) -> None:
    r = await api.put("/policy", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith(field)


async def test_put_policy_is_recorded_and_survives_a_restart(
    api: httpx.AsyncClient, db: Db, rm: RecordedRM
) -> None:
    r = await api.put(
        "/policy", json={"policy": "ltrf", "params": {"discount": 0.5}, "mode": "enforce"}
    )
    assert r.status_code == 200, r.text
    assert (r.json()["policy"], r.json()["params"], r.json()["source"]) == (
        "ltrf",
        {"discount": 0.5, "lending": "used"},
        "operator",
    )
    listed = (await api.get("/decisions", params={"kind": "policy"})).json()["items"]
    assert [(d["policy"], d["status"]) for d in listed] == [("ltrf", "changed")]
    # a new process on the same database keeps the operator's choice
    again = create_app(_settings(db), run_loops=False, rm_transport=httpx.MockTransport(rm))
    async for client in _client(again):
        body = (await client.get("/policy")).json()
        assert (body["policy"], body["params"]["discount"], body["mode"]) == (
            "ltrf",
            0.5,
            "enforce",
        )


async def test_preview_decides_without_pushing_or_recording(
    api: httpx.AsyncClient, db: Db, rm: RecordedRM
) -> None:
    _seed_polls(db)
    r = await api.post("/policy/preview", json={"mode": "enforce"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "would_push"
    # TD weights: etl 0.75, adhoc 0.25, default and deadline idle (floor 0): target 0/75/25/0
    # (default/etl/adhoc/deadline); moves -40/+55/+5/-20, the largest 55, the step 10: every
    # queue goes 2/11 of its way from 40/20/20/20 -> 32.727, 30, 20.909, 16.364; rounded to
    # hundredths (remainders .73 .00 .91 .36 after flooring 32.72/30/20.90/16.36 -> the two largest
    # remainders, adhoc .909 and default .727, get the 2 left hundredths)
    assert {q: v["capacity"] for q, v in body["changes"].items()} == {
        "root.default": "32.73",
        "root.etl": "30.00",
        "root.adhoc": "20.91",
        "root.deadline": "16.36",
    }
    assert rm.writes == []
    assert (await api.get("/decisions")).json()["items"] == []
    bad = await api.post("/policy/preview", json={"policy": "nope"})
    assert bad.status_code == 422 and bad.json()["detail"].startswith("policy:")
    zeros = await api.post("/policy/preview", json={"policy": "fawkes:JS"})
    assert zeros.status_code == 422 and "fawkes:TD" in zeros.json()["detail"]


def _seed_decisions(db: Db) -> list[int]:
    ids = []
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        for i, (kind, policy, status) in enumerate(
            [
                ("queue", "fawkes:TD", "pushed"),
                ("queue", "fawkes:TD", "no_change"),
                ("policy", "ltrf", "changed"),
                ("queue", "ltrf", "pushed"),
                ("admission", "justice", "admit"),
            ]
        ):
            row = repo.add_decision(
                s,
                Decision(
                    cluster_id=cid,
                    created_ms=1_700_000_000_000 + i * 60_000,
                    kind=kind,
                    policy=policy,
                    mode="enforce",
                    params={},
                    inputs={"i": i},
                    outputs={},
                    status=status,
                    reason=f"r{i}",
                ),
            )
            ids.append(row.id)
    return ids


async def test_decisions_filter_paginate_and_detail(api: httpx.AsyncClient, db: Db) -> None:
    ids = _seed_decisions(db)
    page = (await api.get("/decisions", params={"limit": 2})).json()
    assert [d["id"] for d in page["items"]] == [ids[4], ids[3]]
    rest = (await api.get("/decisions", params={"limit": 2, "cursor": page["next_cursor"]})).json()
    assert [d["id"] for d in rest["items"]] == [ids[2], ids[1]]
    last = (await api.get("/decisions", params={"limit": 2, "cursor": rest["next_cursor"]})).json()
    assert [d["id"] for d in last["items"]] == [ids[0]] and last["next_cursor"] is None
    fawkes = (await api.get("/decisions", params={"policy": "fawkes"})).json()["items"]
    assert {d["id"] for d in fawkes} == {ids[0], ids[1]}
    pushed = (await api.get("/decisions", params={"status": "pushed", "kind": "queue"})).json()
    assert {d["id"] for d in pushed["items"]} == {ids[0], ids[3]}
    window = await api.get(
        "/decisions",
        params={"since": "2023-11-14T22:14:20Z", "until": "2023-11-14T22:16:20Z"},
    )
    # created at ...000 + 60 s steps: 22:13:20, 22:14:20, 22:15:20, 22:16:20, 22:17:20
    assert {d["id"] for d in window.json()["items"]} == {ids[1], ids[2]}
    detail = (await api.get(f"/decisions/{ids[2]}")).json()
    assert detail["inputs"] == {"i": 2} and detail["reason"] == "r2"
    assert (await api.get("/decisions/999999")).status_code == 404
    assert (await api.get("/decisions", params={"cursor": "garbage"})).status_code == 400


async def test_ledger_per_queue_over_time(api: httpx.AsyncClient, db: Db) -> None:
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        rows = [
            LedgerRow("root.a", 0, 60_000, 1, 240, 300, 300, -60, 300, 300, 0, 60),
            LedgerRow("root.b", 0, 60_000, 1, 240, 180, 180, 60, 180, 180, 60, 0, {"root.a": 60}),
            LedgerRow("root.a", 60_000, 120_000, 1, 240, 240, 240, -60, 540, 540),
        ]
        control_repo.add_ledger_rows(s, cid, rows)
    body = (await api.get("/ledger")).json()
    a = next(q for q in body["queues"] if q["queue"] == "root.a")
    assert (a["entitlement"], a["usage"], a["debt"], len(a["points"])) == (480, 540, -60, 2)
    assert [p["lent_to"] for p in a["points"]] == [{}, {}]
    b = next(q for q in body["queues"] if q["queue"] == "root.b")
    assert (b["points"][0]["lent"], b["points"][0]["lent_to"]) == (60, {"root.a": 60})
    assert a["points"][0]["borrowed"] == 60
    since = (await api.get("/ledger", params={"since": "1970-01-01T00:01:30Z"})).json()
    assert [(q["queue"], len(q["points"])) for q in since["queues"]] == [("root.a", 1)]


async def test_a_tick_recorded_in_get_decisions_can_be_recomputed_by_hand(
    served: tuple[httpx.AsyncClient, FastAPI], db: Db
) -> None:
    """Only the JSON of GET /decisions/{id}: TD weights from the recorded pending containers,
    Fawkes' first decision (shares = weights, no minimums), exact-100 targets, the step limit."""
    _seed_polls(db)
    api, app = served
    report = await app.state.sidecar.controller.control(NOW_MS)
    assert report.status == "advised"
    d = (await api.get(f"/decisions/{report.decision_id}")).json()
    queues = d["inputs"]["policy_inputs"]["queues"]
    y = {q: v["pending_containers"] for q, v in queues.items()}
    busy = {q for q, v in queues.items() if v["pending_containers"] or v["running_apps"]}
    w = {q: y[q] / sum(y[b] for b in busy) if q in busy else 0.0 for q in y}
    assert d["outputs"]["policy"]["details"]["weights"] == {q: w[q] for q in busy}
    target = {q: 100 * w[q] for q in y}  # 75 / 25 / 0 / 0: exact in hundredths
    live = {q: float(v["capacity"]) for q, v in d["inputs"]["live"]["values"].items()}
    f = d["params"]["max_step_pp"] / max(abs(target[q] - live[q]) for q in y)
    exact = {q: live[q] + f * (target[q] - live[q]) for q in y}
    # largest remainder on hundredths
    floors = {q: int(exact[q] * 100) for q in y}
    left = 10000 - sum(floors.values())
    for q in sorted(y, key=lambda q: -(exact[q] * 100 - floors[q]))[:left]:
        floors[q] += 1
    by_hand = {q: f"{floors[q] // 100}.{floors[q] % 100:02d}" for q in y}
    recorded = {q: v["capacity"] for q, v in d["outputs"]["plan"]["changes"].items()}
    assert recorded == by_hand
    assert d["status"] == "advised" and d["pushed"] is None


async def test_put_policy_accepts_a_newly_registered_policy(api: httpx.AsyncClient) -> None:
    r = await api.put("/policy", json={"policy": "proportional", "params": {"floor": 0.2}})
    assert r.status_code == 200, r.text
    assert (r.json()["policy"], r.json()["params"]) == ("proportional", {"floor": 0.2})
    bad = await api.put("/policy", json={"policy": "proportional", "params": {"floor": 3}})
    assert bad.status_code == 422 and "params.floor" in bad.text


async def test_pushes_list_every_attempt_linked_to_its_decision(
    served: tuple[httpx.AsyncClient, FastAPI], db: Db, rm: RecordedRM
) -> None:
    api, app = served
    assert (await api.get("/pushes")).json() == {"items": [], "next_before": None}
    _seed_polls(db)
    assert (await api.put("/policy", json={"mode": "enforce"})).status_code == 200
    report = await app.state.sidecar.controller.control(NOW_MS)
    assert rm.writes, report  # a PUT was sent
    page = (await api.get("/pushes")).json()
    (push,) = page["items"]
    assert push["decision_id"] == report.decision_id and push["status"] != "pending"
    assert push["values"] and push["previous"]["root.etl"]["capacity"] in ("20", "20.0")
    decision = (await api.get(f"/decisions/{push['decision_id']}")).json()
    # the decision written before the PUT was completed in place: one record per attempt
    assert decision["status"] == report.status and decision["status"] != "pushing"
    queue_decisions = (await api.get("/decisions", params={"kind": "queue"})).json()["items"]
    assert [d["id"] for d in queue_decisions] == [report.decision_id]
    only = (await api.get("/pushes", params={"status": "nope"})).json()
    assert only["items"] == []


class GatedRM(RecordedRM):
    """``RecordedRM`` whose scheduler-configuration reads wait until ``open`` is set, so
    previews can be held in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.open = asyncio.Event()
        self.waiting = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/scheduler-conf"):
            self.waiting += 1
            await self.open.wait()
        return self(request)


async def test_previews_beyond_the_limit_are_refused_with_retry_after(db: Db) -> None:
    _seed_polls(db)
    rm = GatedRM()
    app = create_app(_settings(db), run_loops=False, rm_transport=httpx.MockTransport(rm.handle))
    async for api in _client(app):
        app.state.sidecar.controller.clock = lambda: NOW_MS
        held = [asyncio.create_task(api.post("/policy/preview")) for _ in range(MAX_PREVIEWS)]
        while rm.waiting < MAX_PREVIEWS:
            await asyncio.sleep(0.01)
        # without the limit this one would wait at the gate too: fail, not hang
        refused = await asyncio.wait_for(api.post("/policy/preview"), 10)
        assert refused.status_code == 429, refused.text
        assert refused.headers["Retry-After"] == str(PREVIEW_RETRY_AFTER_S)
        assert refused.json()["detail"].startswith("preview:")
        assert rm.waiting == MAX_PREVIEWS  # the refused one never reached the RM
        rm.open.set()
        assert [(await t).status_code for t in held] == [200] * MAX_PREVIEWS
        # the slots are given back, after an answer and after an error alike
        bad = await api.post("/policy/preview", json={"policy": "nope"})
        assert bad.status_code == 422
        for _ in range(MAX_PREVIEWS + 1):
            assert (await api.post("/policy/preview")).status_code == 200
