"""Promise's planner (``app/policies/promise/core.py``) on hand-computed rounds."""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings

import numpy as np
import pytest

from app.policies.base import PolicyError
from app.policies.promise import core
from app.policies.promise.estimator import (
    Estimate,
    Estimator,
    EstimatorParams,
    Outcome,
    rebuild,
)
from app.policies.promise.signature import Keys

K = Keys("sig", "ut", "q")
OTHER = Keys("sig2", "ut", "q")
P = core.PromiseParams()


def _taught(ratio: float, runs: int = 3, keys: Keys = K) -> Estimator:
    """An estimator whose every run had ``work = ratio * deadline * tasks`` (tasks <= capacity)."""
    est = Estimator()
    for _ in range(runs):
        est.learn(Outcome(keys, tasks=4, work=ratio * 100.0 * 4, deadline_s=100.0, max_cpus=4))
    return est


def test_waves_aligned_and_min_grant_by_hand() -> None:
    assert core.waves(10, 4) == 3 and core.waves(10, 5) == 2 and core.waves(3, 8) == 1
    assert core.aligned(10, 4) == 4  # 3 waves need ceil(10/3) = 4 containers
    assert core.aligned(10, 6) == 5  # 6 containers also take 2 waves; 5 do the same
    # 10 tasks of 10 s in 35 s: at most 3 waves, so ceil(10 / 3) = 4 containers
    assert core.min_grant(10, 10, 10.0, 35.0) == 4
    assert core.min_grant(10, 3, 10.0, 35.0) is None  # needs 4 > limit 3
    assert core.min_grant(10, 10, 10.0, 9.0) is None  # not even one wave fits
    assert core.min_grant(1, 1, 10.0, 10.0) == 1


def test_divisible_work_by_hand() -> None:
    # The fluid model: n tasks' work on g vcores takes n / g task durations, fractions included.
    assert core.waves(10, 4, True) == 2.5 and core.waves(3, 8, True) == 1.0
    assert core.aligned(10, 6, True) == 6 and core.aligned(3, 8, True) == 3
    # 10 tasks of 10 s in 35 s: 100 vcore-s / 35 s = 2.86, so 3 vcores (whole waves need 4)
    assert core.min_grant(10, 10, 10.0, 35.0, True) == 3
    assert core.min_grant(10, 10, 10.0, 50.0, True) == 2  # exactly 50 s on 2
    assert core.min_grant(10, 2, 10.0, 35.0, True) is None  # needs 3 > limit 2
    assert core.min_grant(10, 10, 10.0, 9.0, True) is None  # no grant runs a task in 9 s


DIVISIBLE = core.PromiseParams(divisible=True)


def test_divisible_work_keeps_the_waves_margin_and_prices_an_exact_grant() -> None:
    est = _taught(0.5)  # bound: 200 vcore-s for 4 tasks, 50 s per task
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # 70 s left: whole waves need one wave of 4; the work alone needs 200 / 70 = 2.86, so 3.
    (d,) = core.admit([job], [], 10, 10, 30.0, est, DIVISIBLE)
    assert (d.action, d.cpus, d.finish_s) == ("admit", 4, 80.0)  # the waves' grant fits: kept
    (d,) = core.admit([job], [], 3, 10, 30.0, est, P)
    assert d.action == "queue"  # planned in waves, 3 vcores are not enough
    (d,) = core.admit([job], [], 3, 10, 30.0, est, DIVISIBLE)
    assert (d.action, d.cpus) == ("admit", 3)  # no arrival rate: nothing to price it against
    assert d.finish_s == pytest.approx(30.0 + 200.0 / 3)
    # Priced as a try: its bound is the largest of 3 runs, which a fourth exceeds 1 time in 4;
    # a miss would waste 3 x 70 = 210 vcore-s, worth it when the arrivals' mean work exceeds
    # 0.25 x 210 / 0.75 = 70 vcore-s.
    cheap = core.Load(jobs_per_s=0.01, vcores=1.0)  # mean work 100
    (d,) = core.admit([job], [], 3, 10, 30.0, est, DIVISIBLE, cheap)
    assert (d.action, d.cpus) == ("admit", 3)
    dear = core.Load(jobs_per_s=0.01, vcores=0.5)  # mean work 50
    (d,) = core.admit([job], [], 3, 10, 30.0, est, DIVISIBLE, dear)
    assert d.action == "queue" and "4 vcores for its waves' margin" in d.reason
    assert "about 1 in 4 for a bound from 3 runs" in d.reason
    # With 19 runs the bound holds 19 times in 20: the same price is worth it at mean work 50.
    (d,) = core.admit([job], [], 3, 10, 30.0, _taught(0.5, runs=19), DIVISIBLE, dear)
    assert (d.action, d.cpus) == ("admit", 3)


def test_a_bounds_chance_follows_from_the_runs_it_was_taken_from() -> None:
    # the k = ceil(q n)-th smallest of n exchangeable runs is at least a new one k / (n + 1)
    assert core.bound_chance(3, 0.95) == pytest.approx(3 / 4)
    assert core.bound_chance(19, 0.95) == pytest.approx(19 / 20)
    assert core.bound_chance(64, 0.95) == pytest.approx(61 / 65)
    assert core.bound_chance(4, 0.5) == pytest.approx(2 / 5)
    assert core.bound_chance(0, 0.95) == pytest.approx(1 / 2)  # the bootstrap bound


def test_admits_the_smallest_wave_aligned_grant() -> None:
    est = _taught(0.5)  # bound: 0.5 * 100 s * 4 tasks = 200 vcore-s, 50 s per task
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], free=10, capacity=10, now_s=0.0, estimator=est, params=P)
    # 2 waves of 50 s meet the 100 s deadline with 2 containers; 8 stay free for arrivals
    assert (d.action, d.cpus, d.start_s, d.finish_s) == ("admit", 2, 0.0, 100.0)
    (d,) = core.admit([job], [], free=10, capacity=10, now_s=30.0, estimator=est, params=P)
    assert (d.action, d.cpus, d.finish_s) == ("admit", 4, 80.0)  # 70 s left: one wave of 4
    (d,) = core.admit([job], [], free=1, capacity=10, now_s=0.0, estimator=est, params=P)
    assert d.action == "queue" and d.latest_start_s == pytest.approx(50.0)


def test_a_job_that_would_crowd_out_more_than_one_arrival_waits() -> None:
    est = _taught(0.5)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # Arrivals need 9 vcores on average; after a grant of 2, 8 are free: 1 vcore short, so the
    # job takes 1/9 of the arrivals' demand for 100 s. At 0.05 jobs/s that is 0.56 jobs: admit.
    calm = core.Load(jobs_per_s=0.05, vcores=9.0)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, calm)
    assert d.action == "admit"
    # At 0.1 jobs/s it is 1.1 jobs: one met deadline is not worth more than one lost.
    busy = core.Load(jobs_per_s=0.1, vcores=9.0)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, busy)
    assert d.action == "queue" and "crowd out about 1.1" in d.reason
    # the number behind the hold, for the audit record and the job's ETA
    assert d.crowd_out == pytest.approx(10 / 9, rel=1e-3)
    assert d.to_dict()["crowd_out"] == d.crowd_out
    # An operator who values processed work over the count turns the rule off.
    off = core.PromiseParams(crowd_out=False)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, off, busy)
    assert d.action == "admit"


