"""``simulate`` and ``simulate compare`` through a parser built with ``configure``."""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
from pathlib import Path

import pytest

from app.sim import cli, experiment
from app.sim.jobs import SimJob, reason_shape


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="yarn-sidecar")
    sub = parser.add_subparsers(dest="command", required=True)
    cli.configure(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


COMMON = ["--trace", "synthetic", "--synthetic-jobs", "120", "--capacity", "60", "--quiet"]


def test_simulate_writes_json_csv_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "one"
    rc = _main(
        [
            "simulate",
            *COMMON,
            "--policy",
            "justice",
            "--deadlines",
            "Aria1x3x",
            "--sharing",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["capacity_vcores"] == 60
    assert summary["summary"]["jobs"] == 120
    assert 0.0 <= summary["summary"]["sdr"] <= 1.0
    assert summary["summary"]["decisions"]["admit"] > 0
    jobs = (out / "jobs.csv").read_text().splitlines()
    assert jobs[0].startswith("job_id,queue") and len(jobs) == 121
    assert "sharing_degree.a" in (out / "series.csv").read_text().splitlines()[0]
    for png in ("timeline.png", "queues.png", "sharing.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "justice" in capsys.readouterr().out


def test_compare_writes_one_self_contained_html(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    rc = _main(
        [
            "simulate",
            "compare",
            *COMMON,
            "--policies",
            "baseline-fs,oracle,fawkes:TD",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    page = (out / "compare.html").read_text()
    assert page.count("data:image/png;base64,") >= 6
    assert "<link" not in page and 'src="http' not in page
    data = json.loads((out / "compare.json").read_text())
    assert [r["policy"] for r in data["results"]] == ["baseline-fs", "oracle", "fawkes:TD"]
    assert (out / "compare.csv").read_text().startswith("policy,jobs,sdr")


def test_errors_are_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(["simulate", *COMMON, "--policy", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown policy" in capsys.readouterr().err
    assert (
        _main(
            [
                "simulate",
                *COMMON,
                "--policy",
                "justice",
                "--deadlines",
                "none",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "needs deadlines" in capsys.readouterr().err


def test_decisions_csv_tells_each_jobs_story_once_per_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "promise"
    # 120 jobs on 20 vcores: most wait, many for several rounds
    argv = ["simulate", "--trace", "synthetic", "--synthetic-jobs", "120", "--capacity", "20"]
    argv += ["--quiet", "--deadlines", "Aria1x3x", "--policy", "promise", "--decisions"]
    assert _main([*argv, "--out", str(out)]) == 0
    with (out / "decisions.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with (out / "jobs.csv").open(encoding="utf-8") as fh:
        jobs = {r["job_id"]: r for r in csv.DictReader(fh)}
    times = [float(r["time_s"]) for r in rows]
    assert times == sorted(times)
    story: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        story.setdefault(r["job_id"], []).append(r)
    assert set(story) == set(jobs)  # every job was decided on
    for job_id, job in jobs.items():
        steps = story[job_id]
        admits = [s for s in steps if s["action"] == "admit"]
        if int(job["grant"]) > 0:  # admitted once, on the grant it ran with
            assert [int(s["vcores"]) for s in admits] == [int(job["grant"])]
        else:
            assert admits == []
        if job["status"] in ("dropped", "killed"):  # its last decision is why
            assert steps[-1]["action"] == {"dropped": "drop", "killed": "kill"}[job["status"]]
            assert steps[-1]["reason"] == job["reason"]
        said = [(s["action"], reason_shape(s["reason"])) for s in steps]
        assert all(a != b for a, b in itertools.pairwise(said))  # each line says something new
    summary = json.loads((out / "summary.json").read_text())["summary"]
    logged = sum(r["action"] == "queue" for r in rows)
    # the same wait, round after round, is one line: fewer lines than queue decisions
    assert 0 < logged < summary["decisions"]["queue"]
    assert any(
        s[0]["action"] == "queue" and s[-1]["action"] in ("admit", "drop") for s in story.values()
    )
    # a policy that decides no admissions has none to log
    assert _main(["simulate", *COMMON, "--decisions", "--out", str(tmp_path / "fs")]) == 2
    assert "baseline-fs makes no admission decisions" in capsys.readouterr().err


def test_progress_bar_draws_and_ends_the_line() -> None:
    buf = io.StringIO()
    bar = cli.ProgressBar("x", stream=buf, width=10, min_interval_s=0.0)
    bar(5, 10)
    bar(10, 10)
    bar.close()
    text = buf.getvalue()
    assert "[#####.....]  50.0% 5/10" in text and text.endswith("100.0% 10/10\n")


def test_capacity_as_a_multiple_of_mean_demand() -> None:
    jobs = [
        SimJob("a", 0, 4, 40.0, runtime_s=10.0),
        SimJob("b", 5, 2, 20.0, runtime_s=15.0),
    ]  # mean demand 60 vcore-s over 20 s = 3 vcores
    assert experiment.resolve_capacity("2x-mean", jobs) == 6
    assert experiment.resolve_capacity("0.5x-mean", jobs) == 2
    for bad in ("0x-mean", "fewx-mean", "-1x-mean"):
        with pytest.raises(ValueError, match="capacity"):
            experiment.resolve_capacity(bad, jobs)


def test_compare_shows_sharing_degrees_in_the_table_and_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    argv = ["simulate", "compare", *COMMON, "--policies", "fair,ltrf", "--sharing"]
    assert _main([*argv, "--no-plots", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "mean sharing degree: a=" in printed and "min sharing degree: a=" in printed
    page = (out / "compare.html").read_text()
    assert "<th>mean_sharing_degree</th>" in page and "<th>min_sharing_degree</th>" in page
    data = json.loads((out / "compare.json").read_text())
    degrees = data["results"][0]["mean_sharing_degree"]
    assert f"a: {degrees['a']:.4g}" in page


def test_compare_in_parallel_processes_gives_the_serial_results(tmp_path: Path) -> None:
    def run(jobs: int) -> list[dict[str, object]]:
        out = tmp_path / f"jobs{jobs}"
        argv = ["simulate", "compare", *COMMON, "--deadlines", "Aria1x3x", "--no-plots"]
        argv += ["--policies", "justice,pythia,ltrf,fawkes:TD", "--out", str(out)]
        assert _main([*argv, "--jobs", str(jobs)]) == 0
        results = json.loads((out / "compare.json").read_text())["results"]
        for r in results:
            r.pop("wall_s")
        return list(results)

    serial, parallel = run(1), run(3)
    assert [r["policy"] for r in parallel] == ["justice", "pythia", "ltrf", "fawkes:TD"]
    assert parallel == serial
    assert _main(["simulate", "compare", *COMMON, "--policies", "ltrf", "--jobs", "0"]) == 2


def test_compare_on_a_dask_cluster_gives_the_serial_results(tmp_path: Path) -> None:
    pytest.importorskip("distributed")

    def run(*extra: str) -> list[dict[str, object]]:
        out = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        argv = ["simulate", "compare", *COMMON, "--deadlines", "Jockey1x2x", "--no-plots"]
        argv += ["--policies", "promise,baseline-fs,ltrf", "--out", str(out), *extra]
        assert _main(argv) == 0
        results = json.loads((out / "compare.json").read_text())["results"]
        for r in results:
            r.pop("wall_s")
        return list(results)

    serial = run()
    # a local cluster of two worker processes, started and closed by the run
    on_dask = run("--executor", "dask", "--jobs", "2")
    assert [r["policy"] for r in on_dask] == ["promise", "baseline-fs", "ltrf"]
    assert on_dask == serial
    # an existing cluster, reached through its scheduler's address
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as existing:
        address = existing.scheduler_address
        assert run("--executor", "dask", "--dask-scheduler", address) == serial
    base = ["simulate", "compare", *COMMON, "--policies", "ltrf", "--out", str(tmp_path / "x")]
    assert _main([*base, "--dask-scheduler", "tcp://127.0.0.1:1"]) == 2  # without --executor dask


def test_deadline_basis_template_reaches_the_run(tmp_path: Path) -> None:
    def deadlines_by_job(basis: str) -> dict[str, tuple[float, float]]:
        out = tmp_path / basis
        argv = ["simulate", "--trace", "recurring", "--synthetic-jobs", "60", "--capacity", "200"]
        argv += ["--deadlines", "Fixed1x", "--deadline-basis", basis, "--policy", "pythia"]
        assert _main([*argv, "--quiet", "--no-plots", "--out", str(out)]) == 0
        config = json.loads((out / "summary.json").read_text())["config"]
        assert config["deadline_basis"] == basis
        rows = [line.split(",") for line in (out / "jobs.csv").read_text().splitlines()[1:]]
        # job_id, ..., tasks, work, deadline: the job's own ideal run is work / min(tasks, 200)
        return {r[0]: (float(r[4]) / min(int(r[3]), 200), float(r[5])) for r in rows}

    own = deadlines_by_job("ideal")
    assert all(d == pytest.approx(ideal) for ideal, d in own.values())
    template = deadlines_by_job("template")
    assert template.keys() == own.keys()
    # runs of a template vary, so most deadlines are no longer their own run
    differs = sum(d != pytest.approx(ideal) for ideal, d in template.values())
    assert differs > len(template) / 2


def test_csv_cells_from_a_trace_open_as_text_not_formulas(tmp_path: Path) -> None:
    # Ids and queues of a trace exported from YARN are whatever its users named them.
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "job_id,submit_s,tasks,work_vcore_s,queue\n"
        '"=HYPERLINK(""http://x"")",0,2,20,@evil\n'
        "-2+3,1,1,5,plain\n"
        "j3,2,1,5,plain\n",
        "utf-8",
    )
    out = tmp_path / "run"
    argv = ["simulate", "--trace", str(trace), "--format", "csv", "--capacity", "4"]
    argv += ["--deadlines", "Fixed2x", "--policy", "promise", "--decisions", "--quiet"]
    assert _main([*argv, "--no-plots", "--out", str(out)]) == 0
    with (out / "jobs.csv").open(encoding="utf-8", newline="") as fh:
        jobs = {row["job_id"]: row for row in csv.DictReader(fh)}
    assert set(jobs) == {'\'=HYPERLINK("http://x")', "'-2+3", "j3"}
    assert jobs['\'=HYPERLINK("http://x")']["queue"] == "'@evil"
    assert jobs["j3"]["queue"] == "plain"
    with (out / "decisions.csv").open(encoding="utf-8", newline="") as fh:
        ids = {row["job_id"] for row in csv.DictReader(fh)}
    assert ids <= set(jobs) and "'-2+3" in ids
