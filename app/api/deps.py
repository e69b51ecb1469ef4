"""FastAPI dependencies as ``Annotated`` aliases (``SessionDep``, ``StateDep``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
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
