"""Validation helpers for playground scenarios: every error is a ``PolicyError`` naming the field
it is about (the one error of the policy layer; numbers are checked by ``finite_number``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from app.policies.base import PolicyError

_T = TypeVar("_T")


def check_keys(obj: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    """Unknown keys are errors (``docs/policies.md``: "Unknown keys are errors")."""
    allowed_set = set(allowed)
    for key in obj:
        if key not in allowed_set:
            path = f"{where}.{key}" if where else str(key)
            raise PolicyError(path, f"unknown key (allowed: {', '.join(sorted(allowed_set))})")


def require(obj: Mapping[str, Any], key: str, where: str) -> Any:
    """Return ``obj[key]`` or raise naming the missing field."""
    if key not in obj:
        raise PolicyError(f"{where}.{key}" if where else key, "is required")
    return obj[key]


def as_mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` as a JSON object, or an error naming ``where``."""
    if not isinstance(value, Mapping):
        raise PolicyError(where, f"must be an object, got {type(value).__name__}")
    return value


def as_list(value: Any, where: str) -> list[Any]:
    """``value`` as a JSON array, or an error naming ``where``."""
    if not isinstance(value, list):
        raise PolicyError(where, f"must be an array, got {type(value).__name__}")
    return value


def as_str(value: Any, where: str) -> str:
    """``value`` as a string, or an error naming ``where``."""
    if not isinstance(value, str):
        raise PolicyError(where, f"must be a string, got {value!r}")
    return value


def from_policy(where: str, make: Callable[[], _T]) -> _T:
    """Run a policy call; its ``PolicyError`` is raised again with ``where`` before its field."""
    try:
        return make()
    except PolicyError as exc:
        raise PolicyError(f"{where}.{exc.field}" if where else exc.field, exc.message) from exc
