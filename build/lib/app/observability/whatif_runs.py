"""What-if runs in the background for the dashboard: one worker thread, progress per run, the last
few results kept in memory (a run is minutes of CPU at most and is reproducible from the same
period and policy, so nothing is persisted)."""

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
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="whatif")

    def start(self, spec: whatif.WhatIfSpec) -> WhatIfRun:
        """Validate and queue; ``WhatIfError`` naming the field on bad input."""
        spec.validate()
        run = WhatIfRun(uuid.uuid4().hex, spec, int(time.time() * 1000))
        with self._lock:
            self._runs[run.id] = run
            while len(self._runs) > KEEP:
                self._runs.popitem(last=False)
        self._pool.submit(self._work, run)
        return run

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
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _progress(self, run: WhatIfRun) -> whatif.Progress:
        def update(done: int, total: int) -> None:
            run.done, run.total = done, total

        return update

    def _work(self, run: WhatIfRun) -> None:
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
