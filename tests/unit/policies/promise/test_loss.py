"""The arrival meter and the loss system that prices a hold (``app/policies/promise/loss.py``):
by hand, against the product form, and through rounds of ``core.admit``."""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings

import numpy as np
import pytest

from app.policies.promise import core, loss
from app.policies.promise.estimator import (
    Estimate,
)
from tests.unit.policies.promise.support import K, P, taught


def test_slack_integrates_the_share_of_arrivals_that_cannot_wait() -> None:
    slack = loss.Slack.of([30.0, 0.0, 10.0])
    # P(slack < w) is 1/3 on (0, 10], 2/3 on (10, 30], 1 above: over waits 0..20, 10/3 + 20/3
    assert slack.short_s(0.0, 20.0) == pytest.approx(10.0)
    assert slack.short_s(30.0, 50.0) == pytest.approx(20.0)  # none can wait that long
    assert slack.short_s(-5.0, 0.0) == pytest.approx(0.0)  # no wait: nobody is lost
    assert loss.Slack.of([]).short_s(0.0, 20.0) == pytest.approx(20.0)


def test_arrivals_that_can_wait_for_room_are_not_crowded_out() -> None:
    est = taught(0.5)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # As in the test above: 1 vcore short of 9 for a's 100 s hold, 0.1 jobs/s, 1.1 jobs lost
    # when no arrival can wait.
    hurried = core.Load(0.1, 9.0, loss.Slack.of([0.0] * 4))
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, hurried)
    assert d.action == "queue" and "crowd out about 1.1" in d.reason
    # Half of them could wait 200 s: only an arrival whose slack is under the rest of the hold
    # is lost, half of them over the whole hold: 0.56 jobs.
    mixed = core.Load(0.1, 9.0, loss.Slack.of([0.0, 0.0, 200.0, 200.0]))
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, mixed)
    assert d.action == "admit"
    # All of them could wait 60 s: lost only those arriving in the first 40 s, 0.44 jobs.
    assert loss.crowded_out(
        core.Load(0.1, 9.0, loss.Slack.of([60.0])), 10, [], 0.0, 2, 100.0, 200.0, 10
    ) == pytest.approx(0.1 * 40.0 / 9.0)


def _erlang_b(servers: int, offered: float) -> float:
    """Erlang's loss formula by its recursion: the share of arrivals a full system turns away."""
    b = 1.0
    for c in range(1, servers + 1):
        b = offered * b / (c + offered * b)
    return b