def test_arrivals_find_what_running_jobs_release_before_the_hold_ends() -> None:
    est = _taught(0.5)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    busy = core.Load(jobs_per_s=0.1, vcores=9.0)
    # 10 of 20 vcores run a job bounded to end at 20 s (one wave of 0.5 * 40 s). Arrivals are
    # 1 vcore short beside a's grant of 2 only until then: 20 s x 1/9 x 0.1 jobs/s = 0.22 jobs.
    ending = core.RunningJob("r", 10, 40.0, 0.0, 0.0, 10, K)
    (d,) = core.admit([job], [ending], 10, 20, 0.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    # Bounded to end with a's hold instead (one wave of 0.5 * 200 s): 100 s x 1/9 x 0.1 = 1.1.
    long = core.RunningJob("r", 10, 200.0, 0.0, 0.0, 10, K)
    (d,) = core.admit([job], [long], 10, 20, 0.0, est, P, busy)
    assert d.action == "queue" and "crowd out about 1.1 arriving" in d.reason


def test_arrivals_find_running_jobs_ended_at_their_central_estimate() -> None:
    est = _taught(0.5, runs=19)  # a: 2 waves of 50 s on 2 vcores, bound and centre alike
    for i in range(19):  # r's signature: 18 runs used 0.1 of their window, one 0.5
        ratio = 0.5 if i == 0 else 0.1
        est.learn(Outcome(OTHER, tasks=10, work=ratio * 2000.0, deadline_s=200.0, max_cpus=10))
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    busy = core.Load(jobs_per_s=0.1, vcores=9.0)
    # r's bound ends it at 100 s (0.5 x 200 s), its central estimate at 20 s. The arrivals a
    # crowds out are an expectation, so they find r's vcores at 20 s: 20 s x 1/9 x 0.1 jobs/s
    # = 0.22 jobs, and a is admitted. At r's bounded end it would be 1.1 jobs, and a would wait.
    r = core.RunningJob("r", 10, 200.0, 0.0, 0.0, 10, OTHER)
    (d,) = core.admit([job], [r], 10, 20, 0.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    assert core._crowded_out(busy, 10, [(20.0, 10)], 0.0, 2, 100.0, 200.0, 20) == pytest.approx(
        0.1 * 20.0 / 9.0
    )
    assert core._crowded_out(busy, 10, [(100.0, 10)], 0.0, 2, 100.0, 200.0, 20) >= 1.0


def test_slack_integrates_the_share_of_arrivals_that_cannot_wait() -> None:
    slack = core.Slack.of([30.0, 0.0, 10.0])
    # P(slack < w) is 1/3 on (0, 10], 2/3 on (10, 30], 1 above: over waits 0..20, 10/3 + 20/3
    assert slack.short_s(0.0, 20.0) == pytest.approx(10.0)
    assert slack.short_s(30.0, 50.0) == pytest.approx(20.0)  # none can wait that long
    assert slack.short_s(-5.0, 0.0) == pytest.approx(0.0)  # no wait: nobody is lost
    assert core.Slack.of([]).short_s(0.0, 20.0) == pytest.approx(20.0)


def test_arrivals_that_can_wait_for_room_are_not_crowded_out() -> None:
    est = _taught(0.5)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # As in the test above: 1 vcore short of 9 for a's 100 s hold, 0.1 jobs/s, 1.1 jobs lost
    # when no arrival can wait.
    hurried = core.Load(0.1, 9.0, core.Slack.of([0.0] * 4))
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, hurried)
    assert d.action == "queue" and "crowd out about 1.1" in d.reason
    # Half of them could wait 200 s: only an arrival whose slack is under the rest of the hold
    # is lost, half of them over the whole hold: 0.56 jobs.
    mixed = core.Load(0.1, 9.0, core.Slack.of([0.0, 0.0, 200.0, 200.0]))
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, mixed)
    assert d.action == "admit"
    # All of them could wait 60 s: lost only those arriving in the first 40 s, 0.44 jobs.
    assert core._crowded_out(
        core.Load(0.1, 9.0, core.Slack.of([60.0])), 10, [], 0.0, 2, 100.0, 200.0, 10
    ) == pytest.approx(0.1 * 40.0 / 9.0)


def _erlang_b(servers: int, offered: float) -> float:
    """Erlang's loss formula by its recursion: the share of arrivals a full system turns away."""
    b = 1.0
    for c in range(1, servers + 1):
        b = offered * b / (c + offered * b)
    return b


def _bands(hold_s: float) -> list[tuple[float, float]]:
    """Each doubling band of a hold from the round (``core._band``): its seconds within the
    hold and the time since the round at its middle, where the arrivals' system is read."""
    out, lo = [], 0.0
    while lo < hold_s:
        hi = 2.0 if lo == 0 else 2 * lo
        out.append((min(hi, hold_s) - lo, 1.0 if lo == 0 else 1.5 * lo))
        lo = hi
    return out


def test_the_arrivals_occupancy_is_the_product_form_of_their_loss_system() -> None:
    # Two arrivals (equally likely) at 0.3 jobs/s in all: one needs 1 vcore for 10 s, one 3
    # vcores for 20 s (60 vcore-s), on 7 vcores (one unit each). Their counts are Poisson of
    # means 1.5 and 3, truncated to the states that fit: m1 + 3 m2 <= 7.
    sizes = core.Sizes.of([60.0, 10.0], [3, 1])
    assert sizes.works == (10.0, 60.0) and sizes.needs == (1, 3) and sizes.smaller(60.0) == 1
    load = core.Load(0.3, 6.0, sizes=sizes)
    cdf = core._occupancy(load, sizes, 2, 1, 7)
    weight = {
        (m1, m2): 1.5**m1 / math.factorial(m1) * 3.0**m2 / math.factorial(m2)
        for m1 in range(8)
        for m2 in range(3)
        if m1 + 3 * m2 <= 7
    }
    for level in range(8):
        # an arrival of each kind is blocked when fewer vcores than it needs are free
        states = {(m1, m2): w for (m1, m2), w in weight.items() if m1 + 3 * m2 <= level}
        want = [
            sum(w for (m1, m2), w in states.items() if level - m1 - 3 * m2 < need)
            / sum(states.values())
            for need in (1, 3)
        ]
        assert core._blocked(cdf, np.array([1, 3]), level) == pytest.approx(want)
    assert list(core._blocked(cdf, np.array([1, 3]), -1)) == [1.0, 1.0]
    # one vcore arrivals alone (the first prefix) are Erlang's loss system
    alone = core._occupancy(load, sizes, 1, 1, 7)
    assert core._blocked(alone, np.array([1]), 4) == pytest.approx([_erlang_b(4, 1.5)])


def test_only_arrivals_since_the_round_occupy_the_vcores() -> None:
    # The same two arrivals (10 s and 20 s runs at 0.15 jobs/s each). Those that came before
    # the round are running jobs, which the caller counts; t seconds after it, each kind is
    # there min(d, t) x 0.15 on average. Band 2 (4 to 8 s) is read at 6 s: means 0.9 and 0.9.
    sizes = core.Sizes.of([60.0, 10.0], [3, 1])
    load = core.Load(0.3, 6.0, sizes=sizes)
    assert [core._band(t) for t in (0.0, 1.9, 2.0, 5.0, 8.0, 1000.0)] == [0, 0, 1, 2, 3, 9]
    for band, t in ((0, 1.0), (2, 6.0), (3, 12.0)):
        m1, m2 = 0.15 * min(10.0, t), 0.15 * min(20.0, t)
        weight = [0.0] * 8
        for a in range(8):
            for b in range(3):
                if a + 3 * b <= 7:
                    weight[a + 3 * b] += m1**a / math.factorial(a) * m2**b / math.factorial(b)
        cdf = core._occupancy(load, sizes, 2, 1, 7, band)
        total = sum(weight)
        assert list(cdf) == pytest.approx([w / total for w in itertools.accumulate(weight)])
    # from 20 s on every arrival's run fits in the time since the round: the steady system
    steady = core._occupancy(load, sizes, 2, 1, 7)
    assert list(core._occupancy(load, sizes, 2, 1, 7, 5)) == list(steady)


