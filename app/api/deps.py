"""FastAPI dependencies as ``Annotated`` aliases (``SessionDep``, ``StateDep``), and the answer
to a request refused for load (``retry_later``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from app.api.state import SidecarState


async def get_state(request: Request) -> SidecarState:
    """The lifespan's resources. A coroutine, though it never waits: FastAPI runs a plain
    function dependency in a worker thread, and that hop (a queue put, a thread wake-up, a
    call back into the event loop) cost every request more than reading an attribute."""
    return _state(request)


def _state(request: Request) -> SidecarState:
    state: SidecarState = request.app.state.sidecar
    return state


def get_session(request: Request) -> Iterator[Session]:
    """A read session per request; routes that write open their own transaction. A plain
    generator on purpose: closing the session returns its connection to the pool, which talks
    to the database, and must not block the event loop."""
    with _state(request).sessions() as session:
        yield session


StateDep = Annotated[SidecarState, Depends(get_state)]
SessionDep = Annotated[Session, Depends(get_session)]


def retry_later(status_code: int, detail: str, retry_after_s: int) -> HTTPException:
    """A refusal for load (429: this caller's kind of work is at its limit; 503: the service is
    saturated): nothing was done, and ``Retry-After`` says when asking again may succeed."""
    return HTTPException(status_code, detail, headers={"Retry-After": str(retry_after_s)})
