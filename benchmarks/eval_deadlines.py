"""Deadline-admission evaluation grid (``docs/evaluation.md``, "Deadline admission: Promise").

Every cell replays one workload at one capacity with one deadline type on one cluster model
under Baseline FS, Reactive FS, the Oracle, PYTHIA, Justice and Promise (thesis seed 004,
section 5.2: same trace, same deadlines for every allocator), and prints one row per cell: SDR,
PTR, WTR, fairness and utilization per policy, Promise's SDR margin over the best other policy
and whether the goal (SDR within 0.01 of the best, WTR <= 0.02) holds. Also prints Promise's
work-prediction error (share of predictions off by 2x or more, 3Sigma's measure).

Run: ``nice .venv/bin/python benchmarks/eval_deadlines.py --traces ../shared/traces
[--limit-jobs 2000] [--out reports/eval.json]``; ``--markdown FILE...`` prints saved results
as the table of ``docs/evaluation.md`` (``--plot FILE.png`` also draws every policy's SDR against
its WTR, one panel per deadline basis). Workloads: ``google`` (first 19 h, one queue per
user), ``swim-queues`` (both SWIM 2009 files, one queue each), ``swim-concat`` (both files as one
queue), ``recurring`` (seeded synthetic mix of recurring templates); capacities ``1x-mean`` and
``2x-mean`` of each workload's mean demand (``--capacity`` overrides, repeatable). A fifth,
``google29d`` (the 29-day Google file: one-task jobs, one queue per user), runs only when named
with ``--workload``: it is held out, a workload no rule was chosen on.
``--skip-jobs N`` takes each workload's jobs after its first ``N`` instead, a slice no rule was
chosen on (its clock starts at the slice's first job). ``--deadline-basis template`` draws each
deadline from its template's median run instead of the job's own (``app.sim.deadlines``; only
named jobs, i.e. ``recurring``, change).

``--explain FILE.json`` runs again each cell of a saved run where the goal fails, then each where
it holds with Promise behind the best other policy (same ``--traces``, ``--limit-jobs``,
``--skip-jobs`` and ``--seed``), and counts, job by job, the deadlines the best other policy met
and Promise did not, by what Promise did with the job: refused at arrival or after waiting (and
whose history bounded it, or that it was held back for the arrivals it would crowd out), killed
at its first wave or past its deadline, or late. Each section ends with what the jobs refused
after waiting last waited for (``wait_class``): room for their promise, for a try, for a grant
they could risk, and so on. A cell where Promise wastes more than 0.02 of the work gets a second
line: that waste by how each run that missed was started (``start_class``: promised, tried or
explored, at its first round or after a wait), with how many of each missed and, for tries, the
mean chance they were started on against the share that met (``waste_by_start``).

``--selection`` runs the selection set instead, the seeded workloads a rule is chosen on before
it is checked on the traces: ``synthetic`` (``trace.synthetic``) and ``recurring`` for seeds 1 to
3 (``--seeds``), each cell's deadlines drawn with its workload's seed (with template deadlines,
``recurring`` only). ``--compare BEFORE.json AFTER.json`` prints what changed between two saved
runs of the same cells: goal, SDR condition, mean SDR, WTR above 0.02, and the cells that moved.

``--rerun FILE.json`` runs Promise alone again on a saved run's cells (same ``--traces``,
``--limit-jobs``, ``--skip-jobs`` and ``--seed``) and keeps the other policies' saved results,
which Promise's code does not change: a change to Promise is measured in the time Promise takes
(``--out`` writes the merged cells, for ``--compare``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from app.sim import deadlines, experiment, metrics, recurring, trace
from app.sim.cluster import ClusterSpec
from app.sim.jobs import Decided, JobRun, SimJob, Status, reason_shape
from app.sim.promise_adapter import PromiseAllocator
from app.sim.runner import SimResult, Simulation

POLICIES = ("baseline-fs", "reactive-fs", "oracle", "pythia", "justice", "promise")
KEYS = ("sdr", "ptr", "wtr", "fairness", "utilization")


def workloads(
    root: Path, limit: int, seed: int, skip: int = 0, names: Iterable[str] | None = None
) -> dict[str, list[SimJob]]:
    """The named workloads (default: the grid's four, ``TRACE_WORKLOADS``; ``google29d`` is held
    out and loaded only when named), each cut to ``limit`` jobs by submission after its first
    ``skip`` (a later slice, which no rule was chosen on; its clock then starts at its first
    job)."""
    wanted = set(TRACE_WORKLOADS if names is None else names)
    out: dict[str, list[SimJob]] = {}
    if "google" in wanted:
        g = trace.load_google(root / "google2011" / "jobs_with_tasks_first19h.csv.gz", "user")
        out["google"] = sorted(g, key=lambda j: (j.submit_s, j.job_id))
    if wanted & {"swim-queues", "swim-concat"}:
        s0 = trace.load_swim(root / "swim" / "FB-2009_samples_24_times_1hr_0.tsv")
        s1 = trace.load_swim(root / "swim" / "FB-2009_samples_24_times_1hr_1.tsv")
        swim = sorted(s0 + s1, key=lambda j: (j.submit_s, j.job_id))
        out["swim-queues"] = swim
        out["swim-concat"] = [dataclasses.replace(j, queue="default") for j in swim]
    if "recurring" in wanted:
        spec = recurring.RecurringSpec(jobs=skip + limit)
        out["recurring"] = recurring.recurring(spec, seed)
    if "google29d" in wanted:
        # the file is in submission order: the slice needs only its first rows
        path = root / "google2011" / "jobs_29d.csv.gz"
        g29 = trace.load_google29d(path, "user", limit=skip + limit)
        out["google29d"] = sorted(g29, key=lambda j: (j.submit_s, j.job_id))
    out = {k: v for k, v in out.items() if k in wanted}
    if not skip:
        return {k: v[:limit] for k, v in out.items()}
    return {k: _from_zero(v[skip : skip + limit]) for k, v in out.items()}


def _from_zero(jobs: list[SimJob]) -> list[SimJob]:
    """``jobs`` with submission times counted from the first one's (a slice's clock)."""
    t0 = jobs[0].submit_s if jobs else 0.0
    return [dataclasses.replace(j, submit_s=j.submit_s - t0) for j in jobs]


SELECTION_NAME = re.compile(r"(?:synthetic|recurring)-s(\d+)")
"""A selection-set workload's name; group 1 is its seed."""


