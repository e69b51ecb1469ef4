"""Pure domain objects shared by the RM client, the database layer, the policies and the simulator.

Frozen dataclasses only: no I/O, no clock. Times are epoch milliseconds as the RM reports them
(``None`` where the RM has not set them yet). Resources are vcores and megabytes.
"""

from app.domain.model import (
    AppRecord,
    ClusterInfo,
    ClusterMetrics,
    ClusterSnapshot,
    NodeState,
    QueueState,
    Resources,
)

__all__ = [
    "AppRecord",
    "ClusterInfo",
    "ClusterMetrics",
    "ClusterSnapshot",
    "NodeState",
    "QueueState",
    "Resources",
]
