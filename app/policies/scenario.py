"""Validation helpers for playground scenarios: every error names the field it is about."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from app.policies.base import PolicyError

_T = TypeVar("_T")


class ScenarioError(ValueError):
    """A scenario is invalid. ``field`` is a dotted path such as ``rounds[2].new_demand.A``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_keys(obj: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Unknown keys are errors (``docs/policies.md``: "Unknown keys are errors")."""
    allowed_set = set(allowed)
    for key in obj:
        if key not in allowed_set:
            path = f"{where}.{key}" if where else str(key)
            raise ScenarioError(path, f"unknown key (allowed: {', '.join(sorted(allowed_set))})")


def require(obj: Mapping[str, Any], key: str, where: str) -> Any:
    """Return ``obj[key]`` or raise naming the missing field."""
    if key not in obj:
        raise ScenarioError(f"{where}.{key}" if where else key, "is required")
    return obj[key]


def as_mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` as a JSON object, or an error naming ``where``."""
    if not isinstance(value, Mapping):
        raise ScenarioError(where, f"must be an object, got {type(value).__name__}")
    return value


def as_list(value: Any, where: str) -> list[Any]:
    """``value`` as a JSON array, or an error naming ``where``."""
    if not isinstance(value, list):
        raise ScenarioError(where, f"must be an array, got {type(value).__name__}")
    return value


def as_number(
    value: Any, where: str, *, minimum: float | None = None, positive: bool = False
) -> float:
    """``value`` as a finite float within bounds, or an error naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(where, f"must be a number, got {value!r}")
    num = float(value)
    if num != num or num in (float("inf"), float("-inf")):
        raise ScenarioError(where, "must be finite")
    if positive and num <= 0:
        raise ScenarioError(where, f"must be > 0, got {value!r}")
    if minimum is not None and num < minimum:
        raise ScenarioError(where, f"must be >= {minimum}, got {value!r}")
    return num


def as_str(value: Any, where: str) -> str:
    """``value`` as a string, or an error naming ``where``."""
    if not isinstance(value, str):
        raise ScenarioError(where, f"must be a string, got {value!r}")
    return value


def from_policy(where: str, make: Callable[[], _T]) -> _T:
    """Run a policy call; its ``PolicyError`` becomes a ``ScenarioError`` under ``where``."""
    try:
        return make()
    except PolicyError as exc:
        raise ScenarioError(f"{where}.{exc.field}" if where else exc.field, exc.message) from exc