def _cell_seed(name: str, seed: int) -> int:
    """The seed a saved cell's deadlines were drawn with: its selection workload's own, else the
    run's ``--seed``."""
    picked = SELECTION_NAME.fullmatch(name)
    return int(picked.group(1)) if picked else seed


def selection(limit: int, seeds: list[int], basis: str) -> list[tuple[str, list[SimJob], int]]:
    """The selection set: ``(name, jobs, seed)`` of the seeded workloads (module docstring)."""
    out: list[tuple[str, list[SimJob], int]] = []
    for seed in seeds:
        if basis == "ideal":  # the synthetic jobs have no templates: their deadlines do not change
            jobs = trace.synthetic(trace.SyntheticSpec(jobs=limit), seed)
            out.append((f"synthetic-s{seed}", jobs, seed))
        spec = recurring.RecurringSpec(jobs=limit)
        out.append((f"recurring-s{seed}", recurring.recurring(spec, seed), seed))
    return out


def _at_arrival(run: JobRun) -> bool:
    """Whether a refused job was refused in the round at its arrival (or the round just after
    it, a microsecond later, for a job with no slack that found no room)."""
    return (run.end_s or 0.0) - run.job.submit_s < 1e-3


def loss_class(run: JobRun) -> str:
    """What Promise did with a job it did not finish in time (``--explain``), in words."""
    why = run.reason
    if run.status is Status.DROPPED:
        when = "at arrival" if _at_arrival(run) else "after waiting"
        if "crowd out" in run.waited_for:
            # its bound fitted, but it was held back for the arrivals it would crowd out until
            # its latest start passed (the round after that is a microsecond later)
            return f"refused {when}, held back for the arrivals it would crowd out"
        source = re.search(r"\((task_s|ratio)@([^)]*)\)$", why)
        if source is None:
            return f"refused {when}"
        what = "task times" if source.group(1) == "task_s" else "deadline ratios"
        key = source.group(2)
        if key.startswith("n:") or "|c:" in key:
            whose = "its signature's"
        else:
            whose = {"u": "its user's", "q": "its queue's", "*": "the cluster's"}.get(key[:1], key)
        return f"refused {when}, bound by {whose} {what}"
    if run.status is Status.KILLED:
        return "killed at its first wave" if why.startswith("its first tasks") else "killed late"
    if run.status is Status.MISSED:
        return "finished late"
    return str(run.status.value)