def test_arrivals_of_one_size_are_one_poisson_count_and_prefixes_extend_kept_ones() -> None:
    # Seven arrivals of three sizes (1, 3 and 8 units) on 20 units. The occupancy is built one
    # convolution per size; it must equal the product form summed state by state, whether a
    # prefix is built from nothing or extended from a shorter one kept on the load.
    works, needs = [5.0, 9.0, 12.0, 30.0, 40.0, 64.0, 80.0], [1, 3, 1, 3, 8, 1, 8]
    sizes = core.Sizes.of(works, needs)
    rate = 0.7

    def by_hand(k: int, units: int) -> list[float]:
        means: dict[int, float] = {}
        for w, n in zip(sizes.works[:k], sizes.needs[:k], strict=True):
            means[int(n)] = means.get(int(n), 0.0) + rate / len(works) * w / n
        weight = [0.0] * (units + 1)
        kinds = sorted(means)
        for counts in itertools.product(*(range(units // s + 1) for s in kinds)):
            held = sum(c * s for c, s in zip(counts, kinds, strict=True))
            if held <= units:
                weight[held] += math.prod(
                    means[s] ** c / math.factorial(c) for c, s in zip(counts, kinds, strict=True)
                )
        return list(itertools.accumulate(w / sum(weight) for w in weight))

    fresh = core.Load(rate, 1.0, sizes=sizes)
    extended = core.Load(rate, 1.0, sizes=sizes)
    for k in (2, 5, 7):  # each extends the one before
        assert list(core._occupancy(extended, sizes, k, 1, 20)) == pytest.approx(by_hand(k, 20))
    assert list(core._occupancy(fresh, sizes, 7, 1, 20)) == pytest.approx(by_hand(7, 20))
    # levels in one array give one row of blocking chances per level
    cdf = core._occupancy(fresh, sizes, 7, 1, 20)
    need = np.array([1, 3, 8])
    rows = core._blocked(cdf, need, np.array([-1, 0, 5, 20, 40]))
    for row, level in zip(rows, (-1, 0, 5, 20, 40), strict=True):
        assert list(row) == pytest.approx(list(core._blocked(cdf, need, level)))
    assert list(rows[0]) == [1.0, 1.0, 1.0] and rows[3][0] < rows[3][2] < 1.0


def test_rounding_a_need_up_to_a_whole_unit_adds_no_work() -> None:
    # One-vcore arrivals of 50 s at 0.2 jobs/s occupy 10 vcores on average. On 1,024 vcores the
    # loss system counts units of 4 (``LOSS_UNITS``), so each arrival takes a whole unit: its
    # count is scaled down to keep the occupancy at 10 vcores, not 40.
    alike = core.Sizes.of([50.0] * 9, [1] * 9)
    load = core.Load(0.2, 10.0, sizes=alike)
    unit = math.ceil(1024 / core.LOSS_UNITS)
    assert unit == 4
    cdf = core._occupancy(load, alike, 9, unit, 256)
    pmf = np.diff(cdf, prepend=0.0)
    assert float((np.arange(257) * pmf).sum()) * unit == pytest.approx(10.0, rel=1e-6)
    # counted in single vcores, the same arrivals occupy the same on average
    exact = core._occupancy(core.Load(0.2, 10.0, sizes=alike), alike, 9, 1, 1024)
    assert float((np.arange(1025) * np.diff(exact, prepend=0.0)).sum()) == pytest.approx(10.0)


def test_a_hold_is_not_credited_with_the_room_it_keeps_larger_arrivals_out_of() -> None:
    # On 7 vcores, 1-vcore arrivals of 10 s and 6-vcore ones of 200 s (30 erlangs) that hold
    # 6 of them nearly all the time. Beside a hold of 5, 2 are left: the 6-vcore ones never
    # fit, so the 1-vcore ones no longer share with them and are blocked less often than on
    # all 7. In the cluster the larger ones wait or come back; only the more often blocked
    # count.
    sizes = core.Sizes.of([10.0, 1200.0], [1, 6])
    load = core.Load(0.3, 181.5, sizes=sizes)
    cdf = core._occupancy(load, sizes, 2, 1, 7)
    need = np.array([1, 6])
    beside, alone = core._blocked(cdf, need, 2), core._blocked(cdf, need, 7)
    assert beside[0] < alone[0] and beside[1] == 1.0 > alone[1]
    # over the hold, band by band (arrivals since the round occupy): only the 6-vcore ones
    lost = 0.0
    for band, (seconds, _) in enumerate(_bands(100.0)):
        cdf = core._occupancy(load, sizes, 2, 1, 7, band)
        beside, alone = core._blocked(cdf, need, 2), core._blocked(cdf, need, 7)
        lost += 0.3 * seconds * (max(0.0, beside[0] - alone[0]) + beside[1] - alone[1]) / 2
    assert core._crowded_out(load, 7, [], 0.0, 5, 100.0, 2000.0, 7) == pytest.approx(lost)


def test_a_saturated_loss_system_stays_a_distribution() -> None:
    # Arrivals offering far more than the cluster holds (1-vcore jobs of 10^6 s and 50-vcore
    # ones of 2 * 10^5 s, 10 a second): without a cap on each count's mean its smallest terms
    # underflow and the occupancy was 0 / 0. It stays a distribution, near full: the 50-vcore
    # arrivals never find room, the 1-vcore ones nearly never.
    sizes = core.Sizes.of([1e6] * 8 + [1e7] * 8, [1] * 8 + [50] * 8)
    load = core.Load(10.0, 1e8, sizes=sizes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cdf = core._occupancy(load, sizes, 16, 1, 256)
        assert np.isfinite(cdf).all() and cdf[-1] == pytest.approx(1.0)
        for level in (200, 256):
            small, large = core._blocked(cdf, np.array([1, 50]), level)
            assert large == pytest.approx(1.0) and 0.8 < small < 1.0
        assert math.isfinite(core._crowded_out(load, 256, [], 0.0, 50, 100.0, 1e9, 256))


def test_a_hold_costs_how_much_more_often_arrivals_find_no_room() -> None:
    est = _taught(0.5)  # a: 4 tasks, central work 200 vcore-s; 2 vcores for 100 s
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # Arrivals alike: 1 vcore for 50 s, at 0.2 jobs/s on 10 vcores. Those since the round
    # occupy: t seconds after it, 0.2 x min(50, t) erlangs, 10 from 50 s on. Beside a's grant
    # they are blocked B(8, a) of the time instead of B(10, a) (Erlang): 1.8 jobs lost over
    # its 100 s, so a waits. Read as 10 erlangs from the start, it was 2.5.
    alike = core.Sizes.of([50.0] * 9, [1] * 9)
    busy = core.Load(0.2, 10.0, sizes=alike)
    lost = sum(
        0.2 * s * (_erlang_b(8, 0.2 * min(50.0, t)) - _erlang_b(10, 0.2 * min(50.0, t)))
        for s, t in _bands(100.0)
    )
    assert lost == pytest.approx(1.83, abs=0.01)
    assert core._crowded_out(busy, 10, [], 0.0, 2, 100.0, 200.0, 10) == pytest.approx(lost)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, busy)
    assert d.action == "queue" and "crowd out about 1.8" in d.reason
    # At 0.05 jobs/s (2.5 erlangs) 10 vcores or 8 hardly ever block one: a starts.
    calm = core.Load(0.05, 2.5, sizes=alike)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, calm)
    assert d.action == "admit"
    # The mean demand (10 vcores) fits beside it only with none to spare: treated as a fluid,
    # arrivals lost nothing until the spare fell below it, though they block each other at
    # random; with no size known that is still the rule.
    assert core._crowded_out(
        core.Load(0.2, 8.0), 10, [], 0.0, 2, 100.0, 200.0, 10
    ) == pytest.approx(0.0)


def test_a_hold_is_priced_on_the_arrivals_since_the_round() -> None:
    est = _taught(0.5)  # a: 2 vcores for 100 s, central work 200 vcore-s
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # Arrivals of 1 vcore for 100 s at 0.1 jobs/s: 10 erlangs once 100 s have passed. Read
    # as that steady system from the round, a's 100 s beside them cost 1.24 arrivals and a
    # waited; but those running at the round are the running jobs (none here: all 10 vcores
    # are free), and the arrivals since fill the vcores over the hold: 0.59, and a starts.
    alike = core.Load(0.1, 10.0, sizes=core.Sizes.of([100.0] * 9, [1] * 9))
    steady = 0.1 * 100.0 * (_erlang_b(8, 10.0) - _erlang_b(10, 10.0))
    since = sum(
        0.1 * s * (_erlang_b(8, 0.1 * min(100.0, t)) - _erlang_b(10, 0.1 * min(100.0, t)))
        for s, t in _bands(100.0)
    )
    assert steady == pytest.approx(1.24, abs=0.01) and since == pytest.approx(0.59, abs=0.01)
    assert core._crowded_out(alike, 10, [], 0.0, 2, 100.0, 200.0, 10) == pytest.approx(since)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, alike)
    # on 4 vcores: its bound is the largest of its runs, and 4 for 50 s turn away fewer of
    # these arrivals than 2 for 100 s ("_top_up", beyond its history)
    assert (d.action, d.cpus) == ("admit", 4)


def test_only_arrivals_smaller_than_the_held_job_are_counted() -> None:
    est = _taught(0.5)  # a's central work: 200 vcore-s
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # The same arrivals, 1 vcore each, but for 400 s: larger than a, none counts, and a starts.
    # Holding a back for them would trade one met deadline for one that takes more vcores.
    larger = core.Load(0.025, 10.0, sizes=core.Sizes.of([400.0] * 9, [1] * 9))
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, larger)
    assert d.action == "admit"
    # Nor does an arrival of a's own work (a itself, counted when it arrived): one like it
    # meets the same test when it comes.
    assert core._crowded_out(larger, 10, [], 0.0, 2, 100.0, 400.0, 10) == 0.0
    # Smaller ones count, and only they occupy the vcores left: one arrival in ten takes 1
    # vcore for 50 s (1 erlang at 0.02 jobs/s once 50 s have passed), and its loss system is
    # Erlang's alone.
    mixed = core.Load(0.2, 10.0, sizes=core.Sizes.of([50.0] + [400.0] * 9, [1] * 10))
    assert core._crowded_out(mixed, 10, [], 0.0, 2, 100.0, 200.0, 10) == pytest.approx(
        sum(
            0.2 * s * (_erlang_b(8, 0.02 * min(50.0, t)) - _erlang_b(10, 0.02 * min(50.0, t)))
            for s, t in _bands(100.0)
        )
        / 10
    )


def test_an_arrivals_need_is_its_smallest_grant_for_its_deadline() -> None:
    # 4 tasks of 20 s (central), a 5 s start-up, a 50 s deadline: 45 s leave two waves of 20 s,
    # so 2 vcores (and 2 as divisible work: 80 vcore-s in 45 s is 1.8)
    est = Estimate(upper=120.0, point=80.0, source="task_s@sig", samples=3, overhead_s=5.0)
    assert core.need_of(est, 4, 50.0, 8) == 2
    assert core.need_of(est, 4, 50.0, 8, divisible=True) == 2
    assert core.need_of(est, 4, 30.0, 8) == 4  # 25 s: one wave
    # nothing meets 20 s: its full parallelism on the cluster
    assert core.need_of(est, 4, 20.0, 8) == 4 and core.need_of(est, 4, 20.0, 3) == 3


def test_load_meter_keeps_the_sizes_of_the_last_arrivals() -> None:
    meter = core.LoadMeter(tau_s=100.0)
    meter.arrive(0.0, 10.0)
    assert meter.load(0.0).sizes is None  # no need known: the share of their mean demand
    for i in range(core.SLACK_WINDOW + 3):
        meter.arrive(float(i), float(i), need=i % 5 + 1)
    sizes = meter.load(100.0).sizes
    assert sizes is not None and sizes.works == tuple(float(i) for i in range(3, 67))
    assert sizes.needs == tuple(i % 5 + 1 for i in range(3, 67))  # each with its work