def _bands(hold_s: float) -> list[tuple[float, float]]:
    """Each doubling band of a hold from the round (``loss._band``): its seconds within the
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
    sizes = loss.Sizes.of([60.0, 10.0], [3, 1])
    assert sizes.works == (10.0, 60.0) and sizes.needs == (1, 3) and sizes.smaller(60.0) == 1
    load = core.Load(0.3, 6.0, sizes=sizes)
    cdf = loss._occupancy(load, sizes, 2, 1, 7)
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
        assert loss._blocked(cdf, np.array([1, 3]), level) == pytest.approx(want)
    assert list(loss._blocked(cdf, np.array([1, 3]), -1)) == [1.0, 1.0]
    # one vcore arrivals alone (the first prefix) are Erlang's loss system
    alone = loss._occupancy(load, sizes, 1, 1, 7)
    assert loss._blocked(alone, np.array([1]), 4) == pytest.approx([_erlang_b(4, 1.5)])


def test_only_arrivals_since_the_round_occupy_the_vcores() -> None:
    # The same two arrivals (10 s and 20 s runs at 0.15 jobs/s each). Those that came before
    # the round are running jobs, which the caller counts; t seconds after it, each kind is
    # there min(d, t) x 0.15 on average. Band 2 (4 to 8 s) is read at 6 s: means 0.9 and 0.9.
    sizes = loss.Sizes.of([60.0, 10.0], [3, 1])
    load = core.Load(0.3, 6.0, sizes=sizes)
    assert [loss._band(t) for t in (0.0, 1.9, 2.0, 5.0, 8.0, 1000.0)] == [0, 0, 1, 2, 3, 9]
    for band, t in ((0, 1.0), (2, 6.0), (3, 12.0)):
        m1, m2 = 0.15 * min(10.0, t), 0.15 * min(20.0, t)
        weight = [0.0] * 8
        for a in range(8):
            for b in range(3):
                if a + 3 * b <= 7:
                    weight[a + 3 * b] += m1**a / math.factorial(a) * m2**b / math.factorial(b)
        cdf = loss._occupancy(load, sizes, 2, 1, 7, band)
        total = sum(weight)
        assert list(cdf) == pytest.approx([w / total for w in itertools.accumulate(weight)])
    # from 20 s on every arrival's run fits in the time since the round: the steady system
    steady = loss._occupancy(load, sizes, 2, 1, 7)
    assert list(loss._occupancy(load, sizes, 2, 1, 7, 5)) == list(steady)


def test_arrivals_of_one_size_are_one_poisson_count_and_prefixes_extend_kept_ones() -> None:
    # Seven arrivals of three sizes (1, 3 and 8 units) on 20 units. The occupancy is built one
    # convolution per size; it must equal the product form summed state by state, whether a
    # prefix is built from nothing or extended from a shorter one kept on the load.
    works, needs = [5.0, 9.0, 12.0, 30.0, 40.0, 64.0, 80.0], [1, 3, 1, 3, 8, 1, 8]
    sizes = loss.Sizes.of(works, needs)
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
        assert list(loss._occupancy(extended, sizes, k, 1, 20)) == pytest.approx(by_hand(k, 20))
    assert list(loss._occupancy(fresh, sizes, 7, 1, 20)) == pytest.approx(by_hand(7, 20))
    # levels in one array give one row of blocking chances per level
    cdf = loss._occupancy(fresh, sizes, 7, 1, 20)
    need = np.array([1, 3, 8])
    rows = loss._blocked(cdf, need, np.array([-1, 0, 5, 20, 40]))
    for row, level in zip(rows, (-1, 0, 5, 20, 40), strict=True):
        assert list(row) == pytest.approx(list(loss._blocked(cdf, need, level)))
    assert list(rows[0]) == [1.0, 1.0, 1.0] and rows[3][0] < rows[3][2] < 1.0


def test_rounding_a_need_up_to_a_whole_unit_adds_no_work() -> None:
    # One-vcore arrivals of 50 s at 0.2 jobs/s occupy 10 vcores on average. On 1,024 vcores the
    # loss system counts units of 4 (``LOSS_UNITS``), so each arrival takes a whole unit: its
    # count is scaled down to keep the occupancy at 10 vcores, not 40.
    alike = loss.Sizes.of([50.0] * 9, [1] * 9)
    load = core.Load(0.2, 10.0, sizes=alike)
    unit = math.ceil(1024 / loss.LOSS_UNITS)
    assert unit == 4
    cdf = loss._occupancy(load, alike, 9, unit, 256)
    pmf = np.diff(cdf, prepend=0.0)
    assert float((np.arange(257) * pmf).sum()) * unit == pytest.approx(10.0, rel=1e-6)
    # counted in single vcores, the same arrivals occupy the same on average
    exact = loss._occupancy(core.Load(0.2, 10.0, sizes=alike), alike, 9, 1, 1024)
    assert float((np.arange(1025) * np.diff(exact, prepend=0.0)).sum()) == pytest.approx(10.0)


def test_a_hold_is_not_credited_with_the_room_it_keeps_larger_arrivals_out_of() -> None:
    # On 7 vcores, 1-vcore arrivals of 10 s and 6-vcore ones of 200 s (30 erlangs) that hold
    # 6 of them nearly all the time. Beside a hold of 5, 2 are left: the 6-vcore ones never
    # fit, so the 1-vcore ones no longer share with them and are blocked less often than on
    # all 7. In the cluster the larger ones wait or come back; only the more often blocked
    # count.
    sizes = loss.Sizes.of([10.0, 1200.0], [1, 6])
    load = core.Load(0.3, 181.5, sizes=sizes)
    cdf = loss._occupancy(load, sizes, 2, 1, 7)
    need = np.array([1, 6])
    beside, alone = loss._blocked(cdf, need, 2), loss._blocked(cdf, need, 7)
    assert beside[0] < alone[0] and beside[1] == 1.0 > alone[1]
    # over the hold, band by band (arrivals since the round occupy): only the 6-vcore ones
    lost = 0.0
    for band, (seconds, _) in enumerate(_bands(100.0)):
        cdf = loss._occupancy(load, sizes, 2, 1, 7, band)
        beside, alone = loss._blocked(cdf, need, 2), loss._blocked(cdf, need, 7)
        lost += 0.3 * seconds * (max(0.0, beside[0] - alone[0]) + beside[1] - alone[1]) / 2
    assert loss.crowded_out(load, 7, [], 0.0, 5, 100.0, 2000.0, 7) == pytest.approx(lost)


def test_a_saturated_loss_system_stays_a_distribution() -> None:
    # Arrivals offering far more than the cluster holds (1-vcore jobs of 10^6 s and 50-vcore
    # ones of 2 * 10^5 s, 10 a second): without a cap on each count's mean its smallest terms
    # underflow and the occupancy was 0 / 0. It stays a distribution, near full: the 50-vcore
    # arrivals never find room, the 1-vcore ones nearly never.
    sizes = loss.Sizes.of([1e6] * 8 + [1e7] * 8, [1] * 8 + [50] * 8)
    load = core.Load(10.0, 1e8, sizes=sizes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cdf = loss._occupancy(load, sizes, 16, 1, 256)
        assert np.isfinite(cdf).all() and cdf[-1] == pytest.approx(1.0)
        for level in (200, 256):
            small, large = loss._blocked(cdf, np.array([1, 50]), level)
            assert large == pytest.approx(1.0) and 0.8 < small < 1.0
        assert math.isfinite(loss.crowded_out(load, 256, [], 0.0, 50, 100.0, 1e9, 256))


def test_a_hold_costs_how_much_more_often_arrivals_find_no_room() -> None:
    est = taught(0.5)  # a: 4 tasks, central work 200 vcore-s; 2 vcores for 100 s
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # Arrivals alike: 1 vcore for 50 s, at 0.2 jobs/s on 10 vcores. Those since the round
    # occupy: t seconds after it, 0.2 x min(50, t) erlangs, 10 from 50 s on. Beside a's grant
    # they are blocked B(8, a) of the time instead of B(10, a) (Erlang): 1.8 jobs lost over
    # its 100 s, so a waits. Read as 10 erlangs from the start, it was 2.5.
    alike = loss.Sizes.of([50.0] * 9, [1] * 9)
    busy = core.Load(0.2, 10.0, sizes=alike)
    lost = sum(
        0.2 * s * (_erlang_b(8, 0.2 * min(50.0, t)) - _erlang_b(10, 0.2 * min(50.0, t)))
        for s, t in _bands(100.0)
    )
    assert lost == pytest.approx(1.83, abs=0.01)
    assert loss.crowded_out(busy, 10, [], 0.0, 2, 100.0, 200.0, 10) == pytest.approx(lost)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, busy)
    assert d.action == "queue" and "crowd out about 1.8" in d.reason
    # At 0.05 jobs/s (2.5 erlangs) 10 vcores or 8 hardly ever block one: a starts.
    calm = core.Load(0.05, 2.5, sizes=alike)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, calm)
    assert d.action == "admit"
    # The mean demand (10 vcores) fits beside it only with none to spare: treated as a fluid,
    # arrivals lost nothing until the spare fell below it, though they block each other at
    # random; with no size known that is still the rule.
    assert loss.crowded_out(core.Load(0.2, 8.0), 10, [], 0.0, 2, 100.0, 200.0, 10) == pytest.approx(
        0.0
    )


def test_a_hold_is_priced_on_the_arrivals_since_the_round() -> None:
    est = taught(0.5)  # a: 2 vcores for 100 s, central work 200 vcore-s
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # Arrivals of 1 vcore for 100 s at 0.1 jobs/s: 10 erlangs once 100 s have passed. Read
    # as that steady system from the round, a's 100 s beside them cost 1.24 arrivals and a
    # waited; but those running at the round are the running jobs (none here: all 10 vcores
    # are free), and the arrivals since fill the vcores over the hold: 0.59, and a starts.
    alike = core.Load(0.1, 10.0, sizes=loss.Sizes.of([100.0] * 9, [1] * 9))
    steady = 0.1 * 100.0 * (_erlang_b(8, 10.0) - _erlang_b(10, 10.0))
    since = sum(
        0.1 * s * (_erlang_b(8, 0.1 * min(100.0, t)) - _erlang_b(10, 0.1 * min(100.0, t)))
        for s, t in _bands(100.0)
    )
    assert steady == pytest.approx(1.24, abs=0.01) and since == pytest.approx(0.59, abs=0.01)
    assert loss.crowded_out(alike, 10, [], 0.0, 2, 100.0, 200.0, 10) == pytest.approx(since)
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, alike)
    # on 4 vcores: its bound is the largest of its runs, and 4 for 50 s turn away fewer of
    # these arrivals than 2 for 100 s ("_top_up", beyond its history)
    assert (d.action, d.cpus) == ("admit", 4)


def test_only_arrivals_smaller_than_the_held_job_are_counted() -> None:
    est = taught(0.5)  # a's central work: 200 vcore-s
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    # The same arrivals, 1 vcore each, but for 400 s: larger than a, none counts, and a starts.
    # Holding a back for them would trade one met deadline for one that takes more vcores.
    larger = core.Load(0.025, 10.0, sizes=loss.Sizes.of([400.0] * 9, [1] * 9))
    (d,) = core.admit([job], [], 10, 10, 0.0, est, P, larger)
    assert d.action == "admit"
    # Nor does an arrival of a's own work (a itself, counted when it arrived): one like it
    # meets the same test when it comes.
    assert loss.crowded_out(larger, 10, [], 0.0, 2, 100.0, 400.0, 10) == 0.0
    # Smaller ones count, and only they occupy the vcores left: one arrival in ten takes 1
    # vcore for 50 s (1 erlang at 0.02 jobs/s once 50 s have passed), and its loss system is
    # Erlang's alone.
    mixed = core.Load(0.2, 10.0, sizes=loss.Sizes.of([50.0] + [400.0] * 9, [1] * 10))
    assert loss.crowded_out(mixed, 10, [], 0.0, 2, 100.0, 200.0, 10) == pytest.approx(
        sum(
            0.2 * s * (_erlang_b(8, 0.02 * min(50.0, t)) - _erlang_b(10, 0.02 * min(50.0, t)))
            for s, t in _bands(100.0)
        )
        / 10
    )


def test_a_hold_allows_for_arrivals_larger_than_any_seen_while_few_have_come() -> None:
    # Tiny 1-vcore arrivals at 0.1 jobs/s on 10 vcores hardly ever block one another. A hold
    # of 6 for 100 s beside 4 spare then costs the loss system next to nothing, but of 9
    # arrivals the next needs more than all of them one time in 10, anywhere from 1 to 10
    # vcores as far as they say; from 4 to 10 (6 of those 9) the hold alone blocks it: 0.1 x
    # 100 s x 6 / 9 / 10 = 0.67 arrivals more.
    sizes = loss.Sizes.of([1.0] * 9, [1] * 9)
    unknown = core.Load(0.1, 0.1, sizes=sizes)  # built by hand: no count, no allowance
    few = core.Load(0.1, 0.1, sizes=sizes, seen=9, top_need=1)
    base = loss.crowded_out(unknown, 10, [], 0.0, 6, 100.0, 1e6, 10)
    assert base < 0.01
    with_few = loss.crowded_out(few, 10, [], 0.0, 6, 100.0, 1e6, 10)
    assert with_few - base == pytest.approx(0.1 * 100.0 * 6 / 9 / 10)
    # It fades as arrivals are counted (all of them, not only the recent ones kept) ...
    many = dataclasses.replace(few, seen=999)
    assert loss.crowded_out(many, 10, [], 0.0, 6, 100.0, 1e6, 10) - base == pytest.approx(
        0.1 * 100.0 * 6 / 9 / 1000
    )
    # ... costs nothing above the largest need seen when that is the whole cluster, and only
    # the needs above it that the hold decides: a hold that leaves more than any seen blocks
    # those from 4 to 10 only where they exceed 7.
    whole = dataclasses.replace(few, top_need=10)
    assert loss.crowded_out(whole, 10, [], 0.0, 6, 100.0, 1e6, 10) == pytest.approx(base)
    wide = dataclasses.replace(few, top_need=7)
    assert loss.crowded_out(wide, 10, [], 0.0, 6, 100.0, 1e6, 10) - base == pytest.approx(
        0.1 * 100.0 * 3 / 3 / 10
    )
    # A job that would hold 4 of 8 vcores for 100 s, at 0.4 arrivals a second: 0.4 x 100 s x
    # 4 / 7 / 10 = 2.3 arrivals more after 9, so it waits (the crowd-out rule's one arrival);
    # after 999 it starts.
    est = taught(1.0, keys=K)
    job = core.WaitingJob("a", tasks=4, deadline_s=100.0, submitted_s=0.0, keys=K)
    busy = dataclasses.replace(few, jobs_per_s=0.4)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, busy)
    assert d.action == "queue" and d.crowd_out == pytest.approx(0.4 * 100 * 4 / 7 / 10, rel=0.01)
    (d,) = core.admit([job], [], 8, 8, 0.0, est, P, dataclasses.replace(busy, seen=999))
    assert d.action == "admit"


def test_load_meter_counts_every_arrival_and_the_largest_need() -> None:
    meter = core.LoadMeter(tau_s=100.0)
    assert meter.load(0.0).seen == 0
    for i in range(loss.SLACK_WINDOW + 3):  # the largest need first: out of the window later
        meter.arrive(float(i), 1.0, need=9 if i == 0 else 1)
    load = meter.load(100.0)
    assert load.seen == loss.SLACK_WINDOW + 3 and load.top_need == 9
    assert load.sizes is not None and max(load.sizes.needs) == 1


def test_an_arrivals_need_is_its_smallest_grant_for_its_deadline() -> None:
    # 4 tasks of 20 s (central), a 5 s start-up, a 50 s deadline: 45 s leave two waves of 20 s,
    # so 2 vcores (and 2 as divisible work: 80 vcore-s in 45 s is 1.8)
    est = Estimate(upper=120.0, point=80.0, source="task_s@sig", samples=3, overhead_s=5.0)
    assert loss.need_of(est, 4, 50.0, 8) == 2
    assert loss.need_of(est, 4, 50.0, 8, divisible=True) == 2
    assert loss.need_of(est, 4, 30.0, 8) == 4  # 25 s: one wave
    # nothing meets 20 s: its full parallelism on the cluster
    assert loss.need_of(est, 4, 20.0, 8) == 4 and loss.need_of(est, 4, 20.0, 3) == 3


def test_load_meter_keeps_the_sizes_of_the_last_arrivals() -> None:
    meter = core.LoadMeter(tau_s=100.0)
    meter.arrive(0.0, 10.0)
    assert meter.load(0.0).sizes is None  # no need known: the share of their mean demand
    for i in range(loss.SLACK_WINDOW + 3):
        meter.arrive(float(i), float(i), need=i % 5 + 1)
    sizes = meter.load(100.0).sizes
    assert sizes is not None and sizes.works == tuple(float(i) for i in range(3, 67))
    assert sizes.needs == tuple(i % 5 + 1 for i in range(3, 67))  # each with its work


def test_load_meter_keeps_the_slack_of_the_last_arrivals() -> None:
    meter = core.LoadMeter(tau_s=100.0)
    meter.arrive(0.0, 10.0)
    assert meter.load(0.0).slack is None  # nothing known: every arrival counts as hurried
    for i in range(loss.SLACK_WINDOW + 3):
        meter.arrive(float(i), 10.0, float(i))
    slack = meter.load(100.0).slack
    assert slack is not None and slack.values == tuple(float(i) for i in range(3, 67))
    # 4 tasks of 20 s (central), a 5 s start-up: on 8 vcores one wave, 25 s of a 50 s window;
    # on 2 vcores two waves, 45 s; on 1 four, 85 s: it cannot wait at all
    est = Estimate(upper=120.0, point=80.0, source="task_s@sig", samples=3, overhead_s=5.0)
    assert loss.slack_of(est, 4, 50.0, 8) == pytest.approx(25.0)
    assert loss.slack_of(est, 4, 50.0, 2) == pytest.approx(5.0)
    assert loss.slack_of(est, 4, 50.0, 1) == 0.0


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
    share = 1.0 / (1.0 + (1.0 / -math.expm1(-4.0 / 3600.0) - 1.0) * 4 / loss.SLACK_WINDOW)
    assert early.load(4.0).jobs_per_s == pytest.approx(decayed / share)
    assert early.load(4.0).jobs_per_s < 0.1
    # Counted late (an arrival older than the first one counted), the watch starts earlier.
    late = core.LoadMeter(tau_s=3600.0)
    late.arrive(500.0, 30.0)
    late.arrive(0.0, 30.0)
    assert late.watched() == pytest.approx(
        1.0 / (1.0 + (1.0 / -math.expm1(-500.0 / 3600.0) - 1.0) * 2 / loss.SLACK_WINDOW)
    )
