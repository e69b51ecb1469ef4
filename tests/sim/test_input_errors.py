"""Bad simulator input is a one-line error naming the option, or the file and line, with exit 2:
never a traceback, a run that does not end, or a silent wrong result."""

from __future__ import annotations

import argparse
import gzip
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.observability import whatif_cli
from app.sim import cli, experiment, jobs, phases, report, trace
from app.sim.cluster import ClusterSpec
from app.sim.jobs import JobError, SimJob

CSV_HEADER = "job_id,submit_s,tasks,work_vcore_s,queue\n"
G19_HEADER = (
    "job_id,user_id,sched_class,priority,submit_s,first_task_start_s,last_task_end_s,"
    "final_status,n_tasks,n_tasks_finished,task_seconds_total,task_seconds_max,"
    "cpu_req_per_task,mem_req_per_task,complete\n"
)
G19_ROW = "6251639646,81,1,9,604,605,675,FINISH,1,1,{work},70,0.0625,0.0159,1\n"
G29_HEADER = "job_id,user_id,sched_class,submit_s,schedule_s,end_s,final_status,n_submits\n"


def _parser(settings: Any = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="yarn-sidecar")
    sub = parser.add_subparsers(dest="command", required=True)
    cli.configure(sub)
    simulate = cli.subcommand(parser, "simulate")
    whatif_cli.extend(simulate, lambda: settings)
    whatif_cli.extend_phases(cli.subcommand(simulate, "phases"), lambda: settings)
    return parser


