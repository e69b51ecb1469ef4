"""Simulation outputs: JSON and CSV metrics, PNG plots (matplotlib, Agg) and a self-contained HTML
comparison report with the plots embedded as base64 PNG.

The plots are the papers' views: utilization and Jain's fairness over time (thesis seed 004,
sections 5.4.1 and 5.4.4), per-queue used fraction and the global discrimination factor (Fawkes,
seed 000, section 4.1), and the sharing benefit/loss degree per queue against static partitioning
(LTRF, seed 002, Figure 9.1).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from app.sim import metrics
from app.sim.runner import SimResult

SharingSeries = dict[str, list[float | None]]  # queue -> degree per sample time


def sharing_series(result: SimResult, static_cum: Mapping[str, list[float]]) -> SharingSeries:
    """Sharing degree per queue at every sample of ``result`` (``metrics.sharing_degree``).

    ``static_cum`` holds each queue's cumulative vcore-seconds on its static partition, sampled
    at the same instants (the static runs start at the same time with the same ``sample_s``);
    after a static run ends its last value holds.
    """
    out: SharingSeries = {}
    for q, shared in result.series.queue_cum.items():
        static = static_cum.get(q)
        if not static:
            continue
        out[q] = [
            metrics.sharing_degree(s, static[min(i, len(static) - 1)]) for i, s in enumerate(shared)
        ]
    return out


# ----- JSON / CSV -----
def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Pretty JSON with plain floats."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", "utf-8")


def write_jobs_csv(path: Path, result: SimResult) -> None:
    """One row per job: outcome, times, consumed work."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "job_id",
                "queue",
                "submit_s",
                "tasks",
                "work_vcore_s",
                "deadline_s",
                "status",
                "start_s",
                "end_s",
                "consumed_vcore_s",
                "grant",
                "reason",
            ]
        )
        for r in result.runs:
            j = r.job
            w.writerow(
                [
                    sheet_cell(j.job_id),
                    sheet_cell(j.queue),
                    j.submit_s,
                    j.tasks,
                    j.work,
                    "" if j.deadline_s is None else j.deadline_s,
                    r.status.value,
                    "" if r.start_s is None else r.start_s,
                    "" if r.end_s is None else r.end_s,
                    r.consumed,
                    r.grant,
                    sheet_cell(r.reason),
                ]
            )


def write_decisions_csv(path: Path, result: SimResult) -> None:
    """One row per logged admission decision (``SimResult.decision_log``), in time order."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["time_s", "job_id", "action", "vcores", "reason"])
        for d in result.decision_log:
            w.writerow([d.at_s, sheet_cell(d.job_id), d.action, d.vcores, sheet_cell(d.reason)])


def write_series_csv(path: Path, result: SimResult, sharing: SharingSeries | None = None) -> None:
    """The 60 s samples: utilization, fairness, equality, live jobs, per-queue columns."""
    s = result.series
    queues = sorted(s.queue_used)
    sharing = sharing or {}
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            ["t", "utilization", "fairness", "equality", "live_jobs"]
            + [f"used_fraction.{q}" for q in queues]
            + [f"sharing_degree.{q}" for q in sorted(sharing)]
        )
        for i, t in enumerate(s.t):
            row: list[Any] = [t, s.utilization[i], _blank(s.fairness[i]), _blank(s.equality[i])]
            row.append(s.live[i])
            row += [s.queue_used[q][i] for q in queues]
            row += [_blank(sharing[q][i]) for q in sorted(sharing)]
            w.writerow(row)


def write_control_csv(path: Path, result: SimResult) -> None:
    """Control ticks: shares, discrimination per queue and the global factor."""
    s = result.series
    queues = sorted(s.shares)
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t", "factor"] + [f"share.{q}" for q in queues] + [f"D.{q}" for q in queues])
        for i, t in enumerate(s.control_t):
            row = [t, s.factor[i]] + [s.shares[q][i] for q in queues]
            w.writerow(row + [s.discrimination[q][i] for q in queues])


def sheet_cell(text: str) -> str:
    """``text`` as a spreadsheet shows it as text: ids, queues and reasons can come from YARN
    users (``simulate --from-db``), and one starting ``=``, ``+``, ``-``, ``@`` or a control
    character would be run as a formula by a spreadsheet opening the CSV (OWASP's CSV
    injection advice: prefix a quote)."""
    return f"'{text}" if text[:1] in _FORMULA_START else text


_FORMULA_START = frozenset("=+-@\t\r")


def _blank(v: float | None) -> float | str:
    return "" if v is None else v


# ----- plots -----
def _plain(text: str) -> str:
    """``text`` (a queue or policy name) shown as it is by matplotlib: ``$`` would start math
    text, which may not parse, and a legend leaves out labels that start with ``_``."""
    text = text.replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def _hours(ts: Sequence[float], t0: float) -> list[float]:
    return [(t - t0) / 3600 for t in ts]


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def plot_timeline(result: SimResult) -> bytes:
    """Utilization and Jain's fairness (fraction of demand) over time."""
    s = result.series
    fig, ax = plt.subplots(figsize=(7, 3))
    hrs = _hours(s.t, result.start_s)
    ax.plot(hrs, s.utilization, label="utilization", lw=0.8)
    fair = [float("nan") if v is None else v for v in s.fairness]
    ax.plot(hrs, fair, label="Jain (fraction of demand)", lw=0.8)
    ax.set_xlabel("hours")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"{_label(result)}: utilization and fairness")
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def plot_queues(result: SimResult) -> bytes:
    """Per-queue used fraction of the cluster over time."""
    s = result.series
    fig, ax = plt.subplots(figsize=(7, 3))
    hrs = _hours(s.t, result.start_s)
    for q in sorted(s.queue_used):
        ax.plot(hrs, s.queue_used[q], label=_plain(q), lw=0.8)
    ax.set_xlabel("hours")
    ax.set_ylabel("used fraction")
    ax.set_title(f"{_label(result)}: queue usage")
    if len(s.queue_used) <= 10:
        ax.legend(loc="upper right", fontsize=8)
    return _png(fig)


