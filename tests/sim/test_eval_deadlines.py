"""The deadline evaluation's selection set and its before/after comparison
(``benchmarks/eval_deadlines.py``): what a change to Promise is chosen on and judged by."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.sim import scripts
from tests.sim.test_trace import TRACES, needs_traces


@pytest.fixture(scope="module")
def ev() -> ModuleType:
    return scripts.load("eval_deadlines")


def _cell(workload: str, kind: str, sdr: dict[str, float], wtr: float = 0.0) -> dict[str, Any]:
    results = {n: {"sdr": v, "wtr": 0.0} for n, v in sdr.items()}
    results["promise"]["wtr"] = wtr
    best = max(v for n, v in sdr.items() if n != "promise")
    return {
        "workload": workload,
        "vcores": 100,
        "deadlines": kind,
        "model": "fluid",
        "basis": "ideal",
        "results": results,
        "margin": sdr["promise"] - best,
    }


def test_the_selection_set_is_both_seeded_workloads_per_seed(ev: ModuleType) -> None:
    own = ev.selection(40, [1, 2], "ideal")
    assert [name for name, _, _ in own] == [
        "synthetic-s1",
        "recurring-s1",
        "synthetic-s2",
        "recurring-s2",
    ]
    assert [seed for _, _, seed in own] == [1, 1, 2, 2]
    assert all(len(jobs) == 40 for _, jobs, _ in own)
    # each seed draws its own jobs
    assert [j.work for j in own[0][1]] != [j.work for j in own[2][1]]
    # template deadlines only change jobs that have templates
    assert [name for name, _, _ in ev.selection(40, [3], "template")] == ["recurring-s3"]


def test_compare_counts_goals_sdr_moves_and_names_the_cells_that_changed(
    ev: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = [
        _cell("a", "Fixed1x", {"oracle": 0.90, "promise": 0.85}),  # goal missed
        _cell("a", "Fixed2x", {"oracle": 0.90, "promise": 0.95}),
        _cell("b", "Fixed1x", {"oracle": 0.90, "promise": 0.92}),
    ]
    after = [
        _cell("a", "Fixed1x", {"oracle": 0.90, "promise": 0.90}),  # now met
        _cell("a", "Fixed2x", {"oracle": 0.90, "promise": 0.95}),  # unchanged
        _cell("b", "Fixed1x", {"oracle": 0.90, "promise": 0.93}, wtr=0.05),  # WTR breaks it
    ]
    text = ev.compare(before, after)
    lines = text.splitlines()
    assert lines[0] == "3 cells in both"
    assert lines[2].split() == ["before", "2", "2", "0.9067", "0", "0.000"]
    assert lines[3].split() == ["after", "2", "3", "0.9267", "1", "0.050"]
    assert "Promise's SDR up in 2 cells, down in 0" in text
    assert "a 100 Fixed1x fluid: SDR 0.850 -> 0.900, WTR 0.000 -> 0.000, goal no -> ok" in text
    assert "b 100 Fixed1x fluid: SDR 0.920 -> 0.930, WTR 0.000 -> 0.050, goal ok -> no" in text
    assert "Fixed2x" not in text
    # the command line reads two saved runs
    paths = []
    for name, cells in (("before", before), ("after", after)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(cells), "utf-8")
        paths.append(str(path))
    assert ev.main(["--compare", *paths]) == 0
    assert capsys.readouterr().out.strip() == text
    with pytest.raises(SystemExit, match="no cell in common"):
        ev.compare(before, [_cell("c", "Fixed1x", {"oracle": 0.5, "promise": 0.5})])


def _ended(status: str, reason: str, after_s: float = 0.0, waited_for: str = "") -> Any:
    from app.sim.jobs import JobRun, SimJob, Status

    run = JobRun(SimJob("j", 100.0, 4, 400.0, deadline_s=200.0), max_cpus=4)
    run.status, run.reason, run.end_s = Status[status], reason, 100.0 + after_s
    run.waited_for = waited_for
    return run


@pytest.mark.parametrize(
    ("status", "reason", "after_s", "expected"),
    [
        (
            "DROPPED",
            "cannot finish by its deadline now+9s: at best 4 vcores ... (ratio@q:a)",
            1e-6,
            "refused at arrival, bound by its queue's deadline ratios",
        ),
        (
            "DROPPED",
            "cannot finish by its deadline now+9s: ... (task_s@n:etl-<n>|u:4|q:b)",
            30.0,
            "refused after waiting, bound by its signature's task times",
        ),
        (  # a job without a name: its signature is user, queue and size class
            "DROPPED",
            "cannot finish ... (ratio@u:105|q:u105|c:0)",
            0.0,
            "refused at arrival, bound by its signature's deadline ratios",
        ),
        (
            "DROPPED",
            "... (ratio@u:4|q:b)",
            5.0,
            "refused after waiting, bound by its user's deadline ratios",
        ),
        (
            "DROPPED",
            "... (ratio@*)",
            0.0,
            "refused at arrival, bound by the cluster's deadline ratios",
        ),
        ("DROPPED", "the cluster cannot hold its AM and one task", 0.0, "refused at arrival"),
        (
            "KILLED",
            "its first tasks ran 2s without ending: 2 waves end ...",
            9.0,
            "killed at its first wave",
        ),
        ("KILLED", "past its deadline by 3s; it can no longer succeed", 9.0, "killed late"),
        ("MISSED", "", 9.0, "finished late"),
    ],
)
def test_each_lost_job_is_named_by_what_promise_did_with_it(
    ev: ModuleType, status: str, reason: str, after_s: float, expected: str
) -> None:
    assert ev.loss_class(_ended(status, reason, after_s)) == expected


def test_a_job_held_back_for_crowd_out_is_named_so_not_by_its_bound(ev: ModuleType) -> None:
    refused = "cannot finish by its deadline now+9s: ... (task_s@n:etl-<n>|u:4|q:b)"
    held = "capacity: holding 5 vcores would crowd out about 1.2 arriving jobs"
    assert ev.loss_class(_ended("DROPPED", refused, 1e-6, held)) == (
        "refused at arrival, held back for the arrivals it would crowd out"
    )
    # waiting for anything else, it is named by the bound that refused it, as before
    other = "vcores to free up (after j2, expected at now+4s)"
    assert ev.loss_class(_ended("DROPPED", refused, 30.0, other)) == (
        "refused after waiting, bound by its signature's task times"
    )


@pytest.mark.parametrize(
    ("waited_for", "expected"),
    [
        (
            "waits for vcores free enough to try it (running jobs end too late)",
            "vcores free enough to try it (running jobs end too late)",
        ),
        (
            "waits for vcores free enough to try it (its bound misses)",
            "vcores free enough to try it (its bound misses)",
        ),
        (
            "waits for capacity it can risk: its wait left it a chance of 0.412 by its 7 runs",
            "capacity it can risk",
        ),
        ("waits for vcores to free up (after j2, expected at now+4s)", "vcores to free up"),
        (
            "waits for 12 vcores for its waves' margin: on exactly the 9 its bound needs, ...",
            "room for its waves' margin (its exact grant not worth the risk)",
        ),
        (
            "waits for capacity: on exactly the 9 its bound needs, a miss (about 1 in 4 ...)",
            "room for its waves' margin (its exact grant not worth the risk)",
        ),
        (
            "waits for capacity: holding 5 vcores would crowd out about 1.2 arriving jobs",
            "capacity that would not crowd out arrivals",
        ),
        ("expects 6 vcores at now+3.5s", "the vcores it expected (first in line)"),
    ],
)
def test_a_job_refused_after_waiting_is_named_by_what_it_last_waited_for(
    ev: ModuleType, waited_for: str, expected: str
) -> None:
    refused = "cannot finish by its deadline now+9s: ... (task_s@n:etl-<n>|u:4|q:b)"
    assert ev.wait_class(_ended("DROPPED", refused, 30.0, waited_for)) == expected
    # refused at its first round, never queued, or not refused: it did not wait for anything
    assert ev.wait_class(_ended("DROPPED", refused, 1e-6, waited_for)) is None
    assert ev.wait_class(_ended("DROPPED", refused, 30.0)) is None
    assert ev.wait_class(_ended("KILLED", "past its deadline by 3s", 30.0, waited_for)) is None


def test_the_simulator_keeps_why_a_job_last_waited() -> None:
    from app.policies.promise.estimator import Outcome
    from app.sim.cluster import ClusterSpec
    from app.sim.jobs import SimJob, Status
    from app.sim.promise_adapter import PromiseAllocator, sim_keys
    from app.sim.runner import Simulation

    # One vcore: a starts at once; b arrives while a runs and waits for its vcore, its three
    # runs so far saying it fits once a has ended.
    jobs = [
        SimJob("a", 0.0, 1, 100.0, deadline_s=200.0),
        SimJob("b", 1.0, 1, 50.0, deadline_s=300.0),
    ]
    alloc = PromiseAllocator()
    for _ in range(3):
        alloc.estimator.learn(Outcome(sim_keys(jobs[1]), 1, 50.0, 300.0, 1))
    queued: list[str] = []
    apply = alloc._apply

    def spy(d: Any) -> None:
        if d.action == "queue" and d.job_id == "b":
            queued.append(d.reason)
        apply(d)

    alloc._apply = spy  # type: ignore[method-assign]
    res = Simulation(jobs, alloc, ClusterSpec(1), model="fluid").run()
    runs = {r.job.job_id: r for r in res.runs}
    assert runs["a"].waited_for == "" and runs["b"].start_s == pytest.approx(100.0)
    assert queued and runs["b"].waited_for == queued[-1]
    assert runs["b"].status is Status.SUCCEEDED


def test_explain_reruns_failing_cells_then_those_behind_within_the_goal(ev: ModuleType) -> None:
    name, jobs, seed = ev.selection(60, [2], "ideal")[0]
    res = ev.run_cell(jobs, 20, "Jockey1x2x", "fluid", seed)
    margin = res["promise"]["sdr"] - max(res[n]["sdr"] for n in ev.POLICIES if n != "promise")
    assert margin < 0  # the cell this test explains: Promise behind the best other policy

    def cell(goal: bool, margin: float) -> dict[str, Any]:
        return {
            "workload": name,
            "vcores": 20,
            "deadlines": "Jockey1x2x",
            "model": "fluid",
            "results": res,
            "margin": margin,
            "goal": goal,
        }

    # the same cell counted as failing, as within the goal but behind, and as ahead (not rerun)
    cells = [cell(False, margin), cell(True, margin), cell(True, 0.0)]
    lines = ev.explain(cells, {name: jobs}, 0).splitlines()
    assert len(lines) == 7
    failing, total, waits, heading, behind, total_behind, waits_behind = lines
    assert failing.startswith(f"{name} 20 Jockey1x2x fluid: ")
    assert total.startswith("all failing cells: ")
    assert heading.startswith("cells where the goal holds with Promise behind the best")
    assert behind == failing  # the same cell, explained the same way in either section
    assert total_behind.startswith("all cells within 0.01: ")
    met = int(failing.split(" met ")[1].split()[0])
    counted = [int(part.rsplit(" ", 1)[1]) for part in failing.split("; ")[1:]]
    assert met > 0 and sum(counted) == met
    assert sorted(total.split(": ", 1)[1].split("; ")) == sorted(failing.split("; ")[1:])
    # what the jobs refused after waiting last waited for: as many as were refused so
    prefix = "all failing cells, refused after waiting, by what they last waited for: "
    assert waits.startswith(prefix)
    assert waits_behind == waits.replace("all failing cells", "all cells within 0.01")
    after = sum(n for k, n in _counts(failing) if k.startswith("refused after waiting"))
    assert after > 0 and sum(n for _, n in _counts(waits)) == after


def test_explain_splits_a_wasteful_cells_waste_by_how_each_run_was_started(
    ev: ModuleType,
) -> None:
    # template deadlines: runs slower than their template's median miss, and Promise wastes
    name, jobs, seed = ev.selection(120, [3], "template")[0]
    res = ev.run_cell(jobs, 80, "Fixed1x", "fluid", seed, "template")
    wtr = res["promise"]["wtr"]
    assert wtr > 0.02
    cell = {
        "workload": name,
        "vcores": 80,
        "deadlines": "Fixed1x",
        "model": "fluid",
        "basis": "template",
        "results": res,
        "margin": 0.0,
        "goal": False,
    }
    line = ev.explain([cell], {name: jobs}, 0).splitlines()[1]
    head, parts = line.split(": ", 1)
    assert head == f"  Promise's waste, WTR {wtr:.3f}"
    shares, missed, started = 0.0, 0, 0
    for part in parts.split("; "):
        if part.startswith("chance"):
            continue  # a try class's second half: ``chance P, met M)``
        kind, when_, rest = part.split(" ", 2)
        assert kind in ("promised", "tried", "explored")
        assert when_ in ("at", "after")
        share, counts = rest.rsplit(" (", 1) if "(" in rest else (rest, "")
        shares += float(share.split()[-1])
        m, n = counts.split(" missed")[0].split(" of ")
        missed, started = missed + int(m), started + int(n)
    # every class's waste adds up to the cell's WTR (each printed to 3 decimals)
    assert shares == pytest.approx(wtr, abs=0.002)
    # and its counts to the jobs Promise started, and those of them that missed
    dj = ev.deadlines.assign_deadlines(jobs, "Fixed1x", 80, seed, "template")
    run = ev.experiment.run_policy("promise", dj, ev.ClusterSpec(80), model="fluid")
    ran = [r for r in run.runs if r.start_s is not None]
    assert started == len(ran)
    assert missed == sum(r.status is not ev.Status.SUCCEEDED for r in ran)


def _counts(line: str) -> list[tuple[str, int]]:
    """The ``name count`` parts of an ``explain`` line, after its first ``: `` (a cell's line
    first says who met what, which is not one of them)."""
    parts = line.split(": ", 1)[1].split("; ")
    counted = parts if line.startswith("all") else parts[1:]
    return [(p.rsplit(" ", 1)[0], int(p.rsplit(" ", 1)[1])) for p in counted]


@needs_traces
def test_a_held_out_slice_is_the_same_jobs_later_on_its_own_clock(ev: ModuleType) -> None:
    every = (*ev.TRACE_WORKLOADS, *ev.HELD_OUT_WORKLOADS)
    whole = ev.workloads(TRACES, 150, 0, names=every)
    later = ev.workloads(TRACES, 50, 0, skip=100, names=every)
    assert set(later) == set(whole) == set(every)
    # the grid's four unless others are named: the held-out 29-day file is not loaded
    assert set(ev.workloads(TRACES, 10, 0)) == set(ev.TRACE_WORKLOADS)
    for name, jobs in later.items():
        want = whole[name][100:150]
        assert [j.job_id for j in jobs] == [j.job_id for j in want]
        assert jobs[0].submit_s == 0.0  # its clock starts at its first job
        shift = want[0].submit_s
        assert [j.submit_s for j in jobs] == pytest.approx([j.submit_s - shift for j in want])
        assert [(j.tasks, j.work) for j in jobs] == [(j.tasks, j.work) for j in want]
    # without a skip the workloads keep the traces' own clock (Google's first job at 604 s)
    assert whole["google"][0].submit_s > 0


def test_rerun_runs_promise_again_and_keeps_the_other_policies_saved_results(
    ev: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, jobs, seed = ev.selection(60, [2], "ideal")[0]
    fresh = ev.run_cell(jobs, 20, "Jockey1x2x", "fluid", seed)
    # A saved cell whose Promise results are not this code's, and one other result no rerun may
    # touch: the rerun must draw the deadlines with the workload's own seed (2, not --seed) to
    # get this code's results back.
    saved = json.loads(json.dumps(fresh))
    saved["promise"] = {**saved["promise"], "sdr": 0.0, "wtr": 0.5}
    saved["oracle"]["ptr"] = -1.0
    cell = {
        "workload": name,
        "vcores": 20,
        "deadlines": "Jockey1x2x",
        "model": "fluid",
        "basis": "ideal",
        "results": saved,
        "margin": -1.0,
        "goal": False,
    }
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps([cell]), "utf-8")
    assert ev.main(["--rerun", str(before), "--limit-jobs", "60", "--out", str(after)]) == 0
    (got,) = json.loads(after.read_text("utf-8"))
    promise = {k: v for k, v in got["results"]["promise"].items() if k != "wall_s"}
    assert promise == {k: v for k, v in fresh["promise"].items() if k != "wall_s"}
    assert got["results"]["oracle"]["ptr"] == -1.0
    margin = fresh["promise"]["sdr"] - max(fresh[n]["sdr"] for n in ev.POLICIES if n != "promise")
    assert got["margin"] == pytest.approx(margin)
    assert got["goal"] == ev.goal_holds(margin, fresh["promise"]["wtr"])
    header, row, total = capsys.readouterr().out.splitlines()
    assert header.startswith("workload") and row.startswith(f"{name:<12}{20:>6}")
    assert total == f"1 cells, goal holds in {int(got['goal'])}, fails in {1 - int(got['goal'])}"
