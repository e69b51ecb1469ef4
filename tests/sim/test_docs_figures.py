"""The evaluation's Markdown tables are printed from ``simulate compare`` outputs, one row per
deadline type and allocator, each number from its own run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.sim import docs_figures
from app.sim.docs_figures import ALLOCATORS, CAPACITIES, DEADLINES


def _write_runs(root: Path, model: str) -> None:
    """One compare.json per capacity and deadline type whose numbers say where they came from:
    SDR encodes (capacity, deadline type, allocator, model), so a row read from the wrong run
    shows."""
    for ci, cap in enumerate(CAPACITIES):
        for di, dl in enumerate(DEADLINES):
            results = []
            for ai, alloc in enumerate(ALLOCATORS):
                results.append(
                    {
                        "policy": alloc,
                        "sdr": (100 * ci + 10 * di + ai) / 1000 + (0.5 if model == "tasks" else 0),
                        "ptr": 0.25,
                        "wtr": ai / 8,
                        "fairness": 0.5,
                        "equality": 1.0,
                        "utilization": 0.75,
                        "dropped": 10 * ai,
                        "killed": ai,
                        "missed": 7,
                        "events": 1234567,
                    }
                )
            run = root / f"justice-{cap}-{dl}"
            run.mkdir(parents=True)
            config = {"capacity_vcores": 1000 * (ci + 1), "deadlines": dl}
            (run / "compare.json").write_text(json.dumps({"config": config, "results": results}))


def test_a_capacity_table_reads_each_row_from_its_own_run(tmp_path: Path) -> None:
    _write_runs(tmp_path, "fluid")
    table = docs_figures.justice_table(tmp_path, "25").splitlines()
    assert table[0] == "**25% of peak (2000 vcores)**"
    rows = [line for line in table if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == len(DEADLINES) * len(ALLOCATORS)
    # Jockey1x2x (second deadline type), justice (fifth allocator), at 25 % (second capacity).
    assert (
        "| Jockey1x2x | justice | 0.114 | 0.250 | 0.500 | 0.500 | 1.000 | 0.750 | 40 | 4 | 7 |"
        in (rows)
    )
    assert "events" not in table[2]


def test_the_task_model_table_counts_events(tmp_path: Path) -> None:
    _write_runs(tmp_path, "tasks")
    table = docs_figures.justice_table(tmp_path, "5", events=True).splitlines()
    assert table[0] == "**5% of peak (1000 vcores), task model**"
    assert table[2].endswith("| events |")
    assert table[4].endswith("| 1,234,567 |")


def test_the_sdr_table_pairs_both_models(tmp_path: Path) -> None:
    _write_runs(tmp_path / "fluid", "fluid")
    _write_runs(tmp_path / "tasks", "tasks")
    rows = docs_figures.sdr_table(tmp_path / "fluid", tmp_path / "tasks").splitlines()
    assert len(rows) == 2 + len(CAPACITIES) * len(DEADLINES)
    # 50 %, Aria1x3x: fluid then tasks for each allocator.
    want = [f"0.23{ai}" if m == "fluid" else f"0.73{ai}" for ai in range(5) for m in ("fluid", "t")]
    assert rows[-1] == "| 50% | Aria1x3x | " + " | ".join(want) + " |"


def test_main_writes_the_figures_and_prints_the_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_runs(tmp_path / "fluid", "fluid")
    _write_runs(tmp_path / "tasks", "tasks")
    out = tmp_path / "img"
    argv = [
        str(tmp_path / "tasks"),
        str(out),
        "sim_tasks_justice",
        "--fluid",
        str(tmp_path / "fluid"),
    ]
    assert docs_figures.main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        f"sim_tasks_justice_{cap}pct.png" for cap in ("25", "50", "5")
    ]
    printed = capsys.readouterr().out
    assert printed.count(", task model**") == len(CAPACITIES)
    assert "**SDR, fluid vs task model**" in printed