def test_load_meter_keeps_the_slack_of_the_last_arrivals() -> None:
    meter = core.LoadMeter(tau_s=100.0)
    meter.arrive(0.0, 10.0)
    assert meter.load(0.0).slack is None  # nothing known: every arrival counts as hurried
    for i in range(core.SLACK_WINDOW + 3):
        meter.arrive(float(i), 10.0, float(i))
    slack = meter.load(100.0).slack
    assert slack is not None and slack.values == tuple(float(i) for i in range(3, 67))
    # 4 tasks of 20 s (central), a 5 s start-up: on 8 vcores one wave, 25 s of a 50 s window;
    # on 2 vcores two waves, 45 s; on 1 four, 85 s: it cannot wait at all
    est = Estimate(upper=120.0, point=80.0, source="task_s@sig", samples=3, overhead_s=5.0)
    assert core.slack_of(est, 4, 50.0, 8) == pytest.approx(25.0)
    assert core.slack_of(est, 4, 50.0, 2) == pytest.approx(5.0)
    assert core.slack_of(est, 4, 50.0, 1) == 0.0


def test_load_meter_decays_with_its_time_constant() -> None:
    meter = core.LoadMeter(tau_s=100.0)
    meter.arrive(-5000.0, 0.0)  # watched for fifty time constants: nothing left to correct
    meter.arrive(0.0, 500.0)
    meter.arrive(0.0, 500.0)
    now = meter.load(0.0)
    assert now.jobs_per_s == pytest.approx(0.02) and now.vcores == pytest.approx(10.0)
    later = meter.load(100.0)
    assert later.jobs_per_s == pytest.approx(0.02 / math.e)


def test_load_meter_reads_the_rate_over_the_time_it_has_watched() -> None:
    steady = core.LoadMeter(tau_s=3600.0)
    for i in range(100):  # one job every 10 s from 0 to 990 s, 30 vcore-s each
        steady.arrive(10.0 * i, 30.0)
    load = steady.load(1000.0)
    # The decayed sums alone say 1 - exp(-1000 / 3600) = 0.24 of the rate: 0.024 jobs/s.
    assert load.jobs_per_s == pytest.approx(0.1, rel=0.03)
    assert load.vcores == pytest.approx(3.0, rel=0.03)  # 0.1 jobs/s of 30 vcore-s
    # Four arrivals in four seconds are not a rate of one a second: the correction comes in
    # with the arrivals counted, 4 of the 64 it needs in full.
    early = core.LoadMeter(tau_s=3600.0)
    for t in range(4):
        early.arrive(float(t), 30.0)
    decayed = sum(math.exp(-(4.0 - t) / 3600.0) for t in range(4)) / 3600.0
    share = 1.0 / (1.0 + (1.0 / -math.expm1(-4.0 / 3600.0) - 1.0) * 4 / core.SLACK_WINDOW)
    assert early.load(4.0).jobs_per_s == pytest.approx(decayed / share)
    assert early.load(4.0).jobs_per_s < 0.1
    # Counted late (an arrival older than the first one counted), the watch starts earlier.
    late = core.LoadMeter(tau_s=3600.0)
    late.arrive(500.0, 30.0)
    late.arrive(0.0, 30.0)
    assert late.watched() == pytest.approx(
        1.0 / (1.0 + (1.0 / -math.expm1(-500.0 / 3600.0) - 1.0) * 2 / core.SLACK_WINDOW)
    )


def test_a_job_that_cannot_finish_on_the_whole_cluster_is_dropped_with_its_earliest_finish() -> (
    None
):
    est = _taught(1.0)  # bound: the whole deadline at full parallelism
    job = core.WaitingJob("late", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], free=10, capacity=10, now_s=20.0, estimator=est, params=P)
    assert d.action == "drop" and d.earliest_finish_s == pytest.approx(120.0)
    # times in the reason are relative to the round (live, absolute ones are epoch seconds)
    assert d.reason.startswith(
        "cannot finish by its deadline now+80.0s: at best 4 vcores from now+0.0s finish at "
        "now+100.0s"
    )


def test_a_job_that_fits_once_running_jobs_end_waits_with_an_eta() -> None:
    est = _taught(0.5)
    running = core.RunningJob("r", 4, 100.0, 0.0, started_s=0.0, cpus=4, keys=K)  # ends by 50
    job = core.WaitingJob("w", tasks=4, deadline_s=200.0, submitted_s=10.0, keys=K)
    decisions = core.admit(
        [job], [running], free=0, capacity=4, now_s=10.0, estimator=est, params=P
    )
    (d,) = decisions
    # bound 0.5 * 200 * 4 = 400 vcore-s, 100 s per task; from 50 s, 1 wave of 4 ends at 150
    assert d.action == "queue" and d.start_s == pytest.approx(50.0)
    assert d.finish_s == pytest.approx(150.0) and d.waits_for is not None


