"""Coalesced admission: concurrent submissions share batches, each gets its own answer, and a
saturated lock sheds requests instead of queueing threads without bound."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.services.admission_batch import Overloaded, SubmissionBatcher


def test_concurrent_submissions_are_coalesced_and_each_answered() -> None:
    lock = threading.Lock()
    seen: list[list[int]] = []

    def run(batch: Sequence[tuple[int, int]]) -> list[str | BaseException]:
        seen.append([item for item, _ in batch])
        return [ValueError("odd") if item == 7 else f"job-{item}" for item, _ in batch]

    batcher: SubmissionBatcher[int, str] = SubmissionBatcher(lock, run, wait_s=10)
    lock.acquire()  # a round in progress: every submission below has to wait
    with ThreadPoolExecutor(20) as pool:
        futures = [pool.submit(batcher.submit, i, 1_000 + i) for i in range(20)]
        while len(batcher._pending) < 20:
            time.sleep(0.01)
        lock.release()
        results = {i: f.exception() or f.result() for i, f in enumerate(futures)}
    # Each request got its own outcome; the failing one alone failed.
    assert isinstance(results.pop(7), ValueError)
    assert results == {i: f"job-{i}" for i in range(20) if i != 7}
    # One batch took every waiting request (not one round per request), each exactly once.
    assert len(seen) == 1 and sorted(seen[0]) == list(range(20))


def test_a_saturated_lock_sheds_the_request_and_forgets_it() -> None:
    lock = threading.Lock()
    ran: list[int] = []

    def run(batch: Sequence[tuple[int, int]]) -> list[str | BaseException]:
        ran.extend(item for item, _ in batch)
        return ["ok" for _ in batch]

    batcher: SubmissionBatcher[int, str] = SubmissionBatcher(lock, run, wait_s=0.2)
    with lock:
        started = time.monotonic()
        with pytest.raises(Overloaded):
            batcher.submit(1, 0)
        assert time.monotonic() - started < 2
    # The shed request is not stored later by someone else's batch.
    assert batcher.submit(2, 0) == "ok"
    assert ran == [2]


def test_a_failed_batch_fails_each_of_its_requests() -> None:
    lock = threading.Lock()

    def run(batch: Sequence[tuple[int, int]]) -> list[str | BaseException]:
        raise RuntimeError("database went away")

    batcher: SubmissionBatcher[int, str] = SubmissionBatcher(lock, run)
    with pytest.raises(RuntimeError, match="went away"):
        batcher.submit(1, 0)
    assert not lock.locked()
