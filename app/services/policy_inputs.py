"""Policy inputs and ledger polls from the poller's stored samples.

Reads only; the arithmetic is pure (``app.domain.observation``, ``app.control.ledger``). The
window of a tick is ``(now - T, now]``: a sample taken exactly at the previous tick belongs to
the previous interval.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.control.ledger import Poll
from app.db import control_repo
from app.domain.observation import ClusterTotals, PolicyInputs, SamplePoint, build_inputs


def load_inputs(
    session: Session, cluster_id: int, queues: Sequence[str], now_ms: int, interval_s: float
) -> PolicyInputs:
    """Interval averages of every managed queue and the apps completed in the interval."""
    start = now_ms - int(interval_s * 1000)
    by_time = control_repo.queue_points(session, cluster_id, queues, start + 1, now_ms)
    points: dict[str, list[SamplePoint]] = {q: [] for q in queues}
    for _, row in sorted(by_time.items()):
        for queue, point in row.items():
            points[queue].append(point)
    total = control_repo.latest_totals(session, cluster_id, now_ms) or ClusterTotals(0.0, 0.0)
    completed = control_repo.completed_apps(session, cluster_id, queues, start, now_ms)
    return build_inputs(now_ms, interval_s, queues, points, total, completed)


def load_polls(
    session: Session, cluster_id: int, queues: Sequence[str], since_ms: int, until_ms: int
) -> list[Poll]:
    """Every poll in ``[since_ms, until_ms]`` with the managed queues' samples, oldest first.

    A poll without node samples takes the cluster size of the poll before it (0 at first).
    """
    by_time = control_repo.queue_points(session, cluster_id, queues, since_ms, until_ms)
    totals = control_repo.cluster_totals(session, cluster_id, since_ms, until_ms)
    polls: list[Poll] = []
    last = ClusterTotals(0.0, 0.0)
    for taken, row in sorted(by_time.items()):
        last = totals.get(taken, last)
        polls.append(Poll(taken, last, row))
    return polls