def plot_discrimination(result: SimResult) -> bytes | None:
    """Global discrimination factor ``E[D^2]`` at each control tick (Fawkes eq. 3)."""
    s = result.series
    if not s.control_t:
        return None
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.plot(_hours(s.control_t, result.start_s), s.factor, lw=0.8)
    ax.set_xlabel("hours")
    ax.set_ylabel("mean D_i^2")
    ax.set_title(f"{_label(result)}: global discrimination")
    return _png(fig)


def plot_sharing(result: SimResult, sharing: SharingSeries) -> bytes | None:
    """Sharing benefit (> 0) or loss (< 0) per queue over time (LTRF Figure 9.1)."""
    if not sharing:
        return None
    fig, ax = plt.subplots(figsize=(7, 3))
    hrs = _hours(result.series.t, result.start_s)
    for q in sorted(sharing):
        vals = [float("nan") if v is None else v for v in sharing[q]]
        ax.plot(hrs, vals, label=_plain(q), lw=0.8)
    ax.axhline(0, color="black", lw=0.5)
    ax.set_xlabel("hours")
    ax.set_ylabel("U_shared / U_static - 1")
    ax.set_title(f"{_label(result)}: sharing benefit/loss")
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def plot_bars(summaries: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> bytes:
    """Grouped bars of ``keys`` per policy (the thesis' Figures 5.2 to 5.7 in one panel)."""
    fig, ax = plt.subplots(figsize=(7, 3))
    width = 0.8 / max(1, len(summaries))
    for i, s in enumerate(summaries):
        vals = [float(s.get(k) or 0.0) for k in keys]
        ax.bar([x + i * width for x in range(len(keys))], vals, width, label=_plain(_name(s)))
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(keys))], list(keys))
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, ncol=3)
    return _png(fig)


def _name(summary: Mapping[str, Any]) -> str:
    qp = summary.get("queue_policy")
    return str(qp) if qp and qp != "fair" else str(summary.get("allocator"))


def _label(result: SimResult) -> str:
    return _plain(_name({"queue_policy": result.queue_policy, "allocator": result.allocator}))


def result_plots(result: SimResult, sharing: SharingSeries | None = None) -> dict[str, bytes]:
    """Every plot of one run, by file stem."""
    plots = {"timeline": plot_timeline(result), "queues": plot_queues(result)}
    disc = plot_discrimination(result)
    if disc is not None:
        plots["discrimination"] = disc
    share = plot_sharing(result, sharing or {})
    if share is not None:
        plots["sharing"] = share
    return plots


def write_plots(out: Path, plots: Mapping[str, bytes]) -> list[Path]:
    """Write ``<stem>.png`` files and return their paths."""
    paths = []
    for stem, data in plots.items():
        p = out / f"{stem}.png"
        p.write_bytes(data)
        paths.append(p)
    return paths


# ----- HTML -----
SUMMARY_KEYS = (
    "jobs",
    "sdr",
    "ptr",
    "wtr",
    "fairness",
    "equality",
    "utilization",
    "dropped",
    "killed",
    "missed",
    "makespan_s",
    "final_discrimination_factor",
    "wall_s",
)


def _cell(v: Any) -> str:
    """``v`` as table-cell HTML; dict keys are queue names, which a trace file chooses."""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict):
        return ", ".join(f"{html.escape(str(k))}: {_cell(x)}" for k, x in v.items())
    return html.escape(str(v))


def _img(data: bytes, alt: str) -> str:
    b64 = base64.b64encode(data).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def _sharing_keys(summaries: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The sharing-degree rows, shown when ``--sharing`` computed them."""
    keys = ("mean_sharing_degree", "min_sharing_degree")
    return tuple(k for k in keys if any(s.get(k) is not None for s in summaries))


def compare_html(
    title: str,
    config: Mapping[str, Any],
    summaries: Sequence[Mapping[str, Any]],
    plots: Sequence[Mapping[str, bytes]],
) -> str:
    """One self-contained page: the configuration, a side-by-side table and every plot."""
    head = "".join(f"<th>{html.escape(_name(s))}</th>" for s in summaries)
    rows = [
        f"<tr><th>{html.escape(k)}</th>"
        + "".join(f"<td>{_cell(s.get(k))}</td>" for s in summaries)
        + "</tr>"
        for k in (*SUMMARY_KEYS, "mean_slowdown", *_sharing_keys(summaries))
    ]
    bars = _img(plot_bars(summaries, ("sdr", "ptr", "wtr", "fairness", "equality")), "bars")
    bars += _img(plot_bars(summaries, ("utilization",)), "utilization")
    cols = "".join(
        f"<td><h3>{html.escape(_name(s))}</h3>"
        + "<br>".join(_img(b, f"{_name(s)} {k}") for k, b in p.items())
        + "</td>"
        for s, p in zip(summaries, plots, strict=True)
    )
    cfg = html.escape(json.dumps(config, indent=2, sort_keys=True, default=str))
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top}"
        "img{max-width:480px}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><pre>{cfg}</pre>"
        f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"
        f"<h2>Summary</h2>{bars}<h2>Per policy</h2><table><tr>{cols}</tr></table>"
        "</body></html>\n"
    )
