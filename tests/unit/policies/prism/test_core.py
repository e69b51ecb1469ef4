"""PRISM (seed 003 sections 3 to 5): utility eqs. 1 to 6 and Algorithm 1, by hand-computed
examples and properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.policies.base import PolicyError
from app.policies.prism import core as pr
from app.policies.prism.core import (
    Candidate,
    Demand,
    JobProfile,
    NodeView,
    PausedTask,
    PhaseProfile,
    PrismJob,
    PrismParams,
    TaskCounts,
)

P = PhaseProfile
PROFILE = JobProfile(
    map=P(1, 1024, 10), merge=P(1, 2048, 5), shuffle=P(1, 1024, 20), reduce=P(2, 1024, 8)
)
CAP = Demand(8, 8192)
# A: <4, 2048> -> shares <0.5, 0.25>, dominant 0.5; B: <1, 1024> -> dominant 0.125
A = PrismJob("A", PROFILE, Demand(4, 2048), TaskCounts(pending=4, running=2))
B = PrismJob("B", PROFILE, Demand(1, 1024), TaskCounts(pending=2, running=0))
NODE = NodeView("n1", CAP, Demand(4, 4096))
PAUSED = (PausedTask("a1", "A", "merge", paused_since_s=90),)


# ---------------------------------------------------------------- eqs. 1 to 6


def test_eq3_unfairness_is_the_largest_pairwise_gap() -> None:
    # shares 0.5, 0.125, 0.3: max |s_j - s_j'| = 0.5 - 0.125
    assert pr.unfairness([0.5, 0.125, 0.3]) == pytest.approx(0.375)
    assert pr.unfairness([0.7]) == 0.0


def test_eq3_share_is_dominant_by_default_and_min_as_printed() -> None:
    assert pr.job_share(Demand(4, 2048), CAP) == pytest.approx(0.5)
    assert pr.job_share(Demand(4, 2048), CAP, "min") == pytest.approx(0.25)


def test_eq2_fairness_utility_is_the_fall_in_unfairness() -> None:
    usages = {"A": A.usage, "B": B.usage}
    # B + <1, 1024> -> 0.25: spread 0.5 - 0.125 = 0.375 before, 0.5 - 0.25 = 0.25 after
    assert pr.fairness_utility(usages, "B", Demand(1, 1024), CAP, "dominant") == pytest.approx(
        0.125
    )
    # A + <1, 2048> -> <5, 4096> -> 0.625: spread 0.5 after, utility -0.125
    assert pr.fairness_utility(usages, "A", Demand(1, 2048), CAP, "dominant") == pytest.approx(
        -0.125
    )


def test_eq5_leading_phase_gain() -> None:
    # 6 remaining, 2 running: 6 / 2 - 6 / 3 = 1
    assert pr.leading_phase_utility(6, 2, 0.1) == pytest.approx(1.0)
    # none running: 2 / 0.1 - 2 / 1 = 18
    assert pr.leading_phase_utility(2, 0, 0.1) == pytest.approx(18.0)
    assert pr.leading_phase_utility(0, 3, 0.1) == 0.0


def test_eq6_urgency_grows_quadratically_with_the_pause() -> None:
    # a = 0.1: 10 s -> 10, 20 s -> 40, 40 s -> 160
    assert [pr.urgency(t, 0.1) for t in (0, 10, 20, 40)] == pytest.approx([0, 10, 40, 160])
    jobs = {"A": A, "B": B}
    early = pr.score(Candidate("A", "merge", "a1", 10), jobs, NODE, PrismParams())
    late = pr.score(Candidate("A", "merge", "a1", 20), jobs, NODE, PrismParams())
    assert (early.perf, late.perf) == pytest.approx((10, 40))
    # fairness part unchanged (-0.125), so U = -0.125 + perf
    assert (early.utility, late.utility) == pytest.approx((9.875, 39.875))


def test_eq1_alpha_weights_the_performance_utility() -> None:
    jobs = {"A": A, "B": B}
    scored = pr.score(Candidate("B", "map", None), jobs, NODE, PrismParams(alpha=0.5))
    # 0.125 + 0.5 * 18
    assert scored.utility == pytest.approx(9.125)


# ---------------------------------------------------------------- Algorithm 1


def test_algorithm_1_picks_in_utility_order_until_nothing_fits() -> None:
    # now 100, a1 paused since 90: T_wait 10. Free <4, 4096>.
    # step 1: B map  0.125 + (2/0.1 - 2/1) = 18.125   (B's first map task)
    #         a1 merge -0.125 + 0.1 * 10^2 = 9.875
    #         A map  -0.125 + (6/2 - 6/3) = 0.875       -> B map; free <3, 3072>
    # step 2: B at 0.25. a1 merge: A -> 0.625, spread 0.5 - 0.25 -> 0.375: 9.875
    #         B map: B -> 0.375, spread 0.125: 0.125 + (2/1 - 2/2) = 1.125 -> a1; free <2, 1024>
    # step 3: B map 1.125 (A at 0.625, B -> 0.375); A map -0.125 + 1 = 0.875 -> B; free <1, 0>
    # step 4: only A map left (B has no pending map); 1024 MB does not fit 0 -> stop
    out = pr.schedule(NODE, [A, B], PAUSED, now_s=100)
    got = [(p.chosen.candidate.job_id, p.chosen.candidate.phase) for p in out.picks]
    assert got == [("B", "map"), ("A", "merge"), ("B", "map")]
    utilities = [p.chosen.utility for p in out.picks]
    assert utilities == pytest.approx([18.125, 9.875, 1.125])
    assert [p.chosen.fairness for p in out.picks] == pytest.approx([0.125, -0.125, 0.125])
    assert out.picks[1].chosen.candidate.task_id == "a1"
    assert [p.free_after for p in out.picks] == [
        Demand(3, 3072),
        Demand(2, 1024),
        Demand(1, 0),
    ]
    assert out.free_after == Demand(1, 0)
    assert out.stop_reason == "no candidate phase fits the free resources"
    assert [s.candidate.job_id for s in out.last_considered] == ["A"]
    # the first step considered all three candidates
    assert len(out.picks[0].considered) == 3
    assert out.picks[0].duration_s == 10


def test_algorithm_1_drops_candidates_with_non_positive_utility() -> None:
    # alpha 0: only fairness counts. A (share 0.5) is the only job with pending work:
    # A map -> 0.625, spread grows from 0.375 to 0.5: U = -0.125 <= 0 -> nothing starts
    b_idle = PrismJob("B", PROFILE, Demand(1, 1024))
    out = pr.schedule(NODE, [A, b_idle], (), 100, PrismParams(alpha=0.0))
    assert out.picks == ()
    assert out.stop_reason == "no fitting candidate phase has a positive utility"
    assert out.last_considered[0].utility == pytest.approx(-0.125)


def test_a_just_paused_task_alone_has_no_utility() -> None:
    # single job: fairness utility 0; T_wait 0 -> urgency 0 -> U = 0, not scheduled
    solo = PrismJob("A", PROFILE, Demand(4, 2048))
    out = pr.schedule(NODE, [solo], (PausedTask("a1", "A", "merge", 100),), 100)
    assert out.picks == ()


def test_no_candidates_at_all() -> None:
    out = pr.schedule(NODE, [PrismJob("A", PROFILE)], (), 0)
    assert out.stop_reason.startswith("no candidate phase:")


def test_top_k_limits_new_tasks_to_the_jobs_with_the_highest_deficit() -> None:
    out = pr.schedule(NODE, [A, B], (), 100, PrismParams(top_k=1))
    # only B (share 0.125 < 0.5) offers new tasks while it stays the lowest; it has 2 maps
    first = out.picks[0].considered
    assert {s.candidate.job_id for s in first} == {"B"}


def test_ties_go_to_the_smaller_job_id() -> None:
    x = PrismJob("x", PROFILE, Demand(), TaskCounts(1, 0))
    w = PrismJob("w", PROFILE, Demand(), TaskCounts(1, 0))
    node = NodeView("n", CAP, Demand(1, 1024))  # room for exactly one map
    out = pr.schedule(node, [x, w], (), 0)
    assert [p.chosen.candidate.job_id for p in out.picks] == ["w"]


def test_reduce_tasks_start_with_shuffle_and_count_per_type() -> None:
    job = PrismJob("R", PROFILE, Demand(), reduces=TaskCounts(pending=1, running=1))
    out = pr.schedule(NODE, [job], (PausedTask("r0", "R", "reduce", 95),), 100)
    # shuffle: 2 / 1 - 2 / 2 = 1; paused reduce: 0.1 * 5^2 = 2.5 -> reduce first, then shuffle
    assert [p.chosen.candidate.phase for p in out.picks] == ["reduce", "shuffle"]
    assert [p.chosen.perf for p in out.picks] == pytest.approx([2.5, 1.0])


def test_task_level_fallback_gives_every_phase_the_container() -> None:
    prof = JobProfile.task_level(P(1, 1024), P(2, 2048))
    assert prof.merge == prof.map == P(1, 1024)
    assert prof.shuffle == prof.reduce == P(2, 2048)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"epsilon": 1.0}, "epsilon"),
        ({"epsilon": 0}, "epsilon"),
        ({"alpha": -1}, "alpha"),
        ({"urgency_a": 0}, "urgency_a"),
        ({"top_k": 0}, "top_k"),
        ({"share": "max"}, "share"),
        ({"beta": 1}, "beta"),
    ],
)
def test_parameters_are_validated_by_name(values: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError) as err:
        pr.make_params(values)
    assert err.value.field == field


def test_inputs_are_validated() -> None:
    with pytest.raises(PolicyError) as err:
        PausedTask("t", "A", "map", 0)
    assert err.value.field == "next_phase"
    with pytest.raises(PolicyError) as err:
        NodeView("n", CAP, Demand(9, 0))
    assert err.value.field == "node.free"
    with pytest.raises(PolicyError) as err:
        pr.schedule(NODE, [A, A], (), 0)
    assert err.value.field == "jobs[1].id"
    with pytest.raises(PolicyError) as err:
        pr.schedule(NODE, [A], (PausedTask("t", "Z", "merge", 0),), 0)
    assert err.value.field == "paused[0].job_id"
    twice = (PausedTask("t", "A", "merge", 0), PausedTask("t", "A", "merge", 0))
    with pytest.raises(PolicyError) as err:
        pr.schedule(NODE, [A], twice, 10)
    assert err.value.field == "paused[1].id"
    with pytest.raises(PolicyError) as err:
        pr.schedule(NODE, [A], (PausedTask("t", "A", "merge", 50),), 10)
    assert err.value.field == "paused[0].paused_since_s"


# ---------------------------------------------------------------- properties

_res = st.floats(0, 4, allow_nan=False)
_phase = st.builds(PhaseProfile, _res, st.floats(0, 4096, allow_nan=False))
_profile = st.builds(JobProfile, _phase, _phase, _phase, _phase)
_counts = st.builds(TaskCounts, st.integers(0, 5), st.integers(0, 5))


@st.composite
def _cluster(draw: st.DrawFn) -> tuple[NodeView, list[PrismJob], list[PausedTask]]:
    cap = Demand(draw(st.floats(1, 16)), draw(st.floats(1024, 16384)))
    free = Demand(draw(st.floats(0, 1)) * cap.vcores, draw(st.floats(0, 1)) * cap.memory_mb)
    names = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=5, unique=True))
    jobs = [
        PrismJob(
            n,
            draw(_profile),
            Demand(draw(st.floats(0, 32)), draw(st.floats(0, 32768))),
            draw(_counts),
            draw(_counts),
        )
        for n in names
    ]
    paused = [
        PausedTask(
            f"t{k}",
            draw(st.sampled_from(names)),
            draw(st.sampled_from(["merge", "reduce"])),
            draw(st.floats(0, 100)),
        )
        for k in range(draw(st.integers(0, 4)))
    ]
    return NodeView("n", cap, free), jobs, paused


@settings(max_examples=300, deadline=None)
@given(
    cluster=_cluster(),
    alpha=st.floats(0, 5),
    share=st.sampled_from(pr.SHARES),
    top_k=st.integers(1, 6),
)
def test_algorithm_1_never_over_commits_the_node(
    cluster: tuple[NodeView, list[PrismJob], list[PausedTask]],
    alpha: float,
    share: str,
    top_k: int,
) -> None:
    node, jobs, paused = cluster
    params = PrismParams(alpha=alpha, share=share, top_k=top_k)
    out = pr.schedule(node, jobs, paused, 100, params)
    used_v = sum(p.chosen.demand.vcores for p in out.picks)
    used_m = sum(p.chosen.demand.memory_mb for p in out.picks)
    assert used_v <= node.free.vcores + 1e-6
    assert used_m <= node.free.memory_mb + 1e-6
    assert all(p.chosen.fits and p.chosen.utility > 0 for p in out.picks)
    # every paused task starts at most once; no job starts more new tasks than it has pending
    restarted = [p.chosen.candidate.task_id for p in out.picks if p.chosen.candidate.task_id]
    assert len(restarted) == len(set(restarted))
    by_id = {j.id: j for j in jobs}
    for job_id, job in by_id.items():
        for task_type, leading in pr.LEADING.items():
            new = [
                p
                for p in out.picks
                if p.chosen.candidate.job_id == job_id
                and p.chosen.candidate.phase == leading
                and p.chosen.candidate.leading
            ]
            assert len(new) <= job.counts(task_type).pending
    # the loop stops only when nothing eligible is left
    assert not any(s.fits and s.utility > 0 for s in out.last_considered)
