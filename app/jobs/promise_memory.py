"""What Promise keeps in memory between rounds in one process, and who may touch it when.

The estimator (``app.db.promise_history.EstimatorCache``, one per parameter set) and the arrival
meter (``ArrivalMeter``) change as they are read: a refresh learns the runs observed since the
last one, an estimate is kept until a run at one of its keys is learned, an arrival read is
counted. An admission round, a reader planning the queued jobs' ETAs (``GET /jobs/{id}``) and
``GET /estimator`` run in different threads, so each reads and refreshes them under ``lock``:
two refreshes from the same mark would each learn the same runs, and an estimate kept while a
run is being learned would outlive the run that changes it.

After a restart the estimator is read from the whole history: about 13 to 18 s at 100,000
observations on this project's benchmark machine (``benchmarks/bench_estimator_refresh.py``).
The admission service brings it up to date before each round takes the admission lock
(``warm``), so a round finds only the runs learned since. Once its loop runs, it reads the whole
history only there (``warmer``): a round or a reader that finds it needed (a capacity change
that relearns, new parameters) asks for that read in a thread of its own and does not wait.
While it runs ``loading`` is set; a submission's round answers queued at once instead of holding
every other submission behind it, and the round that next plans takes those jobs as at their
first round (the reason stored on them says so, ``promise_round``: a restart or another replica
does too). Readers never wait for the lock: the ETA recorded answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.orm import Session

from app.db.promise_history import ArrivalMeter, EstimatorCache
from app.policies.promise import core
from app.policies.promise.estimator import Estimator, params_from

# How often a round waiting for the lock looks again whether a load from the whole history
# holds it (a load sets ``loading`` just after taking the lock).
_POLL_S = 0.05


class PromiseMemory:
    """The estimators and the arrival meter of one process (module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loading = False
        # Set by a service that reads the whole history in the background (``warm`` in its own
        # thread): then nobody else does, and whoever finds it needed asks this instead.
        self.warmer: Callable[[], None] | None = None
        self._caches: dict[str, EstimatorCache] = {}
        self._meters: dict[str, ArrivalMeter] = {}

    @contextmanager
    def held(self, *, unless_loading: bool = False, wait: bool = True) -> Iterator[bool]:
        """Hold ``lock``; with ``unless_loading``, give up (yield False, not holding it) as soon
        as a load from the whole history is seen to hold it; without ``wait``, unless it is free
        now."""
        while True:
            if unless_loading and self.loading:
                yield False
                return
            if self.lock.acquire(timeout=_POLL_S if wait else 0):
                break
            if not wait:
                yield False
                return
        try:
            yield True
        finally:
            self.lock.release()

    def _cache(self, session: Session, values: dict[str, Any]) -> EstimatorCache:
        key = _database(session) + repr(sorted(values.items()))
        cache = self._caches.get(key)
        if cache is None:
            cache = self._caches[key] = EstimatorCache(params_from(values))
        return cache

    def estimator(
        self, session: Session, values: dict[str, Any], cap: int, *, warming: bool = False
    ) -> Estimator | None:
        """The estimator as of the database's learned observations (the caller holds
        ``lock``); ``loading`` is set while this reads the whole history. None where that read
        is needed and a ``warmer`` does it (asked here), unless this is that warm."""
        cache = self._cache(session, values)
        whole = cache.rebuilds(cap)
        if whole and self.warmer is not None and not warming:
            self.warmer()
            return None
        self.loading = whole
        try:
            return cache.refresh(session, cap)
        finally:
            self.loading = False

    def arrivals(
        self,
        session: Session,
        est: Estimator,
        cap: int,
        now_ms: int,
        fresh: Collection[str] = (),
    ) -> core.Load:
        """Recent arrivals of deadline jobs (the caller holds ``lock``); ``fresh``: the jobs
        this round has just stored."""
        key = _database(session)
        meter = self._meters.get(key)
        if meter is None:
            meter = self._meters[key] = ArrivalMeter()
        return meter.refresh(session, est, cap, now_ms, fresh)

    def warm(self, session: Session, values: dict[str, Any], cap: int) -> float:
        """Bring the estimator up to date outside the admission lock; the seconds it took. A
        load from the whole history (a restart, or a capacity change that relearns) sets
        ``loading`` while it runs."""
        with self.held():
            started = time.monotonic()
            self.estimator(session, values, cap, warming=True)
            return time.monotonic() - started


def _database(session: Session) -> str:
    """Which database ``session`` reads: a memory kept by no service may serve several."""
    return str(session.get_bind().engine.url)


# The memory of callers that keep none of their own (tests, one-off reads, the CLI).
SHARED = PromiseMemory()