def wait_class(run: JobRun) -> str | None:
    """What a job Promise refused after waiting last waited for (``--explain``), its reason with
    the numbers and the job named in it left out; None for any other job."""
    if run.status is not Status.DROPPED or not run.waited_for:
        return None
    if _at_arrival(run):
        return None  # it never waited
    why = run.waited_for
    if "crowd out" in why:
        return "capacity that would not crowd out arrivals"
    if "on exactly the" in why:  # its waves' grant did not fit, its exact grant is a risk
        return "room for its waves' margin (its exact grant not worth the risk)"
    if why.startswith("expects "):
        return "the vcores it expected (first in line)"
    why = why.removeprefix("waits for ").split(":")[0]
    return reason_shape(re.sub(r" \(after [^)]*\)", "", why))


_CHANCE = re.compile(r"(\d+)% of its history fits")


def start_class(decided: Decided, job: SimJob) -> str:
    """How Promise started a job (``--explain``): promised, tried or explored (its admission's
    reason says), at its first round (its submission, in the simulator) or after a wait."""
    kind = "promised"
    for word in ("tried", "explored"):
        if decided.reason.startswith(word):
            kind = word
    return (
        f"{kind} {'at its first round' if decided.at_s - job.submit_s < 1e-3 else 'after a wait'}"
    )


@dataclasses.dataclass
class _Started:
    """Runs Promise started one way (``start_class``) in one run, and what became of them."""

    runs: int = 0
    missed: int = 0
    wasted: float = 0.0  # vcore-seconds the missed ones used
    chances: list[tuple[float, bool]] = dataclasses.field(
        default_factory=list
    )  # a try's chance, and met


def waste_by_start(result: SimResult) -> str:
    """Promise's waste in one run (``result`` with its decision log) by how each run was started
    (``start_class``): each class's wasted work as a share of the run's work (WTR's own measure,
    ``metrics.outcomes``), how many of its starts missed, and for tries the mean chance they were
    started on against the share of them that met; the largest waste first."""
    started: dict[str, Decided] = {}
    for d in result.decision_log:
        if d.action == "admit":
            started.setdefault(d.job_id, d)
    total = sum(r.job.work for r in result.runs)
    by: dict[str, _Started] = {}
    for r in result.runs:
        admit = started.get(r.job.job_id)
        if admit is None:
            continue
        row = by.setdefault(start_class(admit, r.job), _Started())
        met = r.status is Status.SUCCEEDED
        row.runs += 1
        if not met:
            row.missed += 1
            row.wasted += r.consumed
        if (chance := _CHANCE.search(admit.reason)) is not None:
            row.chances.append((int(chance.group(1)) / 100, met))
    parts = []
    for name, row in sorted(by.items(), key=lambda kv: -kv[1].wasted):
        share = row.wasted / total if total else 0.0
        part = f"{name} {share:.3f} ({row.missed} of {row.runs} missed"
        if row.chances:
            mean = sum(p for p, _ in row.chances) / len(row.chances)
            part += (
                f"; chance {mean:.2f}, met {sum(m for _, m in row.chances) / len(row.chances):.2f}"
            )
        parts.append(part + ")")
    return "; ".join(parts)


