"""HybridMR (seed 001 section III): Algorithm 1 estimates, Algorithm 2 placement, Algorithm 3
arbitration, by hand-computed examples and properties."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.policies.base import PolicyError
from app.policies.hybridmr import core as hm
from app.policies.hybridmr.core import (
    BatchTask,
    HybridParams,
    InteractiveApp,
    Job,
    Node,
    Observation,
    Partitions,
    ProfileDB,
)

GB = 1_000_000_000


def _row(d_gb: float, c: float, m: float, r: float, t: float, part: str = "virtual") -> Observation:
    return Observation("sort", part, d_gb * GB, c, m, r, t)


# rows 0, 1: cluster size 8 at 10 and 20 GB; row 2: cluster size 16 at 10 GB; row 3: native
DB = ProfileDB(
    (
        _row(10, 8, 60, 40, 100),
        _row(20, 8, 110, 70, 180),
        _row(10, 16, 30, 45, 80),
        _row(10, 8, 50, 30, 85, "native"),
    )
)


# ---------------------------------------------------------------- Algorithm 1


def test_exact_lookup_averages_the_repeated_runs() -> None:
    # III-A1 averages 3 runs: total (100 + 110 + 120) / 3 = 110, map (60 + 66 + 72) / 3 = 66
    db = ProfileDB((_row(10, 8, 60, 40, 100), _row(10, 8, 66, 44, 110), _row(10, 8, 72, 48, 120)))
    est = hm.estimate(db, "sort", 10 * GB, 8)
    assert est.rule == "exact"
    assert (est.map_s, est.reduce_s, est.total_s) == pytest.approx((66, 44, 110))
    assert est.basis == (0, 1, 2)


def test_data_size_interpolates_between_profiled_sizes() -> None:
    # 15 GB is halfway between 10 GB and 20 GB at cluster size 8:
    # total 100 + (180 - 100) / 2 = 140, map 60 + 50 / 2 = 85, reduce 40 + 30 / 2 = 55
    est = hm.estimate(DB, "sort", 15 * GB, 8)
    assert est.rule == "data_size"
    assert (est.map_s, est.reduce_s, est.total_s) == pytest.approx((85, 55, 140))
    assert est.basis == (0, 1)
    assert "interpolated" in est.reason


def test_data_size_extrapolates_along_the_end_segment() -> None:
    # 40 GB: slope 80 s per 10 GB from the 20 GB point: 180 + 2 * 80 = 340; map 110 + 2 * 50 = 210
    est = hm.estimate(DB, "sort", 40 * GB, 8)
    assert est.rule == "data_size"
    assert (est.map_s, est.total_s) == pytest.approx((210, 340))
    assert "extrapolated" in est.reason


def test_data_size_with_one_profiled_size_is_proportional() -> None:
    # only 10 GB -> 80 s at cluster size 16; 20 GB -> 80 * 2 = 160, map 30 * 2 = 60
    est = hm.estimate(DB, "sort", 20 * GB, 16)
    assert est.rule == "data_size"
    assert (est.map_s, est.reduce_s, est.total_s) == pytest.approx((60, 90, 160))
    assert est.basis == (2,)


def test_extrapolation_below_the_profiles_is_clamped_at_zero() -> None:
    # (10 GB, 20 s), (20 GB, 180 s): at 5 GB the line gives 20 - 160 / 2 = -60 -> 0
    db = ProfileDB((_row(10, 8, 10, 10, 20), _row(20, 8, 90, 90, 180)))
    assert hm.estimate(db, "sort", 5 * GB, 8).total_s == 0.0


def test_cluster_size_interpolates_map_in_inverse_size_and_reduce_linearly() -> None:
    # 10 GB at cluster 12, profiled at 8 (map 60, reduce 40) and 16 (map 30, reduce 45):
    # map linear in 1/c: weight (1/12 - 1/8) / (1/16 - 1/8) = 2/3 -> 60 - 30 * 2/3 = 40
    # reduce linear in c: 40 + 5 * (12 - 8) / 8 = 42.5; JCT = map + reduce = 82.5
    est = hm.estimate(DB, "sort", 10 * GB, 12)
    assert est.rule == "cluster_size"
    assert (est.map_s, est.reduce_s, est.total_s) == pytest.approx((40, 42.5, 82.5))
    assert est.basis == (0, 2)


def test_cluster_size_outside_the_profiles_scales_map_inversely_and_holds_reduce() -> None:
    # 32 nodes from the 16-node run: map 30 * 16 / 32 = 15, reduce held at 45, JCT 60
    est = hm.estimate(DB, "sort", 10 * GB, 32)
    assert (est.rule, est.basis) == ("cluster_size", (2,))
    assert (est.map_s, est.reduce_s, est.total_s) == pytest.approx((15, 45, 60))
    # 4 nodes from the 8-node run: map 60 * 8 / 4 = 120, reduce 40, JCT 160
    low = hm.estimate(DB, "sort", 10 * GB, 4)
    assert (low.map_s, low.reduce_s, low.total_s) == pytest.approx((120, 40, 160))


def test_training_cluster_extrapolates_data_size_then_cluster_size() -> None:
    # 5 GB on 4 nodes: neither profiled. At 8 nodes the data rule gives map 60 - 50 / 2 = 35 and
    # reduce 40 - 30 / 2 = 25; 4 < 8 so map 35 * 8 / 4 = 70, reduce held at 25: JCT 95
    est = hm.estimate(DB, "sort", 5 * GB, 4)
    assert est.rule == "data_then_cluster"
    assert (est.map_s, est.reduce_s, est.total_s) == pytest.approx((70, 25, 95))
    assert est.basis == (0, 1)


def test_without_combine_algorithm_1_has_no_rule_for_two_unmatched_sizes() -> None:
    est = hm.estimate(DB, "sort", 5 * GB, 4, params=HybridParams(combine=False))
    assert not est.ok
    assert est.rule is None and est.basis == ()
    assert "nothing to extrapolate from" in est.reason
    # the same input size at other cluster sizes is still Algorithm 1 line 7
    strict = hm.estimate(DB, "sort", 10 * GB, 12, params=HybridParams(combine=False))
    assert strict.rule == "cluster_size" and strict.total_s == pytest.approx(82.5)


def test_no_estimate_without_a_profile_of_the_class_on_the_partition() -> None:
    est = hm.estimate(DB, "grep", 10 * GB, 8)
    assert not est.ok and "no profile of 'grep' on the virtual partition" in est.reason
    # rows of the other partition are never used: native has only row 3 (85 s at 10 GB)
    native = hm.estimate(DB, "sort", 20 * GB, 8, "native")
    assert native.total_s == pytest.approx(170) and native.basis == (3,)


def test_profile_db_round_trips_and_errors_name_the_row_field() -> None:
    assert ProfileDB.from_dict(DB.to_dict()) == DB
    bad = DB.to_dict()
    bad["observations"][1]["total_s"] = -1
    with pytest.raises(PolicyError) as err:
        ProfileDB.from_dict(bad)
    assert err.value.field == "observations[1].total_s"
    missing = {"observations": [{"job_class": "sort"}]}
    with pytest.raises(PolicyError) as err:
        ProfileDB.from_dict(missing)
    assert err.value.field == "observations[0].partition"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"input_bytes": 0}, "input_bytes"),
        ({"cluster_size": -1}, "cluster_size"),
        ({"partition": "physical"}, "partition"),
        ({"job_class": ""}, "job_class"),
    ],
)
def test_estimate_arguments_are_validated(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {
        "job_class": "sort",
        "input_bytes": GB,
        "cluster_size": 8,
        "partition": "virtual",
    }
    args.update(kwargs)
    with pytest.raises(PolicyError) as err:
        hm.estimate(DB, **args)  # type: ignore[arg-type]
    assert err.value.field == field


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"throttle_share": 1.0}, "throttle_share"),
        ({"throttle_share": -0.1}, "throttle_share"),
        ({"unknown_placement": "cloud"}, "unknown_placement"),
        ({"combine": "yes"}, "combine"),
        ({"tau": 1}, "tau"),
    ],
)
def test_parameters_are_validated_by_name(values: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError) as err:
        hm.make_params(values)
    assert err.value.field == field


# ---------------------------------------------------------------- Algorithm 2

PARTS = Partitions(native_size=8, virtual_size=8)


def test_batch_job_goes_virtual_when_the_virtual_estimate_meets_the_desired_time() -> None:
    # virtual estimate for 15 GB on 8 nodes is 140 s (interpolation above); 140 < 200
    placement = hm.place(Job("j1", "sort", 15 * GB), DB, PARTS, 200)
    assert placement.partition == "virtual"
    assert placement.estimate is not None and placement.estimate.total_s == pytest.approx(140)
    assert "140 s < desired 200 s" in placement.reason


def test_batch_job_goes_native_when_the_virtual_partition_would_miss_it() -> None:
    # 140 >= 120: Algorithm 2 line 6 -> P_CLUSTER
    assert hm.place(Job("j2", "sort", 15 * GB), DB, PARTS, 120).partition == "native"
    # equality is a miss too (line 6 is >=)
    tie = hm.place(Job("j3", "sort", 15 * GB), DB, PARTS, 140)
    assert tie.partition == "native" and "140 s >= desired 140 s" in tie.reason
    # the native estimate is reported: 85 s * 15 / 10 = 127.5 s
    assert tie.native_estimate is not None
    assert tie.native_estimate.total_s == pytest.approx(127.5)


def test_transactional_jobs_always_go_virtual() -> None:
    placement = hm.place(Job("web", "rubis", 1, "transactional"), DB, PARTS, None)
    assert (placement.partition, placement.estimate) == ("virtual", None)


def test_unprofiled_batch_job_follows_unknown_placement() -> None:
    job = Job("j5", "grep", 10 * GB)
    assert hm.place(job, DB, PARTS, 100).partition == "native"
    virtual = hm.place(job, DB, PARTS, 100, hm.make_params({"unknown_placement": "virtual"}))
    assert virtual.partition == "virtual" and "unknown_placement" in virtual.reason


def test_batch_job_needs_a_desired_time_and_place_all_keeps_queue_order() -> None:
    with pytest.raises(PolicyError) as err:
        hm.place(Job("j", "sort", GB), DB, PARTS, None)
    assert err.value.field == "desired_completion_s"
    out = hm.place_all(
        [(Job("a", "sort", 15 * GB), 200), (Job("b", "sort", 15 * GB), 100)], DB, PARTS
    )
    assert [(p.job_id, p.partition) for p in out] == [("a", "virtual"), ("b", "native")]


def test_job_fields_are_validated() -> None:
    with pytest.raises(PolicyError) as err:
        Job("j", "sort", GB, "interactive")
    assert err.value.field == "workload"


# ---------------------------------------------------------------- Algorithm 3

NODES = (Node("vm1", 4, 1), Node("vm2", 4, 1), Node("vm3", 2))
APPS = (InteractiveApp("rubis", "vm1", 2.5, 2.0), InteractiveApp("tpcw", "vm2", 1.2, 2.0))
TASKS = (
    BatchTask("t1", "j1", "vm1", 1, 0.4),
    BatchTask("t2", "j1", "vm1", 2, 0.1),
    BatchTask("t3", "j2", "vm2", 1, 0.2),
    BatchTask("t4", "j2", "vm1", 2, 0.9),
)


def test_arbitration_moves_least_interfering_first_to_the_best_fit_then_throttles() -> None:
    # free vcores: vm1 4-1-5 = -2 (violating), vm2 4-1-1 = 2, vm3 2.
    # Min-Min order by interference: t2 (0.1), t1 (0.4), t4 (0.9).
    # t2 (2 vcores): vm2 and vm3 both end at 0 -> tie by id -> vm2.
    # t1 (1 vcore): only vm3 fits (2 -> 1). t4 (2 vcores): nothing fits -> paused.
    out = hm.arbitrate(APPS, TASKS, NODES)
    assert [v.app_id for v in out.violations] == ["rubis"]
    assert [(a.kind, a.task_id, a.to_node) for a in out.actions] == [
        ("move", "t2", "vm2"),
        ("move", "t1", "vm3"),
        ("throttle", "t4", None),
    ]
    assert out.actions[2].share == 0.0 and "paused" in out.actions[2].reason
    # vm1 gets back 2 + 1 + 2 (paused) vcores: -2 + 5 = 3
    assert dict(out.free_after) == pytest.approx({"vm1": 3, "vm2": 0, "vm3": 1})


def test_throttle_share_keeps_part_of_the_allocation() -> None:
    out = hm.arbitrate(APPS, TASKS, NODES, hm.make_params({"throttle_share": 0.5}))
    throttled = out.actions[-1]
    assert (throttled.kind, throttled.share) == ("throttle", 0.5)
    assert "throttled to 0.5" in throttled.reason
    # vm1: -2 + 2 + 1 + 2 * 0.5 = 2
    assert out.free_after["vm1"] == pytest.approx(2)


def test_best_fit_prefers_the_tightest_node() -> None:
    nodes = (Node("hot", 2), Node("roomy", 8), Node("snug", 2))
    apps = (InteractiveApp("web", "hot", 3, 1),)
    tasks = (BatchTask("t", "j", "hot", 1.5, 0.5),)
    # roomy leaves 6.5, snug 0.5: best fit is snug
    assert hm.arbitrate(apps, tasks, nodes).actions[0].to_node == "snug"


def test_no_action_within_the_sla_and_at_the_bound() -> None:
    apps = (InteractiveApp("rubis", "vm1", 2.0, 2.0),)  # metric == sla is within bounds
    out = hm.arbitrate(apps, TASKS, NODES)
    assert out.violations == () and out.actions == ()


def test_arbitration_inputs_name_the_bad_field() -> None:
    with pytest.raises(PolicyError) as err:
        hm.arbitrate(APPS, (BatchTask("t", "j", "vm9", 1, 0),), NODES)
    assert err.value.field == "tasks[0].node"
    with pytest.raises(PolicyError) as err:
        hm.arbitrate(APPS, TASKS, (*NODES, Node("vm1", 1)))
    assert err.value.field == "nodes[3].id"
    with pytest.raises(PolicyError) as err:
        hm.arbitrate(APPS, (*TASKS, BatchTask("t1", "j", "vm2", 1, 0)), NODES)
    assert err.value.field == "tasks[4].id"
    with pytest.raises(PolicyError) as err:
        InteractiveApp("a", "vm1", 1, 0)
    assert err.value.field == "sla"


# ---------------------------------------------------------------- properties

_SIZES = st.lists(st.integers(1, 50), min_size=1, max_size=5, unique=True)
_STEPS = st.lists(st.floats(0, 100, allow_nan=False), min_size=5, max_size=5)


@st.composite
def _monotone_db(draw: st.DrawFn) -> ProfileDB:
    """Per cluster size, map, reduce and total times non-decreasing in the input size."""
    rows: list[Observation] = []
    for c in draw(
        st.lists(st.sampled_from([2, 4, 8, 16, 32]), min_size=1, max_size=4, unique=True)
    ):
        sizes = sorted(draw(_SIZES))
        m = r = t = 0.0
        for d, dm, dr, dt in zip(sizes, draw(_STEPS), draw(_STEPS), draw(_STEPS), strict=False):
            m, r, t = m + dm, r + dr, t + dt
            rows.append(_row(d, c, m, r, t))
    return ProfileDB(tuple(rows))


@settings(max_examples=200, deadline=None)
@given(
    db=_monotone_db(),
    c=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64]),
    sizes=st.lists(st.floats(0.1, 80, allow_nan=False), min_size=2, max_size=6),
)
def test_estimates_are_monotone_in_input_size_when_the_profiles_are(
    db: ProfileDB, c: int, sizes: list[float]
) -> None:
    totals = [hm.estimate(db, "sort", d * GB, c).total_s for d in sorted(sizes)]
    assert all(t is not None for t in totals)
    for lo, hi in itertools.pairwise(totals):
        assert lo is not None and hi is not None
        assert lo <= hi + 1e-6 * max(1.0, abs(hi))
