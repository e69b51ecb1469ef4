"""``yarn-sidecar simulate``: replay a trace under one policy, or several side by side.

    yarn-sidecar simulate --trace PATH|synthetic [--format swim|google|google29d|csv]
        --policy NAME --capacity N|P% [--deadlines TYPE] [--seed S] [--limit-jobs N] [--out DIR]
        [--decisions]
    yarn-sidecar simulate compare --policies a,b,c  (same options)

One run writes ``summary.json``, ``jobs.csv``, ``series.csv``, ``control.csv`` and PNG plots into
``--out`` (with ``--decisions``, an admission policy's decisions too: ``decisions.csv``);
``compare`` writes one self-contained ``compare.html`` (tables and base64 plots) plus
``compare.json`` and ``compare.csv``. Progress goes to stderr. ``configure`` adds the sub-command
to the top-level parser (``app/cli.py``).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import multiprocessing
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

from app.policies.prism import core as prism_core
from app.sim import dask_cells, deadlines, experiment, phases, registry, report, trace
from app.sim.cluster import ClusterSpec
from app.sim.jobs import SimJob
from app.sim.queue_policies import MAX_STEP_PP, MIN_CHANGE_PP, PlanSettings
from app.sim.runner import SimResult
from app.sim.tasks import MODELS

_N = TypeVar("_N", int, float)


class ProgressBar:
    """A one-line bar on a terminal stream, redrawn at most every ``min_interval_s``."""

    def __init__(
        self, label: str, stream: TextIO | None = None, width: int = 30, min_interval_s: float = 0.2
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.min_interval_s = min_interval_s
        self._last = 0.0
        self._drawn = False

    def __call__(self, done: int, total: int) -> None:
        """Redraw for ``done`` of ``total`` (``total <= 0``: a counter without a bar)."""
        now = time.monotonic()
        if now - self._last < self.min_interval_s and done < total:
            return
        self._last = now
        self._drawn = True
        if total > 0:
            filled = int(self.width * min(done, total) / total)
            bar = "#" * filled + "." * (self.width - filled)
            text = f"\r{self.label} [{bar}] {100 * done / total:5.1f}% {done}/{total}"
        else:
            text = f"\r{self.label} {done}"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        """End the line if anything was drawn."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace",
        action="append",
        help="trace file (repeat for several SWIM files, one queue each), 'synthetic' or "
        "'recurring' (seeded recurring-job mix)",
    )
    p.add_argument("--format", choices=trace.FORMATS, help="trace format (default: from the name)")
    p.add_argument(
        "--capacity",
        help="vcores, a percentage of the trace's peak (25%%), or a multiple of its mean "
        "demand (2x-mean)",
    )
    p.add_argument("--memory-mb", type=int, help="cluster memory (default: vcores x container)")
    p.add_argument("--container-mb", type=int, default=1024, help="memory per container")
    p.add_argument(
        "--deadlines",
        default="Fixed2x",
        help=f"deadline type ({', '.join(deadlines.DEADLINE_TYPES)}) or 'none'",
    )
    p.add_argument(
        "--deadline-basis",
        choices=deadlines.BASES,
        default="ideal",
        help="T_i of deadline = x * T_i: the job's ideal runtime, the trace's runtime, or the "
        "median ideal runtime of the jobs with its name (template)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of deadlines and synthetic jobs")
    p.add_argument("--limit-jobs", type=int, help="only the first N jobs by submission time")
    p.add_argument("--queue-by", default="single", help="single, user or group:K (Google)")
    p.add_argument("--synthetic-jobs", type=int, default=500)
    p.add_argument("--swim-mib-per-s", type=float, default=32.0, help="SWIM bytes/vcore-second")
    p.add_argument("--interval", type=float, default=60.0, help="queue policy interval T (s)")
    p.add_argument(
        "--max-step-pp",
        type=float,
        default=MAX_STEP_PP,
        help="controller plan: largest capacity change per tick, percentage points",
    )
    p.add_argument(
        "--min-change-pp",
        type=float,
        default=MIN_CHANGE_PP,
        help="controller plan: smallest capacity change worth pushing, percentage points",
    )
    p.add_argument(
        "--model",
        choices=MODELS,
        default="fluid",
        help="cluster model: fluid fair share (default) or tasks (non-preemptive containers)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="policy parameter (VALUE is JSON, else a string); repeatable",
    )
    p.add_argument(
        "--sharing",
        action="store_true",
        help="also run each queue on a static partition (sharing benefit/loss, LTRF Fig. 9.1)",
    )
    p.add_argument("--out", default="reports/sim", help="output directory")
    p.add_argument("--no-plots", action="store_true", help="skip PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def configure(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``simulate`` (and ``simulate compare``) to the top-level parser."""
    sim = subparsers.add_parser("simulate", help="replay a workload trace in the simulator")
    sim_sub = sim.add_subparsers(dest="simulate_command")
    _add_options(sim)
    sim.add_argument("--policy", default="baseline-fs", help="one of: " + _names())
    sim.add_argument(
        "--decisions",
        action="store_true",
        help="also write decisions.csv: each admission, drop and kill and each new reason a job "
        "waits for, with its time (admission policies: pythia, justice, oracle, promise)",
    )
    sim.set_defaults(func=cmd_simulate)
    cmp_ = sim_sub.add_parser("compare", help="several policies on the same input, one report")
    _add_options(cmp_)
    cmp_.add_argument("--policies", required=True, help="comma-separated policy names")
    cmp_.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="policies simulated in parallel, one process each (default 1; results identical)",
    )
    cmp_.add_argument(
        "--executor",
        choices=("local", "dask"),
        default="local",
        help="local: forked processes on this machine; dask: a Dask cluster (the dask extra)",
    )
    cmp_.add_argument(
        "--dask-scheduler",
        metavar="ADDRESS",
        help="with --executor dask: the scheduler (tcp://host:8786); default: a local cluster of "
        "--jobs worker processes started for this run",
    )
    cmp_.set_defaults(func=cmd_compare)
    ph = sim_sub.add_parser(
        "phases", help="PRISM's phase-level scheduling against task-level containers"
    )
    ph.add_argument("--count", type=int, default=60, help="synthetic jobs per cell")
    ph.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    ph.add_argument("--gaps", default="20,8,4", help="mean inter-arrival times (s), one per load")
    ph.add_argument("--nodes", type=int, default=8, help="nodes in the simulated cluster")
    ph.add_argument("--node-vcores", type=float, default=8, help="vcores per node (default 8)")
    ph.add_argument("--node-mb", type=float, default=16384, help="memory per node, MB (16384)")
    ph.set_defaults(func=cmd_phases)


def subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The sub-command parser ``name`` of ``parser`` (for extensions such as ``--from-db``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise KeyError(name)


PHASES_HEADER = "gap_s seed  jobs  task_mean_s  prism_mean_s  speedup  task_util  prism_util"


def phases_row(
    label: str, seed: str, jobs: Sequence[phases.PhaseJob], args: argparse.Namespace
) -> str:
    """One line of the ``phases`` table: both models on ``jobs``."""
    node = prism_core.Demand(args.node_vcores, args.node_mb)
    phases.check_fits(jobs, node)
    task = phases.simulate(jobs, args.nodes, node, "task")
    prism = phases.simulate(jobs, args.nodes, node, "prism")
    speedup = task.mean_running_s / prism.mean_running_s if prism.mean_running_s else 1.0
    return (
        f"{label:>5} {seed:>4} {len(jobs):5d} {task.mean_running_s:12.1f} "
        f"{prism.mean_running_s:13.1f} {speedup:8.3f} "
        f"{task.vcore_utilization:10.3f} {prism.vcore_utilization:11.3f}"
    )


def _guarded(
    prog: str,
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Bad input (``ValueError``, which the simulator's own input errors are: ``TraceError``,
    ``JobError``, ``PolicyError``) and unreadable files (``OSError``) as one line on stderr and
    exit 2; any other exception is a bug and keeps its traceback."""

    def guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        def wrapped(args: argparse.Namespace) -> int:
            try:
                return fn(args)
            except (ValueError, OSError) as exc:
                print(f"{prog}: {exc}", file=sys.stderr)
                return 2

        return wrapped

    return guard


_guard = _guarded("simulate")


def _within(value: float, option: str, low: float, high: float, unit: str = "") -> None:
    """``ValueError`` naming ``option`` unless ``low <= value <= high`` (NaN never is)."""
    if not low <= value <= high:
        ints = isinstance(low, int) and isinstance(high, int)
        span = f"{low:,} to {high:,}" if ints else f"{low:g} to {high:g}"
        raise ValueError(f"{option} must be from {span}{unit}, got {value!r}")


def _listed(text: str, option: str, kind: Callable[[str], _N], what: str) -> list[_N]:
    try:
        return [kind(item) for item in text.split(",")]
    except ValueError:
        raise ValueError(f"{option}: expected comma-separated {what}, got {text!r}") from None


def check_phase_nodes(args: argparse.Namespace) -> None:
    """The simulated nodes of ``simulate phases`` (``--nodes``, ``--node-vcores``,
    ``--node-mb``), also with ``--from-db``."""
    _within(args.nodes, "--nodes", 1, 100_000)
    _within(args.node_vcores, "--node-vcores", 0.001, 100_000)
    _within(args.node_mb, "--node-mb", 1, 1_000_000_000, " MB")


@_guarded("simulate phases")
def cmd_phases(args: argparse.Namespace) -> int:
    """Print task-level against PRISM per load and seed (``app.sim.phases``)."""
    _within(args.count, "--count", 1, 1_000_000)
    seeds = _listed(args.seeds, "--seeds", int, "whole numbers")
    gaps = _listed(args.gaps, "--gaps", float, "numbers")
    for gap in gaps:
        # a mean gap is a finite time: 0 divides by zero, NaN never advances the arrivals
        _within(gap, "--gaps: each mean inter-arrival time", 0.001, 86_400, " s")
    check_phase_nodes(args)
    print(PHASES_HEADER)
    for gap in gaps:
        for seed in seeds:
            jobs = phases.synthetic_jobs(args.count, seed, mean_gap_s=gap)
            print(phases_row(f"{gap:g}", str(seed), jobs, args))
    return 0


def _names() -> str:
    return ", ".join(registry.policy_names())


def _params(raw: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in raw:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--param {item!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


class _Prepared:
    """Workload, cluster and deadlines shared by every policy of one invocation."""

    def __init__(self, args: argparse.Namespace, quiet: bool) -> None:
        self.args = args
        self.quiet = quiet
        if not args.trace or not args.capacity:
            raise ValueError("--trace and --capacity are required")
        spec = experiment.WorkloadSpec(
            traces=tuple(args.trace),
            fmt=args.format,
            queue_by=args.queue_by,
            limit_jobs=args.limit_jobs,
            seed=args.seed,
            synthetic_jobs=args.synthetic_jobs,
            swim=trace.SwimParams(bytes_per_vcore_s=args.swim_mib_per_s * trace.MIB),
        )
        rows = self._bar("loading rows")
        base = experiment.load_workload(spec, lambda n: rows(n, 0))
        rows.close()
        if not base:
            raise ValueError("the workload has no jobs")
        try:
            vcores = experiment.resolve_capacity(args.capacity, base)
        except ValueError as exc:
            raise ValueError(f"--{exc}") from None  # "capacity ...": the option's name
        memory = args.memory_mb if args.memory_mb is not None else vcores * args.container_mb
        self.cluster = ClusterSpec(vcores, memory, args.container_mb)
        experiment.check_length(base, self.cluster.slots)
        kind = None if args.deadlines == "none" else args.deadlines
        self.deadline_kind = kind
        self.jobs: list[SimJob] = experiment.with_deadlines(
            base, kind, self.cluster.slots, args.seed, args.deadline_basis
        )
        self.params = _params(args.param)
        self.static: dict[str, list[float]] | None = None
        if args.sharing:
            self.static = experiment.static_partition_cum(self.jobs, self.cluster)

    @classmethod
    def quietly(cls, prep: _Prepared) -> _Prepared:
        """``prep`` without progress bars (parallel workers would interleave them)."""
        copy = cls.__new__(cls)
        copy.__dict__.update(prep.__dict__)
        copy.quiet = True
        return copy

    def _bar(self, label: str) -> ProgressBar:
        return ProgressBar(label, stream=io.StringIO() if self.quiet else None)

    def config(self) -> dict[str, Any]:
        a = self.args
        return {
            "trace": list(a.trace),
            "format": a.format,
            "jobs": len(self.jobs),
            "queues": sorted({j.queue for j in self.jobs}),
            "capacity_vcores": self.cluster.slots,
            "capacity_arg": a.capacity,
            "deadlines": a.deadlines,
            "deadline_basis": a.deadline_basis,
            "seed": a.seed,
            "limit_jobs": a.limit_jobs,
            "queue_by": a.queue_by,
            "interval_s": a.interval,
            "max_step_pp": a.max_step_pp,
            "min_change_pp": a.min_change_pp,
            "model": a.model,
            "params": self.params,
        }

    def run(self, name: str, decisions: bool = False) -> SimResult:
        missing = any(j.deadline_s is None for j in self.jobs)
        if registry.needs_deadlines(name) and missing:
            raise ValueError(f"policy {name} needs deadlines; pass --deadlines TYPE")
        bar = self._bar(name)
        try:
            return experiment.run_policy(
                name,
                self.jobs,
                self.cluster,
                self.params,
                interval_s=self.args.interval,
                progress=bar,
                start_s=self.jobs[0].submit_s,
                model=self.args.model,
                plan=PlanSettings(self.args.max_step_pp, self.args.min_change_pp),
                decision_log=decisions,
            )
        finally:
            bar.close()

    def sharing(self, result: SimResult) -> report.SharingSeries | None:
        return None if self.static is None else report.sharing_series(result, self.static)


def _summary(prep: _Prepared, result: SimResult) -> dict[str, Any]:
    s = result.summary()
    sharing = prep.sharing(result)
    if sharing is not None:
        defined = {q: [v for v in vals if v is not None] for q, vals in sharing.items()}
        s["mean_sharing_degree"] = {q: _mean(v) for q, v in defined.items()}
        s["min_sharing_degree"] = {q: min(v) if v else None for q, v in defined.items()}
    if result.decisions:
        s["decisions"] = dict(result.decisions)
    return s


def _mean(vals: Sequence[float]) -> float | None:
    return sum(vals) / len(vals) if vals else None


def _write_run(out: Path, prep: _Prepared, result: SimResult) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    summary = _summary(prep, result)
    sharing = prep.sharing(result)
    report.write_json(out / "summary.json", {"config": prep.config(), "summary": summary})
    report.write_jobs_csv(out / "jobs.csv", result)
    report.write_series_csv(out / "series.csv", result, sharing)
    report.write_control_csv(out / "control.csv", result)
    if prep.args.decisions:
        report.write_decisions_csv(out / "decisions.csv", result)
    if not prep.args.no_plots:
        report.write_plots(out, report.result_plots(result, sharing))
    return summary


# Bounds of the options with no natural limit: beyond them a value is a typo, and the run would
# take days or more memory than the machine has.
MAX_SYNTHETIC_JOBS = 10_000_000


def _check_options(args: argparse.Namespace) -> None:
    """Every option of ``simulate`` and ``simulate compare`` before anything is loaded: a bad
    one is an error naming it, never a division by zero or a run that does not end."""
    if args.limit_jobs is not None and args.limit_jobs < 1:
        raise ValueError(f"--limit-jobs must be >= 1, got {args.limit_jobs}")
    _within(args.synthetic_jobs, "--synthetic-jobs", 1, MAX_SYNTHETIC_JOBS)
    if args.container_mb < 1:
        raise ValueError(f"--container-mb must be >= 1, got {args.container_mb}")
    if args.memory_mb is not None and args.memory_mb < args.container_mb:
        raise ValueError(
            f"--memory-mb must hold at least one container (--container-mb {args.container_mb}),"
            f" got {args.memory_mb}"
        )
    if not 0 < args.swim_mib_per_s * trace.MIB < math.inf:
        raise ValueError(f"--swim-mib-per-s must be a finite number > 0, got {args.swim_mib_per_s}")
    # the controller's own bounds (YARN_SIDECAR_POLICY_INTERVAL_S, _MAX_STEP_PP, _MIN_CHANGE_PP)
    _within(args.interval, "--interval", 1, 86_400, " s")
    _within(args.max_step_pp, "--max-step-pp", 0.01, 100)
    _within(args.min_change_pp, "--min-change-pp", 0, 100)
    try:
        trace.check_queue_by(args.queue_by)
    except ValueError as exc:
        raise ValueError(f"--queue-by: {exc}") from None
    if args.deadlines != "none" and args.deadlines not in deadlines.DEADLINE_TYPES:
        types = ", ".join(deadlines.DEADLINE_TYPES)
        raise ValueError(
            f"--deadlines: unknown type {args.deadlines!r}; use none or one of {types}"
        )
    _params(args.param)


@_guard
def cmd_simulate(args: argparse.Namespace) -> int:
    """Run one policy and write its metrics and plots."""
    if args.policy not in registry.policy_names():
        raise ValueError(f"unknown policy {args.policy!r}; use one of {_names()}")
    _check_options(args)
    prep = _Prepared(args, args.quiet)
    result = prep.run(args.policy, args.decisions)
    summary = _write_run(Path(args.out), prep, result)
    _print_table([summary], sys.stdout)
    print(f"wrote {args.out}")
    return 0


@_guard
def cmd_compare(args: argparse.Namespace) -> int:
    """Run several policies on the same input and write one HTML report."""
    names = [n.strip() for n in args.policies.split(",") if n.strip()]
    unknown = [n for n in names if n not in registry.policy_names()]
    if unknown or not names:
        raise ValueError(f"unknown policies {unknown}; use any of {_names()}")
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    if args.dask_scheduler and args.executor != "dask":
        raise ValueError("--dask-scheduler needs --executor dask")
    _check_options(args)
    prep = _Prepared(args, args.quiet)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cells = _run_cells(prep, names, args.jobs, args.executor == "dask", args.dask_scheduler)
    summaries = [summary for summary, _ in cells]
    plots = [figures for _, figures in cells]
    report.write_json(out / "compare.json", {"config": prep.config(), "results": summaries})
    _write_compare_csv(out / "compare.csv", summaries)
    title = f"simulate compare: {', '.join(names)}"
    (out / "compare.html").write_text(
        report.compare_html(title, prep.config(), summaries, plots), "utf-8"
    )
    _print_table(summaries, sys.stdout)
    print(f"wrote {out / 'compare.html'}")
    return 0


# The prepared workload of a parallel ``compare``, inherited by the forked workers: the trace is
# loaded and the deadlines drawn once, in the parent, so every cell runs on the same jobs.
_FORKED: _Prepared | None = None


def _cell(prep: _Prepared, name: str) -> tuple[dict[str, Any], Mapping[str, bytes]]:
    """One policy's summary and plots (what the report keeps of a run)."""
    result = prep.run(name)
    summary = _summary(prep, result)
    summary["policy"] = name
    plots = {} if prep.args.no_plots else report.result_plots(result, prep.sharing(result))
    return summary, plots


def _forked_cell(name: str) -> tuple[dict[str, Any], Mapping[str, bytes]]:
    assert _FORKED is not None
    return _cell(_FORKED, name)


def _run_cells(
    prep: _Prepared,
    names: Sequence[str],
    jobs: int,
    on_dask: bool = False,
    dask_scheduler: str | None = None,
) -> list[tuple[dict[str, Any], Mapping[str, bytes]]]:
    """Every policy's cell, serially, in ``jobs`` forked processes or on Dask (``dask_cells``),
    in the order given.

    The simulation is deterministic and each cell owns its state, so the parallel results equal
    the serial ones (only ``wall_s`` differs). Workers are forked, not spawned: they share the
    parent's loaded jobs without pickling them. Progress is one line per finished cell."""
    global _FORKED

    def done(k: int) -> None:
        if not prep.quiet:
            print(f"{names[k - 1]} done ({k}/{len(names)})", file=sys.stderr)

    if on_dask:
        quiet = _Prepared.quietly(prep)
        return dask_cells.run_cells(_cell, quiet, names, dask_scheduler, jobs, done)
    if jobs == 1 or len(names) == 1:
        return [_cell(prep, name) for name in names]
    _FORKED = _Prepared.quietly(prep)
    try:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(min(jobs, len(names))) as pool:
            out = []
            for k, cell in enumerate(pool.imap(_forked_cell, names), start=1):
                done(k)
                out.append(cell)
            return out
    finally:
        _FORKED = None


TABLE_KEYS = ("sdr", "ptr", "wtr", "fairness", "equality", "utilization", "wall_s")


def _write_compare_csv(path: Path, summaries: Sequence[Mapping[str, Any]]) -> None:
    keys = ("policy", "jobs", *TABLE_KEYS, "dropped", "killed", "missed", "makespan_s")
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(keys)
        for s in summaries:
            w.writerow([s.get(k, "") for k in keys])


def _print_table(summaries: Sequence[Mapping[str, Any]], stream: TextIO) -> None:
    stream.write(f"{'policy':<16}" + "".join(f"{k:>12}" for k in TABLE_KEYS) + "\n")
    for s in summaries:
        name = str(s.get("policy") or report._name(s))
        cells = "".join(f"{_fmt(s.get(k)):>12}" for k in TABLE_KEYS)
        stream.write(f"{name:<16}{cells}\n")
        slow = s.get("mean_slowdown")
        if isinstance(slow, dict) and 1 < len(slow) <= 8:
            stream.write(
                "  mean slowdown: " + ", ".join(f"{q}={v:.3f}" for q, v in slow.items()) + "\n"
            )
        for key, label in (("mean_sharing_degree", "mean"), ("min_sharing_degree", "min")):
            degrees = s.get(key)
            if isinstance(degrees, dict) and degrees:
                stream.write(
                    f"  {label} sharing degree: "
                    + ", ".join(f"{q}={_fmt(v)}" for q, v in degrees.items())
                    + "\n"
                )


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return "-" if v is None else str(v)
