"""Job signatures: what makes two submissions "the same recurring job" (history-based
estimation as in 3Sigma and Jockey: recurring jobs repeat their work, so their past runs predict
the next one).

A signature is an explicit profile (a ``profile:<name>`` tag or the job's ``profile`` field),
else the application name with digits, dates and hex ids normalised, plus application type, user
and queue. ``Keys`` is the fallback chain the estimator walks: signature -> user+type -> queue ->
global. Pure string functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from app.domain.model import leaf_name

GLOBAL = "*"
_DATE = re.compile(r"\d{4}[-_/]?\d{2}[-_/]?\d{2}([T _-]?\d{2}[:_-]?\d{2}([:_-]?\d{2})?)?")
_HEX = re.compile(r"(?<![0-9a-z])[0-9a-f]{8,}(?![0-9a-z])")
_DIGITS = re.compile(r"\d+")


def normalise_name(name: str) -> str:
    """``etl-2024-05-01-run42`` and ``etl-2024-05-02-run43`` both become ``etl-<date>-run<n>``."""
    out = _DATE.sub("<date>", name.strip().lower())
    out = _HEX.sub("<id>", out)
    return _DIGITS.sub("<n>", out)


@dataclass(frozen=True, slots=True)
class Keys:
    """A job's estimator keys, most specific first."""

    signature: str
    user_type: str
    queue: str

    def chain(self) -> tuple[str, str, str, str]:
        """Keys from most to least specific, ending with the global key."""
        return (self.signature, self.user_type, self.queue, GLOBAL)


def profile_from_tags(tags: Iterable[str]) -> str | None:
    """The ``profile:<name>`` tag's name, if any."""
    for tag in tags:
        if tag.startswith("profile:") and len(tag) > len("profile:"):
            return tag[len("profile:") :]
    return None


def keys_for(
    *,
    name: str,
    app_type: str,
    user: str,
    queue: str,
    profile: str | None = None,
    tags: Iterable[str] = (),
) -> Keys:
    """The default signature rule (module docstring)."""
    prof = profile or profile_from_tags(tags)
    user_type = f"u:{user}|t:{app_type.lower()}"
    # The leaf: YARN reports an app's queue by its leaf name, a job names the full path.
    leaf = leaf_name(queue)
    sig = f"p:{prof}" if prof else f"n:{normalise_name(name)}|{user_type}|q:{leaf}"
    return Keys(sig, user_type, f"q:{leaf}")


def size_class(tasks: int) -> int:
    """Power-of-two class of a task count; stands in for the name where a trace has none."""
    return max(0, int(tasks).bit_length() - 1)
