"""Time per decision of the queue-share policies for 200 queues: one Fawkes step (seed 000
section 4) and one LTRF / MLRF round (seed 002 section 9.4).

Run: ``.venv/bin/python benchmarks/bench_queue_policies.py [--queues N] [--repeats R]``. Inputs come
from a seeded generator, so every run times the same work. Target: well under 100 ms each.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from app.policies.fawkes import core as fawkes
from app.policies.fawkes.core import FawkesParams, FawkesState, FawkesTick, QueueSample
from app.policies.ltrf import core as ltrf


def _fawkes_case(n: int, rng: random.Random) -> Callable[[], object]:
    names = [f"root.q{i:03d}" for i in range(n)]
    params = FawkesParams(
        weighting="TD", tau=0.0, min_shares={q: 0.5 / n for q in names}, interval_s=60
    )

    def tick(t: float) -> FawkesTick:
        return FawkesTick(
            t=t,
            queues={
                q: QueueSample(
                    running_jobs=rng.randint(0, 5),
                    waiting_jobs=rng.randint(0, 10),
                    waiting_tasks=rng.randint(0, 500),
                    used_fraction=rng.random() / n,
                    slowdowns=tuple(rng.uniform(1, 5) for _ in range(3)),
                )
                for q in names
            },
        )

    # warm state (every queue admitted, discrimination accumulated), then time one more tick;
    # tau 0 forces the rebalance path (the water-fill) on every timed step
    _, state = fawkes.step(FawkesState(), tick(0), params)
    _, state = fawkes.step(state, tick(60), params)
    timed = tick(120)
    return lambda: fawkes.step(state, timed, params)


def _ltrf_case(n: int, rng: random.Random, params: ltrf.LtrfParams) -> Callable[[], object]:
    names = [f"root.q{i:03d}" for i in range(n)]
    weights = {q: rng.uniform(0.5, 4) for q in names}
    capacity = 10.0 * n
    state = ltrf.LtrfState()
    for _ in range(3):  # build a history so the levels differ
        demand = {q: rng.uniform(0, 30) for q in names}
        _, state = ltrf.round(state, demand, capacity, weights, params)
    timed = {q: rng.uniform(0, 30) for q in names}
    return lambda: ltrf.round(state, timed, capacity, weights, params)


def _measure(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(0.99 * len(samples)))]
    return statistics.median(samples), p99


def main() -> None:
    """Print one row per policy: queues, repeats, median and p99 milliseconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(20140601)
    cases = {
        "fawkes step (TD)": _fawkes_case(args.queues, rng),
        "ltrf round (delta 0.5)": _ltrf_case(args.queues, rng, ltrf.LtrfParams(discount=0.5)),
        "mlrf round": _ltrf_case(args.queues, rng, ltrf.LtrfParams(memoryless=True)),
    }
    print(f"{'decision':<24} {'queues':>6} {'runs':>5} {'median ms':>10} {'p99 ms':>8}")
    for label, fn in cases.items():
        median, p99 = _measure(fn, args.repeats)
        print(f"{label:<24} {args.queues:>6} {args.repeats:>5} {median:>10.3f} {p99:>8.3f}")


if __name__ == "__main__":
    main()
