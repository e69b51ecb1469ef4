"""The poller: each tick snapshots the RM and appends it to the history.

Applications are upserted (repeated polls and restarts never duplicate one). Finished apps are
fetched with ``finishedTimeBegin`` = the stored watermark, so an app that finished while the
sidecar was down is still recorded, as long as the RM retains it
(``yarn.resourcemanager.max-completed-applications``, default 1000). An RM that is down or answers
garbage makes the tick fail softly: it is recorded, the poller backs off exponentially (capped), and
``/ready`` reports the age of the last good poll. Any other error of a tick (a bug, a value
nothing expected) fails it the same way, with its traceback in the log, instead of stopping the
loop. RM URLs are stored and reported with their password masked.

At cluster scale (thousands of apps and nodes) a tick writes only what changed since the previous
good tick, in fixed-size batches (``app.db.poll_writes``); error text kept for ``/ready`` and the
logs is capped, since a database error can quote a whole statement with its parameters.

A large cluster's running apps are not all asked for on every tick. Each tick lists every
pending app, the RUNNING apps started in the last ``NEW_MARGIN_MS`` (by the RM's clock), the
finished window, and one of ``slices`` ranges of start instants, the ranges splitting the known
running apps evenly, so that each running app is listed once per ``app_refresh_s``: a tick costs
about 1/``slices`` of the full list and the counter refreshes are spread over the window. Apps
the poller knew as pending are looked for among the RUNNING ones by their start instants (at most
``FOLLOW_RANGES`` narrow ranges), so a start is seen on the next tick. A known app missing from a
range it belongs to is gone. The first tick of a process lists everything.

The finished window reaches ``FINISHED_GRACE_MS`` behind the watermark: a real 3.5.0 RM keeps
accruing ``vcoreSeconds`` for a few seconds after an app turns FINISHED (its AM container is still
exiting), so apps are re-read, and their accounting corrected, until the grace has passed. With
slices, a busy cluster ending thousands of apps in the grace, a tick reads back
``FINISHED_MARGIN_MS`` only, plus the apps that ended in the band since the previous tick's
band up to ``SETTLE_MS`` behind the watermark: each finished app is read once more, settled.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Table
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.db import poll_writes, repo
from app.db.models import Cluster, PollRecord
from app.db.session import transaction
from app.domain.model import FINAL_APP_STATES, FINISHED_GRACE_MS, ClusterSnapshot
from app.redact import redact_text, redact_url
from app.services.base import Clock, LoopService, wall_clock_ms
from app.yarn.client import PENDING_APP_STATES, RunningSlice
from app.yarn.errors import RMError

# How stale a running app's counters (progress, elapsed, resource-seconds) may be in the history
# before its row is rewritten; lifecycle changes and final states are written at once.
APP_REFRESH_S = 60.0
# How often the whole node list is read (its totals come from ``/metrics`` on every tick, and a
# change in the RM's node counts makes the next tick read it): nodes change rarely, and at 1,000
# nodes the list is about 1.8 MB to fetch and parse.
NODE_REFRESH_S = 60.0
# Error text kept per failure (``/ready``, the polls table, the log line).
MAX_ERROR_CHARS = 1000
# Running apps started this recently (RM clock, behind the latest submission seen) are listed on
# every tick: new submissions that went straight to RUNNING between two ticks.
NEW_MARGIN_MS = 5_000
# How far behind the watermark a sliced tick reads finished apps, and how long after its end a
# finished app is read once more (see above).
FINISHED_MARGIN_MS = 5_000
SETTLE_MS = 60_000
# Narrow ranges of start instants in which apps known as pending are looked for once RUNNING.
FOLLOW_RANGES = 4
_PENDING = frozenset(PENDING_APP_STATES)


class SnapshotSource(Protocol):
    """What the poller needs of the RM client."""

    @property
    def active_url(self) -> str | None: ...

    async def snapshot(
        self,
        now_ms: int,
        *,
        finished_since_ms: int | None,
        running: RunningSlice | None = None,
        nodes: bool = True,
    ) -> ClusterSnapshot: ...


@dataclass(frozen=True, slots=True)
class PollSummary:
    """What one tick did (printed by ``yarn-sidecar poll-once``)."""

    ok: bool
    rm_url: str | None
    apps: int
    queues: int
    nodes: int
    watermark_ms: int
    error: str | None = None
    skipped: bool = False


class Poller(LoopService):
    """Observe the RM and persist what it saw."""

    name = "poller"

    def __init__(
        self,
        source: SnapshotSource,
        sessions: sessionmaker[Session],
        *,
        cluster_name: str,
        rm_urls: tuple[str, ...],
        interval_s: float,
        max_backoff_s: float = 300.0,
        clock: Clock = wall_clock_ms,
        app_refresh_s: float = APP_REFRESH_S,
        node_refresh_s: float = NODE_REFRESH_S,
    ) -> None:
        super().__init__(interval_s, clock)
        self.source = source
        self.sessions = sessions
        self.cluster_name = cluster_name
        # Only stored (``clusters.rm_urls``): the client has the URLs it connects with.
        self.rm_urls = tuple(redact_url(url) for url in rm_urls)
        self.max_backoff_s = max_backoff_s
        self.failures = 0
        self.next_attempt_ms = 0
        self.last_good_poll_ms: int | None = None
        self.last_error: str | None = None
        self.last_summary: PollSummary | None = None
        self.app_refresh_ms = int(app_refresh_s * 1000)
        self.node_refresh_ms = int(node_refresh_s * 1000)
        self._nodes_ms: int | None = None
        self._node_counts: tuple[int, int] | None = None
        self.memory = poll_writes.PollMemory()
        # One range of start instants per tick; the full running list is visited once per window.
        self.slices = max(1, math.ceil(app_refresh_s / interval_s)) if interval_s > 0 else 1
        self._slice = 0
        self._bounds: list[int] = []
        # Finished apps that ended up to here (RM clock) were read again after settling.
        self._settled_ms = 0

    async def run_once(self, now_ms: int) -> None:
        await self.poll(now_ms)

    async def poll(self, now_ms: int, *, force: bool = False) -> PollSummary:
        """One observation; skipped (not failed) while backing off unless ``force``."""
        if not force and now_ms < self.next_attempt_ms:
            return PollSummary(False, None, 0, 0, 0, 0, self.last_error, skipped=True)
        started = time.monotonic()
        try:
            watermark = await asyncio.to_thread(self._load_watermark, now_ms)
            running, covered = self._running_slice(watermark)
            reach = FINISHED_GRACE_MS if running is None else FINISHED_MARGIN_MS
            since = max(0, watermark - reach) if watermark else 0
            nodes = self._nodes_due(now_ms)
            snap = await self.source.snapshot(
                now_ms, finished_since_ms=since, running=running, nodes=nodes
            )
            summary = await asyncio.to_thread(
                self._persist, snap, watermark, now_ms, started, covered
            )
        except Exception as exc:
            summary = await self._fail(now_ms, exc, started)
        else:
            self.failures = 0
            self._slice = (self._slice + 1) % self.slices if running is not None else 0
            self._settled_ms = max(0, watermark - SETTLE_MS)
            self.next_attempt_ms = 0
            self.last_good_poll_ms = now_ms
            self.last_error = None
            counts = (snap.metrics.active_nodes, snap.metrics.total_nodes)
            if snap.nodes_read:
                self._nodes_ms, self._node_counts = now_ms, counts
            elif counts != self._node_counts:
                self._nodes_ms = None  # a node came or went: list them on the next tick
        self.last_summary = summary
        return summary

    def _nodes_due(self, now_ms: int) -> bool:
        """List the nodes on a process's first tick, once per ``node_refresh_s``, and on the
        tick after the RM's node counts changed; the other ticks take the totals from
        ``/metrics``."""
        return self._nodes_ms is None or now_ms - self._nodes_ms >= self.node_refresh_ms

    def _running_slice(
        self, watermark: int
    ) -> tuple[RunningSlice | None, Callable[[poll_writes.AppKey], bool] | None]:
        """What this tick asks of the running apps, and which known apps that answer covers
        (``None``, ``None``: all of them, on the first tick of a process or with one slice)."""
        memory = self.memory
        if not memory.primed or self.slices == 1:
            return None, None
        state_at, started_at = poll_writes.LIFE_STATE, poll_writes.LIFE_STARTED
        follow: list[int] = []
        starts: list[int] = []
        for life, _, _ in memory.apps.values():
            if life[state_at] in _PENDING:
                follow.append(life[started_at] or 0)
            elif life[state_at] == "RUNNING":
                starts.append(life[started_at] or 0)
        latest = max(max(starts, default=0), max(follow, default=0))
        new_begin = max(0, latest - NEW_MARGIN_MS)
        settle_end = watermark - SETTLE_MS
        settle_begin = max(self._settled_ms + 1, watermark - FINISHED_GRACE_MS)
        forget_before = max(0, watermark - FINISHED_GRACE_MS)
        finished_at = poll_writes.LIFE_FINISHED
        k, j = self.slices, self._slice
        if j == 0 or len(self._bounds) != k - 1:
            # Boundaries fixed for one pass over the slices, so that the pass covers every start.
            starts.sort()
            n = len(starts)
            self._bounds = [starts[i * n // k] if n else 0 for i in range(1, k)]
            j = self._slice = 0
        lo = None if j == 0 else self._bounds[j - 1]
        hi = new_begin - 1 if j == k - 1 else self._bounds[j] - 1
        ranges: list[tuple[int | None, int | None]] = [(new_begin, None)]
        if lo is None or hi >= lo:
            ranges.insert(0, (lo, hi))
        ranges += follow_ranges([t for t in follow if t < new_begin], FOLLOW_RANGES)
        ranges = rm_ranges(ranges)

        def covered(life: poll_writes.AppKey) -> bool:
            if life[state_at] in FINAL_APP_STATES:
                # Kept in memory until out of the grace, when the RM's window drops it too.
                return bool((life[finished_at] or 0) < forget_before)
            if life[state_at] in _PENDING:
                return True  # every pending app is listed, or followed by id
            if life[state_at] != "RUNNING":
                return False
            start = life[started_at] or 0
            return any((b is None or start >= b) and (e is None or start <= e) for b, e in ranges)

        settled = (settle_begin, settle_end) if watermark and settle_begin <= settle_end else None
        return RunningSlice(tuple(ranges), settled), covered

    def backoff_s(self) -> float:
        """Delay before the next attempt after ``failures`` consecutive failures."""
        if self.failures == 0:
            return 0.0
        return float(min(self.max_backoff_s, self.interval_s * 2 ** (self.failures - 1)))

    async def _fail(self, now_ms: int, exc: Exception, started: float) -> PollSummary:
        self.failures += 1
        delay = self.backoff_s()
        self.next_attempt_ms = now_ms + int(delay * 1000)
        self.last_error = poll_writes.storable_text(
            cap_error(redact_text(f"{type(exc).__name__}: {exc}"))
        )
        self.log.warning(
            "poll failed (%d in a row), next attempt in %.0fs: %s",
            self.failures,
            delay,
            self.last_error,
            # An RM or database failure is explained by its message; anything else is a bug.
            exc_info=not isinstance(exc, (RMError, SQLAlchemyError)),
        )
        try:
            await asyncio.to_thread(self._record_failure, now_ms, self.last_error, started)
        except Exception:
            self.log.exception("could not record the failed poll")
        return PollSummary(False, _public_url(self.source.active_url), 0, 0, 0, 0, self.last_error)

    def _load_watermark(self, now_ms: int) -> int:
        with transaction(self.sessions) as session:
            cluster = repo.ensure_cluster(session, self.cluster_name, self.rm_urls, now_ms)
            return cluster.finished_watermark_ms

    def _persist(
        self,
        snap: ClusterSnapshot,
        watermark: int,
        now_ms: int,
        started: float,
        covered: Callable[[poll_writes.AppKey], bool] | None = None,
    ) -> PollSummary:
        with transaction(self.sessions) as session:
            cluster = repo.ensure_cluster(session, self.cluster_name, self.rm_urls, now_ms)
            queue_states = poll_writes.storable_queues(snap.queues)
            queue_ids = repo.upsert_queues(session, cluster.id, queue_states, snap.taken_ms)
            queues = repo.add_queue_samples(session, queue_ids, queue_states, snap.taken_ms)
            writes = poll_writes.plan(
                self.memory,
                cluster.id,
                snap.apps,
                snap.nodes if snap.nodes_read else None,
                snap.taken_ms,
                self.app_refresh_ms,
                covered,
            )
            apps = poll_writes.upsert_app_rows(session, writes.app_rows)
            apps += poll_writes.update_counters(session, writes.counter_rows)
            if self.memory.primed:
                poll_writes.mark_gone(session, writes.gone, snap.taken_ms)
            else:
                # Every listed app was just written: the others in the history are gone.
                poll_writes.mark_unlisted_gone(session, cluster.id, snap.taken_ms)
            poll_writes.add_cluster_sample(
                session, cluster.id, poll_writes.snapshot_totals(snap), snap.taken_ms
            )
            nodes = poll_writes.add_node_rows(session, cluster.id, writes.node_rows, snap.taken_ms)
            new_watermark, rm_url = _mark_good(cluster, snap, watermark, now_ms)
            repo.record_poll(
                session,
                PollRecord(
                    cluster_id=cluster.id,
                    started_ms=now_ms,
                    duration_ms=_elapsed_ms(started),
                    ok=True,
                    rm_url=rm_url,
                    apps_upserted=apps,
                    queues_sampled=queues,
                    nodes_sampled=nodes,
                ),
            )
        self.memory = writes.memory  # only once committed: a failed tick changes nothing
        return PollSummary(True, rm_url, apps, queues, nodes, new_watermark)

    def _record_failure(self, now_ms: int, error: str, started: float) -> None:
        with transaction(self.sessions) as session:
            cluster = repo.ensure_cluster(session, self.cluster_name, self.rm_urls, now_ms)
            cluster.last_poll_ms = now_ms
            cluster.last_error = error
            repo.record_poll(
                session,
                PollRecord(
                    cluster_id=cluster.id,
                    started_ms=now_ms,
                    duration_ms=_elapsed_ms(started),
                    ok=False,
                    rm_url=_public_url(self.source.active_url),
                    error=poll_writes.storable_text(cap_error(redact_text(error))),
                ),
            )


def follow_ranges(starts: list[int], most: int) -> list[tuple[int | None, int | None]]:
    """At most ``most`` inclusive ranges covering every instant in ``starts``, cut at the widest
    gaps, so they hold as few other apps' starts as possible."""
    points = sorted(set(starts))
    if not points:
        return []
    gaps = sorted(range(1, len(points)), key=lambda i: points[i] - points[i - 1])
    cuts = sorted(gaps[len(gaps) - (most - 1) :] if most > 1 else [])
    out: list[tuple[int | None, int | None]] = []
    begin = 0
    for cut in [*cuts, len(points)]:
        out.append((points[begin], points[cut - 1]))
        begin = cut
    return out


