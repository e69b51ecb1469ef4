"""``config.check_observable``: a policy whose parameters decide on view fields the live view
cannot fill is refused, naming what is missing and what would work instead."""

from __future__ import annotations

import pytest

from app.control.config import HISTORY_VIEW, LIVE_VIEW, check_observable
from app.policies.base import PolicyError
from tests.unit.services.test_controller import config


@pytest.mark.parametrize("weighting", ["JD", "TD", "PU", "DU", "RU", "JT", "EQ", "None"])
def test_weightings_from_the_rms_numbers_pass(weighting: str) -> None:
    check_observable(config(policy=f"fawkes:{weighting}"))


@pytest.mark.parametrize(
    ("weighting", "field", "what"),
    [
        ("DD", "waiting_input_bytes", "input bytes of waiting jobs"),
        ("TT", "completed_tasks", "tasks completed"),
        ("JS", "slowdowns", "slowdowns of running jobs"),
    ],
)
def test_weightings_on_unreported_numbers_are_refused_unless_the_view_has_them(
    weighting: str, field: str, what: str
) -> None:
    cfg = config(policy=f"fawkes:{weighting}")
    with pytest.raises(PolicyError) as info:
        check_observable(cfg)
    assert info.value.field == "policy" and what in info.value.message
    # the alternatives offered are exactly the weightings the live view can feed
    offered = info.value.message.split(", or choose one of ")[1]
    assert offered.split(", ") == [
        f"fawkes:{w}" for w in ("JD", "TD", "PU", "DU", "RU", "JT", "EQ", "None")
    ]
    check_observable(cfg, frozenset({field}))


def test_policies_without_needs_and_static_pass() -> None:
    for name in ("ltrf", "mlrf", "rrf", "proportional", "static"):
        check_observable(config(policy=name))


@pytest.mark.parametrize("weighting", ["DD", "TT", "JS"])
def test_the_history_view_feeds_every_fawkes_weighting(weighting: str) -> None:
    cfg = config(policy=f"fawkes:{weighting}")
    with pytest.raises(PolicyError) as info:
        check_observable(cfg, LIVE_VIEW)
    assert "YARN_SIDECAR_JOBHISTORY_URL" in info.value.message
    check_observable(cfg, HISTORY_VIEW)