def test_smaller_jobs_are_offered_capacity_first() -> None:
    est = _taught(0.5, keys=K)
    big = core.WaitingJob("big", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    small = core.WaitingJob("small", tasks=1, deadline_s=100.0, submitted_s=5.0, keys=K)
    out = {d.job_id: d for d in core.admit([big, small], [], 2, 10, 5.0, est, P)}
    # small: bound 0.5 * 100 * 1 = 50 -> 1 container; big needs 2 of the 1 left -> waits
    assert out["small"].action == "admit" and out["small"].cpus == 1
    assert out["big"].action == "queue"


def test_the_job_with_least_slack_is_offered_capacity_first() -> None:
    # 19 runs each: enough for each signature's own 0.95 quantile of ratios
    est = _taught(0.9, runs=19, keys=K)
    for _ in range(19):
        est.learn(Outcome(OTHER, tasks=4, work=0.1 * 100.0 * 4, deadline_s=100.0, max_cpus=4))
    # tight: bound 0.9 * 50 * 2 = 90 -> 45 s a task; only one wave fits its 50 s: 2 containers,
    # latest start 5. loose: its own runs took 10 s a task, which task seconds predicted
    # exactly (the ratios of its first runs came from K's): one container, latest start 390.
    tight = core.WaitingJob("tight", tasks=2, deadline_s=50.0, submitted_s=0.0, keys=K)
    loose = core.WaitingJob("loose", tasks=1, deadline_s=400.0, submitted_s=0.0, keys=OTHER)
    out = {d.job_id: d for d in core.admit([loose, tight], [], 2, 10, 0.0, est, P)}
    # Both cannot hold the 2 free vcores; the loose one can wait, the tight one cannot.
    assert (out["tight"].action, out["tight"].cpus) == ("admit", 2)
    assert out["loose"].action == "queue" and out["loose"].latest_start_s == pytest.approx(390)


def test_late_jobs_are_killed_unless_small_and_still_teaching_their_signature() -> None:
    est = _taught(0.5, keys=K)  # K has 3 runs: nothing more to learn
    late = core.RunningJob("late", 4, 100.0, 0.0, started_s=0.0, cpus=2, keys=K)
    new = core.RunningJob("new", 1, 100.0, 0.0, started_s=0.0, cpus=1, keys=OTHER)
    out = {d.job_id: d for d in core.admit([], [late, new], 0, 10, 150.0, est, P)}
    assert out["late"].action == "kill" and out["late"].cpus == 2
    assert out["new"].action == "keep"  # OTHER has no runs yet and holds 1 vcore


def test_a_job_whose_first_wave_shows_it_will_miss_is_killed_before_its_deadline() -> None:
    est = _taught(0.5, keys=K)  # bound: 4 tasks x 50 s of work; K has nothing more to learn
    # 4 tasks on 2 vcores: 2 waves. Its first tasks have run 60 s without ending at t = 60, so
    # the second wave ends at 120 s at the earliest, after its deadline at 100 s.
    slow = core.RunningJob("slow", 4, 100.0, 0.0, 0.0, 2, K, task_floor_s=60.0)
    # 40 s so far: 2 x 40 = 80 s <= 100 s, it may still make it
    ok = core.RunningJob("ok", 4, 100.0, 0.0, 0.0, 2, K, task_floor_s=40.0)
    # a one-task job of a signature still learning runs on, as a late one would
    small = core.RunningJob("small", 1, 50.0, 0.0, 0.0, 1, OTHER, task_floor_s=60.0)
    out = {d.job_id: d for d in core.admit([], [slow, ok, small], 5, 10, 60.0, est, P)}
    assert out["slow"].action == "kill" and out["slow"].cpus == 2
    assert "first tasks ran 60s" in out["slow"].reason and "2 waves" in out["slow"].reason
    assert "ok" not in out
    assert out["small"].action == "keep"
    # the verdict comes at start + (deadline - start) / waves: 50 s for both 2-wave jobs
    assert core.first_wave_verdict_s(slow) == pytest.approx(50.0)


def test_a_running_job_slower_than_its_bound_frees_its_vcores_later_in_the_eta() -> None:
    est = _taught(0.5, keys=K)
    # 8 tasks on the whole 4-vcore cluster, 2 waves; its bound is 25 s a task (ratio 0.5 of a
    # 100 s deadline on 4 vcores), so it would free them at 50 s. Its first wave took 40 s:
    # 2 x 40 = 80 s still meets the deadline, and the vcores free up at 80 s, not 50 s.
    r = core.RunningJob("r", 8, 100.0, 0.0, 0.0, 4, K, task_floor_s=40.0)
    waiting = core.WaitingJob("w", 4, 300.0, 45.0, K)
    out = {d.job_id: d for d in core.admit([waiting], [r], 0, 4, 45.0, est, P)}
    assert "r" not in out
    assert out["w"].action == "queue" and out["w"].start_s == pytest.approx(80.0)
    unseen = dataclasses.replace(r, task_floor_s=0.0)
    assert core.admit([waiting], [unseen], 0, 4, 45.0, est, P)[0].start_s == pytest.approx(50.0)


def test_am_containers_are_booked_and_floor_counts_them() -> None:
    est = _taught(1.0)
    params = core.PromiseParams(am_containers=1)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # 4 tasks need all 4 containers for the 100 s window, plus 1 AM: 4 free is not enough
    (d,) = core.admit([job], [], free=4, capacity=10, now_s=0.0, estimator=est, params=params)
    assert d.action == "queue"
    (d,) = core.admit([job], [], free=5, capacity=10, now_s=0.0, estimator=est, params=params)
    assert d.action == "admit" and d.cpus == 4
    running = [
        core.RunningJob("a", 4, 100.0, 0.0, 0.0, 4, K),
        core.RunningJob("b", 1, 9, 0, 0, 1, K),
    ]
    assert core.booked_floor(running, params) == 7


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(PolicyError, match="capacity"):
        core.admit([], [], 0, 0, 0.0, Estimator(), P)
    with pytest.raises(PolicyError, match="quantile"):
        core.make_params({"quantile": 0.2})


def test_start_up_is_planned_before_the_first_task() -> None:
    est = _taught(0.5)  # work bound: half of deadline x tasks
    for _ in range(3):  # three runs of this job took 20 s from admission to their first task
        est.learn(Outcome(K, tasks=4, work=200.0, deadline_s=100.0, max_cpus=4, overhead_s=20.0))
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], free=10, capacity=10, now_s=0.0, estimator=est, params=P)
    # 50 s per task; 100 s less 20 s of start-up leave 80 s: one wave, on 4 containers (without
    # the start-up 2 containers and 2 waves would have ended exactly at the deadline)
    assert (d.action, d.cpus, d.start_s, d.finish_s) == ("admit", 4, 0.0, 70.0)
    tight = core.WaitingJob("b", tasks=4, deadline_s=30.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([tight], [], free=10, capacity=10, now_s=0.0, estimator=est, params=P)
    # 15 s per task would fit 30 s; after 20 s of start-up the best finish is 35 s
    assert d.action == "drop" and d.earliest_finish_s == pytest.approx(35.0)
    # a running job's end is its start, its start-up and its waves: 0 + 20 + 50 s
    running = core.RunningJob("r", 4, 100.0, 0.0, 0.0, 4, K)
    late = core.WaitingJob("c", tasks=4, deadline_s=200.0, submitted_s=10.0, keys=K)
    (d,) = core.admit([late], [running], free=0, capacity=4, now_s=10.0, estimator=est, params=P)
    # it starts when those 4 vcores free at 70 s and ends after its own start-up and one wave
    assert (d.action, d.start_s, d.finish_s) == ("queue", 70.0, 190.0)


def test_a_new_sidecar_plans_the_start_up_prior_before_it_knows_any() -> None:
    # 3 tasks whose bound is 8.95 s each and a 30 s deadline: 3 waves on one container end at
    # 26.85 s if tasks start at admission; with the 10 s start-up prior 2 waves fit, on 2
    runs = [Outcome(K, tasks=3, work=26.85, deadline_s=30.0, max_cpus=3) for _ in range(3)]
    job = core.WaitingJob("a", tasks=3, deadline_s=30.0, submitted_s=0.0, keys=K)
    grants = {}
    for prior in (0.0, 10.0):
        est = rebuild(runs, EstimatorParams(startup_s=prior))
        (d,) = core.admit([job], [], free=8, capacity=8, now_s=0.0, estimator=est, params=P)
        grants[prior] = (d.action, d.cpus, round(d.finish_s or 0, 2))
    assert grants == {0.0: ("admit", 1, 26.85), 10.0: ("admit", 2, 27.9)}
    # with no history at all a job is still admitted at full parallelism, due at its deadline
    est = Estimator(EstimatorParams(startup_s=10.0))
    (d,) = core.admit([job], [], free=8, capacity=8, now_s=0.0, estimator=est, params=P)
    assert (d.action, d.cpus, d.finish_s, d.source) == ("admit", 3, 30.0, "bootstrap")


def _one_task_runs(*works: float) -> Estimator:
    est = Estimator()
    for w in works:
        est.learn(Outcome(K, tasks=1, work=w, deadline_s=None, max_cpus=1))
    return est


def test_a_one_task_job_whose_central_estimate_fits_is_tried_when_a_vcore_is_free() -> None:
    # task seconds 10, 11, 12, 13, 20: bound (0.95, nearest rank) 20, central value 12
    est = _one_task_runs(10, 11, 12, 13, 20)
    job = core.WaitingJob("one", tasks=1, deadline_s=15.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], free=4, capacity=4, now_s=0.0, estimator=est, params=P)
    assert (d.action, d.cpus, d.finish_s, d.work_bound) == ("admit", 1, 12.0, 20.0)
    assert d.reason.startswith("tried on 1 vcores")
    # no vcore free: it waits while its central estimate can still finish in time
    (d,) = core.admit([job], [], free=0, capacity=4, now_s=0.0, estimator=est, params=P)
    assert d.action == "queue" and d.latest_start_s == pytest.approx(3.0)
    # past that, the honest answer: dropped with the earliest finish its bound allows
    (d,) = core.admit([job], [], free=4, capacity=4, now_s=4.0, estimator=est, params=P)
    assert d.action == "drop" and d.earliest_finish_s == pytest.approx(24.0)


def test_without_an_arrival_rate_only_one_task_jobs_are_tried_after_promised_jobs() -> None:
    est = _one_task_runs(10, 11, 12, 13, 20)
    promised = core.WaitingJob("promised", tasks=1, deadline_s=30.0, submitted_s=0.0, keys=K)
    tried = core.WaitingJob("tried", tasks=1, deadline_s=15.0, submitted_s=0.0, keys=K)
    two = core.WaitingJob("two", tasks=2, deadline_s=30.0, submitted_s=0.0, keys=K)
    out = {d.job_id: d for d in core.admit([tried, promised], [], 1, 4, 0.0, est, P)}
    assert (out["promised"].action, out["tried"].action) == ("admit", "queue")
    # two tasks: 2 x 12 s on one vcore would fit 30 s, but only whole one-vcore jobs are tried
    (d,) = core.admit([two], [], free=4, capacity=4, now_s=0.0, estimator=est, params=P)
    assert d.action == "admit" and d.cpus == 2  # its bound fits on 2: promised, not tried
    (d,) = core.admit([two], [], free=4, capacity=4, now_s=12.0, estimator=est, params=P)
    assert d.action == "drop"  # bound misses; central 12 s on 2 would fit, but it is not tried
    # learn_cpus 0 turns trying off
    off = core.PromiseParams(learn_cpus=0)
    (d,) = core.admit([tried], [], free=4, capacity=4, now_s=0.0, estimator=est, params=off)
    assert d.action == "drop"


def _four_task_runs(*task_s: float) -> Estimator:
    est = Estimator()
    for t in task_s:
        est.learn(Outcome(K, tasks=4, work=4 * t, deadline_s=None, max_cpus=4))
    return est


def test_a_larger_job_is_tried_when_its_chance_is_worth_what_a_miss_would_waste() -> None:
    # works 40, 44, 48, 52, 80: bound one 20 s wave on 4 vcores misses a 15 s deadline; four of
    # five runs (p = 0.8) fit in one 15 s wave. A miss wastes 4 vcores x 15 s = 60.
    est = _four_task_runs(10, 11, 12, 13, 20)
    job = core.WaitingJob("big", tasks=4, deadline_s=15.0, submitted_s=0.0, keys=K)
    busy = core.Load(jobs_per_s=0.01, vcores=1.0)  # mean work 100 > 0.2 x 60 / 0.8 = 15
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=busy)
    assert (d.action, d.cpus) == ("admit", 4)
    assert "80% of its history fits" in d.reason and d.finish_s == pytest.approx(12.0)
    # arrivals whose mean work is 10: a miss would waste six of them, not worth a 0.8 chance,
    # and more capacity cannot raise it: refused at once
    small = core.Load(jobs_per_s=0.1, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=small)
    assert d.action == "drop"
    # the price is the operator's: ten times dearer waste, and the same chance is not enough
    dear = core.PromiseParams(waste_price=10.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, dear, load=busy)
    assert d.action == "drop"
    # with 2 vcores free no run of its history fits two waves in 15 s: it waits for 4
    (d,) = core.admit([job], [], 2, 8, 0.0, est, P, load=busy)
    assert d.action == "queue" and d.latest_start_s == pytest.approx(5.0)
    # once even its smallest run (40 in one wave: start by 5 s) cannot finish: dropped
    (d,) = core.admit([job], [], 8, 8, 6.0, est, P, load=busy)
    assert d.action == "drop"