def explain(cells: list[dict[str, Any]], loads: dict[str, list[SimJob]], seed: int) -> str:
    """Where Promise lost jobs against each cell's best other policy: first the cells where the
    goal fails, then those where it holds with Promise behind the best (within 0.01), whose
    reason the goal asks to be stated."""
    failing = [c for c in cells if not c["goal"]]
    behind = [c for c in cells if c["goal"] and c["margin"] < -1e-9]
    lines: list[str] = []
    sections = (
        (None, "all failing cells", failing),
        (
            "cells where the goal holds with Promise behind the best, within 0.01:",
            "all cells within 0.01",
            behind,
        ),
    )
    for heading, title, group in sections:
        if heading is not None:
            lines.append(heading)
        total: Counter[str] = Counter()
        waited: Counter[str] = Counter()
        for c in group:
            line, lost, waits = _explain_cell(c, loads, seed)
            lines.append(line)
            total.update(lost)
            waited.update(waits)
        lines.append(f"{title}: {_tally(total)}")
        lines.append(
            f"{title}, refused after waiting, by what they last waited for: "
            + (_tally(waited) or "none")
        )
    return "\n".join(lines)


def _tally(counts: Counter[str]) -> str:
    """``name count; ...``, the most frequent first: how ``explain`` lists its counts."""
    return "; ".join(f"{k} {v}" for k, v in counts.most_common())


def _explain_cell(
    c: dict[str, Any], loads: dict[str, list[SimJob]], seed: int
) -> tuple[str, Counter[str], Counter[str]]:
    """One cell run again under Promise and its best other policy: the line ``explain`` prints,
    the jobs only the other met by what Promise did with them, and those Promise refused after
    waiting by what they last waited for (``wait_class``)."""
    name = c["workload"]
    cell_seed = _cell_seed(name, seed)
    jobs = loads[name]
    res = c["results"]
    other = max((n for n in POLICIES if n != "promise"), key=lambda n: res[n]["sdr"])
    dj = deadlines.assign_deadlines(
        jobs, c["deadlines"], c["vcores"], cell_seed, c.get("basis", "ideal")
    )
    spec = ClusterSpec(c["vcores"])
    ran = {
        n: experiment.run_policy(n, dj, spec, model=c["model"], decision_log=n == "promise")
        for n in ("promise", other)
    }
    runs = {n: {r.job.job_id: r for r in result.runs} for n, result in ran.items()}
    met = {n: {j for j, r in rs.items() if r.status is Status.SUCCEEDED} for n, rs in runs.items()}
    only = met[other] - met["promise"]
    lost = Counter(loss_class(runs["promise"][j]) for j in only)
    waits = Counter(w for j in only if (w := wait_class(runs["promise"][j])) is not None)
    line = (
        f"{name} {c['vcores']} {c['deadlines']} {c['model']}: {other} met "
        f"{len(only)} that Promise did not, Promise "
        f"{len(met['promise'] - met[other])} that it did not; {_tally(lost)}"
    )
    wtr = metrics.outcomes(ran["promise"].runs).wtr
    if wtr > 0.02:
        line += f"\n  Promise's waste, WTR {wtr:.3f}: {waste_by_start(ran['promise'])}"
    return line, lost, waits


def sdr_holds(margin: float) -> bool:
    """The goal's SDR condition: within 0.01 of the best other policy. SDRs are shares of the
    same job count, so a gap of exactly 0.01 (3 jobs of 300) can come out a hair below -0.01 in
    floating point; that gap is within 0.01, as the goal means."""
    return margin >= -0.01 - 1e-9


def goal_holds(margin: float, wtr: float) -> bool:
    """The goal: the SDR condition (``sdr_holds``) and WTR at most 0.02."""
    return sdr_holds(margin) and wtr <= 0.02


