"""The per-tick work lists read only the rows they can return, never the applications history
(which has no retention): the learning pass (``jobs_repo.unlearned_job_apps``,
``jobs_repo.unobserved_tagged_apps``), the stray sweep (``jobs_repo.live_job_tagged_apps``) and
the JobHistory collector's list (``history_repo.to_collect``).

Behaviour, not timing, on both engines: each returns exactly what the former whole-history query
returned on a seeded history full of edge cases, and its plan reads ``applications`` through an
index that holds only candidates (SQLite: ``EXPLAIN QUERY PLAN``; PostgreSQL: the rows
``EXPLAIN ANALYZE`` reports read from the table, next to thousands of irrelevant apps)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event, insert, or_, select, text
from sqlalchemy.orm import Session

from app.db import history_repo, jobs_repo, observe_repo
from app.db.history_models import MapReduceJobRow
from app.db.jobs_models import EstimatorObservation, Job
from app.db.models import Application, Cluster
from app.db.session import transaction
from app.domain.model import FINAL_APP_STATES
from app.domain.tags import CANCELLED, DEADLINE_TAG, FAILED, FINISHED, JOB_TAG, KILLED
from tests.conftest import Db
from tests.factories import job_row

SETTLED = 1_000_000
NOW = 2_000_000
RETRY_AFTER = 30_000
IRRELEVANT = 4_000  # finished Spark apps: neither jobs' nor tagged nor MapReduce


# ---- the former queries, verbatim: what the new ones must return ------------------------------


def _old_settled(settled_ms: int) -> Any:
    return or_(Application.finished_ms.is_(None), Application.finished_ms <= settled_ms)


def _old_unlearned(s: Session, settled_ms: int, limit: int = 500) -> list[tuple[str, str]]:
    stmt = (
        select(Job.id, Application.app_id)
        .join(Application, Application.app_id == Job.app_id)
        .outerjoin(EstimatorObservation, EstimatorObservation.app_id == Application.app_id)
        .where(
            EstimatorObservation.app_id.is_(None),
            Job.state.in_([FINISHED, FAILED, KILLED, CANCELLED]),
            Application.state.in_(sorted(FINAL_APP_STATES)),
            _old_settled(settled_ms),
        )
        .order_by(Application.finished_ms, Application.app_id)
        .limit(limit)
    )
    return [(j, a) for j, a in s.execute(stmt).all()]


def _old_unobserved(s: Session, settled_ms: int, limit: int = 500) -> list[str]:
    stmt = (
        select(Application.app_id)
        .outerjoin(EstimatorObservation, EstimatorObservation.app_id == Application.app_id)
        .where(
            EstimatorObservation.app_id.is_(None),
            Application.state.in_(sorted(FINAL_APP_STATES)),
            _old_settled(settled_ms),
            Application.tags.contains(f",{DEADLINE_TAG}", autoescape=True),
            ~Application.tags.contains(f",{JOB_TAG}", autoescape=True),
        )
        .order_by(Application.finished_ms, Application.app_id)
        .limit(limit)
    )
    return list(s.scalars(stmt))


def _old_live(s: Session) -> list[str]:
    stmt = select(Application.app_id).where(
        Application.state.not_in(sorted(FINAL_APP_STATES)),
        Application.gone_ms.is_(None),
        Application.tags.contains(f",{JOB_TAG}", autoescape=True),
    )
    return sorted(s.scalars(stmt))


def _old_to_collect(s: Session, cluster_id: int, now_ms: int, limit: int) -> list[str]:
    stmt = (
        select(Application.app_id)
        .outerjoin(MapReduceJobRow, MapReduceJobRow.app_id == Application.app_id)
        .where(
            Application.cluster_id == cluster_id,
            Application.app_type == "MAPREDUCE",
            Application.state.in_(sorted(FINAL_APP_STATES)),
            or_(
                MapReduceJobRow.app_id.is_(None),
                (MapReduceJobRow.status == "retry")
                & (MapReduceJobRow.fetched_ms <= now_ms - RETRY_AFTER),
            ),
        )
        .order_by(Application.finished_ms, Application.app_id)
        .limit(limit)
    )
    return list(s.scalars(stmt))


# ---- a history full of edge cases --------------------------------------------------------------


def _app(
    app_id: str,
    cluster_id: int,
    *,
    state: str = "FINISHED",
    finished_ms: int | None = 500_000,
    tags: str = ",",
    app_type: str = "SPARK",
    gone_ms: int | None = None,
) -> dict[str, Any]:
    return {
        "app_id": app_id, "cluster_id": cluster_id, "user": "u", "queue": "root.etl",
        "name": app_id, "app_type": app_type, "tags": tags, "state": state,
        "final_status": "SUCCEEDED", "progress": 100.0, "submitted_ms": 1_000,
        "started_ms": 2_000, "launched_ms": 2_100, "finished_ms": finished_ms,
        "elapsed_ms": 0, "allocated_vcores": 0, "allocated_mb": 0, "vcore_seconds": 10,
        "memory_seconds": 10, "running_containers": 0, "priority": 0, "diagnostics": "",
        "first_seen_ms": 1_000, "updated_ms": 1_000, "gone_ms": gone_ms,
        "final_seen_ms": finished_ms,
    }  # fmt: skip


def _observed(app_id: str) -> EstimatorObservation:
    return EstimatorObservation(
        app_id=app_id, source="tagged", observed_ms=1, learned=True, reason=""
    )


def _seed(db: Db, irrelevant: int = IRRELEVANT) -> tuple[int, int]:
    """The edge cases below among ``irrelevant`` finished Spark apps; the clusters' ids."""
    dl, job = f",{DEADLINE_TAG}600,", f",{JOB_TAG}"
    with transaction(db.sessions) as s:
        c1 = Cluster(name="default", rm_urls="http://rm", first_seen_ms=0, last_good_poll_ms=NOW)
        c2 = Cluster(name="other", rm_urls="http://rm2", first_seen_ms=0, last_good_poll_ms=NOW)
        s.add_all([c1, c2])
        s.flush()
        a, b = c1.id, c2.id
        rows = [
            _app(f"application_0_{i:07d}", a, finished_ms=100_000 + i, tags=",team-1,")
            for i in range(irrelevant)
        ]
        rows += [
            # The sidecar's jobs' apps (tagged with their job, and a deadline as it submits).
            _app("app_job_a", a, finished_ms=400_000, tags=f"{job}ja,{dl[1:]}"),
            _app("app_job_b", a, finished_ms=400_000, tags=f"{job}jb,"),  # tie with a
            _app("app_job_null", a, finished_ms=None, state="KILLED", tags=f"{job}jn,"),
            _app("app_job_late", a, finished_ms=SETTLED + 1, tags=f"{job}jl,"),  # not settled
            _app("app_job_seen", a, finished_ms=300_000, tags=f"{job}js,"),  # observed
            _app("app_job_live", a, state="RUNNING", finished_ms=None, tags=f"{job}jr,"),
            _app("app_job_run", a, state="FINISHED", finished_ms=200_000, tags=f"{job}ju,"),
            # Tagged apps no job owns.
            _app("app_t_1", a, finished_ms=600_000, tags=dl),
            _app("app_t_0", a, finished_ms=600_000, tags=dl),  # tie: by app id
            _app("app_t_old", a, finished_ms=100, tags=f",x,{dl[1:]}"),
            _app("app_t_null", a, finished_ms=None, state="FAILED", tags=dl),
            _app("app_t_late", a, finished_ms=SETTLED + 5, tags=dl),  # finishes late
            _app("app_t_running", a, state="RUNNING", finished_ms=None, tags=dl),
            _app("app_t_seen", a, finished_ms=700_000, tags=dl),  # already observed
            _app("app_t_case", a, finished_ms=650_000, tags=",DEADLINE:600,"),  # engine's LIKE
            _app("app_t_inner", a, finished_ms=660_000, tags=",nodeadline:600,"),  # not a tag
            _app("app_t_other", b, finished_ms=610_000, tags=dl),  # any cluster
            # Live apps carrying a job tag in every kind of state, and gone ones.
            _app("app_l_accepted", a, state="ACCEPTED", finished_ms=None, tags=f"{job}x,"),
            _app("app_l_new", a, state="NEW_SAVING", finished_ms=None, tags=f"{job}y,"),
            _app("app_l_finishing", a, state="FINISHING", finished_ms=None, tags=f"{job}z,"),
            _app("app_l_between", a, state="FAILEDX", finished_ms=None, tags=f"{job}w,"),
            _app("app_l_low", a, state="A", finished_ms=None, tags=f"{job}v,"),
            _app("app_l_gone", a, state="RUNNING", finished_ms=None, tags=f"{job}g,", gone_ms=5),
            _app("app_l_untagged", a, state="RUNNING", finished_ms=None, tags=",t,"),
            _app("app_l_other", b, state="RUNNING", finished_ms=None, tags=f"{job}o,"),
            # MapReduce apps in every collection state.
            _app("app_mr_new2", a, app_type="MAPREDUCE", finished_ms=800_000),
            _app("app_mr_new1", a, app_type="MAPREDUCE", finished_ms=800_000),  # tie
            _app("app_mr_null", a, app_type="MAPREDUCE", finished_ms=None, state="KILLED"),
            _app("app_mr_due", a, app_type="MAPREDUCE", finished_ms=100),
            _app("app_mr_notdue", a, app_type="MAPREDUCE", finished_ms=150),
            _app("app_mr_ok", a, app_type="MAPREDUCE", finished_ms=120),
            _app("app_mr_missing", a, app_type="MAPREDUCE", finished_ms=130),
            _app("app_mr_running", a, app_type="MAPREDUCE", state="RUNNING", finished_ms=None),
            _app("app_mr_other", b, app_type="MAPREDUCE", finished_ms=90),
            _app("app_mr_lower", a, app_type="mapreduce", finished_ms=95),
        ]
        s.execute(insert(Application), rows)
        s.add_all(
            [
                job_row("ja", state=FINISHED, submitted_ms=1, app_id="app_job_a"),
                job_row("jb", state=FAILED, submitted_ms=2, app_id="app_job_b"),
                job_row("jn", state=CANCELLED, submitted_ms=3, app_id="app_job_null"),
                job_row("jl", state=KILLED, submitted_ms=4, app_id="app_job_late"),
                job_row("js", state=FINISHED, submitted_ms=5, app_id="app_job_seen"),
                job_row("jr", state=FINISHED, submitted_ms=6, app_id="app_job_live"),
                job_row("ju", state="submitted", submitted_ms=7, app_id="app_job_run"),
                job_row("jx", state=FINISHED, submitted_ms=8, app_id="app_never_polled"),
                job_row("jq", state="queued", submitted_ms=9),
            ]
        )
        s.flush()
        s.add_all([_observed("app_job_seen"), _observed("app_t_seen")])
        for app_id, status, fetched in (
            ("app_mr_due", "retry", NOW - RETRY_AFTER),
            ("app_mr_notdue", "retry", NOW - RETRY_AFTER + 1),
            ("app_mr_ok", "ok", 1),
            ("app_mr_missing", "missing", 1),
        ):
            s.add(MapReduceJobRow(app_id=app_id, status=status, attempts=1, fetched_ms=fetched,
                                  seq=0, counters={}))  # fmt: skip
    if db.engine.dialect.name == "postgresql":
        # As autovacuum would have; the sidecar never runs ANALYZE on SQLite (no statistics).
        with db.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    return a, b


