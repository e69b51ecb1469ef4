"""Fawkes' DD, TT and JS inputs from the history, hand-computed."""

from __future__ import annotations

import pytest

from app.control.history_view import LiveApp, history_inputs
from app.policies.hybridmr.profiles import ProfileBook, Run

WC = ("p:wc", "u:ann|t:mapreduce", "q:root.etl", "*")


def _run(k: int, size: float, total: float) -> Run:
    return Run(f"a{k}", WC, k, size, 8, total / 2, total / 2, total, 4)


def test_waiting_bytes_completed_tasks_and_slowdowns_per_queue() -> None:
    book = ProfileBook([_run(1, 1000, 10), _run(2, 3000, 30)])
    other = ("p:other", "u:bob|t:spark", "q:root.adhoc", "x")  # no history at any level
    out = history_inputs(
        book,
        now_ms=100_000,
        queues=["root.etl", "root.adhoc"],
        waiting=[LiveApp("root.etl", WC), LiveApp("root.etl", WC), LiveApp("root.adhoc", other)],
        running=[
            LiveApp("root.etl", WC, started_ms=60_000),  # 40 s against a median of 20 s
            LiveApp("root.etl", WC, started_ms=None),
            LiveApp("root.adhoc", other, started_ms=0),
            LiveApp("root.gone", WC, started_ms=0),
        ],
        completed_tasks={"root.etl": 7},
    )
    assert out["root.etl"].waiting_input_bytes == 4000  # two waiting jobs of mean 2000 B
    assert out["root.etl"].completed_tasks == 7
    assert out["root.etl"].slowdowns == [pytest.approx(2.0)]
    assert (out["root.adhoc"].waiting_input_bytes, out["root.adhoc"].slowdowns) == (0.0, [])
    assert "root.gone" not in out