def run_cell(
    jobs: list[SimJob], cap: int, kind: str, model: str, seed: int, basis: str = "ideal"
) -> dict[str, dict[str, Any]]:
    """Every policy on one cell."""
    dj = deadlines.assign_deadlines(jobs, kind, cap, seed, basis)
    out: dict[str, dict[str, Any]] = {}
    for name in POLICIES:
        if name == "promise":
            out[name] = run_promise(dj, cap, model)
        else:
            out[name] = _kept(experiment.run_policy(name, dj, ClusterSpec(cap), model=model))
    return out


def _kept(result: SimResult) -> dict[str, Any]:
    """What a saved cell keeps of one policy's run: ``KEYS`` and its wall time."""
    s = result.summary()
    return {**{k: s[k] for k in KEYS}, "wall_s": s["wall_s"]}


def run_promise(dj: list[SimJob], cap: int, model: str) -> dict[str, Any]:
    """Promise on one cell's jobs, their deadlines assigned: the metrics every policy keeps, and
    its estimator's share of work predictions off by 2x or more (from the same run)."""
    alloc = PromiseAllocator()
    out = _kept(Simulation(dj, alloc, ClusterSpec(cap), model=model).run())
    out["off_by_2x"] = alloc.estimator.totals()["off_by_2x"]
    return out


def rerun(cells: list[dict[str, Any]], loads: dict[str, list[SimJob]], seed: int) -> None:
    """Run Promise alone again on each saved cell (the code as it is now) and put its results,
    margin and goal in place of the saved ones, printing each cell's row; the other policies'
    saved results stand (they do not change with Promise's code)."""
    print(_HEADER)
    for c in cells:
        dj = deadlines.assign_deadlines(
            loads[c["workload"]],
            c["deadlines"],
            c["vcores"],
            _cell_seed(c["workload"], seed),
            c.get("basis", "ideal"),
        )
        c["results"]["promise"] = run_promise(dj, c["vcores"], c["model"])
        c["margin"], c["goal"] = _scored(c["results"])
        row = _row(c["workload"], c["vcores"], c["deadlines"], c["model"], c["results"])
        print(row, flush=True)


def _scored(res: dict[str, dict[str, Any]]) -> tuple[float, bool]:
    """A cell's margin (Promise's SDR over the best other policy's) and whether the goal holds."""
    margin = float(res["promise"]["sdr"]) - max(res[n]["sdr"] for n in POLICIES if n != "promise")
    return margin, goal_holds(margin, res["promise"]["wtr"])


_HEADER = (
    f"{'workload':<12}{'cap':>6}{'deadlines':>12}{'model':>7} "
    + " ".join(f"{n[:7]:>7}" for n in POLICIES)
    + f"{'margin':>8}{'p.wtr':>7}{'2x':>6} goal"
)


def _row(wname: str, cap: int, kind: str, model: str, res: dict[str, dict[str, Any]]) -> str:
    """One cell's line of the printed table."""
    margin, ok = _scored(res)
    off = res["promise"]["off_by_2x"]
    off_txt = f"{off:>6.2f}" if off is not None else f"{'-':>6}"
    return (
        f"{wname:<12}{cap:>6}{kind:>12}{model:>7} "
        + " ".join(f"{res[n]['sdr']:>7.3f}" for n in POLICIES)
        + f"{margin:>+8.3f}{res['promise']['wtr']:>7.3f}"
        + f"{off_txt} {'ok' if ok else 'FAIL'}"
    )


def markdown(cells: list[dict[str, Any]]) -> str:
    """The grid as a Markdown table: SDR of every policy, then PTR, WTR, Jain's fairness and
    utilization of each policy as ``promise / best other`` pairs are too wide, so those columns
    are Promise's, with the largest WTR among the others beside it."""
    head = (
        "| workload | cap | deadlines | model | "
        + " | ".join(f"SDR {n}" for n in POLICIES)
        + " | P. PTR | P. WTR | max other WTR | P. Jain | P. util | P. off 2x | goal |"
    )
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for c in cells:
        r = c["results"]
        p = r["promise"]
        other_wtr = max(r[n]["wtr"] for n in POLICIES if n != "promise")
        off = p.get("off_by_2x")
        lines.append(
            f"| {c['workload']} | {c['capacity']} ({c['vcores']}) | {c['deadlines']} | "
            f"{c['model']} | "
            + " | ".join(f"{r[n]['sdr']:.3f}" for n in POLICIES)
            + f" | {p['ptr']:.3f} | {p['wtr']:.3f} | {other_wtr:.3f} | "
            + f"{_num(p['fairness'])} | {p['utilization']:.3f} | {_num(off)} | "
            + ("ok" if goal_holds(c["margin"], p["wtr"]) else f"no ({c['margin']:+.3f})")
            + " |"
        )
    return "\n".join(lines)


