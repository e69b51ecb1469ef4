"""Time per decision of RRF (200 tenants) and Justice ``admit`` (10,000 waiting jobs).

Run: ``.venv/bin/python benchmarks/bench_rrf_justice.py [--repeat N]``. Inputs are random but
seeded, so runs are comparable; prints median and p99 wall time per call (``time.perf_counter``).
"""

from __future__ import annotations

import argparse
import collections
import random
import statistics
import time
from collections.abc import Callable

from app.policies.justice import core as justice
from app.policies.justice.core import EstimatorState, Job, JobOutcome, RunningJob
from app.policies.rrf import core as rrf
from app.policies.rrf.core import Res, Tenant


def _tenants(n: int, rng: random.Random) -> dict[str, Tenant]:
    return {
        f"root.t{i:03d}": Tenant(
            Res(rng.uniform(100, 1000), rng.uniform(100, 1000)),
            Res(rng.uniform(0, 40), rng.uniform(0, 80_000)),
        )
        for i in range(n)
    }


def _estimator(rng: random.Random, params: justice.JusticeParams) -> EstimatorState:
    state = EstimatorState()
    for k in range(50):
        tasks = rng.randint(1, 2000)
        outcome = JobOutcome(
            f"done{k}", tasks, 600, rng.uniform(10, 600) * tasks * 0.3, tasks, True
        )
        state = justice.track_job(state, outcome, 5000, params)
    return state


def _waiting(n: int, rng: random.Random) -> list[Job]:
    return [
        Job(
            f"job{i:05d}",
            rng.choice((1, 1, 2, 8, 40, 300, 2000)),
            rng.uniform(60, 3600),
            -rng.uniform(0, 600),
        )
        for i in range(n)
    ]


def _running(n: int, rng: random.Random) -> list[RunningJob]:
    return [
        RunningJob(
            f"run{i:04d}", rng.randint(1, 3000), rng.uniform(60, 3600), -rng.uniform(0, 4000), 1
        )
        for i in range(n)
    ]


def _time(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    call()  # warm-up
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    p99 = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]
    return statistics.median(samples), p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=100, help="timed calls per row")
    args = parser.parse_args()
    rng = random.Random(20181)
    tenants = _tenants(200, rng)
    capacity = Res(4000, 8_000_000)
    params = justice.make_params("justice", {"smoothing": "ewma", "alpha": 0.3})
    state = _estimator(rng, params)
    waiting = _waiting(10_000, rng)
    running = _running(500, rng)
    rows: list[tuple[str, Callable[[], object]]] = [
        ("rrf (IRT), 200 tenants", lambda: rrf.rrf(tenants, capacity)),
        ("wmmf, 200 tenants", lambda: rrf.wmmf(tenants, capacity)),
        ("wdrf, 200 tenants", lambda: rrf.wdrf(tenants, capacity)),
        ("tshirt, 200 tenants", lambda: rrf.tshirt(tenants, capacity)),
        (
            "justice admit, 10000 waiting + 500 running",
            lambda: justice.admit(state, waiting, running, 2500, 5000, 0.0, params),
        ),
        (
            "pythia admit, 10000 waiting + 500 running",
            lambda: justice.admit(
                state, waiting, running, 2500, 5000, 0.0, justice.make_params("pythia")
            ),
        ),
    ]
    mix = collections.Counter(
        d.action for d in justice.admit(state, waiting, running, 2500, 5000, 0.0, params)
    )
    print(f"justice admit mix: {dict(sorted(mix.items()))}")
    print(f"{'decision':<45} {'median ms':>10} {'p99 ms':>10}   ({args.repeat} calls each)")
    for name, call in rows:
        median, p99 = _time(call, args.repeat)
        print(f"{name:<45} {median:>10.3f} {p99:>10.3f}")


if __name__ == "__main__":
    main()
