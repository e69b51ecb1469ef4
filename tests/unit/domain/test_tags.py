"""Tags, states and parallelism of deadline jobs (``app.domain.tags``)."""

from __future__ import annotations

import pytest

from app.domain.tags import (
    DeadlineTags,
    deadline_tag,
    is_reserved,
    job_id_of,
    job_tag,
    mean_parallelism,
    parse_deadline_tags,
    requested_tasks,
)

MIB = 1024 * 1024


def test_job_and_deadline_tags_are_lower_case_and_whole_seconds() -> None:
    assert job_tag("ABCdef") == "sidecar-job:abcdef"
    assert deadline_tag(1_700_000_600_999) == "deadline:1700000600"
    assert job_id_of(["x", "sidecar-job:abc"]) == "abc"
    assert job_id_of(["deadline:1"]) is None


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (["deadline:1700000600"], DeadlineTags(1_700_000_600.0, None)),
        (["team-a", "DEADLINE:1700000600", "tasks:12"], DeadlineTags(1_700_000_600.0, 12)),
        (["deadline:1700000600.5"], DeadlineTags(1_700_000_600.5, None)),
        (["tasks:3"], "no deadline: tag"),
        (["deadline:soon"], "tag 'deadline:soon' is not deadline:<epoch seconds>"),
        (["deadline:1", "deadline:2"], "more than one deadline: tag"),
        (["deadline:1", "tasks:0"], "tag 'tasks:0' is not tasks:<n> with n >= 1"),
        (["deadline:1", "tasks:-2"], "tag 'tasks:-2' is not tasks:<n> with n >= 1"),
    ],
)
def test_parse_deadline_tags(tags: list[str], expected: DeadlineTags | str) -> None:
    assert parse_deadline_tags(tags) == expected


def test_requested_tasks_from_input_size_rounds_up() -> None:
    # seed 004, 5.1.1: tasks = input size / block size (rounded up to whole tasks).
    assert requested_tasks(None, 1024 * MIB, 128 * MIB) == 8
    assert requested_tasks(None, 128 * MIB + 1, 128 * MIB) == 2
    assert requested_tasks(None, 1, 128 * MIB) == 1
    # exact past 2**53, where a float quotient rounds 1 + 2**-53 down to 1
    assert requested_tasks(None, 2**53 + 1, 2**53) == 2
    assert requested_tasks(None, 2**63 - 1, 1) == 2**63 - 1
    assert requested_tasks(7, None) == 7
    with pytest.raises(ValueError):
        requested_tasks(None, None)
    with pytest.raises(ValueError):
        requested_tasks(0, None)


def test_mean_parallelism() -> None:
    assert mean_parallelism(30, 10_000) == 3
    assert mean_parallelism(31, 10_000) == 4
    assert mean_parallelism(0, 10_000) == 1
    assert mean_parallelism(30, 0) == 1


def test_reserved_prefixes() -> None:
    assert is_reserved("Deadline:5")
    assert is_reserved("sidecar-job:x")
    assert is_reserved("tasks:2")
    assert not is_reserved("team-a")
