"""``/metrics``: a controller tick whose push is not settled yet (written ahead of the PUT, or a
PUT sent and not answered) and that push are gauges until a later tick settles them; the
counters only see settled statuses, so none of their series goes down when a row moves on."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.db import control_repo, repo
from app.db.control_models import ConfigPush
from app.db.models import Decision
from app.db.session import transaction
from app.observability.prometheus import SidecarCollector
from tests.conftest import Db

NOW = 1_700_000_000_000
CLUSTER = "test"
P = "yarn_sidecar_"


def _scrape(db: Db) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(SidecarCollector(db.sessions, CLUSTER))
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
        if s.name.startswith((P + "controller_decisions", P + "config_pushes"))
    }


def _written_ahead(db: Db, status: str) -> tuple[int, int]:
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, CLUSTER, ["http://rm:8088"], NOW).id
        decision = repo.add_decision(
            s,
            Decision(cluster_id=cid, created_ms=NOW, kind="queue", policy="fawkes:TD",
                     mode="enforce", params={}, inputs={}, outputs={}, status=status,
                     reason="written before the PUT"),
        )  # fmt: skip
        push = ConfigPush(cluster_id=cid, decision_id=decision.id, pushed_ms=NOW,
                          parent="root", values={}, previous={}, version_before=1,
                          version_after=None, status="pending")  # fmt: skip
        s.add(push)
        s.flush()
        return decision.id, push.id


def test_unsettled_ticks_and_pushes_are_gauges_until_settled(db: Db) -> None:
    _, push_id = _written_ahead(db, "pushing")
    _written_ahead(db, "pushed_unverified")
    before = _scrape(db)
    assert before[(P + "controller_decisions_unsettled", ())] == 2
    assert before[(P + "config_pushes_pending", ())] == 2
    counted = {k for k in before if k[0].endswith("_total")}
    assert not any(dict(labels).get("status") in ("pushing", "pushed_unverified")
                   for _, labels in counted)  # fmt: skip
    assert not any(dict(labels).get("outcome") == "pending" for _, labels in counted)
    with transaction(db.sessions) as s:
        push = s.get(ConfigPush, push_id)
        assert push is not None
        push.status = "applied"
        control_repo.settle_pending_decision(s, push_id, "pushed", "settled by the next tick")
    after = _scrape(db)
    assert after[(P + "controller_decisions_unsettled", ())] == 1
    assert after[(P + "config_pushes_pending", ())] == 1
    assert after[(P + "controller_decisions_total", (("status", "pushed"),))] == 1
    assert after[(P + "config_pushes_total", (("outcome", "applied"),))] == 1
    for key, value in before.items():  # no counter series went down
        if key[0].endswith("_total"):
            assert after.get(key, 0) >= value, key
