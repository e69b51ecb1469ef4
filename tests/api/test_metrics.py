"""``/metrics`` after an hour of recorded data and real controller ticks, parsed with
``prometheus_client``'s own parser: every documented series is there with the stored numbers."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from app.db import jobs_repo, repo
from app.db.session import transaction
from app.domain import tags as t
from app.main import create_app
from app.settings import Settings
from tests import operator_data as od
from tests.conftest import Db
from tests.factories import app, job_row

P = "yarn_sidecar_"


@pytest.fixture
async def served(db: Db) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    od.seed_history(db.sessions)
    od.seed_jobs(db.sessions)
    settings = Settings(
        database_url=db.url, cluster_name=od.CLUSTER, poll_interval_s=60, mode="observe"
    )
    api = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(od.RecordedRM()))
    async with api.router.lifespan_context(api):
        api.state.sidecar.controller.clock = lambda: od.NOW_MS
        await od.run_ticks(api)
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            yield client, api


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def _value(
    samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str
) -> float:
    hits = [v for lab, v in samples[P + name] if all(lab.get(k) == x for k, x in labels.items())]
    assert len(hits) == 1, (name, labels, samples.get(P + name))
    return hits[0]


async def test_every_series_is_exposed_with_the_recorded_numbers(
    served: tuple[httpx.AsyncClient, FastAPI],
) -> None:
    client, _ = served
    r = await client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    s = _samples(r.text)
    leaves = [f"root.{q}" for q in od.LEAVES]
    for name in (
        "queue_configured_capacity_percent",
        "queue_desired_capacity_percent",
        "queue_pushed_capacity_percent",
        "queue_measured_share",
        "queue_ltrf_debt_vcore_seconds",
        "queue_drift",
    ):
        assert {lab["queue"] for lab, _ in s[P + name]} >= set(leaves), name
    # Fawkes weighs and discriminates the queues with demand only (etl and adhoc)
    for name in ("queue_policy_weight", "queue_fawkes_discrimination"):
        assert {lab["queue"] for lab, _ in s[P + name]} >= {"root.etl", "root.adhoc"}, name
    assert _value(s, "queue_configured_capacity_percent", queue="root.default") == 40.0
    # the measured share is the last interval's average of etl's dominant vcore share
    assert 0 < _value(s, "queue_measured_share", queue="root.etl") <= 6 / od.NODE_VCORES
    assert _value(s, "queue_fawkes_discrimination", queue="root.etl") != 0
    # the exposed debts are the ledger's (all zero here: no queue used beyond its entitlement,
    # so nobody lent, as LTRF's loan agreement counts it)
    ledger = (await client.get("/ledger")).json()
    assert ledger["queues"]
    for q in ledger["queues"]:
        assert _value(s, "queue_ltrf_debt_vcore_seconds", queue=q["queue"]) == q["debt"]
    # the seeded jobs: 6 of 12 finished (i % 3 == 2 missed its deadline), 2 queued
    assert _value(s, "jobs", state="finished") == 6
    assert _value(s, "jobs", state="queued") == 2
    assert _value(s, "job_deadlines_total", outcome="met") == 4
    assert _value(s, "job_deadlines_total", outcome="missed") == 2
    assert (
        _value(
            s,
            "admission_decisions_total",
            action="queue",
            reason="request of N CPUs does not fit in N free",
        )
        == 2
    )
    assert _value(s, "estimator_fraction", kind="max") == 0.75
    assert _value(s, "estimator_fraction_error", kind="mean") == pytest.approx(0.04)
    assert _value(s, "estimator_fraction_error", kind="ewma") == 0.05
    assert sum(v for _, v in s[P + "controller_decisions_total"]) == 10  # 5 ticks per policy
    assert sum(v for _, v in s[P + "config_pushes_total"]) > 0
    # RM latency is measured at the client: the ticks read scheduler-conf and its version
    endpoints = {lab["endpoint"] for lab, _ in s[P + "rm_request_duration_seconds_count"]}
    assert {"/scheduler-conf", "/scheduler-conf/version"} <= endpoints
    assert "# TYPE yarn_sidecar_rm_request_errors_total counter" in r.text
    assert _value(s, "polls_total", outcome="ok") == 61
    assert _value(s, "poll_duration_seconds_count") == 61
    assert _value(s, "poll_duration_seconds_bucket", le="0.025") == 0
    assert _value(s, "poll_duration_seconds_bucket", le="+Inf") == 61
    assert _value(s, "last_good_poll_age_seconds") > 0
    assert _value(s, "leader") == 1
    assert _value(s, "policy_info", policy="fawkes:TD", mode="enforce") == 1
    assert _value(s, "applications", state="FINISHED") == 46  # 40 recorded + 6 deadline jobs
    # the seeded jobs submitted to YARN run there
    assert _value(s, "jobs_unstarted") == 0
    assert _value(s, "jobs_unstarted_oldest_seconds") == 0


async def test_jobs_yarn_has_not_started_are_counted_with_the_longest_wait(
    db: Db, served: tuple[httpx.AsyncClient, FastAPI]
) -> None:
    """A job submitted to YARN whose app is still ACCEPTED, or not yet polled, is one YARN has
    not started; the gauge says how many and how long the first has waited."""
    client, _ = served
    now_ms = int(time.time() * 1000)
    waits = {"accepted": 90_000, "unpolled": 5_000, "running": 300_000}
    with transaction(db.sessions) as s:
        cluster = repo.ensure_cluster(s, od.CLUSTER, ["http://rm:8088"], od.NOW_MS)
        for n, (kind, wait_ms) in enumerate(waits.items()):
            app_id = f"application_1700000000002_{n + 1:04d}"
            job = job_row(
                f"unstarted{n:023x}",
                state=t.SUBMITTED,
                submitted_ms=now_ms - wait_ms,
                tasks=2,
                name=kind,
                deadline_ms=now_ms + 600_000,
                granted_cpus=2,
                admitted_ms=now_ms - wait_ms,
                app_id=app_id,
                yarn_submitted_ms=now_ms - wait_ms,
                updated_ms=now_ms,
            )
            jobs_repo.add_job(s, job)
            if kind != "unpolled":
                state = "ACCEPTED" if kind == "accepted" else "RUNNING"
                rec = app(app_id, queue="root.deadline", state=state, submitted_ms=now_ms)
                repo.upsert_apps(s, cluster.id, [rec], now_ms)
    s = _samples((await client.get("/metrics")).text)
    assert _value(s, "jobs_unstarted") == 2  # the ACCEPTED one and the one no poll has listed
    assert 90 <= _value(s, "jobs_unstarted_oldest_seconds") < 90 + 60


async def test_openmetrics_on_request(served: tuple[httpx.AsyncClient, FastAPI]) -> None:
    client, _ = served
    r = await client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    assert r.text.rstrip().endswith("# EOF")


async def test_monitoring_docs_use_only_exposed_series(
    served: tuple[httpx.AsyncClient, FastAPI],
) -> None:
    client, _ = served
    r = await client.get("/metrics")
    exposed = {s.name for f in text_string_to_metric_families(r.text) for s in f.samples}
    exposed |= set(re.findall(r"^# TYPE (\S+)", r.text, re.MULTILINE))  # declared, no sample yet
    docs = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
    used = set()
    for name in ("alerts.yml", "grafana-dashboard.json"):
        used |= set(re.findall(r"yarn_sidecar_[a-z_]+", (docs / name).read_text()))
    # the alert test feeds its own series; every name the rules and panels query is real
    assert used and used <= exposed, used - exposed
