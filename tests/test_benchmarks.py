"""Every benchmark runs, at its smallest size, as the documentation tells users to run it.

A benchmark is run by hand, rarely, and long after the code it drives last changed: two of them
had stopped working (one sent a ``Host`` the API refuses and no token, one passed nodes where
the poll now writes totals) and a third crashed on a cluster smaller than its default. Each runs
here as a process, with options that keep it to seconds, and must exit 0 and print its table.
What the numbers are is the benchmarks' business, not this test's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sim.test_trace import TRACES

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"

_TRACE_CELL = [
    "--traces", str(TRACES), "--limit-jobs", "30", "--workload", "swim-queues",
    "--deadline", "Fixed2x", "--capacity", "1x-mean", "--model", "fluid",
]  # fmt: skip

# script -> (smallest arguments, a line of the table it prints)
SMOKE: dict[str, tuple[list[str], str]] = {
    "bench_admission_round": (["--waiting", "10", "--rounds", "2"], "lock p50 ms"),
    "bench_dashboard": (
        ["--hours", "1", "--queues", "5", "--jobs", "10", "--repeat", "1"],
        "/queues/series",
    ),
    "bench_estimator_refresh": (["--observations", "200"], "| 200 |"),
    "bench_job_reads": (["--waiting", "10", "--reads", "2"], "promise"),
    "bench_jobs_api": (
        ["--rate", "20", "--count", "20", "--waiting", "10", "--max-duration", "20"],
        "POST /jobs",
    ),
    "bench_queue_policies": (["--queues", "4", "--repeats", "2"], "fawkes step"),
    "bench_redact": (["--sizes", "200,400", "--repeat", "1"], "| a://:x |"),
    "bench_retention": (
        ["--db", "sqlite", "--nodes", "20", "--queues", "4", "--job-decisions", "2000"],
        "| sqlite | 2,400 |",
    ),
    "bench_rrf_justice": (["--repeat", "1"], "justice admit"),
    "bench_scale": (["--db", "sqlite", "--sizes", "10:4:5:10", "--ticks", "1"], "client"),
    "bench_sim": (
        ["--skip-29d", "--synthetic", "100", "--policies", "promise,oracle", "--models", "fluid"],
        "synthetic 100",
    ),
    "bench_submission": (["--batches", "1,4", "--jobs", "8", "--repeats", "1"], "CPU ms/job"),
    "calibrate_crowd_out": ([*_TRACE_CELL, "--max-holds", "2"], "mean predicted"),
    "eval_deadlines": (_TRACE_CELL, "swim-queues"),
}
# Not run here, and why.
EXEMPT = {
    # starts a mini cluster with the JobHistory server and runs ten MapReduce jobs (minutes);
    # what it drives (poller, history collector, HybridMR profiles) the real-RM tests run
    "eval_hybridmr": "needs a real mini cluster",
}


def test_every_benchmark_is_smoke_tested_or_exempt_with_a_reason() -> None:
    scripts = {p.stem for p in BENCHMARKS.glob("*.py")}
    assert scripts == SMOKE.keys() | EXEMPT.keys()


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_benchmark_runs_at_its_smallest_size(name: str, tmp_path: Path) -> None:
    args, expected = SMOKE[name]
    if name in ("eval_deadlines", "calibrate_crowd_out"):
        args = [*args, "--out", str(tmp_path / "out.json")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("YARN_SIDECAR_")}
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), *args],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert expected in proc.stdout, proc.stdout[-2000:]
    # bench_scale reports a cell whose process died as a row, and goes on
    assert "crashed" not in proc.stdout, proc.stdout[-2000:]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--limit-jobs", "0"], "--limit-jobs: at least 1 job"),
        (["--workload", "bogus"], "--workload 'bogus': use one of google"),
        (["--selection", "--workload", "google"], "--workload 'google': use one of synthetic"),
        (["--deadline", "Fixed3x"], "--deadline 'Fixed3x': use one of"),
        (["--model", "fluids"], "--model 'fluids': use one of fluid, tasks"),
        (["--selection", "--seeds", "1,x"], "--seeds '1,x': comma-separated integers"),
        (["--traces", "/nonexistent"], "--traces /nonexistent: no google2011/"),
        (["--markdown", "missing.json"], "--markdown missing.json: not a saved run"),
        (["--compare", "empty.json", "empty.json"], "--compare empty.json: not a saved run"),
        ([*_TRACE_CELL[:8], "--capacity", "lots"], "--capacity:"),
    ],
)
def test_eval_deadlines_refuses_what_would_run_nothing_or_fail_midway(
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One line naming the option, before any cell runs: an empty or misnamed workload used to
    print "goal holds in 1 cell" of nothing, a misnamed deadline a traceback after the header."""
    from tests.sim.scripts import load

    (tmp_path / "empty.json").write_text("")
    ev = load("eval_deadlines")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        ev.main(["--traces", str(TRACES), *args])
    assert exit_.value.code == 2
    out, err = capsys.readouterr()
    assert message in err and "Traceback" not in err and out == ""