def test_a_job_that_only_early_ends_could_save_is_tried_on_even_odds_or_better() -> None:
    # task seconds 10, 11, 12, 13, 20: bound 20 s a task, central 12 s. The 4-task job fits the
    # 8-vcore cluster in one 20 s wave by its 30 s deadline, but 6 vcores are held by a 6-task
    # job of the same history and only 2 are free: it must start on 4 by 10 s.
    est = _four_task_runs(10, 11, 12, 13, 20)
    busy = core.Load(jobs_per_s=0.01, vcores=1.0)
    job = core.WaitingJob("w", tasks=4, deadline_s=30.0, submitted_s=0.0, keys=K)
    # the running job started 5 s ago: its central end (7 s) would leave a start, its bounded
    # end (15 s) would not; the job waits for the running job to end early
    early = core.RunningJob("r", 6, 100.0, -5.0, -5.0, 6, K)
    (d,) = core.admit([job], [early], 2, 8, 0.0, est, P, load=busy)
    assert d.action == "queue" and "running jobs to end before their bounds" in d.reason
    # started now, even its central end (12 s) is too late: waiting is a poor bet, and on the 2
    # free vcores (two waves) four of five runs fit 30 s
    now = core.RunningJob("r", 6, 100.0, 0.0, 0.0, 6, K)
    (d,) = core.admit([job], [now], 2, 8, 0.0, est, P, load=busy)
    assert (d.action, d.cpus) == ("admit", 2) and "80% of its history fits" in d.reason
    assert d.reason.startswith("tried on 2 vcores (running jobs end too late;")
    assert d.finish_s == pytest.approx(24.0)  # two central 12 s waves
    # by a 22 s deadline two of five fit two waves: worse than even odds, so it waits
    tight = dataclasses.replace(job, deadline_s=22.0)
    (d,) = core.admit([tight], [now], 2, 8, 0.0, est, P, load=busy)
    assert (
        d.action == "queue"
        and d.waits_for == "vcores free enough to try it (running jobs end too late)"
    )
    assert d.latest_start_s == pytest.approx(12.0)  # its fastest run: one 10 s wave on 4


def test_a_try_gets_the_smallest_grant_that_keeps_its_chance() -> None:
    # task seconds 5, 6, 7, 8, 20: the bound (one 20 s wave) misses a 19 s deadline; on 4
    # vcores four of five runs fit, and the largest of those (8 s tasks) fits two waves on 2
    est = _four_task_runs(5, 6, 7, 8, 20)
    job = core.WaitingJob("mid", tasks=4, deadline_s=19.0, submitted_s=0.0, keys=K)
    busy = core.Load(jobs_per_s=0.01, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=busy)
    assert (d.action, d.cpus) == ("admit", 2) and d.reason.startswith("tried on 2 vcores")
    assert "80% of its history fits" in d.reason


def test_a_try_of_several_waves_is_priced_at_its_first_waves_verdict() -> None:
    # The same history and deadline: tried on 2 vcores (two waves, 80 % of its history fits).
    # A miss shows in its first wave, whose tasks run past 19 / 2 s; the kill rule ends it
    # there, so it wastes 2 vcores x 9.5 s = 19, not its grant until the deadline (38).
    est = _four_task_runs(5, 6, 7, 8, 20)
    job = core.WaitingJob("mid", tasks=4, deadline_s=19.0, submitted_s=0.0, keys=K)
    # arrivals' mean work 6: 0.8 x 6 = 4.8 beats 0.2 x 19 = 3.8 (though not 0.2 x 38 = 7.6)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=core.Load(jobs_per_s=0.5, vcores=3.0))
    assert (d.action, d.cpus) == ("admit", 2) and d.reason.startswith("tried on 2 vcores")
    run = core.RunningJob("mid", 4, 19.0, 0.0, 0.0, 2, K)
    assert core.first_wave_verdict_s(run) == pytest.approx(9.5)
    # mean work 4: 3.2 does not beat 3.8, and no grant raises its chance: refused
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=core.Load(jobs_per_s=0.5, vcores=2.0))
    assert d.action == "drop"
    # a job whose first wave is not timed (live: a run without task_containers) is killed only
    # at its deadline: its miss burns the whole 38, and at mean work 6 it is not worth it
    untimed = dataclasses.replace(job, timed=False)
    load = core.Load(jobs_per_s=0.5, vcores=3.0)
    (d,) = core.admit([untimed], [], 8, 8, 0.0, est, P, load=load)
    assert d.action == "drop"


def test_a_small_job_of_an_unknown_signature_is_explored_when_others_history_refuses_it() -> None:
    # Three runs of another signature each needed 1.3 x (deadline x tasks): the only history
    # a new signature can borrow (the cluster's ratios) says no job can meet its deadline.
    est = _taught(1.3, keys=OTHER)
    new = Keys("new", "someone", "elsewhere")
    one = core.WaitingJob("one", tasks=1, deadline_s=60.0, submitted_s=0.0, keys=new)
    two = core.WaitingJob("two", tasks=2, deadline_s=60.0, submitted_s=0.0, keys=new)
    out = {d.job_id: d for d in core.admit([one, two], [], 4, 4, 0.0, est, P)}
    # refusing it would refuse every new signature for good: nothing would run to teach them
    assert (out["one"].action, out["one"].cpus) == ("admit", 1)
    assert out["one"].reason.startswith("explored on 1 vcores")
    assert out["one"].finish_s == pytest.approx(78.0)  # its central estimate: 1.3 x 60 s
    assert out["two"].action == "drop"  # larger than learn_cpus: its bound decides
    busy = core.Load(jobs_per_s=0.01, vcores=1.0)
    (d,) = core.admit([one], [], 4, 4, 0.0, est, P, load=busy)
    assert d.action == "admit"  # with an arrival rate too (no chance of its own to price)
    # only at its first round: with no vcore free then, it gets its bound's answer at once
    (d,) = core.admit([one], [], 0, 4, 0.0, est, P)
    assert d.action == "drop" and d.reason.startswith("cannot finish by its deadline")
    assert d.earliest_finish_s == pytest.approx(78.0)
    # after a wait it has less than its deadline, and what it borrows already says it misses:
    # not started to run late (the kill rule would keep it, small and still learning)
    (d,) = core.admit([one], [], 4, 4, 5.0, est, P)
    assert d.action == "drop"
    # the live sidecar's first round comes a moment after the submission
    live = dataclasses.replace(one, first_round=True)
    (d,) = core.admit([live], [], 4, 4, 2.0, est, P)
    assert (d.action, d.cpus) == ("admit", 1) and d.reason.startswith("explored on 1 vcores")
    # once its signature has the runs the estimator needs, its own history decides
    for _ in range(3):
        est.learn(Outcome(new, tasks=1, work=78.0, deadline_s=60.0, max_cpus=1))
    (d,) = core.admit([one], [], 4, 4, 0.0, est, P)
    assert d.action == "drop"
    # learn_cpus 0 turns exploring off, as it does trying
    off = core.PromiseParams(learn_cpus=0)
    (d,) = core.admit([one], [], 4, 4, 0.0, _taught(1.3, keys=OTHER), off)
    assert d.action == "drop"


def test_a_promised_job_gets_idle_vcores_where_its_history_has_longer_runs() -> None:
    # 19 runs of 10 s tasks and one of 20 s: the bound (0.95, nearest rank of 20) is 10 s, so
    # 2 vcores (two waves) meet a 25 s deadline, and 19 of the 20 runs fit them; on 4 (one
    # wave) all 20 do. The larger grant costs no work, only vcores for a shorter time.
    est = _four_task_runs(*([10.0] * 19), 20.0)
    job = core.WaitingJob("a", tasks=4, deadline_s=25.0, submitted_s=0.0, keys=K)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P)
    assert (d.action, d.cpus) == ("admit", 2)  # no arrival rate: nothing prices a top-up
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, core.LoadMeter().load(0.0))
    assert (d.action, d.cpus) == ("admit", 2)  # nor a meter that has seen no arrival
    calm = core.Load(jobs_per_s=0.001, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, calm)
    assert (d.action, d.cpus, d.finish_s) == ("admit", 4, 10.0)
    assert d.reason.endswith(
        "2 more than its bound needs (20 of its 20 history runs fit it, 19 fit 2)"
    )
    # arrivals needing 3 vcores at 0.05 a second: on 4 of 6 free, a third of them find no
    # room for its 10 s, 0.17 jobs lost against a chance 1/21 higher
    busy = core.Load(jobs_per_s=0.05, vcores=3.0)
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    # a history with no run above the bound gives it nothing more
    (d,) = core.admit([job], [], 8, 8, 0.0, _four_task_runs(*([10.0] * 20)), P, calm)
    assert (d.action, d.cpus) == ("admit", 2)


