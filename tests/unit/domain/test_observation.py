"""The shared observation view (``app.domain.observation``): interval averages of samples."""

from __future__ import annotations

from app.domain.observation import ClusterTotals, SamplePoint, average

TOTAL8 = ClusterTotals(8.0, 8192.0)


def test_interval_averages() -> None:
    pts = [
        SamplePoint(
            0, used_vcores=2, used_memory_mb=1024, pending_containers=4, absolute_capacity=50
        ),
        SamplePoint(
            1, used_vcores=4, used_memory_mb=1024, pending_containers=0, absolute_capacity=50
        ),
    ]
    got = average(pts, TOTAL8, completed=3)
    # mean used 3 vcores of a capacity of 50 % x 8 = 4 vcores; dominant share (2/8, 4/8) -> 0.375
    assert (got.used_vcores, got.pending_containers, got.completed_apps) == (3, 2, 3)
    assert got.vcore_utilization == 0.75 and got.used_fraction == 0.375
    assert got.memory_utilization == 1024 / 4096
