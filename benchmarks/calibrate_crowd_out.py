"""Promise's crowd-out estimate against counterfactual runs (``docs/evaluation.md``, "The
crowd-out estimate against what admitting did").

Promise holds a job back while its hold would crowd out one or more expected arrivals
(``app.policies.promise.core``, "Arrivals it would crowd out"): a prediction from a loss
system, which a run alone cannot check, since the held job's admission never happened. Here it
does: each cell of the deadline grid is run under Promise once, recording every job's first
hold (``Decision.crowd_out``, the arrivals predicted lost); then, per hold, the cell is run again
with that one job admitted at that round, everything else unchanged. Comparing the two runs job
by job gives what admitting it did: the deadlines the other jobs lost (the realised crowd-out)
and whether the job itself gained its own (``own``). A hold paid when ``own - others`` is below
zero.

Run: ``nice .venv/bin/python benchmarks/calibrate_crowd_out.py --traces ../shared/traces
[--limit-jobs 300] [--skip-jobs N] [--workload W] [--capacity C] [--deadline D] [--model M]
[--max-holds 40] [--out FILE.json]`` (the cells as ``eval_deadlines.py`` builds them; at most
``--max-holds`` holds per cell, a seeded sample); ``--markdown FILE.json...`` prints each saved run
as a table of ``docs/evaluation.md``; ``--plot FILE.png`` draws predicted against realised, one
panel per run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import eval_deadlines as ev

from app.policies.promise import core, model, risk
from app.sim import deadlines, experiment
from app.sim.cluster import ClusterSpec
from app.sim.jobs import SimJob, Status

BUCKETS = ((1.0, 2.0), (2.0, 4.0), (4.0, 10.0), (10.0, float("inf")))
"""Predicted crowd-out ranges of the table (a hold predicts at least 1)."""


@contextlib.contextmanager
def _recording(holds: dict[str, tuple[float, float]]) -> Iterator[None]:
    """Record each job's first hold for crowd-out: ``{job id: (time, arrivals predicted)}``."""
    admit = core.admit

    def recorded(*args: Any, **kwargs: Any) -> list[core.Decision]:
        out = admit(*args, **kwargs)
        now_s = kwargs["now_s"] if "now_s" in kwargs else args[4]
        for d in out:
            if d.crowd_out is not None and d.job_id not in holds:
                holds[d.job_id] = (now_s, d.crowd_out)
        return out

    with mock.patch.object(core, "admit", recorded):
        yield


@contextlib.contextmanager
def _admitting(job_id: str, at_s: float) -> Iterator[None]:
    """The job's hold at ``at_s`` priced at nothing: it is admitted there instead. Admission
    prices it before any try or top-up of that round, so the first hold found is that one."""
    real = risk.hold_lost
    done = False

    def priced(rnd: model.Round, j: core.WaitingJob, *args: Any, **kw: Any) -> float:
        nonlocal done
        lost = real(rnd, j, *args, **kw)
        if not done and j.id == job_id and abs(rnd.now_s - at_s) < 1e-9 and lost >= 1.0:
            done = True
            return 0.0
        return lost

    with mock.patch.object(core, "hold_lost", priced):
        yield


def _run(dj: list[SimJob], cap: int, model: str) -> dict[str, tuple[bool, float | None]]:
    """Promise on one cell: per job, whether it met its deadline and when it started."""
    result = experiment.run_policy("promise", dj, ClusterSpec(cap), model=model)
    return {r.job.job_id: (r.status is Status.SUCCEEDED, r.start_s) for r in result.runs}


def calibrate(
    dj: list[SimJob], cap: int, model: str, max_holds: int, seed: int = 1
) -> tuple[int, list[dict[str, Any]]]:
    """Every first hold of one cell (a seeded sample of ``max_holds`` when there are more) with
    what admitting the job there instead did: ``(holds, rows)``."""
    holds: dict[str, tuple[float, float]] = {}
    with _recording(holds):
        base = _run(dj, cap, model)
    picked = sorted(holds.items(), key=lambda kv: (kv[1][0], kv[0]))
    if len(picked) > max_holds:
        picked = sorted(random.Random(seed).sample(picked, max_holds), key=lambda kv: kv[1][0])
    met = sum(ok for ok, _ in base.values())
    rows: list[dict[str, Any]] = []
    for job_id, (at_s, predicted) in picked:
        with _admitting(job_id, at_s):
            forced = _run(dj, cap, model)
        own = int(forced[job_id][0]) - int(base[job_id][0])
        met_forced = sum(ok for ok, _ in forced.values())
        others = (met - base[job_id][0]) - (met_forced - forced[job_id][0])
        rows.append(
            {
                "job": job_id,
                "at_s": at_s,
                "predicted": predicted,
                "others": int(others),
                "own": own,
                "started_s": forced[job_id][1],
            }
        )
    return len(holds), rows


def _bucket(predicted: float) -> str:
    for lo, hi in BUCKETS:
        if lo <= predicted < hi:
            return f"{lo:g} to {hi:g}" if hi != float("inf") else f"{lo:g} or more"
    return "below 1"