# ---- same rows -------------------------------------------------------------------------------


def test_the_work_lists_return_what_the_whole_history_queries_returned(db: Db) -> None:
    a, b = _seed(db, irrelevant=50)
    with db.sessions() as s:
        for limit in (500, 3, 2, 1):
            new = [(j.id, app.app_id) for j, app in jobs_repo.unlearned_job_apps(s, SETTLED, limit)]
            assert new == _old_unlearned(s, SETTLED, limit)
            tagged = [x.app_id for x in jobs_repo.unobserved_tagged_apps(s, SETTLED, limit)]
            assert tagged == _old_unobserved(s, SETTLED, limit)
            for cluster in (a, b):
                assert history_repo.to_collect(
                    s, cluster, NOW, limit=limit, retry_after_ms=RETRY_AFTER
                ) == _old_to_collect(s, cluster, NOW, limit)
        for settled in (0, 100, 400_000, SETTLED + 5, NOW):
            assert [(j.id, x.app_id) for j, x in jobs_repo.unlearned_job_apps(s, settled)] == (
                _old_unlearned(s, settled)
            )
            assert [x.app_id for x in jobs_repo.unobserved_tagged_apps(s, settled)] == (
                _old_unobserved(s, settled)
            )
        live = sorted(x.app_id for x in jobs_repo.live_job_tagged_apps(s, "default"))
        assert live == _old_live(s)

        # The edge cases, spelled out (engine-neutral ones).
        jobs = [j.id for j, _ in jobs_repo.unlearned_job_apps(s, SETTLED)]
        assert set(jobs) == {"ja", "jb", "jn"}  # not late, observed, live, running or unpolled
        assert jobs.index("ja") + 1 == jobs.index("jb")  # a tie goes by app id
        got = [x.app_id for x in jobs_repo.unobserved_tagged_apps(s, SETTLED)]
        assert {"app_t_old", "app_t_0", "app_t_1", "app_t_null", "app_t_other"} <= set(got)
        assert got.index("app_t_0") + 1 == got.index("app_t_1")  # a tie goes by app id
        assert not {"app_t_late", "app_t_seen", "app_t_running", "app_job_a"} & set(got)
        assert "app_t_inner" not in got
        late = [x.app_id for x in jobs_repo.unobserved_tagged_apps(s, SETTLED + 5)]
        assert "app_t_late" in late  # learned once it settles
        assert {"app_l_accepted", "app_l_new", "app_l_finishing", "app_l_between", "app_l_low",
                "app_l_other", "app_job_live"} == set(live)  # fmt: skip
        todo = history_repo.to_collect(s, a, NOW, limit=50, retry_after_ms=RETRY_AFTER)
        assert set(todo) == {"app_mr_due", "app_mr_new1", "app_mr_new2", "app_mr_null"}
        assert todo.index("app_mr_new1") + 1 == todo.index("app_mr_new2")  # a tie: by app id


