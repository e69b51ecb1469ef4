"""YARN application tags of deadline jobs, job states and parallelism.

The sidecar tags what it submits ``sidecar-job:<job id>`` (idempotent submission: an app with the
tag is the job's, adopted rather than submitted twice) and ``deadline:<epoch seconds>``. Apps
submitted straight to YARN take part in learning with ``deadline:<epoch seconds>`` and optionally
``tasks:<n>``. YARN lower-cases tags (``docs/yarn.md`` section 4.2), so every tag here is lower
case.

``requestedTasks`` is the declared task count or the input size over the block size rounded up
(seed 004, 5.1.1: "the division of its input size and the HDFS block size").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

JOB_TAG = "sidecar-job:"
DEADLINE_TAG = "deadline:"
TASKS_TAG = "tasks:"
# With Timeline Service v2 the RM reads the flow's name, version and run id from tags with these
# prefixes (any case) and exports them into the ApplicationMaster's environment; the run id is
# parsed as a number. A caller's tag must not set them.
TIMELINE_FLOW_TAG = "timeline_flow_"
RESERVED_PREFIXES = (JOB_TAG, DEADLINE_TAG, TASKS_TAG, TIMELINE_FLOW_TAG)
DEFAULT_BLOCK_SIZE = 128 * 1024 * 1024

# ApplicationSubmissionContext refuses more than 10 tags (YarnConfiguration.APPLICATION_MAX_TAGS)
# and tags longer than 100 ASCII characters; the sidecar adds two of its own. The RM lists tags
# comma-joined, so a comma inside a tag could never be read back. Beyond that, only characters
# that mean nothing to a shell: the NodeManager writes what the RM exports from tags and the
# application name into the AM's launch script as ``export K="value"``, unescaped, so a quote,
# ``$``, a backtick or a backslash there would run as a command. Matched whole (``fullmatch``):
# ``$`` in a pattern also matches before a trailing newline.
MAX_USER_TAGS = 8
TAG_PATTERN = re.compile(r"[A-Za-z0-9._:/=@+-]{1,100}")
# The application name, for the same reason: letters and digits of any script, and ASCII
# punctuation that is inert inside double quotes.
APP_NAME_PATTERN = re.compile(r"\w[\w .:/=@+-]{0,199}")
_EPOCH = re.compile(r"^\d{1,12}(\.\d+)?$")
_COUNT = re.compile(r"^\d{1,9}$")

# The sidecar's job lifecycle. "Holding" states own their granted CPUs.
QUEUED = "queued"
ADMITTED = "admitted"
SUBMITTING = "submitting"
SUBMITTED = "submitted"
KILLING = "killing"
CANCELLING = "cancelling"
FINISHED = "finished"
FAILED = "failed"
KILLED = "killed"
DROPPED = "dropped"
CANCELLED = "cancelled"
JOB_STATES = (
    QUEUED,
    ADMITTED,
    SUBMITTING,
    SUBMITTED,
    KILLING,
    CANCELLING,
    FINISHED,
    FAILED,
    KILLED,
    DROPPED,
    CANCELLED,
)
HOLDING_STATES = (ADMITTED, SUBMITTING, SUBMITTED)
WITH_APP_STATES = (SUBMITTING, SUBMITTED, KILLING, CANCELLING)
FINAL_STATES = (FINISHED, FAILED, KILLED, DROPPED, CANCELLED)


def job_tag(job_id: str) -> str:
    """The tag that makes submission idempotent: at most one RM app carries it."""
    return f"{JOB_TAG}{job_id.lower()}"


def deadline_tag(deadline_ms: int) -> str:
    """``deadline:<epoch seconds>`` (whole seconds, rounded down)."""
    return f"{DEADLINE_TAG}{deadline_ms // 1000}"


def is_reserved(tag: str) -> bool:
    """Tags the sidecar writes itself; a user-supplied one would contradict the job's fields."""
    return tag.lower().startswith(RESERVED_PREFIXES)


@dataclass(frozen=True, slots=True)
class DeadlineTags:
    """What an app's tags say about its deadline and parallelism."""

    deadline_s_epoch: float
    tasks: int | None


def parse_deadline_tags(tags: Iterable[str]) -> DeadlineTags | str:
    """The ``deadline:`` (and optional ``tasks:``) of an app, or why they cannot be used."""
    deadline: float | None = None
    tasks: int | None = None
    for raw in tags:
        tag = raw.strip().lower()
        if tag.startswith(DEADLINE_TAG):
            value = tag.removeprefix(DEADLINE_TAG)
            if not _EPOCH.match(value):
                return f"tag {raw!r} is not deadline:<epoch seconds>"
            if deadline is not None:
                return "more than one deadline: tag"
            deadline = float(value)
        elif tag.startswith(TASKS_TAG):
            value = tag.removeprefix(TASKS_TAG)
            if not _COUNT.match(value) or int(value) < 1:
                return f"tag {raw!r} is not tasks:<n> with n >= 1"
            tasks = int(value)
    if deadline is None:
        return "no deadline: tag"
    return DeadlineTags(deadline, tasks)


def job_id_of(tags: Iterable[str]) -> str | None:
    """The sidecar job an app belongs to, from its ``sidecar-job:`` tag."""
    for tag in tags:
        if tag.lower().startswith(JOB_TAG):
            return tag[len(JOB_TAG) :].lower()
    return None


def requested_tasks(
    tasks: int | None, input_bytes: int | None, block_size: int = DEFAULT_BLOCK_SIZE
) -> int:
    """Declared tasks, or ``ceil(input_bytes / block_size)`` (at least 1)."""
    if tasks is not None:
        if tasks < 1:
            raise ValueError(f"requested_tasks must be >= 1, got {tasks}")
        return tasks
    if input_bytes is None or input_bytes < 1 or block_size < 1:
        raise ValueError("input_bytes and block_size must be >= 1 when tasks are not given")
    return max(-(-input_bytes // block_size), 1)  # exact: a float quotient rounds past 2**53


def mean_parallelism(vcore_seconds: float, elapsed_ms: int) -> int:
    """Average vcores an app held while it ran, rounded up (at least 1)."""
    if elapsed_ms <= 0 or vcore_seconds <= 0:
        return 1
    return max(math.ceil(vcore_seconds / (elapsed_ms / 1000) - 1e-9), 1)
