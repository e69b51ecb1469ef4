"""Small PNG figures for ``docs/evaluation.md`` from ``simulate compare`` outputs.

    .venv/bin/python -m app.sim.docs_figures reports/eval docs/img
    .venv/bin/python -m app.sim.docs_figures reports/eval-tasks docs/img sim_tasks_justice

Reads ``<eval>/justice-<cap>-<deadlines>/compare.json`` (the thesis' Figures 5.4 to 5.6 as
grouped bars of SDR, PTR and WTR per deadline type), ``<eval>/fawkes-swim/compare.json`` (Fawkes
Figure 9: per-queue mean slowdown per weighting) and ``<eval>/ltrf-google/compare.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

DEADLINES = ("Fixed2x", "Jockey1x2x", "90loose", "Aria1x3x")
ALLOCATORS = ("baseline-fs", "reactive-fs", "oracle", "pythia", "justice")


def _load(path: Path) -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    results: list[dict[str, Any]] = data["results"]
    return results


def justice_figure(eval_dir: Path, cap: str, out: Path, title: str = "") -> None:
    """SDR, PTR and WTR per deadline type and allocator at one capacity."""
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.8), sharey=True)
    width = 0.8 / len(ALLOCATORS)
    for ax, metric in zip(axes, ("sdr", "ptr", "wtr"), strict=True):
        for i, alloc in enumerate(ALLOCATORS):
            vals = []
            for dl in DEADLINES:
                rows = _load(eval_dir / f"justice-{cap}-{dl}" / "compare.json")
                vals.append(next(float(r[metric]) for r in rows if r["policy"] == alloc))
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


def main(argv: list[str] | None = None) -> int:
    """``main(["reports/eval", "docs/img"])``; a third argument renames the Justice figures
    (``sim_tasks_justice`` for the task-model runs)."""
    args = sys.argv[1:] if argv is None else argv
    eval_dir, out = Path(args[0]), Path(args[1])
    prefix = args[2] if len(args) > 2 else "sim_justice"
    title = ", task model" if prefix != "sim_justice" else ""
    out.mkdir(parents=True, exist_ok=True)
    for cap in ("5", "25", "50"):
        if (eval_dir / f"justice-{cap}-Fixed2x" / "compare.json").exists():
            justice_figure(eval_dir, cap, out / f"{prefix}_{cap}pct.png", title)
    if (eval_dir / "fawkes-swim" / "compare.json").exists():
        fawkes_figure(eval_dir, out / "sim_fawkes_swim.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