def test_a_bound_from_few_runs_takes_idle_vcores_no_arrival_needs() -> None:
    # 5 runs of 10 s tasks: fewer than the 19 a 0.95 quantile needs, so the bound is their
    # largest, 10 s, which a sixth run exceeds one time in six. 2 vcores (two waves) meet a 25 s
    # deadline and every run fits them, as every run fits 4 (one wave), but a run longer than
    # all five has 12.5 s a task on 2 and 25 s on 4: where no arrival, of any size, is expected
    # to be turned away by the other 2, the job takes them.
    est = _four_task_runs(*([10.0] * 5))
    job = core.WaitingJob("a", tasks=4, deadline_s=25.0, submitted_s=0.0, keys=K)
    calm = core.Load(jobs_per_s=0.001, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, calm)
    assert (d.action, d.cpus, d.finish_s) == ("admit", 4, 10.0)
    assert d.reason.endswith(
        "2 more than its bound needs (its bound is the largest of its 5 runs, and no arrival is "
        "expected to need the rest)"
    )
    # arrivals needing 3 vcores at 0.05 a second find 2 of 6 free beside 4, 4 beside 2: it
    # keeps the 2 its bound needs
    busy = core.Load(jobs_per_s=0.05, vcores=3.0)
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    # none without an arrival rate, as for any top-up
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P)
    assert (d.action, d.cpus) == ("admit", 2)
    # 20 runs make the bound a 0.95 quantile (the 19th): nothing beyond its history is priced
    (d,) = core.admit([job], [], 8, 8, 0.0, _four_task_runs(*([10.0] * 20)), P, calm)
    assert (d.action, d.cpus) == ("admit", 2)


def test_no_top_up_while_a_waiting_job_counts_on_the_free_vcores() -> None:
    est = _four_task_runs(*([10.0] * 19), 20.0)
    calm = core.Load(jobs_per_s=0.001, vcores=1.0)
    job = core.WaitingJob("a", tasks=4, deadline_s=25.0, submitted_s=0.0, keys=K)
    # 4 of 10 vcores are held until 10 s; "big" (16 tasks by 35 s) needs 8 vcores from then
    running = core.RunningJob("r", 4, 100.0, 0.0, 0.0, 4, K)
    big = core.WaitingJob("big", tasks=16, deadline_s=35.0, submitted_s=0.0, keys=K)
    out = {d.job_id: d for d in core.admit([job, big], [running], 6, 10, 0.0, est, P, calm)}
    assert (out["a"].action, out["a"].cpus) == ("admit", 2)
    assert (out["big"].action, out["big"].start_s) == ("queue", 10.0)
    (d,) = core.admit([job], [running], 6, 10, 0.0, est, P, calm)
    assert (d.action, d.cpus) == ("admit", 4)


def _jockey_runs() -> Estimator:
    """60 runs of 2 tasks: 9, 10 or 11 s a task, deadlines of 1.11 or 2.22 times the run
    (ratios 0.9 and 0.45): the tighter of both bounds bounds the signature."""
    est = Estimator()
    for i in range(60):
        task_s, ratio = (9.0, 10.0, 11.0)[i % 3], (0.9, 0.45)[i % 2]
        est.learn(Outcome(K, tasks=2, work=2 * task_s, deadline_s=task_s / ratio, max_cpus=2))
    return est


def test_a_try_on_the_tighter_bound_takes_the_odds_of_the_less_hopeful_predictor() -> None:
    # 60 runs of 2 tasks: 9, 10 or 11 s a task, deadlines of 1.11 or 2.22 times the run
    # (ratios 0.9 and 0.45: tight runs due 10 to 12.2 s, loose ones 20 to 24.4 s). A job due
    # 15 s after its submission falls between them: the runs due nearest it are of both kinds,
    # so its ratios bound it at 0.9 x 15 s x 2 = 27, and the tighter of both bounds (each at
    # the 0.975 quantile) is the task seconds', 22. At 5 s only 10 s are left, 20 on 2 vcores,
    # and the bound misses.
    est = _jockey_runs()
    job = core.WaitingJob("j", tasks=2, deadline_s=15.0, submitted_s=0.0, keys=K)
    assert est.estimate(K, 2, 15.0, 2).upper == pytest.approx(22.0)
    # Its task seconds alone fit 20 in 40 of 60 runs; its ratios near 15 s predict 13.5 or 27.
    # The try is priced on the larger of both predictions at each rank: 28 of 60 fit. A miss
    # wastes 20 vcore-seconds, so it is worth its chance where an arrival's mean work is above
    # 20 x 32 / 28 = 22.9, not merely above 20 x 20 / 40 = 10.
    hopeful = est.works(K, 2, 15.0, 2)
    assert sum(w <= 20.0 for w in hopeful) / len(hopeful) == pytest.approx(2 / 3)
    cautious = est.works(K, 2, 15.0, 2, cautious=True)
    assert sum(w <= 20.0 for w in cautious) / len(cautious) == pytest.approx(28 / 60)
    mean_20 = core.Load(jobs_per_s=0.05, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 5.0, est, P, load=mean_20)
    assert d.action == "drop"
    mean_25 = core.Load(jobs_per_s=0.04, vcores=1.0)
    (d,) = core.admit([job], [], 8, 8, 5.0, est, P, load=mean_25)
    assert (d.action, d.cpus) == ("admit", 2) and "47% of its history fits" in d.reason


def test_a_job_waiting_for_its_promise_is_never_queued_past_its_latest_start() -> None:
    # Due in 8 s, the job is bounded by its ratios (0.9 x 8 s x 2 = 14.4: 7.2 s on its 2
    # vcores, so it must start by 0.8 s), while its task seconds never predict less than 18.
    # A try's latest start by the less hopeful predictor is already past (8 - 18 / 2 = -1 s),
    # but its promise may still be kept until 0.8 s: queued behind a running job that ends too
    # late even at its central estimate, it waits until then. A latest start in the past
    # would ask for a round at once, again and again, and never drop it.
    est = _jockey_runs()
    job = core.WaitingJob("j", tasks=2, deadline_s=8.0, submitted_s=0.0, keys=K)
    assert est.estimate(K, 2, 8.0, 2).upper == pytest.approx(14.4)
    assert est.works(K, 2, 8.0, 2, cautious=True)[0] == pytest.approx(18.0)
    running = core.RunningJob("r", 2, 100.0, 0.0, 0.0, 2, OTHER)
    load = core.Load(jobs_per_s=0.025, vcores=1.0)
    (d,) = core.admit([job], [running], 0, 2, 0.0, est, P, load=load)
    assert d.action == "queue" and d.latest_start_s == pytest.approx(0.8)
    # once that passes, its bound misses and no run of the less hopeful predictor fits: refused
    (d,) = core.admit([job], [running], 0, 2, 0.9, est, P, load=load)
    assert d.action == "drop"


def test_a_promise_after_a_wait_is_priced_at_the_chance_the_wait_left_it() -> None:
    # 64 runs of 4 tasks: 60 of 10 s a task, one of 11 s, three of 13 s (works 40, 44, 52).
    # The bound (the 61st smallest) is one 11 s wave on 4 vcores; a 15 s deadline allowed up to
    # 60 from submission, where the last of the 65 gaps ends.
    est = _four_task_runs(*([10.0] * 60 + [11.0] + [13.0] * 3))
    job = core.WaitingJob("j", tasks=4, deadline_s=15.0, submitted_s=0.0, keys=K)
    poor = core.Load(jobs_per_s=1.0, vcores=2.0)  # arrivals' mean work 2
    # At its first round it is promised on its bound, unpriced.
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, poor)
    assert (d.action, d.cpus) == ("admit", 4)
    # Having waited 1 s, 56 fits: every run and half the last gap, 64.5 / 65. A miss wastes
    # 4 x 14 = 56, worth it where the mean work exceeds 56 x 0.5 / 64.5 = 0.43.
    (d,) = core.admit([job], [], 8, 8, 1.0, est, P, poor)
    assert (d.action, d.cpus) == ("admit", 4)
    # Having waited 3 s, 48 fits: 61 runs and half the gap from 44 to 52, 61.5 / 65. A miss
    # wastes 4 x 12 = 48, worth it only where the mean work exceeds 48 x 3.5 / 61.5 = 2.73.
    (d,) = core.admit([job], [], 8, 8, 3.0, est, P, poor)
    assert d.action == "queue" and "its wait left it a chance of 0.946 by its 64 runs" in d.reason
    (d,) = core.admit([job], [], 8, 8, 3.0, est, P, core.Load(jobs_per_s=0.25, vcores=1.0))
    assert (d.action, d.cpus) == ("admit", 4)  # mean work 4
    # A round that is the job's first, 3 s after its submission (the live sidecar's submission
    # round), promises it on its bound.
    first = dataclasses.replace(job, first_round=True)
    (d,) = core.admit([first], [], 8, 8, 3.0, est, P, poor)
    assert (d.action, d.cpus) == ("admit", 4)
    # Without an arrival rate there is no price.
    (d,) = core.admit([job], [], 8, 8, 3.0, est, P)
    assert (d.action, d.cpus) == ("admit", 4)


