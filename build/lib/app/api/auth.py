"""Authentication and roles on the HTTP API (bearer API tokens).

``require(role)`` is the one dependency every protected route declares: it resolves the caller
from ``Authorization: Bearer <token>`` (401 with ``WWW-Authenticate`` when missing or invalid),
checks the role (403 naming the role needed) and binds the principal to the request's context so
that every audited row written while serving it names who did it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from app.auth.principal import ANONYMOUS_OPERATOR, Principal, Role, allows, set_current
from app.auth.tokens import looks_like_token
from app.db import auth_repo

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="BearerToken",
    description="An API token from `yarn-sidecar tokens create` (roles: scrape, viewer, "
    "submitter, operator).",
)

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="yarn-sidecar"'}


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, f"Authorization: {message}", CHALLENGE)


def forbidden(need: Role, what: str) -> HTTPException:
    """403 naming the role the caller would need."""
    return HTTPException(status.HTTP_403_FORBIDDEN, f"role: {what} needs the {need.value} role")


async def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """The caller; with authentication off (loopback only) the local operator."""
    settings = request.app.state.sidecar.settings
    if settings.auth == "none":
        return ANONYMOUS_OPERATOR
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise _unauthorized("a bearer token is required")
    token = credentials.credentials
    if not looks_like_token(token):
        raise _unauthorized("invalid or expired token")
    sessions = request.app.state.sidecar.sessions

    def lookup() -> Principal | None:
        with sessions() as session:
            return auth_repo.authenticate(session, token, int(time.time() * 1000))

    principal = await run_in_threadpool(lookup)
    if principal is None:
        raise _unauthorized("invalid or expired token")
    return principal


@cache
def require(need: Role) -> Callable[..., Awaitable[Principal]]:
    """A dependency admitting callers whose role includes ``need``."""

    async def check(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if not allows(principal.role, need):
            raise forbidden(need, "this endpoint")
        set_current(principal)
        return principal

    check.__name__ = f"require_{need.value}"
    return check


async def metrics_access(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """``/metrics``: open when the operator said so, else any token (a scrape token suffices)."""
    if request.app.state.sidecar.settings.metrics_open:
        return
    principal = await authenticate(request, credentials)
    if not allows(principal.role, Role.SCRAPE):
        raise forbidden(Role.SCRAPE, "/metrics")


Viewer = Annotated[Principal, Depends(require(Role.VIEWER))]
Submitter = Annotated[Principal, Depends(require(Role.SUBMITTER))]
Operator = Annotated[Principal, Depends(require(Role.OPERATOR))]