def markdown(cells: Sequence[dict[str, Any]]) -> str:
    """Holds by predicted crowd-out, what admitting did on average and how often it paid."""
    head = (
        "| predicted | holds | mean predicted | mean realised (others lost) | own gained "
        "| net of admitting | admitting better / same / worse |\n"
        "| --- | --- | --- | --- | --- | --- | --- |"
    )
    rows = [r for c in cells for r in c["rows"]]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["predicted"]):
        groups.setdefault(_bucket(r["predicted"]), []).append(r)
    lines = [head]
    for name, rs in [*groups.items(), ("all", rows)]:
        if not rs:
            continue
        n = len(rs)
        net = [r["own"] - r["others"] for r in rs]
        lines.append(
            f"| {name} | {n} | {sum(r['predicted'] for r in rs) / n:.2f} "
            f"| {sum(r['others'] for r in rs) / n:.2f} | {sum(r['own'] for r in rs) / n:.2f} "
            f"| {sum(net) / n:+.2f} | {sum(x > 0 for x in net)} / {sum(x == 0 for x in net)} "
            f"/ {sum(x < 0 for x in net)} |"
        )
    total = sum(c["holds"] for c in cells)
    lines.append(f"\n{len(cells)} cells, {total} holds, {len(rows)} replayed.")
    return "\n".join(lines)


def plot(cells: Sequence[dict[str, Any]], out: Path) -> None:
    """Predicted against realised crowd-out, one dot per replayed hold, per saved run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({c["set"] for c in cells})
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.5), squeeze=False)
    jitter = random.Random(0)
    for ax, name in zip(axes[0], names, strict=True):
        rows = [r for c in cells if c["set"] == name for r in c["rows"]]
        for sign, colour, label in (
            (1, "tab:green", "admitting met more"),
            (0, "tab:grey", "same"),
            (-1, "tab:red", "holding met more"),
        ):
            pts = [
                r
                for r in rows
                if (r["own"] - r["others"] > 0) - (r["own"] - r["others"] < 0) == sign
            ]
            ax.scatter(
                [r["predicted"] for r in pts],
                [r["others"] + jitter.uniform(-0.2, 0.2) for r in pts],
                s=12,
                alpha=0.6,
                color=colour,
                label=f"{label} ({len(pts)})",
            )
        top = max([r["predicted"] for r in rows] + [2.0])
        ax.plot([1, top], [1, top], ":", color="black", label="realised = predicted")
        ax.set_xscale("log")
        # linear near zero, where most holds are and where they go negative (others gained)
        ax.set_yscale("symlog", linthresh=2.0)
        ax.set_xlabel("arrivals predicted crowded out (log)")
        ax.set_ylabel("other jobs' deadlines lost by admitting")
        ax.set_title(name)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", type=Path, default=Path("../shared/traces"))
    p.add_argument("--limit-jobs", type=int, default=300)
    p.add_argument("--skip-jobs", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--capacity", action="append", help="default: 1x-mean and 2x-mean")
    p.add_argument("--workload", action="append", help="default: all four")
    p.add_argument("--deadline", action="append", help="default: all seven types")
    p.add_argument("--model", action="append", help="default: fluid and tasks")
    p.add_argument("--deadline-basis", choices=deadlines.BASES, default="ideal")
    p.add_argument("--max-holds", type=int, default=40, help="replayed per cell at most")
    p.add_argument("--out", type=Path)
    p.add_argument("--markdown", type=Path, nargs="+", help="print saved --out files")
    p.add_argument("--plot", type=Path, help="with --markdown: draw predicted against realised")
    a = p.parse_args(argv)
    if a.markdown:
        saved: list[dict[str, Any]] = []
        for path in a.markdown:
            kept = [{**c, "set": path.stem} for c in json.loads(path.read_text("utf-8"))]
            print(f"{path.stem}:\n\n{markdown(kept)}\n")
            saved += kept
        if a.plot is not None:
            plot(saved, a.plot)
        return 0
    if a.max_holds < 1 or a.skip_jobs < 0:
        p.error("--max-holds must be >= 1 and --skip-jobs >= 0")
    loads = ev.workloads(a.traces, a.limit_jobs, a.seed, a.skip_jobs)
    cells: list[dict[str, Any]] = []
    runs = [(name, loads[name], a.seed) for name in a.workload or list(loads)]
    for cell, jobs, seed in ev.grid(runs, a.capacity, a.deadline, a.model):
        cap, model = cell["vcores"], cell["model"]
        dj = deadlines.assign_deadlines(jobs, cell["deadlines"], cap, seed, a.deadline_basis)
        holds, rows = calibrate(dj, cap, model, a.max_holds)
        net = sum(r["own"] - r["others"] for r in rows)
        print(
            f"{cell['workload']} {cell['capacity']} ({cap}) {cell['deadlines']} {model}: "
            f"{holds} holds, {len(rows)} replayed, net of admitting {net:+d}",
            file=sys.stderr,
            flush=True,
        )
        cells.append({**cell, "holds": holds, "rows": rows})
        if a.out is not None:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps(cells, indent=1), "utf-8")
    print(markdown(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
