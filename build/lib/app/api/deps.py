"""FastAPI dependencies as ``Annotated`` aliases (``SessionDep``, ``StateDep``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.api.state import SidecarState


def get_state(request: Request) -> SidecarState:
    """The lifespan's resources."""
    state: SidecarState = request.app.state.sidecar
    return state


def get_session(request: Request) -> Iterator[Session]:
    """A read session per request; routes that write open their own transaction."""
    with get_state(request).sessions() as session:
        yield session


StateDep = Annotated[SidecarState, Depends(get_state)]
SessionDep = Annotated[Session, Depends(get_session)]