def rm_ranges(
    ranges: list[tuple[int | None, int | None]],
) -> list[tuple[int | None, int | None]]:
    """``ranges`` as the RM accepts them: it answers 400 to a negative bound or to a begin after
    the end. Start instants are never negative, so a range ending below 0 holds no app and is
    dropped, and a negative begin is the same as none."""
    out: list[tuple[int | None, int | None]] = []
    for begin, end in ranges:
        if end is not None and end < 0:
            continue
        if begin is not None and begin < 0:
            begin = None
        if begin is not None and end is not None and begin > end:
            continue
        out.append((begin, end))
    return out


def cap_error(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


_CLUSTERS: Table = Cluster.__table__  # type: ignore[assignment]


def _public_url(url: str | None) -> str | None:
    """An RM URL as it is stored and shown: password masked, storable."""
    length = poll_writes.length(_CLUSTERS.c.active_rm_url)  # as long as polls.rm_url
    return poll_writes.storable_text(redact_url(url), length) if url else None


def _mark_good(
    cluster: Cluster, snap: ClusterSnapshot, watermark: int, now_ms: int
) -> tuple[int, str | None]:
    """Record a good poll on ``cluster``'s row: the finished-apps watermark ``snap`` moves it to,
    the RM that answered and what it says of itself; returns the new watermark and that RM's
    public URL."""
    finished = [a.finished_ms for a in snap.apps if a.is_finished and a.finished_ms]
    new_watermark = max([watermark, *finished])
    cluster.finished_watermark_ms = new_watermark
    rm_url = _public_url(snap.rm_url)
    cluster.active_rm_url = rm_url
    cluster.rm_cluster_id = poll_writes.storable_int(
        snap.info.cluster_id, _CLUSTERS.c.rm_cluster_id
    )
    cluster.hadoop_version = poll_writes.storable_text(
        snap.info.hadoop_version, poll_writes.length(_CLUSTERS.c.hadoop_version)
    )
    cluster.last_poll_ms = now_ms
    cluster.last_good_poll_ms = now_ms
    cluster.last_error = None
    return new_watermark, rm_url


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
