"""Policy inputs and ledger polls from the poller's stored samples.

Reads only; the arithmetic is pure (``app.domain.observation``, ``app.control.ledger``). The
window of a tick is ``(now - T, now]``: a sample taken exactly at the previous tick belongs to
the previous interval.

Completions are counted from where the last recorded tick stopped (``Cursors``, stored with the
tick), not by a time window: a completion reaches the database some time after it happened (the
poll that sees an app end, the JobHistory fetch after it), possibly after the tick whose window
held its time has read, and a window would then count it nowhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy.orm import Session

from app.control.history_view import LiveApp, history_inputs
from app.control.ledger import Poll
from app.db import control_repo, history_repo
from app.db.promise_history import app_keys
from app.domain.model import leaf_name
from app.domain.observation import (
    ClusterTotals,
    Cursors,
    PolicyInputs,
    SamplePoint,
    build_inputs,
)
from app.policies.hybridmr.profiles import ProfileBook
from app.yarn.client import PENDING_APP_STATES


def load_inputs(
    session: Session,
    cluster_id: int,
    queues: Sequence[str],
    now_ms: int,
    interval_s: float,
    *,
    history: bool = False,
    cursors: Cursors | None = None,
    lag_ms: int = 0,
    polled_ms: int | None = None,
) -> tuple[PolicyInputs, Cursors]:
    """Interval averages of every managed queue and the apps completed since ``cursors``; with
    ``history`` (a JobHistory server is read) also Fawkes' DD, TT and JS inputs
    (``app.control.history_view``). Returns the cursors to store with the tick.

    ``lag_ms`` is how late a poll may see an app end (the controller's staleness limit): an app
    that ended earlier than one interval plus that before this tick (a backlog seen after a
    restart or an outage) is not counted as this interval's. ``polled_ms`` is the newest good poll
    the caller has read (the controller's context): completed apps are counted up to it.
    """
    start = now_ms - int(interval_s * 1000)
    by_time = control_repo.queue_points(session, cluster_id, queues, start + 1, now_ms)
    points: dict[str, list[SamplePoint]] = {q: [] for q in queues}
    for _, row in sorted(by_time.items()):
        for queue, point in row.items():
            points[queue].append(point)
    total = control_repo.latest_totals(session, cluster_id, now_ms) or ClusterTotals(0.0, 0.0)
    cursors = cursors or Cursors()
    floor = start - lag_ms
    after = max(cursors.apps_seen_ms if cursors.apps_seen_ms is not None else start, floor)
    # Polls commit in the order they are taken, so every app a poll up to this one saw end is
    # in the database: counting through it, and from it next time, counts each app once.
    through = max(after, polled_ms if polled_ms is not None else after)
    completed = control_repo.completed_apps(
        session, cluster_id, queues, after, through, after - lag_ms
    )
    inputs = build_inputs(now_ms, interval_s, queues, points, total, completed)
    if not history:
        return inputs, Cursors(through, cursors.history_seq)
    filled, seq = with_history(session, cluster_id, inputs, queues, cursors.history_seq)
    return filled, Cursors(through, seq)


def with_history(
    session: Session,
    cluster_id: int,
    inputs: PolicyInputs,
    queues: Sequence[str],
    after_seq: int | None = None,
) -> tuple[PolicyInputs, int]:
    """``inputs`` with the history-derived fields filled from the stored MapReduce history, and
    the cursor after it.

    The completed tasks are those of the jobs stored after ``after_seq`` (the cursor the last
    recorded tick stored), not those fetched within the interval: a history committed after a
    tick read the database, or during a tick that was skipped, would otherwise count nowhere.
    Without a cursor (the first tick) the count starts one interval back."""
    book = ProfileBook(history_repo.runs(session, cluster_id, limit=history_repo.PROFILE_RUNS))
    managed = {leaf_name(q): q for q in queues} | {q: q for q in queues}
    waiting: list[LiveApp] = []
    running: list[LiveApp] = []
    for app in history_repo.live_apps(session, cluster_id, [*PENDING_APP_STATES, "RUNNING"]):
        queue = managed.get(app.queue)
        if queue is None:
            continue
        live = LiveApp(queue, app_keys(app).chain(), app.started_ms)
        (running if app.state == "RUNNING" else waiting).append(live)
    if after_seq is None:
        after_seq = history_repo.seq_through(session, inputs.window_start_ms)
    tasks, cursor = history_repo.completed_tasks(session, cluster_id, queues, after_seq)
    extra = history_inputs(book, inputs.now_ms, queues, waiting, running, tasks)
    filled = replace(
        inputs,
        queues={
            q: replace(
                v,
                waiting_input_bytes=extra[q].waiting_input_bytes,
                completed_tasks=extra[q].completed_tasks,
                slowdowns=tuple(extra[q].slowdowns),
            )
            if q in extra
            else v
            for q, v in inputs.queues.items()
        },
    )
    return filled, cursor


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
