"""What-if runs in the background for the dashboard: one worker thread, progress per run, the last
few results kept in memory (a run is minutes of CPU at most and is reproducible from the same
period and policy, so nothing is persisted).

At most ``MAX_ACTIVE`` runs are queued or running at once: another ``start`` raises ``WhatIfBusy``
(the API answers 429 with ``Retry-After``) instead of growing the worker's queue. Only finished
runs are dropped to keep ``KEEP``, so every accepted run stays visible until it ends, and a run
no longer kept (after ``close``) is never replayed."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app.observability import whatif

KEEP = 20
# Runs queued or running at once (one replays, the rest wait); below KEEP, so an unfinished run is
# never dropped to make room.
MAX_ACTIVE = 4
# Seconds a refused client is told to wait before asking again (a replay takes seconds to minutes).
BUSY_RETRY_AFTER_S = 30
ACTIVE = frozenset({"queued", "running"})


class WhatIfBusy(Exception):
    """``MAX_ACTIVE`` runs are already queued or running; nothing was queued."""

    def __init__(self, active: int) -> None:
        super().__init__(
            f"whatif: {active} runs already queued or running (the most this process takes); "
            "retry once one finishes"
        )


@dataclass(slots=True)
class WhatIfRun:
    """One run's state as the API shows it."""

    id: str
    spec: whatif.WhatIfSpec
    created_ms: int
    status: str = "queued"  # queued, running, done, failed
    phase: str = "waiting"
    done: int = 0
    total: int = 0
    error: str | None = None
    finished_ms: int | None = None
    summary: dict[str, Any] | None = None
    html: str | None = field(default=None, repr=False)

    @property
    def progress(self) -> float:
        """0..1; the replay's share of processed jobs."""
        if self.status == "done":
            return 1.0
        return self.done / self.total if self.total else 0.0


class WhatIfRuns:
    """Queue what-if runs on one worker; look them up by id."""

    def __init__(
        self, sessions: sessionmaker[Session], cluster_name: str, *, plots: bool = True
    ) -> None:
        self._sessions = sessions
        self._cluster = cluster_name
        self._plots = plots
        self._runs: OrderedDict[str, WhatIfRun] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="whatif")

    def start(self, spec: whatif.WhatIfSpec) -> WhatIfRun:
        """Validate and queue; ``WhatIfError`` naming the field on bad input, ``WhatIfBusy`` when
        ``MAX_ACTIVE`` runs are already queued or running."""
        spec.validate()
        run = WhatIfRun(uuid.uuid4().hex, spec, int(time.time() * 1000))
        with self._lock:
            active = sum(1 for r in self._runs.values() if r.status in ACTIVE)
            if active >= MAX_ACTIVE:
                raise WhatIfBusy(active)
            self._runs[run.id] = run
            self._trim()
            try:
                self._pool.submit(self._work, run)
            except RuntimeError:  # closed: the run was not queued
                del self._runs[run.id]
                raise
        return run

    def _trim(self) -> None:
        """Drop the oldest finished runs beyond ``KEEP`` (the lock held); unfinished ones stay."""
        finished = [run_id for run_id, r in self._runs.items() if r.status not in ACTIVE]
        for run_id in finished[: max(len(self._runs) - KEEP, 0)]:
            del self._runs[run_id]

    def get(self, run_id: str) -> WhatIfRun | None:
        """A run by id, if still kept."""
        with self._lock:
            return self._runs.get(run_id)

    def recent(self) -> list[WhatIfRun]:
        """Newest first."""
        with self._lock:
            return list(reversed(self._runs.values()))

    def close(self) -> None:
        """Stop taking runs; queued ones are dropped, a running one finishes in its thread."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _progress(self, run: WhatIfRun) -> whatif.Progress:
        def update(done: int, total: int) -> None:
            run.done, run.total = done, total

        return update

    def _work(self, run: WhatIfRun) -> None:
        with self._lock:
            if self._closed or self._runs.get(run.id) is not run:
                return  # no longer kept: nobody could see its result
            run.status, run.phase = "running", "loading the recorded period"
        try:
            with self._sessions() as session:
                history = whatif.load_history(session, self._cluster, run.spec)
            run.phase = f"replaying {len(history.jobs)} jobs under {run.spec.policy}"
            outcome = whatif.run(history, run.spec, self._progress(run))
            run.phase = "writing the report"
            run.summary = outcome.to_dict()
            run.html = whatif.html_report(outcome, plots=self._plots)
            run.status, run.phase = "done", "done"
        except whatif.WhatIfError as exc:
            run.status, run.phase, run.error = "failed", "failed", str(exc)
        except Exception as exc:  # a simulator bug must not kill the worker; show it on the run
            run.status, run.phase, run.error = "failed", "failed", f"{type(exc).__name__}: {exc}"
        finally:
            run.finished_ms = int(time.time() * 1000)