def test_observing_an_app_takes_it_off_the_learning_lists(db: Db) -> None:
    _seed(db, irrelevant=10)
    with transaction(db.sessions) as s:
        s.add_all([_observed("app_t_0"), _observed("app_job_a")])
    with db.sessions() as s:
        assert "app_t_0" not in [x.app_id for x in jobs_repo.unobserved_tagged_apps(s, SETTLED)]
        assert "app_job_a" not in [x.app_id for _, x in jobs_repo.unlearned_job_apps(s, SETTLED)]
        assert [x.app_id for x in jobs_repo.unobserved_tagged_apps(s, SETTLED)] == (
            _old_unobserved(s, SETTLED)
        )
        assert [(j.id, x.app_id) for j, x in jobs_repo.unlearned_job_apps(s, SETTLED)] == (
            _old_unlearned(s, SETTLED)
        )


# ---- no whole-history reads ----------------------------------------------------------------


@contextlib.contextmanager
def _statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The SQL statements (with their parameters) sent while the block runs."""
    sent: list[tuple[str, Any]] = []

    def record(_c: Any, _cur: Any, statement: str, params: Any, _ctx: Any, _many: bool) -> None:
        sent.append((statement, params))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _app_statement(db: Db, run: Callable[[Session], object]) -> tuple[str, Any]:
    with _statements(db.engine) as sent, db.sessions() as s:
        run(s)
    found = [(st, p) for st, p in sent if "FROM applications" in st or "JOIN applications" in st]
    assert len(found) == 1, found
    return found[0]


def _sqlite_plan(db: Db, statement: str, params: Any) -> list[str]:
    with db.engine.connect() as conn:
        return [r[3] for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params)]


def _pg_rows_read(db: Db, statement: str, params: Any) -> int:
    """Rows the executed plan took from ``applications`` (returned or filtered out)."""
    with db.engine.connect() as conn:
        plan = conn.exec_driver_sql(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params
        ).scalar_one()
    plan = json.loads(plan) if isinstance(plan, str) else plan

    def walk(node: dict[str, Any]) -> int:
        own = 0
        if node.get("Relation Name") == "applications":
            loops = node.get("Actual Loops", 1)
            own = loops * (
                node.get("Actual Rows", 0)
                + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)
            )
        return own + sum(walk(child) for child in node.get("Plans", []))

    return walk(plan[0]["Plan"])


def _work_lists(a: int) -> dict[str, tuple[Callable[[Session], object], str]]:
    """Each query, and the index its SQLite plan must read ``applications`` through."""
    return {
        "unlearned_job_apps": (
            lambda s: jobs_repo.unlearned_job_apps(s, SETTLED),
            "USING INDEX sqlite_autoindex_applications_1 (app_id=?)",
        ),
        "unobserved_tagged_apps": (
            lambda s: jobs_repo.unobserved_tagged_apps(s, SETTLED),
            "USING INDEX ix_applications_deadline_tagged",
        ),
        "live_job_tagged_apps": (
            lambda s: jobs_repo.live_job_tagged_apps(s, "default"),
            # the live states' ranges, or the apps the RM still lists (both bounded by the RM)
            "USING INDEX ix_applications_state (state>? AND state<?)|ix_applications_listed",
        ),
        "to_collect": (
            lambda s: history_repo.to_collect(s, a, NOW, limit=50, retry_after_ms=RETRY_AFTER),
            "USING INDEX ix_applications_mapreduce (cluster_id=?)",
        ),
    }


@pytest.mark.parametrize(
    "query", ["unlearned_job_apps", "unobserved_tagged_apps", "live_job_tagged_apps", "to_collect"]
)
def test_a_work_list_does_not_read_the_irrelevant_history(db: Db, query: str) -> None:
    a, _ = _seed(db)
    run, index = _work_lists(a)[query]
    statement, params = _app_statement(db, run)
    if db.engine.dialect.name == "sqlite":
        plan = _sqlite_plan(db, statement, params)
        app_lines = [line for line in plan if " applications" in line]
        assert app_lines, plan
        assert all("USING" in line for line in app_lines), plan  # never a bare SCAN
        assert any(i in line for line in app_lines for i in index.split("|")), plan
        # Neither the state index with equality (every finished app) nor the time indexes.
        assert not any(
            "(state=?)" in line or "ix_applications_finished" in line or "final_seen" in line
            for line in app_lines
        ), plan
    else:
        # The candidates number a few dozen; the irrelevant apps thousands.
        assert _pg_rows_read(db, statement, params) < 100


# ---- the applications gauge ------------------------------------------------------------------


def test_the_applications_gauge_counts_the_apps_the_rm_lists_not_the_history(db: Db) -> None:
    with transaction(db.sessions) as s:
        cluster = Cluster(name="default", rm_urls="http://rm", first_seen_ms=0,
                          last_good_poll_ms=NOW)  # fmt: skip
        s.add(cluster)
        s.flush()
        c = cluster.id
        history = [
            _app(f"application_0_{i:07d}", c, finished_ms=100_000 + i, gone_ms=200_000 + i)
            for i in range(IRRELEVANT)
        ]
        listed = [
            _app("app_run_1", c, state="RUNNING", finished_ms=None),
            _app("app_run_2", c, state="RUNNING", finished_ms=None),
            _app("app_acc", c, state="ACCEPTED", finished_ms=None),
            _app("app_done", c, state="FINISHED"),
            _app("app_lost", c, state="RUNNING", finished_ms=None, gone_ms=5),  # RM dropped it
        ]
        s.execute(insert(Application), history + listed)
    if db.engine.dialect.name == "postgresql":
        with db.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    with _statements(db.engine) as sent, db.sessions() as s:
        snap = observe_repo.snapshot(s, "default")
    assert snap.apps_by_state == {"RUNNING": 2, "ACCEPTED": 1, "FINISHED": 1}
    statement, params = next(
        (st, p) for st, p in sent if "FROM applications" in st and "GROUP BY" in st
    )
    if db.engine.dialect.name == "sqlite":
        plan = _sqlite_plan(db, statement, params)
        assert any("USING INDEX ix_applications_listed" in line for line in plan), plan
    else:
        assert _pg_rows_read(db, statement, params) < 100