def test_a_new_run_falls_in_any_gap_between_the_runs_alike() -> None:
    works = [10.0, 20.0, 30.0]
    assert core._share(works, 5.0, 40.0) == pytest.approx(0.5 / 4)
    assert core._share(works, 20.0, 40.0) == pytest.approx(2 / 4)
    assert core._share(works, 35.0, 40.0) == pytest.approx(3.5 / 4)
    assert core._share(works, 40.0, 40.0) == 1.0
    # a wait no run shows still costs its share of the last gap
    assert core._share(works, 32.0, 40.0) < core._share(works, 38.0, 40.0) < 1.0
    # the last gap ends at the largest run when that exceeds the top
    assert core._share(works, 30.0, 25.0) == 1.0


def test_a_round_never_books_more_than_is_free() -> None:
    """Over random rounds (histories with killed runs, waiting and running jobs, AM containers,
    arrival loads, both work models): what a round admits, with each admitted job's AM
    containers, fits in what was free plus what its kills free, and every job gets one
    decision. The live sidecar books exactly this, so YARN is never asked for more than the
    deadline queue holds."""
    rng = np.random.default_rng(7)
    keys = [Keys(f"sig{i}", f"ut{i % 2}", "q") for i in range(4)]
    admitted_any = filled = 0
    for _ in range(400):
        est = Estimator(EstimatorParams(min_samples=int(rng.integers(1, 4))))
        for _ in range(int(rng.integers(0, 30))):
            tasks = int(rng.integers(1, 40))
            est.learn(
                Outcome(
                    keys[int(rng.integers(0, 4))],
                    tasks=tasks,
                    work=float(rng.uniform(1, 60)) * tasks,
                    deadline_s=float(rng.uniform(20, 600)),
                    max_cpus=max(1, min(tasks, 32)),
                    censored=bool(rng.random() < 0.2),
                )
            )
        capacity = int(rng.integers(2, 48))
        am = int(rng.integers(0, 3))
        params = core.PromiseParams(am_containers=am, divisible=bool(rng.random() < 0.5))
        now = 1000.0
        running = []
        booked = 0
        for i in range(int(rng.integers(0, 6))):
            cpus = int(rng.integers(1, 6))
            if booked + cpus + am > capacity:
                break
            booked += cpus + am
            submitted = now - float(rng.uniform(0, 300))
            running.append(
                core.RunningJob(
                    f"r{i}",
                    tasks=int(rng.integers(1, 30)),
                    deadline_s=float(rng.uniform(10, 600)),
                    submitted_s=submitted,
                    started_s=submitted + float(rng.uniform(0, now - submitted)),
                    cpus=cpus,
                    keys=keys[int(rng.integers(0, 4))],
                    task_floor_s=float(rng.choice([0.0, rng.uniform(1, 50)])),
                )
            )
        waiting = [
            core.WaitingJob(
                f"w{i}",
                tasks=int(rng.integers(1, 40)),
                deadline_s=float(rng.uniform(5, 900)),
                submitted_s=now - float(rng.uniform(0, 30)),
                keys=keys[int(rng.integers(0, 4))],
                first_round=bool(rng.random() < 0.5),
                timed=bool(rng.random() < 0.8),
            )
            for i in range(int(rng.integers(0, 12)))
        ]
        load = None
        if rng.random() < 0.7:
            n = int(rng.integers(1, 20))
            load = core.Load(
                jobs_per_s=float(rng.uniform(0.001, 0.1)),
                vcores=float(rng.uniform(0.1, capacity)),
                slack=core.Slack.of(rng.uniform(0, 300, n).tolist()),
                sizes=core.Sizes.of(
                    rng.uniform(1, 500, n).tolist(), rng.integers(1, 8, n).tolist()
                ),
            )
        free = int(rng.integers(0, capacity - booked + 1))
        decisions = core.admit(waiting, running, free, capacity, now, est, params, load)
        freed = sum(d.cpus for d in decisions if d.action == "kill")
        taken = sum(d.cpus + am for d in decisions if d.action == "admit")
        assert taken <= free + freed, (free, freed, decisions)
        decided = [d.job_id for d in decisions if d.job_id.startswith("w")]
        assert sorted(decided) == sorted(j.id for j in waiting)
        admitted_any += taken > 0
        filled += any(d.action == "admit" and d.cpus + am == free + freed for d in decisions)
    # the rounds reached the bound: many admitted, and some took exactly what was free
    assert admitted_any > 100 and filled > 10, (admitted_any, filled)


def test_a_try_whose_widest_chance_crowds_out_too_much_is_tried_on_a_narrower_grant() -> None:
    # task seconds 4, 5, 9, 10, 30 (works 16, 20, 36, 40, 120): the bound (one 30 s wave) misses
    # a 10 s deadline. On 4 vcores (one wave) four of five runs fit, 0.8; on 2 (two waves) the
    # two with tasks of 5 s or less, 0.4. The central estimate (9 s a task) holds 4 vcores for
    # 9 s, 2 for 18 s.
    est = _four_task_runs(4, 5, 9, 10, 30)
    job = core.WaitingJob("w", tasks=4, deadline_s=10.0, submitted_s=0.0, keys=K)
    # Arrivals need 4 vcores at 0.2 a second (mean work 20). Both grants are worth their miss:
    # on 4 a miss wastes 4 x 10 s = 40, and 0.8 x 20 = 16 beats 0.2 x 40 = 8; on 2 the first
    # wave's verdict (5 s) ends it, wasting 2 x 5 s = 10, and 0.4 x 20 = 8 beats 0.6 x 10 = 6.
    load = core.Load(jobs_per_s=0.2, vcores=4.0)
    # With 6 free, 4 for it leave the arrivals 2 of their 4 for 9 s: 0.2 x 9 s x 2/4 = 0.9
    # crowded out, not worth a 0.8 chance; 2 for it leave them all 4, and nobody is lost.
    assert core._crowded_out(load, 6, [], 0.0, 4, 9.0, 36.0, 6) == pytest.approx(0.9)
    assert core._crowded_out(load, 6, [], 0.0, 2, 18.0, 36.0, 6) == 0.0
    # Waiting for room for the wider grant would give up the narrower one's chance for nothing.
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, load=load)
    assert (d.action, d.cpus) == ("admit", 2) and d.reason.startswith("tried on 2 vcores")
    assert "40% of its history fits" in d.reason
    assert d.finish_s == pytest.approx(18.0)  # two central 9 s waves
    # With 8 free the wider grant crowds out nobody either: its larger chance wins.
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, load=load)
    assert (d.action, d.cpus) == ("admit", 4) and "80% of its history fits" in d.reason


def test_a_try_takes_the_grant_whose_chance_less_its_crowd_out_is_largest() -> None:
    # The history, deadline and 6 free vcores above: 4 vcores (chance 0.8) leave arrivals
    # needing 4 vcores 2 short for 9 s, 2 vcores (chance 0.4) crowd out nobody.
    est = _four_task_runs(4, 5, 9, 10, 30)
    job = core.WaitingJob("w", tasks=4, deadline_s=10.0, submitted_s=0.0, keys=K)
    # At 0.1 a second the wider grant crowds out 0.1 x 9 s x 2/4 = 0.45, fewer than its chance,
    # but it is then worth 0.8 - 0.45 = 0.35 met deadlines, the narrower one 0.4.
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, load=core.Load(jobs_per_s=0.1, vcores=4.0))
    assert (d.action, d.cpus) == ("admit", 2) and "40% of its history fits" in d.reason
    # At 0.05 a second it crowds out 0.225 and is worth 0.575: the wider grant.
    (d,) = core.admit([job], [], 6, 6, 0.0, est, P, load=core.Load(jobs_per_s=0.05, vcores=4.0))
    assert (d.action, d.cpus) == ("admit", 4) and "80% of its history fits" in d.reason


def test_a_running_job_past_its_central_end_releases_at_its_bound() -> None:
    est = _taught(0.5, runs=19)  # a: 2 waves of 50 s on 2 vcores
    for i in range(19):  # r's signature: 18 runs used 0.1 of their window, one 0.5
        ratio = 0.5 if i == 0 else 0.1
        est.learn(Outcome(OTHER, tasks=10, work=ratio * 2000.0, deadline_s=200.0, max_cpus=10))
    busy = core.Load(jobs_per_s=0.1, vcores=9.0)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=50.0, keys=K)
    # r is bounded to end at 200 s and centred at 20 s (its ratios, over a 400 s window). At
    # 10 s it is expected at 20 s, so the arrivals beside a's hold find its 10 vcores 10 s on.
    young = core.RunningJob("r", 10, 400.0, 0.0, 0.0, 10, OTHER, task_floor_s=10.0)
    early = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=10.0, keys=K)
    (d,) = core.admit([early], [young], 10, 20, 10.0, est, P, busy)
    assert (d.action, d.cpus) == ("admit", 2)
    # At 50 s its tasks have run 50 s without ending, past its centre: it is expected at its
    # bound, 200 s (not at once), so for all of a's 100 s hold the arrivals find 8 vcores where
    # they need 9.
    old = core.RunningJob("r", 10, 400.0, 0.0, 0.0, 10, OTHER, task_floor_s=50.0)
    (d,) = core.admit([job], [old], 10, 20, 50.0, est, P, busy)
    assert d.action == "queue" and "crowd out about 1.1" in d.reason
