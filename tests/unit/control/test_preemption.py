"""The "effective now / pending container completion" split of a capacity change
(``app.control.preemption``) and when the RM's configuration means preemption
(``SchedulerSettings.preempts``)."""

from __future__ import annotations

import pytest

from app.control.preemption import guarantees, split
from app.domain.model import SchedulerSettings
from app.yarn.mapping import scheduler_settings

PCPP = (
    "org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity."
    "ProportionalCapacityPreemptionPolicy"
)


def test_full_cluster_without_preemption_waits_for_containers() -> None:
    # 8 vcores all used by etl (guarantee 4 -> 2); deadline 2 -> 4 must wait for etl's containers
    got = split({"etl": (4.0, 2.0), "deadline": (2.0, 4.0)}, {"etl": 8.0}, 8.0, False)
    assert got["queues"]["deadline"]["effective_now_vcores"] == 0
    assert got["queues"]["deadline"]["pending_vcores"] == 2
    assert got["queues"]["etl"]["pending_vcores"] == 2  # it runs 6 above its new 2
    assert (got["effective_now_vcores"], got["pending_vcores"]) == (0, 2)
    assert "finish" in got["pending_until"]


def test_idle_vcores_and_own_borrowing_count_as_effective_now() -> None:
    # 3 vcores free; adhoc already uses 3 on a guarantee of 2 -> 4: 1 held, 1 from the free pool
    got = split(
        {"adhoc": (2.0, 4.0), "default": (4.0, 2.0)},
        {"adhoc": 3.0, "default": 2.0},
        8.0,
        True,
        {"monitoring_interval_ms": 3000, "max_wait_before_kill_ms": 15000},
    )
    assert got["queues"]["adhoc"]["effective_now_vcores"] == pytest.approx(2.0)
    assert got["queues"]["default"]["effective_now_vcores"] == pytest.approx(2.0)
    assert got["pending_vcores"] == 0 and got["preemption"]
    assert got["pending_until"] == "preemption (about 18 s)"


def test_guarantees_from_percent_and_absolute_lines() -> None:
    assert guarantees({"live_h": 2500, "planned_h": 5000}, 8.0) == (2.0, 4.0)
    assert guarantees({"live": {"vcores": 1}, "planned": {"vcores": 3}}, 8.0) == (1.0, 3.0)
    assert guarantees({}, 8.0) is None


@pytest.mark.parametrize(
    ("conf", "preempts"),
    [
        ({}, False),
        ({"yarn.resourcemanager.scheduler.monitor.enable": "false"}, False),
        (
            {
                "yarn.resourcemanager.scheduler.monitor.enable": "true",
                "yarn.resourcemanager.scheduler.monitor.policies": PCPP,
            },
            True,
        ),
        (
            {
                "yarn.resourcemanager.scheduler.monitor.enable": "true",
                "yarn.resourcemanager.scheduler.monitor.policies": PCPP,
                "yarn.resourcemanager.monitor.capacity.preemption.observe_only": "true",
            },
            False,
        ),
        (
            {
                "yarn.resourcemanager.scheduler.monitor.enable": "true",
                "yarn.resourcemanager.scheduler.monitor.policies": "some.OtherPolicy",
            },
            False,
        ),
    ],
)
def test_preempts_only_with_the_monitor_and_the_capacity_policy(
    conf: dict[str, str], preempts: bool
) -> None:
    assert scheduler_settings(conf).preempts is preempts
    assert SchedulerSettings().preempts is False
