"""Small PNG figures and the Markdown tables of ``docs/evaluation.md`` from ``simulate compare``
outputs.

    .venv/bin/python -m app.sim.docs_figures reports/eval docs/img
    .venv/bin/python -m app.sim.docs_figures reports/eval-tasks docs/img sim_tasks_justice \
        --fluid reports/eval

Reads ``<eval>/justice-<cap>-<deadlines>/compare.json`` (the thesis' Figures 5.4 to 5.6 as
grouped bars of SDR, PTR and WTR per deadline type, and one table per capacity printed to stdout;
``--fluid`` adds the table of SDR in both cluster models) and ``<eval>/fawkes-swim/compare.json``
(Fawkes Figure 9: per-queue mean slowdown per weighting).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

DEADLINES = ("Fixed2x", "Jockey1x2x", "90loose", "Aria1x3x")
ALLOCATORS = ("baseline-fs", "reactive-fs", "oracle", "pythia", "justice")


def _read(path: Path) -> dict[str, Any]:
    """A ``compare.json``: its config and its results."""
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


def _load(path: Path) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = _read(path)["results"]
    return results


def _run(eval_dir: Path, cap: str, dl: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """One ``justice-<cap>-<dl>`` run: its config and its results by policy."""
    data = _read(eval_dir / f"justice-{cap}-{dl}" / "compare.json")
    return data["config"], {str(r["policy"]): r for r in data["results"]}


def _md(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def justice_figure(eval_dir: Path, cap: str, out: Path, title: str = "") -> None:
    """SDR, PTR and WTR per deadline type and allocator at one capacity."""
    runs = [_run(eval_dir, cap, dl)[1] for dl in DEADLINES]
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.8), sharey=True)
    width = 0.8 / len(ALLOCATORS)
    for ax, metric in zip(axes, ("sdr", "ptr", "wtr"), strict=True):
        for i, alloc in enumerate(ALLOCATORS):
            vals = [float(run[alloc][metric]) for run in runs]
            ax.bar([x + i * width for x in range(len(DEADLINES))], vals, width, label=alloc)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(DEADLINES))], DEADLINES, fontsize=7)
        ax.set_title(metric.upper(), fontsize=9)
        ax.set_ylim(0, 1.05)
    axes[0].legend(fontsize=6, loc="lower left")
    fig.suptitle(f"Google first 19 h, capacity {cap}% of peak{title}", fontsize=9, y=1.04)
    fig.savefig(out, dpi=70, bbox_inches="tight")
    plt.close(fig)


def fawkes_figure(eval_dir: Path, out: Path) -> None:
    """Mean job slowdown of each queue per weighting (min and max marked)."""
    rows = _load(eval_dir / "fawkes-swim" / "compare.json")
    fig, ax = plt.subplots(figsize=(8, 2.8))
    for x, r in enumerate(rows):
        slow = list(r["mean_slowdown"].values())
        ax.plot([x, x], [min(slow), max(slow)], color="grey", lw=1)
        ax.scatter([x] * len(slow), slow, s=12)
    ax.set_xticks(range(len(rows)), [str(r["policy"]).removeprefix("fawkes:") for r in rows])
    ax.set_ylabel("mean slowdown per queue")
    ax.set_title("SWIM FB-2009 files as two queues", fontsize=9)
    fig.savefig(out, dpi=70, bbox_inches="tight")
    plt.close(fig)


CAPACITIES = ("5", "25", "50")


def justice_table(eval_dir: Path, cap: str, events: bool = False) -> str:
    """One capacity's Markdown table: every metric of every allocator per deadline type (with
    the simulated events in the task model, whose cost they are)."""
    runs = {dl: _run(eval_dir, cap, dl) for dl in DEADLINES}
    head = ["deadlines", "allocator", "SDR", "PTR", "WTR", "Jain", "equality", "util."]
    head += ["dropped", "killed", "missed"] + (["events"] if events else [])
    vcores = runs[DEADLINES[0]][0]["capacity_vcores"]
    lines = [
        f"**{cap}% of peak ({vcores} vcores)" + (", task model**" if events else "**"),
        "",
        _md(head),
        _md(["---"] * len(head)),
    ]
    for dl, (_, by_policy) in runs.items():
        for alloc in ALLOCATORS:
            r = by_policy[alloc]
            cells = [dl, alloc]
            cells += [f"{float(r[m]):.3f}" for m in ("sdr", "ptr", "wtr", "fairness")]
            cells += [f"{float(r[m]):.3f}" for m in ("equality", "utilization")]
            cells += [str(r[m]) for m in ("dropped", "killed", "missed")]
            if events:
                cells.append(f"{int(r['events']):,}")
            lines.append(_md(cells))
    return "\n".join(lines)


def sdr_table(fluid_dir: Path, tasks_dir: Path) -> str:
    """SDR of every allocator in both cluster models, per capacity and deadline type."""
    head = ["capacity", "deadlines"]
    head += [f"{a} {m}" for a in ALLOCATORS for m in ("fluid", "tasks")]
    lines = [_md(head), _md(["---"] * len(head))]
    for cap in CAPACITIES:
        for dl in DEADLINES:
            both = [_run(d, cap, dl)[1] for d in (fluid_dir, tasks_dir)]
            cells = [f"{cap}%", dl]
            cells += [f"{float(run[alloc]['sdr']):.3f}" for alloc in ALLOCATORS for run in both]
            lines.append(_md(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``main(["reports/eval", "docs/img"])``; a third argument renames the Justice figures
    (``sim_tasks_justice`` for the task-model runs, whose tables then count events too)."""
    parser = argparse.ArgumentParser(prog="python -m app.sim.docs_figures")
    parser.add_argument("eval_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("prefix", nargs="?", default="sim_justice")
    parser.add_argument("--fluid", type=Path, help="the fluid-model runs, for the SDR table")
    args = parser.parse_args(argv)
    eval_dir, out, prefix = args.eval_dir, args.out, args.prefix
    tasks = prefix != "sim_justice"
    out.mkdir(parents=True, exist_ok=True)
    for cap in CAPACITIES:
        if (eval_dir / f"justice-{cap}-Fixed2x" / "compare.json").exists():
            justice_figure(
                eval_dir, cap, out / f"{prefix}_{cap}pct.png", ", task model" if tasks else ""
            )
            print(justice_table(eval_dir, cap, events=tasks), end="\n\n")
    if args.fluid is not None:
        print("**SDR, fluid vs task model**", sdr_table(args.fluid, eval_dir), sep="\n\n")
    if (eval_dir / "fawkes-swim" / "compare.json").exists():
        fawkes_figure(eval_dir, out / "sim_fawkes_swim.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
