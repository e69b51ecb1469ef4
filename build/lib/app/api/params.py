"""Query-parameter checks shared by the list endpoints: errors name the parameter."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from fastapi import HTTPException, status

from app.db import repo


def require_choice(value: str | None, choices: Iterable[str], field: str) -> None:
    """422 naming ``field`` when ``value`` is given and not one of ``choices``."""
    options = tuple(choices)
    if value is not None and value not in options:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"{field}: must be one of {', '.join(options)}, got {value!r}",
        )


@contextmanager
def cursor_errors() -> Iterator[None]:
    """A pagination cursor this server did not issue becomes a 400 naming ``cursor``."""
    try:
        yield
    except repo.InvalidCursor as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"cursor: {exc}") from exc
