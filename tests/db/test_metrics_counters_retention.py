"""``/metrics`` counters derived from tables retention prunes (polls, the poll-duration histogram,
controller and placement decisions) keep their values when retention deletes the rows, and keep
growing from there, on both engines."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.db import repo
from app.db.models import Decision, PollRecord
from app.db.retention import HOUR_MS, Windows
from app.db.session import transaction
from app.observability.prometheus import SidecarCollector
from app.services.retention import RetentionService
from tests.conftest import Db

NOW = 1_700_000_000_000 // HOUR_MS * HOUR_MS
CLUSTER = "test"
WINDOWS = Windows(raw_days=2 / 24, hourly_days=10 / 24, decision_days=5 / 24)
COUNTERS = (
    "yarn_sidecar_polls_total",
    "yarn_sidecar_controller_decisions_total",
    "yarn_sidecar_placement_decisions_total",
    "yarn_sidecar_poll_duration_seconds_bucket",
    "yarn_sidecar_poll_duration_seconds_count",
    "yarn_sidecar_poll_duration_seconds_sum",
)


def _scrape(db: Db) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(SidecarCollector(db.sessions, CLUSTER))
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            if s.name in COUNTERS:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _decision(cid: int, at_ms: int, kind: str, status: str) -> Decision:
    return Decision(cluster_id=cid, created_ms=at_ms, kind=kind, policy="x", mode="advise",
                    params={}, inputs={}, outputs={}, status=status, reason="")  # fmt: skip


def _poll(cid: int, at_ms: int, duration_ms: int, ok: bool) -> PollRecord:
    return PollRecord(cluster_id=cid, started_ms=at_ms, duration_ms=duration_ms, ok=ok)


def test_counters_keep_what_retention_deleted(db: Db) -> None:
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, CLUSTER, ["http://rm:8088"], NOW).id
        # a poll every 5 min over 4 h (the raw window is 2 h), every 7th failing and slow
        for i, at in enumerate(range(NOW - 4 * HOUR_MS, NOW, 5 * 60_000)):
            repo.record_poll(s, _poll(cid, at, 3000 if i % 7 == 0 else 40, i % 7 != 0))
        # decisions every 10 min over 8 h (kept 5 h)
        for i, at in enumerate(range(NOW - 8 * HOUR_MS, NOW, 10 * 60_000)):
            repo.add_decision(s, _decision(cid, at, "queue", ("advised", "no_change")[i % 2]))
            repo.add_decision(s, _decision(cid, at, "placement", "decided"))
    before = _scrape(db)
    assert before[("yarn_sidecar_polls_total", (("outcome", "error"),))] == 7
    pruned = RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=7).prune(NOW)
    # 36 beyond 5 h, and the 9 no_change ticks between 5 h and the 2 h raw window
    assert pruned.deleted_rows["polls"] == 24 and pruned.deleted_rows["decisions"] == 36 + 9
    assert _scrape(db) == before
    # a second pass deletes nothing more and adds nothing twice
    RetentionService(db.sessions, WINDOWS, interval_s=3600, batch=7).prune(NOW)
    assert _scrape(db) == before
    with transaction(db.sessions) as s:
        repo.record_poll(s, _poll(cid, NOW, 40, True))
        repo.add_decision(s, _decision(cid, NOW, "queue", "advised"))
    after = _scrape(db)
    summed = ("yarn_sidecar_poll_duration_seconds_sum", ())
    assert after.pop(summed) - before.pop(summed) == pytest.approx(0.04)
    grew = {k: after[k] - v for k, v in before.items() if after[k] != v}
    assert grew == {
        ("yarn_sidecar_polls_total", (("outcome", "ok"),)): 1,
        ("yarn_sidecar_controller_decisions_total", (("status", "advised"),)): 1,
        ("yarn_sidecar_poll_duration_seconds_count", ()): 1,
        **{
            ("yarn_sidecar_poll_duration_seconds_bucket", (("le", le),)): 1
            for le in ("0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "30.0", "+Inf")
        },
    }