def scatter(cells: list[dict[str, Any]], out: Path) -> None:
    """Every policy's SDR against its WTR, one point per cell and a cross at the policy's mean,
    one panel per deadline basis: where the goal's corner (high SDR, WTR <= 0.02) is reached."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bases = sorted({c.get("basis", "ideal") for c in cells})
    fig, axes = plt.subplots(
        1, len(bases), figsize=(4.4 * len(bases), 3.4), sharey=True, squeeze=False
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, basis in zip(axes[0], bases, strict=True):
        sub = [c for c in cells if c.get("basis", "ideal") == basis]
        for color, name in zip(colors, POLICIES, strict=False):
            wtr = [c["results"][name]["wtr"] for c in sub]
            sdr = [c["results"][name]["sdr"] for c in sub]
            ax.scatter(wtr, sdr, s=9, alpha=0.45, color=color, label=name)
            ax.scatter(
                [sum(wtr) / len(wtr)], [sum(sdr) / len(sdr)], s=90, marker="X", color=color,
                edgecolors="black", linewidths=0.8,
            )  # fmt: skip
        ax.axvline(0.02, ls=":", color="grey", lw=1)
        ax.set_xlabel("WTR (wasted share of work)", fontsize=8)
        what = {"ideal": "each job's own run", "template": "its template's median run"}
        ax.set_title(f"deadline = x * {what.get(basis, basis)} ({len(sub)} cells)", fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("SDR (deadlines met)", fontsize=8)
    axes[0][0].legend(fontsize=6, loc="lower left")
    fig.savefig(out, dpi=80, bbox_inches="tight")
    plt.close(fig)


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    """What changed for Promise between two runs of the same cells (``--compare``)."""

    def key(c: dict[str, Any]) -> tuple[Any, ...]:
        return (c["workload"], c["vcores"], c["deadlines"], c["model"], c.get("basis", "ideal"))

    old, new = {key(c): c for c in before}, {key(c): c for c in after}
    keys = [k for k in old if k in new]
    if not keys:
        raise SystemExit("--compare: the two files have no cell in common")

    def row(name: str, cells: dict[tuple[Any, ...], dict[str, Any]]) -> str:
        p = [cells[k]["results"]["promise"] for k in keys]
        goal = sum(
            goal_holds(cells[k]["margin"], cells[k]["results"]["promise"]["wtr"]) for k in keys
        )
        sdr_ok = sum(sdr_holds(cells[k]["margin"]) for k in keys)
        mean_sdr = sum(r["sdr"] for r in p) / len(p)
        over = sum(r["wtr"] > 0.02 for r in p)
        top = max(r["wtr"] for r in p)
        return f"{name:<8}{goal:>6}{sdr_ok:>10}{mean_sdr:>10.4f}{over:>10}{top:>9.3f}"

    lines = [
        f"{len(keys)} cells in both",
        f"{'':<8}{'goal':>6}{'SDR cond':>10}{'mean SDR':>10}{'WTR>0.02':>10}{'max WTR':>9}",
        row("before", old),
        row("after", new),
    ]
    up = down = 0
    moved: list[str] = []
    for k in keys:
        a, b = old[k]["results"]["promise"], new[k]["results"]["promise"]
        up += b["sdr"] > a["sdr"] + 1e-9
        down += b["sdr"] < a["sdr"] - 1e-9
        ga = goal_holds(old[k]["margin"], a["wtr"])
        gb = goal_holds(new[k]["margin"], b["wtr"])
        if ga != gb:
            moved.append(
                f"  {' '.join(str(x) for x in k[:4])}: SDR {a['sdr']:.3f} -> {b['sdr']:.3f}, "
                f"WTR {a['wtr']:.3f} -> {b['wtr']:.3f}, goal {'ok' if ga else 'no'} -> "
                f"{'ok' if gb else 'no'}"
            )
    lines.append(f"Promise's SDR up in {up} cells, down in {down}")
    if moved:
        lines += ["cells whose goal changed:", *moved]
    return "\n".join(lines)


def _seeds(names: set[str]) -> list[int]:
    """The selection seeds named in a saved run's workloads (``synthetic-s2`` -> 2)."""
    found = (SELECTION_NAME.fullmatch(n) for n in names)
    return sorted({int(m.group(1)) for m in found if m})


