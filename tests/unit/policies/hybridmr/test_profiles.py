"""The live profile book: chain fallback, Algorithm 1 over a signature's runs, the estimation
error measured run by run from the runs before it, and PRISM's phase profile with its advice."""

from __future__ import annotations

import pytest

from app.policies.hybridmr.profiles import ProfileBook, Run, place

WC = ("p:wc", "u:ann|t:mapreduce", "q:root.etl", "*")
SORT = ("p:sort", "u:ann|t:mapreduce", "q:root.etl", "*")


def run(chain: tuple[str, ...], k: int, size: float, total: float, **kw: float) -> Run:
    return Run(
        app_id=f"application_1_{k:04d}",
        chain=chain,
        finished_ms=k * 1000,
        input_bytes=size,
        cluster_size=16,
        map_s=total * 0.6,
        reduce_s=total * 0.4,
        total_s=total,
        tasks=4,
        **kw,  # type: ignore[arg-type]
    )


def test_expected_times_walk_the_chain_from_the_most_specific_level() -> None:
    book = ProfileBook([run(WC, 1, 100, 10), run(WC, 2, 100, 30), run(SORT, 3, 0, 100)])
    assert book.expected_total_s(WC) == 20  # median of the signature's two runs
    # an unseen signature of the same user and type falls back to all three runs
    assert book.expected_total_s(("p:new", *WC[1:])) == 30
    assert book.expected_total_s(("p:new", "u:bob|t:spark", "q:other", "x")) is None
    # input sizes only from runs that read input: sort read none, so the user level gives wc's
    assert book.expected_input_bytes(SORT) == 100
    assert book.expected_input_bytes(("p:x", "u:bob|t:spark", "q:other", "x")) is None


def test_algorithm_1_estimates_by_input_size_and_errors_are_measured_from_earlier_runs() -> None:
    book = ProfileBook([run(WC, 1, 100, 10), run(WC, 2, 200, 20), run(WC, 3, 400, 50)])
    est = book.estimate("p:wc", 300, 16)
    # linear between the 200 B (20 s) and 400 B (50 s) runs
    assert est.rule == "data_size" and est.total_s == pytest.approx(35)
    err = book.errors("p:wc")
    # run 2 from run 1 (proportional): 20 -> 0 error; run 3 from runs 1-2 (linear, 400 B):
    # 40 s against 50 s -> 0.2
    assert err.samples == 2
    assert err.mean == pytest.approx(0.1)
    assert err.p90 == pytest.approx(0.2)


def test_runs_without_input_are_estimated_by_the_median_of_earlier_runs() -> None:
    book = ProfileBook([run(SORT, 1, 0, 10), run(SORT, 2, 0, 30), run(SORT, 3, 0, 15)])
    err = book.errors("p:sort")
    # 30 s estimated from [10] -> |10 - 30| / 30 = 2/3; 15 s from median(10, 30) = 20 -> 1/3
    assert err.mean == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert err.p90 == pytest.approx(2 / 3)
    assert book.estimate("p:sort", 100, 16).total_s is None


def test_phase_profile_gives_peak_and_mean_vcores_and_rounds_the_advice_up() -> None:
    book = ProfileBook(
        [
            run(
                WC,
                1,
                100,
                10,
                map_tasks=3,
                map_mean_vcores=2.0,
                map_peak_vcores=3.0,
                map_vcores_per_task=1.0,
                reduce_vcores_per_task=1.5,
            ),
            run(
                WC,
                2,
                100,
                20,
                map_tasks=5,
                map_mean_vcores=4.0,
                map_peak_vcores=5.0,
                map_vcores_per_task=1.0,
                reduce_vcores_per_task=1.0,
            ),
        ]
    )
    phases = book.phase_profile("p:wc")
    assert phases["map"]["duration_s"] == pytest.approx(9)  # mean of 6 and 12
    assert (phases["map"]["tasks"], phases["map"]["mean_vcores"]) == (4, 3.0)
    assert phases["map"]["peak_vcores"] == 4.0
    assert phases["map"]["advice"] == {"vcores_per_container": 1}
    assert phases["reduce"]["advice"] == {"vcores_per_container": 2}
    assert book.phase_profile("p:none") == {}


def test_placement_sends_a_job_the_shared_partition_would_make_late_to_the_labelled_one() -> None:
    book = ProfileBook([run(WC, 1, 100, 10), run(WC, 2, 200, 20)])
    # Algorithm 1 with the input size: 300 B -> 30 s (extrapolated) against 25 s desired
    late = place(book, WC, 300, desired_s=25, shared_size=16)
    assert (late.partition, late.estimate_s, late.rule) == (
        "native",
        pytest.approx(30),
        "data_size",
    )
    assert "would miss it" in late.reason
    on_time = place(book, WC, 300, desired_s=31, shared_size=16)
    assert on_time.partition == "virtual" and "meets it" in on_time.reason
    # no input size: the median run time of the chain's most specific level (15 s); equality
    # goes native, as Algorithm 2's ">=" does
    assert place(book, WC, None, desired_s=15, shared_size=16).partition == "native"
    assert place(book, WC, None, desired_s=15.5, shared_size=16).partition == "virtual"
    unknown = place(book, ("p:x", "u:z|t:y", "q:w", "nothing"), None, 1, 16)
    assert (unknown.partition, unknown.estimate_s) == ("virtual", None)


def test_partitions_are_estimated_apart_and_their_ratio_is_the_slowdown() -> None:
    book = ProfileBook(
        [
            run(WC, 1, 0, 30),
            run(WC, 2, 0, 34),
            Run("application_1_0003", WC, 3000, 0, 16, 6, 4, 10, 4, partition="native"),
        ]
    )
    assert book.expected_total_s(WC, "virtual") == 32
    assert book.expected_total_s(WC, "native") == 10
    assert book.slowdown("p:wc") == pytest.approx(3.2)
    assert book.summary("p:wc")["partitions"] == {"virtual": 2, "native": 1}
    # placement weighs the shared partition's runs only: 32 s against 31 s desired -> native
    assert place(book, WC, None, desired_s=31, shared_size=16).partition == "native"
    assert book.slowdown("p:none") is None
