"""Comparing scheduler-configuration values, and drift (``docs/yarn.md`` 5.5).

Values are compared as the CapacityScheduler reads them, not as strings: ``"40"``, ``"40.0"`` and
``"40.00"`` are the same percentage; ``[memory=1024,vcores=2]`` and ``[vcores=2, memory=1024]``
the same absolute resource; a ``maximum-capacity`` of ``-1`` means 100.

Drift is a difference between what the sidecar last pushed (or accepted as its baseline) and what
the RM holds now: someone edited the queues by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from app.control.budget import TOTAL, to_hundredths

QueueValues = Mapping[str, Mapping[str, str]]
"""queue path -> relative key (``capacity``, ``maximum-capacity``) -> value as sent/stored."""


def normalise(value: str | None) -> object:
    """A comparable form: hundredths for a percentage, a sorted tuple for absolute resources."""
    if value is None:
        return None
    return _parse(value)


# A plan compares the same few capacity strings several times per tick: each is parsed once.
# The forms are immutable, so a cached one can be shared.
@lru_cache(maxsize=16384)
def _parse(value: str) -> object:
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        parts = (p.split("=", 1) for p in text[1:-1].split(",") if "=" in p)
        return tuple(sorted((k.strip(), v.strip()) for k, v in parts))
    try:
        number = float(text)
    except ValueError:
        return text
    return TOTAL if number == -1 else to_hundredths(number)


def same_value(a: str | None, b: str | None) -> bool:
    """True when the RM would read ``a`` and ``b`` as the same value."""
    return normalise(a) == normalise(b)


def differences(expected: QueueValues, live: QueueValues) -> dict[str, dict[str, dict[str, str]]]:
    """Per queue and key, the expected and live values that differ (missing counts as a value)."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for queue, values in sorted(expected.items()):
        for key, want in sorted(values.items()):
            have = live.get(queue, {}).get(key)
            if not same_value(want, have):
                out.setdefault(queue, {})[key] = {"expected": want, "live": str(have)}
    return out