def _main(argv: list[str], settings: Any = None) -> int:
    args = _parser(settings).parse_args(argv)
    return int(args.func(args))


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Input that must be refused never reaches a simulation (without the check it would run
    for ever, so the test fails here instead of hanging)."""

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("bad input reached the simulation")

    monkeypatch.setattr(experiment, "run_policy", refuse)
    monkeypatch.setattr(phases, "simulate", refuse)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, "utf-8")
    return path


# ----- 1. HTML -----
def test_compare_html_escapes_queue_names_from_the_trace(tmp_path: Path) -> None:
    t = _write(tmp_path / "t.csv", CSV_HEADER + "j1,0,2,100,<script>alert(1)</script>\n")
    out = tmp_path / "cmp"
    argv = ["simulate", "compare", "--trace", str(t), "--capacity", "4", "--deadlines", "none"]
    assert _main([*argv, "--policies", "baseline-fs,ltrf", "--out", str(out), "--quiet"]) == 0
    page = (out / "compare.html").read_text()
    assert "<script>" not in page
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;: 1" in page


def test_plots_show_queue_names_that_look_like_math_text() -> None:
    # "$...$" is matplotlib math text, and this one does not parse
    odd = [SimJob("a", 0, 1, 100.0, queue="$\\frac$"), SimJob("b", 0, 1, 100.0, queue="_q")]
    result = experiment.run_policy("baseline-fs", odd, ClusterSpec(2))
    plots = report.result_plots(result)
    assert all(png[:4] == b"\x89PNG" for png in plots.values())


# ----- 2. bounds: no run that never ends -----
@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("j1,0,2,inf,a", "t.csv:2: work_vcore_s: must be a finite number, got 'inf'"),
        ("j1,0,2,nan,a", "t.csv:2: work_vcore_s: must be a finite number"),
        ("j1,inf,2,10,a", "t.csv:2: submit_s: must be a finite number, got 'inf'"),
        ("j1,1e12,2,10,a", "t.csv:2: submit_s: 1000000000000.0 is not within 100 years of 0"),
        ("j1,0,2,1e308,a", "t.csv:2: work_vcore_s: 1e+308 vcore-s over 2 task(s) is an ideal run"),
        ("j1,0,100000000,1e9,a", "t.csv:2: tasks: must be from 1 to 10,000,000"),
    ],
)
def test_csv_times_and_work_are_finite_and_bounded(tmp_path: Path, row: str, message: str) -> None:
    t = _write(tmp_path / "t.csv", CSV_HEADER + row + "\n")
    with pytest.raises(trace.TraceError) as err:
        trace.load_csv(t)
    assert str(err.value).endswith(message) or message in str(err.value)


def test_google_work_is_bounded_and_sane_rows_still_load(tmp_path: Path) -> None:
    g = _write(tmp_path / "g.csv", G19_HEADER + G19_ROW.format(work="1e308"))
    with pytest.raises(trace.TraceError, match=r"g.csv:2: task_seconds_total: 1e\+308 vcore-s"):
        trace.load_google(g)
    g = _write(tmp_path / "g.csv", G19_HEADER + G19_ROW.format(work="70"))
    assert [(j.submit_s, j.work, j.runtime_s) for j in trace.load_google(g)] == [(604, 70, 70)]
    t = _write(tmp_path / "x_29d.csv", G29_HEADER + "1,2,3,0,0,,,1\n7,2,3,5,6,9,,1\n")
    [job] = trace.load_google29d(t)
    assert (job.job_id, job.submit_s, job.work) == ("7", 5.0, 3.0)
    with pytest.raises(trace.TraceError, match=r"x_29d.csv:2: end_s: 4e\+09 vcore-s"):
        trace.load_google29d(_write(t, G29_HEADER + "1,2,3,0,0,4e9,,1\n"))


def test_a_job_refuses_values_no_run_can_reach() -> None:
    for bad in (
        {"submit_s": math.inf},
        {"submit_s": math.nan},
        {"work": math.inf},
        {"work": math.nan},
        {"work": jobs.MAX_RUN_S * 2.5, "tasks": 2},
        {"deadline_s": math.inf},
        {"runtime_s": math.nan},
        {"input_bytes": -1.0},
    ):
        fields: dict[str, Any] = {"submit_s": 0.0, "tasks": 1, "work": 10.0} | bad
        with pytest.raises(JobError):
            SimJob("j", **fields)
    assert SimJob("j", 1.7e9, 1, jobs.MAX_RUN_S).work == jobs.MAX_RUN_S  # epoch seconds are fine


def test_a_workload_too_long_for_the_cluster_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_runs: None
) -> None:
    # each job alone is allowed (9.5 years); five of them on one vcore are 40 years of samples
    rows = "".join(f"j{k},0,1,3e8,a\n" for k in range(5))
    t = _write(tmp_path / "t.csv", CSV_HEADER + rows)
    argv = ["simulate", "--trace", str(t), "--capacity", "1", "--deadlines", "none", "--quiet"]
    assert _main([*argv, "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, "needs at least 47.5 years of simulated time on 1 vcores")


def test_the_cli_refuses_an_infinite_job_before_simulating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_runs: None
) -> None:
    t = _write(tmp_path / "t.csv", CSV_HEADER + "j1,0,2,inf,a\n")
    argv = ["simulate", "--trace", str(t), "--capacity", "4", "--deadlines", "none", "--quiet"]
    assert _main([*argv, "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, f"simulate: {t}:2: work_vcore_s: must be a finite number")


# ----- 3. simulate phases -----
@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--gaps", "nan"], "--gaps: each mean inter-arrival time must be from 0.001 to 86400 s"),
        (["--gaps", "0"], "--gaps: each mean inter-arrival time"),
        (["--gaps", "inf"], "--gaps: each mean inter-arrival time"),
        (
            ["--gaps", "-5"],
            "--gaps: each mean inter-arrival time must be from 0.001 to 86400 s, got -5.0",
        ),
        (["--gaps", "abc"], "--gaps: expected comma-separated numbers, got 'abc'"),
        (["--gaps", "4,"], "--gaps: expected comma-separated numbers"),
        (["--seeds", "x"], "--seeds: expected comma-separated whole numbers, got 'x'"),
        (["--seeds", ""], "--seeds: expected comma-separated whole numbers, got ''"),
        (["--count", "-3"], "--count must be from 1 to 1,000,000, got -3"),
        (["--count", "0"], "--count must be from 1"),
        (["--nodes", "0"], "--nodes must be from 1"),
        (["--node-vcores", "0"], "--node-vcores must be from"),
        (["--node-vcores", "nan"], "--node-vcores must be from"),
        (["--node-mb", "-1"], "--node-mb must be from 1"),
    ],
)
def test_phases_options_are_checked(
    options: list[str], message: str, capsys: pytest.CaptureFixture[str], no_runs: None
) -> None:
    assert _main(["simulate", "phases", "--count", "5", "--seeds", "1", *options]) == 2
    out, err = capsys.readouterr()
    assert err == f"simulate phases: {message}\n" or (
        err.startswith(f"simulate phases: {message}") and err.count("\n") == 1
    )
    assert out == ""  # no table header before the error


def test_phases_from_db_checks_the_nodes_before_reading(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _main(["simulate", "phases", "--from-db", "--nodes", "0"], settings=None) == 2
    _one_line_error(capsys, "simulate phases: --nodes must be from 1")


# ----- 4 and 7. simulate options -----
SYNTH = ["--trace", "synthetic", "--synthetic-jobs", "50", "--deadlines", "none", "--quiet"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--capacity", "20", "--limit-jobs", "-5"], "--limit-jobs must be >= 1, got -5"),
        (["--capacity", "20", "--limit-jobs", "0"], "--limit-jobs must be >= 1, got 0"),
        (["--capacity", "inf%"], "--capacity 'inf%' must be a finite percentage > 0"),
        (["--capacity", "1e400%"], "--capacity '1e400%' must be a finite percentage > 0"),
        (["--capacity", "abc"], "--capacity 'abc': expected whole vcores"),
        (["--capacity", "1e9"], "--capacity '1e9': expected whole vcores"),
        (["--capacity", "x%"], "--capacity 'x%': expected a number before '%'"),
        (["--capacity", "100000000"], "--capacity '100000000' is over 10,000,000 vcores"),
        (["--capacity", "4", "--swim-mib-per-s", "0"], "--swim-mib-per-s must be a finite"),
        (["--capacity", "4", "--swim-mib-per-s", "nan"], "--swim-mib-per-s must be a finite"),
        (["--capacity", "4", "--container-mb", "0"], "--container-mb must be >= 1, got 0"),
        (["--capacity", "4", "--memory-mb", "0"], "--memory-mb must hold at least one container"),
        (["--capacity", "4", "--memory-mb", "-5"], "--memory-mb must hold at least one container"),
        (["--capacity", "4", "--interval", "0"], "--interval must be from 1 to 86,400 s"),
        (["--capacity", "4", "--interval", "nan"], "--interval must be from 1"),
        (["--capacity", "4", "--max-step-pp", "nan"], "--max-step-pp must be from 0.01 to 100"),
        (["--capacity", "4", "--min-change-pp", "-1"], "--min-change-pp must be from 0 to 100"),
        (["--capacity", "4", "--synthetic-jobs", "0"], "--synthetic-jobs must be from 1"),
        (["--capacity", "4", "--queue-by", "group:x"], "--queue-by: group:K needs a whole"),
        (["--capacity", "4", "--queue-by", "team"], "--queue-by: unknown queue rule 'team'"),
    ],
)
def test_simulate_options_are_checked(
    options: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_runs: None,
) -> None:
    assert _main(["simulate", *SYNTH, *options, "--out", str(tmp_path)]) == 2
    _one_line_error(capsys, f"simulate: {message}")


def test_compare_checks_its_options_before_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_runs: None
) -> None:
    argv = ["simulate", "compare", *SYNTH, "--capacity", "4", "--policies", "baseline-fs,ltrf"]
    assert _main([*argv, "--memory-mb", "0", "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, "--memory-mb must hold at least one container")
    assert not (tmp_path / "o").exists()


def test_limit_jobs_keeps_the_first_jobs() -> None:
    spec = experiment.WorkloadSpec(traces=("synthetic",), synthetic_jobs=50, limit_jobs=5)
    assert len(experiment.load_workload(spec)) == 5
    with pytest.raises(ValueError, match="limit_jobs must be >= 1"):
        experiment.load_workload(
            experiment.WorkloadSpec(traces=("synthetic",), synthetic_jobs=50, limit_jobs=-5)
        )


# ----- 5 and 6. malformed files -----
def _gz(path: Path, text: str) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(text)
    return path


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "t.csv",
            CSV_HEADER + "j1,0,2,100,a,extra,1,2,3,4,5\n",
            "t.csv:2: 11 fields, the header has 5",
        ),
        (
            "t.csv",
            CSV_HEADER + "j1,0,2,100,a\nj2,5\n",
            "t.csv:3: tasks: missing (the row has 2 fields)",
        ),
        ("t.csv", CSV_HEADER + "j1,0,two,100,a\n", "t.csv:2: tasks: not a whole number: 'two'"),
        (
            "t.csv",
            CSV_HEADER + "\nj1,0,2,100,a\n\nj2,x,2,100,a\n",
            "t.csv:5: submit_s: not a number: 'x'",
        ),
        (
            "t.csv",
            "job_id,submit_s,tasks,work_vcore_s,tasks\n",
            "t.csv:1: columns ['tasks'] appear more",
        ),
        (
            "t.tsv",
            "j1\t0\t0\t-1000\t10\t10\n",
            "t.tsv:1: map_input_bytes: must be >= 0, got '-1000'",
        ),
        ("t.tsv", "j1\t0\t0\t1e400\t10\t10\n", "t.tsv:1: map_input_bytes: must be a finite number"),
        ("t.tsv", "j1\t-3\t0\t100\t10\t10\n", "t.tsv:1: submit_s: must be >= 0, got '-3'"),
        ("t.tsv", "j1\t0\t0\t1e30\t10\t10\n", "t.tsv:1: map_input_bytes: 1e+30 bytes is over"),
        ("g_first19h.csv", G19_HEADER + "123,4\n", "g_first19h.csv:2: 2 fields, the header has 15"),
        ("g_first19h.csv", G19_HEADER + G19_ROW.format(work="x"), "g_first19h.csv:2: task_seconds"),
        ("x_29d.csv", G29_HEADER + "1,2\n", "x_29d.csv:2: 2 fields, the header has 8"),
        ("x_29d.csv", G29_HEADER + "1,2,3,0,0,inf,,1\n", "x_29d.csv:2: end_s: must be a finite"),
        ("x_29d.csv", G29_HEADER + "1,2,3,-1,0,5,,1\n", "x_29d.csv:2: submit_s: must be >= 0"),
        ("x_29d.csv", "", "x_29d.csv: empty file, expected a header line"),
    ],
)
def test_malformed_rows_name_file_line_and_field(
    name: str,
    text: str,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_runs: None,
) -> None:
    t = _write(tmp_path / name, text)
    argv = ["simulate", "--trace", str(t), "--capacity", "4", "--deadlines", "none", "--quiet"]
    assert _main([*argv, "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, f"simulate: {tmp_path}/{message}")


def test_unreadable_files_name_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_runs: None
) -> None:
    bad_text = tmp_path / "t.csv"
    bad_text.write_bytes(CSV_HEADER.encode() + b"j1,0,2,100,\xff\xfe\n")
    not_gz = _write(tmp_path / "t.csv.gz", "not gzip\n")
    rows = "".join(f"j{k},{k},1,{k * 7 % 1000 + 1},a\n" for k in range(2000))
    whole = _gz(tmp_path / "whole.csv.gz", CSV_HEADER + rows).read_bytes()
    cut_gz = tmp_path / "c.csv.gz"
    cut_gz.write_bytes(whole[: len(whole) // 2])
    for path, message in (
        (bad_text, "not UTF-8 text (byte 0xff"),
        (not_gz, "not a readable gzip file"),
        (cut_gz, "not a readable gzip file"),
    ):
        argv = ["simulate", "--trace", str(path), "--capacity", "4", "--quiet"]
        assert _main([*argv, "--out", str(tmp_path / "o")]) == 2
        _one_line_error(capsys, f"simulate: {path}: {message}")


# ----- 8. --from-db -----
def _settings(url: str) -> Any:
    return SimpleNamespace(effective_database_url=url, cluster_name="c1")


def test_from_db_without_a_database_file_creates_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "nowhere" / "sidecar.db"
    settings = _settings(f"sqlite:///{db}")
    argv = ["simulate", "--from-db", "--policy", "ltrf", "--quiet", "--out", str(tmp_path / "o")]
    assert _main(argv, settings) == 2
    _one_line_error(capsys, f"simulate: no database at {db}: run `yarn-sidecar db upgrade` first")
    assert not db.exists() and not db.parent.exists()
    assert _main(["simulate", "phases", "--from-db"], settings) == 2
    _one_line_error(capsys, "simulate phases: no database at")
    assert not db.exists()


def test_from_db_on_an_unmigrated_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()
    argv = ["simulate", "--from-db", "--policy", "ltrf", "--quiet", "--out", str(tmp_path / "o")]
    assert _main(argv, _settings(f"sqlite:///{db}")) == 2
    _one_line_error(capsys, "the database has no sidecar tables: run `yarn-sidecar db upgrade`")


def test_from_db_unreachable_says_so_without_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # port 1 on the loopback refuses at once
    settings = _settings("postgresql://sim:hunter2@127.0.0.1:1/sidecar")
    argv = ["simulate", "--from-db", "--policy", "ltrf", "--quiet", "--out", str(tmp_path / "o")]
    assert _main(argv, settings) == 2
    err = _one_line_error(capsys, "simulate: cannot reach the database: ")
    assert "hunter2" not in err
    assert not (tmp_path / "o").exists()
