"""Simulator speed-ups change no result: each optimised path is compared, on fixed seeds, with
the algorithm it replaced, kept here (or, for the clusters, in ``reference_sim.py``) as the
reference implementation."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from app.control import drift, plan
from app.control import floors as control_floors
from app.control.budget import Bounds, format_hundredths
from app.control.ledger import Poll, integrate
from app.control.plan import Limits
from app.domain.observation import ClusterTotals
from app.policies import rounding
from app.policies.base import PolicyError
from app.sim import experiment, metrics, queue_policies, trace
from app.sim.cluster import ClusterSpec, level_for_counts
from app.sim.jobs import JobRun, Status
from app.sim.queue_policies import ControllerPolicy, make_queue_policy
from app.sim.runner import QueueObservation, Simulation
from app.sim.tasks import _EPS, TaskCluster
from tests.sim import reference_control, reference_sim


def _reference_room(self: TaskCluster, q: int) -> int:
    # The replaced code: the whole per-queue list built for one queue's value.
    return math.floor(self.max_shares[q] * self.capacity - self.used_by_queue()[q] + _EPS)


Outcome = tuple[dict[str, object], list[tuple[str, float | None]], list[float]]


def _run(policy: str, seed: int, model: str, jobs: int = 300, gap_s: float = 2.0) -> Outcome:
    """Every headline number, every end time and every discrimination step of one run."""
    trace_jobs = trace.synthetic(trace.SyntheticSpec(jobs=jobs, mean_interarrival_s=gap_s), seed)
    trace_jobs = experiment.with_deadlines(trace_jobs, "Fixed2x", 60, seed)
    result = experiment.run_policy(policy, trace_jobs, ClusterSpec(60), model=model)
    ends = sorted((r.job.job_id, r.end_s) for r in result.runs)
    summary = {k: v for k, v in result.summary().items() if k != "wall_s"}
    return summary, ends, list(result.series.factor)


def _outcome(policy: str, seed: int) -> Outcome:
    return _run(policy, seed, "tasks", jobs=120, gap_s=5.0)


@pytest.mark.parametrize("policy", ["baseline-fs", "fawkes:TD"])
def test_task_model_room_is_identical_to_the_reference(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _outcome(policy, 3)
    monkeypatch.setattr(TaskCluster, "_room", _reference_room)
    slow = _outcome(policy, 3)
    assert fast == slow  # exact: every end time and every headline number


def _fluid(policy: str, seed: int) -> Outcome:
    return _run(policy, seed, "fluid")


@pytest.mark.parametrize("policy", ["fawkes:TD", "fawkes:TT", "fawkes:JS", "ltrf"])
def test_fields_left_out_for_policies_that_do_not_read_them_change_nothing(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _fluid(policy, 2)
    # the reference: every policy observed with the slowdowns and the waiting input bytes, as
    # before they were left out
    _observe_with(monkeypatch, {"slowdowns", "waiting_input_bytes"})
    slow = _fluid(policy, 2)
    assert fast == slow


def test_the_slowdown_weighting_decides_on_them(monkeypatch: pytest.MonkeyPatch) -> None:
    js = make_queue_policy("fawkes:JS", ["a", "b"])
    td = make_queue_policy("fawkes:TD", ["a", "b"])
    assert "slowdowns" in js.needs and "slowdowns" not in td.needs
    with_them = _fluid("fawkes:JS", 2)
    _observe_with(monkeypatch, set())
    assert _fluid("fawkes:JS", 2) != with_them  # so the comparison above can tell


def test_the_input_bytes_weighting_decides_on_them(monkeypatch: pytest.MonkeyPatch) -> None:
    dd = make_queue_policy("fawkes:DD", ["a", "b"])
    assert "waiting_input_bytes" in dd.needs
    with_them = _fluid("fawkes:DD", 2)
    _observe_with(monkeypatch, set())
    assert _fluid("fawkes:DD", 2) != with_them


def _observe_with(monkeypatch: pytest.MonkeyPatch, needs: set[str]) -> None:
    init = ControllerPolicy.__init__

    def patched(self: ControllerPolicy, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.needs = frozenset(needs)

    monkeypatch.setattr(ControllerPolicy, "__init__", patched)


def _reference_observe(self: Simulation) -> dict[str, QueueObservation]:
    # The replaced code: the live jobs grouped per queue, then one pass per queue with
    # ``Cluster.rate_of`` per job and a built-in ``sum`` per field.
    cl = self._cluster
    dt = self.now - self._last_control_t
    live_by_q: dict[str, list[JobRun]] = defaultdict(list)
    for run in self._live.values():
        live_by_q[run.job.queue].append(run)
    out: dict[str, QueueObservation] = {}
    for q, name in enumerate(cl.queues):
        used = (
            (cl.used_integral[q] - self._last_control_used[q]) / dt
            if dt > 0
            else cl.used_by_queue()[q]
        )
        live = live_by_q.get(name, [])
        holds = [(run, cl.rate_of(run)) for run in live]
        waiting = [run for run, held in holds if held < 1.0]
        done = [r for r in self._completed.get(name, []) if r.status is not Status.KILLED]
        guaranteed = cl.shares[q] * cl.capacity
        slowdowns: tuple[float, ...] = ()
        if live and self._reads_slowdowns:
            total = sum(
                (self.now - r.job.submit_s) / r.job.ideal_runtime(cl.capacity) for r in live
            )
            slowdowns = (total / len(live),)
        out[name] = QueueObservation(
            waiting_jobs=len(waiting),
            waiting_tasks=sum(max(0.0, run.max_cpus - held) for run, held in holds),
            waiting_input_bytes=sum(run.job.input_bytes for run in waiting),
            running_jobs=len(live) - len(waiting),
            used_vcores=used,
            used_fraction=used / cl.capacity if cl.capacity else 0.0,
            utilization=min(1.0, used / guaranteed) if guaranteed > 0 else 0.0,
            completed_jobs=len(done),
            completed_tasks=sum(r.max_cpus for r in done),
            demand_vcores=float(sum(run.max_cpus for run in live)),
            slowdowns=slowdowns,
        )
    self._last_control_used = list(cl.used_integral)
    self._last_control_t = self.now
    self._completed.clear()
    return out


@pytest.mark.parametrize("model", ["fluid", "tasks"])
@pytest.mark.parametrize("policy", ["fawkes:TD", "fawkes:JS", "fawkes:DD", "fawkes:JD", "ltrf"])
def test_one_pass_observation_is_identical_to_the_reference(
    policy: str, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _run(policy, 4, model)
    monkeypatch.setattr(Simulation, "_observe", _reference_observe)
    assert _run(policy, 4, model) == fast  # exact: every end time, headline number and step


Workload = tuple[int, int, int, tuple[tuple[str, float], ...], float]
_WORKLOADS: dict[str, Workload] = {
    # jobs, seed, vcores, queues, mean gap: an overloaded and a loaded cluster, 1 to 3 queues
    "two queues": (300, 1, 80, (("a", 0.7), ("b", 0.3)), 4.0),
    "three queues": (250, 2, 50, (("a", 0.5), ("b", 0.3), ("c", 0.2)), 2.0),
    "one queue": (200, 3, 40, (("a", 1.0),), 15.0),
}


def _everything(policy: str, model: str, workload: Workload) -> tuple[object, ...]:
    """Every job's end, start, consumption and status, every headline number but the engine's
    event count, and every measured series of one run."""
    n, seed, vcores, queues, gap = workload
    spec = trace.SyntheticSpec(jobs=n, mean_interarrival_s=gap, queues=queues)
    jobs = experiment.with_deadlines(trace.synthetic(spec, seed), "Fixed2x", vcores, seed)
    result = experiment.run_policy(policy, jobs, ClusterSpec(vcores), model=model)
    runs = [(r.job.job_id, r.start_s, r.end_s, r.consumed, r.status) for r in result.runs]
    summary = {k: v for k, v in result.summary().items() if k not in ("wall_s", "events")}
    return runs, summary, result.busy_vcore_s, result.series


@pytest.mark.parametrize("workload", sorted(_WORKLOADS))
@pytest.mark.parametrize("model", ["fluid", "tasks"])
@pytest.mark.parametrize("policy", ["baseline-fs", "reactive-fs", "fawkes:TD", "ltrf", "justice"])
def test_runs_are_identical_to_the_reference(
    policy: str, model: str, workload: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _everything(policy, model, _WORKLOADS[workload])
    monkeypatch.setattr("app.sim.runner.make_cluster", reference_sim.make_cluster)
    monkeypatch.setattr("app.sim.metrics.snapshot_indexes", reference_sim.snapshot_indexes)
    slow = _everything(policy, model, _WORKLOADS[workload])
    assert fast == slow  # exact: runs in the same order, every float to the last bit


def _counted(caps: list[int]) -> tuple[int, int, list[int], dict[int, int]]:
    held = Counter(caps)
    return len(caps), sum(caps), sorted(held), dict(held)


def test_level_from_counts_is_identical_to_the_sorted_arrays() -> None:
    rnd = random.Random(7)
    for _ in range(4000):
        caps = [rnd.choice((1, 1, 1, 2, 3, 5, 8, 40, 400)) for _ in range(rnd.randint(1, 60))]
        if rnd.random() < 0.6:
            # an allocation that fills the caps up to one of them exactly (a tie at a level),
            # or a few float steps off it, where rounding decides the comparisons
            low = sorted(caps)
            cut = rnd.randint(1, len(caps))
            alloc = float(sum(low[:cut]) + low[cut - 1] * (len(caps) - cut))
            for _ in range(rnd.choice((0, 0, 1, 2, 5, 40))):
                alloc = math.nextafter(alloc, math.inf if rnd.random() < 0.7 else 0.0)
        else:
            alloc = rnd.uniform(0.001, 1.2 * sum(caps))
        ref = reference_sim.level_for(alloc, np.array(caps, dtype=np.float64))
        assert level_for_counts(alloc, *_counted(caps)) == ref, (alloc, caps)


def test_snapshot_indexes_are_identical_to_the_reference() -> None:
    rnd = random.Random(11)
    for case in range(1500):
        n = rnd.randint(0, 80)
        whole = case % 3 != 0
        demands = [
            float(rnd.choice((1, 2, 7, 40, 400, 5000))) if whole else rnd.uniform(0.5, 50)
            for _ in range(n)
        ]
        allocs = [rnd.choice((0.0, rnd.uniform(0, d), d)) for d in demands]
        tally = metrics.AllocationTally()
        for _ in range(rnd.choice((0, 0, 3))):  # grants and waiting jobs, as admission runs have
            demand = rnd.choice((1, 2, 7, 40))
            tally.add(float(rnd.randint(0, demand)), demand)
        a, d = np.array(allocs), np.array(demands)
        assert metrics.snapshot_indexes(a, d, tally) == reference_sim.snapshot_indexes(a, d, tally)


@pytest.mark.parametrize("model", ["fluid", "tasks"])
@pytest.mark.parametrize("policy", ["fawkes:TD", "fawkes:JS", "ltrf"])
def test_the_live_tally_from_the_pool_arrays_is_identical_to_the_one_pass_loop(
    policy: str, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks: list[int] = []

    def both(self: Simulation) -> dict[str, Any]:
        fast = self._tally_pool()
        assert fast == self._tally_each()
        ticks.append(len(fast))
        return fast

    monkeypatch.setattr(Simulation, "_tally_live", both)
    for workload in _WORKLOADS.values():
        _everything(policy, model, workload)
    assert len(ticks) > 100 and max(ticks) > 1  # it compared, over several queues


@pytest.mark.parametrize("policy", ["fawkes:TD", "fawkes:JS", "ltrf"])
def test_the_pool_sorted_from_the_last_order_is_sorted_afresh(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sorts: list[int] = []
    tally_pool = Simulation._tally_pool

    def checked(self: Simulation) -> Any:
        out = tally_pool(self)
        pool = self._cluster.pool
        n = pool.n
        # the replaced code: the pool's keys sorted from scratch
        fresh = (pool.qix[:n] * len(self._jobs) + pool.arrival[:n]).argsort(kind="stable")
        assert np.array_equal(self._pool_order, fresh)
        sorts.append(n)
        return out

    monkeypatch.setattr(Simulation, "_tally_pool", checked)
    for workload in _WORKLOADS.values():
        _everything(policy, "fluid", workload)
    assert len(sorts) > 100 and max(sorts) > 10


def _reference_floors_for(self: ControllerPolicy, total: ClusterTotals) -> control_floors.Floors:
    # The replaced code: the floors computed afresh at every tick.
    return control_floors.compute(
        self.queues,
        self.cfg.floors,
        control_floors.Amount(1, self.container_mb),
        "simulated container",
        control_floors.Amount(total.vcores, total.memory_mb),
        self.cfg.bounds,
    )


@pytest.mark.parametrize("policy", ["fawkes:TD", "ltrf", "rrf"])
def test_floors_computed_once_per_size_change_nothing(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _everything(policy, "fluid", _WORKLOADS["three queues"])
    monkeypatch.setattr(ControllerPolicy, "_floors_for", _reference_floors_for)
    assert _everything(policy, "fluid", _WORKLOADS["three queues"]) == fast


def _reference_account(
    self: ControllerPolicy, now: float, observed: Mapping[str, QueueObservation], total: Any
) -> None:
    # The replaced code: ``ledger.integrate`` over the interval's two polls, rows and all.
    if self._last_t is not None and now > self._last_t:
        points = self._points(self._last_t, observed)  # unchanged: only the ledger step is new
        polls = [
            Poll(int(self._last_t * 1000), total, points),
            Poll(int(now * 1000), total, {}),
        ]
        step = integrate(self.ledger, polls, self._weights, self._discount, 2**62, self._lending)
        if step is not None:
            self.ledger = step.state
    self._last_t = now


@pytest.mark.parametrize("policy", ["fawkes:TD", "ltrf", "mlrf", "rrf"])
def test_the_ledger_one_rectangle_at_a_time_is_identical_to_integrate(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_account = ControllerPolicy._account
    ledgers: list[Any] = []

    def both(
        self: ControllerPolicy, now: float, observed: Mapping[str, QueueObservation], total: Any
    ) -> None:
        ledger, last = self.ledger, self._last_t
        _reference_account(self, now, observed, total)
        want = self.ledger
        self.ledger, self._last_t = ledger, last
        fast_account(self, now, observed, total)
        assert self.ledger == want  # every counted usage, debt and total to the last bit
        ledgers.append(self.ledger)

    monkeypatch.setattr(ControllerPolicy, "_account", both)
    for workload in _WORKLOADS.values():
        _everything(policy, "fluid", workload)
    assert len(ledgers) > 100 and any(ledger.debt for ledger in ledgers)


@pytest.mark.parametrize("policy", ["fawkes:TD", "fawkes:None", "ltrf", "proportional", "rrf"])
def test_plans_remembered_by_their_inputs_change_nothing(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []
    plan_outcome = queue_policies.plan_outcome

    def counted(*args: Any, **kwargs: Any) -> plan.Plan:
        made.append(1)
        return plan_outcome(*args, **kwargs)

    monkeypatch.setattr(queue_policies, "plan_outcome", counted)
    fast = [_everything(policy, "fluid", w) for w in _WORKLOADS.values()]
    reused = len(made)
    # the reference: every tick planned afresh
    monkeypatch.setattr(queue_policies, "_plan_key", lambda *args: None)
    made.clear()
    slow = [_everything(policy, "fluid", w) for w in _WORKLOADS.values()]
    assert fast == slow  # exact: every end time, headline number, series and step
    if policy == "ltrf":
        assert reused < len(made) / 2  # most of its ticks repeat a plan


def _rounding_case(rnd: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    names = rnd.sample(["a", "b", "c", "d", "e", "root.x", "root.y"], rnd.randint(1, 7))
    pick = rnd.random()
    shares: dict[str, Any] = {}
    for name in names:
        if pick < 0.2:  # equal shares: every remainder ties
            shares[name] = 1 / 3
        elif pick < 0.3:  # magnitudes far apart, down to subnormals
            shares[name] = rnd.choice((0.0, 5e-324, 1e-300, 1e-9, 1.0, 3, 1e300))
        else:
            shares[name] = rnd.choice((0.0, rnd.random(), rnd.uniform(0, 1e-6), rnd.randint(0, 9)))
    mins: dict[str, Any] = {}
    for name in names:
        if rnd.random() < 0.5:
            # as ``plan._target`` passes them, a few float steps off whole hundredths, or raw
            mins[name] = rnd.choice(
                ((rnd.randint(1, 4000) - 0.5) / 100, rnd.uniform(0, 40), rnd.randint(0, 30))
            )
    if rnd.random() < 0.03:  # invalid input: the same error, naming the same field
        bad = rnd.choice((-1.0, float("nan"), float("inf"), True, "1", 101.0))
        (shares if rnd.random() < 0.5 else mins)[rnd.choice(names)] = bad
    return shares, mins


def _hundredths(fn: Any, shares: dict[str, Any], mins: dict[str, Any]) -> object:
    try:
        return fn(shares, mins)
    except PolicyError as err:
        return ("error", str(err), err.field)


def test_capacity_hundredths_are_identical_to_the_fractions() -> None:
    rnd = random.Random(5)
    for _ in range(20000):
        shares, mins = _rounding_case(rnd)
        want = _hundredths(reference_control.capacity_hundredths, shares, mins)
        got = _hundredths(rounding.capacity_hundredths, shares, mins)
        assert got == want, (shares, mins)
        if isinstance(got, dict) and isinstance(want, dict):
            assert list(got) == list(want)  # the same key order


def _live_value(rnd: random.Random, h: int) -> str:
    return rnd.choice(
        (
            format_hundredths(h),
            format_hundredths(h),
            str(h / 100),  # "33.33" as the RM may print it, or "50.0"
            f"{h / 100:.3f}",
            f"[memory={h * 10},vcores={h // 100}]",  # left by RRF
        )
    )


def _plans(rnd: random.Random) -> list[dict[str, Any]]:
    names = sorted(rnd.sample(["a", "b", "c", "d"], rnd.randint(1, 4)))
    cuts = sorted(rnd.randint(0, 10000) for _ in names[1:])
    hundredths = [hi - lo for lo, hi in zip([0, *cuts], [*cuts, 10000], strict=True)]
    live = {
        q: {"capacity": _live_value(rnd, h), "maximum-capacity": rnd.choice(("100.00", "-1", "80"))}
        for q, h in zip(names, hundredths, strict=True)
    }
    shares = {q: rnd.choice((0.0, rnd.random(), 1 / 3)) for q in names}
    bounds = {q: Bounds(min_h=rnd.choice((0, 0, 200, 1000))) for q in names}
    limits = Limits(
        bounds=bounds if sum(b.min_h for b in bounds.values()) <= 10000 else {},
        max_step_h=rnd.choice((100, 1000, 10000)),
        min_change_h=rnd.choice((0, 100, 1000)),
        no_borrowing=rnd.random() < 0.2,
        max_targets={names[0]: 5000} if rnd.random() < 0.2 else {},
    )
    cluster = {"vcores": 400.0, "memory": 409600.0}
    out = []
    for made in (
        lambda: plan.percent_plan(shares, live, limits, cluster),
        lambda: plan.absolute_plan(
            {q: {"vcores": 400 * s, "memory": 409600 * s} for q, s in shares.items()},
            live,
            cluster,
            rnd.choice((0.1, 1.0)),
            rnd.choice((0.0, 0.01)),
        ),
    ):
        try:
            p = made()
        except PolicyError as err:
            out.append({"error": str(err)})
            continue
        out.append({**p.to_dict(), "expected": p.expected(), "previous": p.previous()})
    return out


def test_plans_are_identical_to_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    seeds = range(3000)
    fast = [_plans(random.Random(seed)) for seed in seeds]
    again = [_plans(random.Random(seed)) for seed in seeds]  # from the caches
    monkeypatch.setattr(plan, "_exact_percent", plan._exact_percent.__wrapped__)
    monkeypatch.setattr(plan, "normalise", reference_control.normalise)
    monkeypatch.setattr(plan, "_lines_plan", reference_control._lines_plan)
    monkeypatch.setattr(plan, "capacity_hundredths", reference_control.capacity_hundredths)
    slow = [_plans(random.Random(seed)) for seed in seeds]
    assert fast == slow
    assert again == slow
    assert sum(p[0].get("push") is True for p in slow) > 300  # pushed plans and kept ones
    assert sum(p[0].get("push") is False for p in slow) > 300


def test_normalised_values_are_identical_to_the_reference() -> None:
    values: list[str | None] = ["40", "40.0", " 40.00 ", "-1", "33.333", "1e2", "nan", "abc", ""]
    values += ["[vcores=2, memory=1024]", "[memory=1024,vcores=2]", "[]", "[x]", "12.345", None]
    values += ["0.005", "-0.0"]
    for value in values * 2:  # the second pass reads the cache
        got = _normalised(drift.normalise, value)
        want = _normalised(reference_control.normalise, value)
        assert (got, type(got)) == (want, type(want)), value


def _normalised(fn: Any, value: str | None) -> object:
    try:
        return fn(value)
    except ValueError as err:  # "nan" cannot be hundredths
        return ("error", str(err))