def _num(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", type=Path, default=Path("../shared/traces"))
    p.add_argument("--limit-jobs", type=int, default=2000)
    p.add_argument(
        "--skip-jobs",
        type=int,
        default=0,
        help="the workloads' jobs after their first N (a held-out slice; not --selection)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--capacity", action="append", help="default: 1x-mean and 2x-mean")
    p.add_argument("--workload", action="append", help="default: all four")
    p.add_argument("--deadline", action="append", help="default: all seven types")
    p.add_argument("--model", action="append", help="default: fluid and tasks")
    p.add_argument(
        "--deadline-basis",
        choices=deadlines.BASES,
        default="ideal",
        help="T_i of each deadline x T_i (app.sim.deadlines): the job's own run or its template's",
    )
    p.add_argument("--selection", action="store_true", help="the seeded selection set instead")
    p.add_argument("--seeds", default="1,2,3", help="with --selection: the workload seeds")
    p.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"))
    p.add_argument(
        "--explain",
        type=Path,
        help="where Promise lost jobs in a saved run's cells that fail or are behind the best",
    )
    p.add_argument(
        "--rerun",
        type=Path,
        help="run Promise alone again on a saved run's cells, keeping the others' results",
    )
    p.add_argument("--out", type=Path)
    p.add_argument("--markdown", type=Path, nargs="+", help="print saved --out files as Markdown")
    p.add_argument("--plot", type=Path, help="with --markdown: also draw SDR against WTR (PNG)")
    a = p.parse_args(argv)

    def saved_run(path: Path, option: str) -> list[dict[str, Any]]:
        try:
            cells = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8 or not JSON
            p.error(f"{option} {path}: not a saved run ({exc})")
        if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
            p.error(f"{option} {path}: not a saved run (a JSON list of cells)")
        return cells

    if a.markdown:
        saved = [c for path in a.markdown for c in saved_run(path, "--markdown")]
        print(markdown(saved))
        if a.plot is not None:
            scatter(saved, a.plot)
        return 0
    if a.compare:
        before, after = (saved_run(path, "--compare") for path in a.compare)
        print(compare(before, after))
        return 0
    _check_options(p, a)
    if a.explain or a.rerun:
        saved = saved_run(a.explain or a.rerun, "--explain" if a.explain else "--rerun")
        names = {c["workload"] for c in saved}
        loads = {n: j for n, j, _ in selection(a.limit_jobs, _seeds(names), "ideal")}
        if names - set(loads):
            loads |= workloads(a.traces, a.limit_jobs, a.seed, a.skip_jobs, names - set(loads))
        if a.explain:
            print(explain(saved, loads, a.seed))
            return 0
        rerun(saved, loads, a.seed)
        _save(saved, a.out)
        return 0
    if a.skip_jobs < 0 or (a.skip_jobs and a.selection):
        p.error("--skip-jobs: a count >= 0 of the traces' jobs, without --selection")
    if a.selection:
        runs = selection(a.limit_jobs, a.seeds, a.deadline_basis)
        if a.workload:
            runs = [r for r in runs if r[0].rsplit("-s", 1)[0] in a.workload]
    else:
        named = a.workload or TRACE_WORKLOADS
        loads = workloads(a.traces, a.limit_jobs, a.seed, a.skip_jobs, named)
        runs = [(name, loads[name], a.seed) for name in named]
    try:  # every cell's capacity, before the first is run
        todo = list(grid(runs, a.capacity, a.deadline, a.model))
    except ValueError as exc:
        p.error(f"--capacity: {exc}")
    cells: list[dict[str, Any]] = []
    print(_HEADER)
    for cell, jobs, seed in todo:
        wname, cap, kind, model = cell["workload"], cell["vcores"], cell["deadlines"], cell["model"]
        res = run_cell(jobs, cap, kind, model, seed, a.deadline_basis)
        margin, ok = _scored(res)
        print(_row(wname, cap, kind, model, res), flush=True)
        cells.append(
            {**cell, "basis": a.deadline_basis, "results": res, "margin": margin, "goal": ok}
        )
    _save(cells, a.out)
    return 0


TRACE_WORKLOADS = ("google", "swim-queues", "swim-concat", "recurring")  # the grid's
# Run only when named: the 29-day file's jobs have one task each and a run time for their work
# (``trace.iter_google29d``), a workload unlike the grid's that no rule was chosen on.
HELD_OUT_WORKLOADS = ("google29d",)
SELECTION_WORKLOADS = ("synthetic", "recurring")
MODELS = ("fluid", "tasks")


def _check_options(p: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Refuse, before anything runs, what would run nothing or fail after the table began: an
    empty workload, a workload, deadline type or model with no such name, seeds that are not
    numbers, traces that are not there. ``--seeds`` becomes a list of ints."""
    if a.limit_jobs < 1:
        p.error(f"--limit-jobs: at least 1 job, got {a.limit_jobs}")
    known = SELECTION_WORKLOADS if a.selection else TRACE_WORKLOADS + HELD_OUT_WORKLOADS
    for option, given, names in (
        ("--workload", a.workload, known),
        ("--deadline", a.deadline, tuple(deadlines.DEADLINE_TYPES)),
        ("--model", a.model, MODELS),
    ):
        for name in given or ():
            if name not in names:
                p.error(f"{option} {name!r}: use one of {', '.join(names)}")
    try:
        a.seeds = [int(x) for x in a.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds {a.seeds!r}: comma-separated integers, e.g. 1,2,3")
    # a saved run's cells may all be the selection's, which need no traces
    if not (a.selection or a.explain or a.rerun) and not (a.traces / "google2011").is_dir():
        p.error(f"--traces {a.traces}: no google2011/ and swim/ traces there")


def grid(
    runs: Sequence[tuple[str, list[SimJob], int]],
    capacities: Sequence[str] | None = None,
    kinds: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
) -> Iterator[tuple[dict[str, Any], list[SimJob], int]]:
    """The cells of ``runs`` (``(workload, jobs, seed)``): each capacity (default 1x and 2x the
    mean demand), deadline type (default all seven) and model (default both), as ``(cell,
    jobs, seed)`` with the cell's saved keys: workload, capacity, vcores, deadlines, model."""
    for wname, jobs, seed in runs:
        for ctext in capacities or ["1x-mean", "2x-mean"]:
            cap = experiment.resolve_capacity(ctext, jobs)
            for kind in kinds or list(deadlines.DEADLINE_TYPES):
                for model in models or ["fluid", "tasks"]:
                    cell = {
                        "workload": wname,
                        "capacity": ctext,
                        "vcores": cap,
                        "deadlines": kind,
                        "model": model,
                    }
                    yield cell, jobs, seed


def _save(cells: list[dict[str, Any]], out: Path | None) -> None:
    """Write the cells as JSON (``--out``), then print how many hold the goal."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(cells, indent=1), "utf-8")
    failed = sum(1 for c in cells if not c["goal"])
    print(f"{len(cells)} cells, goal holds in {len(cells) - failed}, fails in {failed}")


if __name__ == "__main__":
    sys.exit(main())
