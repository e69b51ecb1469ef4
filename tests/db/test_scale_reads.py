"""Reads whose cost must not grow with the history, on both engines: Promise's estimator refresh
reads only the observations added since its last one (``app.db.promise_history``), and learns
from them exactly what a full rebuild learns; placement reads only the live apps that carry a
``deadline:`` tag (``history_repo.live_tagged_apps``).

Behaviour, not timing: the tests count the ORM rows a read loads (speed is for benchmarks)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from sqlalchemy import event

from app.db import history_repo, repo
from app.db.jobs_models import EstimatorObservation
from app.db.models import Application, Cluster
from app.db.promise_history import EstimatorCache, load_estimator
from app.db.session import transaction
from app.policies.promise.estimator import Estimator, EstimatorParams
from tests.conftest import Db
from tests.factories import app

CAPACITY = 8
PARAMS = EstimatorParams(min_samples=1)


@contextlib.contextmanager
def _loads(model: type[Any]) -> Iterator[list[object]]:
    """The instances of ``model`` built from rows while the block runs."""
    seen: list[object] = []

    def loaded(target: object, _context: object) -> None:
        seen.append(target)

    event.listen(model, "load", loaded)
    try:
        yield seen
    finally:
        event.remove(model, "load", loaded)


def _observe(db: Db, rows: list[tuple[str, int, str, float, bool]], tasks: int = 4) -> None:
    """Finished apps and their observations: (app id, observed_ms, job name, work, censored),
    each run of ``tasks`` tasks."""
    with transaction(db.sessions) as s:
        cluster = s.query(Cluster).filter_by(name="test").one_or_none()
        if cluster is None:
            cluster = Cluster(name="test", rm_urls="http://rm", first_seen_ms=0)
            s.add(cluster)
            s.flush()
        for app_id, observed_ms, name, work, censored in rows:
            s.add(
                Application(
                    app_id=app_id, cluster_id=cluster.id, user="al", queue="root.deadline",
                    name=name, app_type="MAPREDUCE", tags=",", state="FINISHED",
                    final_status="KILLED" if censored else "SUCCEEDED", elapsed_ms=100_000,
                    vcore_seconds=int(work), first_seen_ms=0, updated_ms=0, launched_ms=0,
                    finished_ms=10_000,  # the AM's 10 s come off the work
                )
            )  # fmt: skip
            s.flush()
            s.add(
                EstimatorObservation(
                    app_id=app_id, source="tagged", observed_ms=observed_ms,
                    learned=not censored, censored=censored, tasks=tasks, deadline_s=100.0,
                    comp_time=work, cpus=4, success=not censored,
                )
            )  # fmt: skip


def _same(a: Estimator, b: Estimator) -> None:
    assert a.entries() == b.entries()
    assert a.totals() == b.totals()
    assert a.startup() == b.startup()


def test_a_refresh_reads_only_the_observations_added_since(db: Db) -> None:
    _observe(
        db,
        [
            (f"application_1_{i:04d}", 1_000 + i, f"etl-{i % 3}", 100.0 + i, False)
            for i in range(40)
        ],
    )
    cache = EstimatorCache(PARAMS)
    with db.sessions() as s, _loads(EstimatorObservation) as first:
        cache.refresh(s, CAPACITY)
    assert len(first) == 40 and cache.learned == 40
    # a round with nothing new reads nothing (not the 40 rows again, skipped in Python)
    with db.sessions() as s, _loads(EstimatorObservation) as idle:
        cache.refresh(s, CAPACITY)
    assert idle == [] and cache.learned == 40
    # new rows, one observed in the same millisecond as the last one learned: only they are read
    _observe(
        db,
        [
            ("application_1_0100", 1_039, "etl-1", 90.0, False),  # ties the mark, a later id
            ("application_1_0101", 1_050, "etl-2", 300.0, False),
        ],
    )
    with db.sessions() as s, _loads(EstimatorObservation) as new:
        est = cache.refresh(s, CAPACITY)
    got = sorted(obs.app_id for obs in new)  # type: ignore[attr-defined]
    assert got == ["application_1_0100", "application_1_0101"] and cache.learned == 42
    with db.sessions() as s:
        _same(est, load_estimator(s, PARAMS, CAPACITY))


def test_refreshing_batch_by_batch_learns_what_a_full_rebuild_learns(db: Db) -> None:
    cache = EstimatorCache(PARAMS)
    # (app id, observed_ms, signature, work, censored); ties on observed_ms inside a batch and
    # with the previous batch's last row (a later app id), killed runs among them
    a1, a2, a3, a4 = (f"application_1_000{i}" for i in range(1, 5))
    b1, b2, b3 = (f"application_2_000{i}" for i in range(1, 4))
    batches = [
        [(a1, 500, "a", 120.0, False), (a2, 500, "b", 40.0, False)],
        [(a3, 500, "a", 200.0, True), (a4, 700, "a", 90.0, False)],
        [(b1, 700, "b", 60.0, False), (b2, 701, "a", 150.0, False)],
        [(b3, 900, "b", 55.0, True)],
    ]
    for batch in batches:
        _observe(db, batch)
        with db.sessions() as s:
            est = cache.refresh(s, CAPACITY)
            _same(est, load_estimator(s, PARAMS, CAPACITY))
    assert cache.learned == sum(len(batch) for batch in batches)
    assert cache.mark == (900, b3)


def test_placement_reads_only_the_live_apps_with_a_deadline_tag(db: Db) -> None:
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        apps = [
            app(f"application_1_{i:04d}", state="RUNNING", tags=("team-1", "profile:etl"))
            for i in range(30)
        ]
        apps += [
            app("application_1_0100", state="RUNNING", tags=("team-1", "deadline:2000000")),
            app("application_1_0101", state="ACCEPTED", tags=("Deadline:2000000",)),
            app("application_1_0102", state="FINISHED", finished_ms=5_000, tags=("deadline:9",)),
            app("application_1_0103", state="RUNNING", tags=("deadline:2000000",), queue="x"),
        ]
        repo.upsert_apps(s, cid, apps, now_ms=10_000)
    with db.sessions() as s, _loads(Application) as loaded:
        live = history_repo.live_tagged_apps(s, cid, ("ACCEPTED", "RUNNING"), "deadline:")
    ids = sorted(a.app_id for a in live)
    assert ids == ["application_1_0100", "application_1_0101", "application_1_0103"]
    assert len(loaded) == 3  # the 30 untagged live apps are not read


def test_a_new_capacity_rebuilds_only_when_a_run_learned_was_wider_than_it(db: Db) -> None:
    # runs of 4 tasks: maxCPUs is 4 on 8 vcores and on 6, 2 on 2
    _observe(db, [(f"application_1_{i:04d}", 1_000 + i, f"etl-{i % 2}", 50.0 + i, False)
                  for i in range(10)])  # fmt: skip
    cache = EstimatorCache(PARAMS)
    with db.sessions() as s:
        cache.refresh(s, CAPACITY)
    for capacity, rows_read in [(6, 0), (4, 0), (2, 10), (3, 10), (8, 10), (16, 0)]:
        with db.sessions() as s, _loads(EstimatorObservation) as read:
            est = cache.refresh(s, capacity)
        assert len(read) == rows_read, capacity
        with db.sessions() as s:
            _same(est, load_estimator(s, PARAMS, capacity))
    # a wider run learned later makes the next smaller capacity rebuild
    _observe(db, [("application_2_0001", 2_000, "etl-0", 400.0, False)], tasks=12)
    with db.sessions() as s, _loads(EstimatorObservation) as read:
        cache.refresh(s, 16)
    assert len(read) == 1
    with db.sessions() as s, _loads(EstimatorObservation) as read:
        est = cache.refresh(s, 10)
    assert len(read) == 11
    with db.sessions() as s:
        _same(est, load_estimator(s, PARAMS, 10))
