"""``yarn-sidecar simulate --from-db``: the recorded history replayed from the command line, on
both engines; without ``--from-db`` the command is the trace simulator as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from tests import operator_data as od
from tests.conftest import Db


@pytest.fixture
def recorded(db: Db, monkeypatch: pytest.MonkeyPatch) -> Db:
    od.seed_history(db.sessions)
    od.seed_jobs(db.sessions)
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", db.url)
    monkeypatch.setenv("YARN_SIDECAR_CLUSTER_NAME", od.CLUSTER)
    return db


def test_from_db_writes_summary_and_report(
    recorded: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "whatif"
    argv = ["simulate", "--from-db", "--policy", "fair", "--quiet", "--no-plots", "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "fair" and summary["jobs"] == 47
    assert summary["capacity_vcores"] == od.NODE_VCORES
    assert (summary["actual"]["deadlines_met"], summary["actual"]["deadlines_missed"]) == (4, 3)
    assert "Per-queue mean slowdown" in (out / "report.html").read_text()
    printed = capsys.readouterr().out
    assert "slowdown root.etl" in printed and "47 jobs on 32 vcores under fair" in printed


def test_from_db_errors_name_the_option(
    recorded: Db, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["simulate", "--from-db", "--quiet", "--out", str(tmp_path)]
    # the recorded hour is in 2023: nothing was submitted in the last 7 days
    assert main([*base, "--policy", "fair", "--since", "7d"]) == 2
    assert "since: no finished application" in capsys.readouterr().err
    assert main([*base, "--policy", "fair", "--since", "a week"]) == 2
    assert "since: expected a duration" in capsys.readouterr().err
    assert main([*base, "--policy", "justice"]) == 2
    assert "policy: justice needs a deadline per job" in capsys.readouterr().err
    assert main(["simulate", "--since", "7d", "--policy", "fair", "--trace", "synthetic"]) == 2
    assert "--since needs --from-db" in capsys.readouterr().err
    assert main([*base, "--policy", "promise", "--decisions"]) == 2
    assert "--decisions replays a trace; not with --from-db" in capsys.readouterr().err


async def test_phases_from_db_runs_both_models_on_the_stored_mapreduce_jobs(
    db: Db, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dataclasses

    from app.db import history_repo, repo
    from app.db.session import transaction
    from tests.db.test_history_repo import _mr, _wordcount

    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", db.url)
    monkeypatch.setenv("YARN_SIDECAR_CLUSTER_NAME", "test")
    assert main(["simulate", "phases", "--from-db"]) == 2
    assert "no MapReduce job history" in capsys.readouterr().err
    job = await _wordcount()
    with transaction(db.sessions) as s:
        cid = repo.ensure_cluster(s, "test", ["http://rm:8088"], 1).id
        apps = [_mr(f"application_1_000{i}") for i in (1, 2)]
        repo.upsert_apps(s, cid, apps, now_ms=1)  # type: ignore[arg-type]
        for i in (1, 2):
            copy = dataclasses.replace(
                job, job_id=f"job_1_000{i}", submit_ms=(job.submit_ms or 0) + 2000 * i
            )
            history_repo.store_job(s, f"application_1_000{i}", copy, 8.0, 10)
    assert main(["simulate", "phases", "--from-db", "--nodes", "1"]) == 0
    header, row = capsys.readouterr().out.strip().splitlines()
    assert header.split()[:3] == ["gap_s", "seed", "jobs"]
    label, _, jobs, task_mean, prism_mean, *_ = row.split()
    assert (label, jobs) == ("db", "2") and float(task_mean) > 0 and float(prism_mean) > 0
    # a node smaller than the recorded 1024 MB containers is refused, naming the job
    assert main(["simulate", "phases", "--from-db", "--node-mb", "512"]) == 2
    assert "map container (1 vcores, 1024 MB) does not fit" in capsys.readouterr().err
