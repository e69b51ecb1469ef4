"""Roles and the acting principal.

The principal of the request being served lives in a context variable, so the database layer can
stamp every row it writes on that request (decisions, policy changes, jobs, cancellations) without
every service passing it along. Background loops run without one and are recorded as ``None``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    """What a token may do; each role includes the ones before it, except ``scrape``."""

    SCRAPE = "scrape"  # /metrics only
    VIEWER = "viewer"  # read everything except secrets
    SUBMITTER = "submitter"  # plus submit, see and cancel its own deadline jobs
    OPERATOR = "operator"  # plus policy, mode, bounds, any job, raw commands, tokens


_RANK = {Role.SCRAPE: 0, Role.VIEWER: 1, Role.SUBMITTER: 2, Role.OPERATOR: 3}


def allows(have: Role, need: Role) -> bool:
    """Whether a principal with role ``have`` may do what needs ``need``."""
    if need is Role.SCRAPE:
        return True
    if have is Role.SCRAPE:
        return False
    return _RANK[have] >= _RANK[need]


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the user it acts for, its role and the token's name."""

    user: str
    role: Role
    token: str | None = None

    @property
    def label(self) -> str:
        """How the audit trail names it."""
        return self.user if self.token in (None, self.user) else f"{self.user} (token {self.token})"


# Authentication off (loopback only): the caller is the local operator.
ANONYMOUS_OPERATOR = Principal(user="anonymous", role=Role.OPERATOR, token=None)

_CURRENT: ContextVar[Principal | None] = ContextVar("sidecar_principal", default=None)


def current() -> Principal | None:
    """The principal of the request being served, if any."""
    return _CURRENT.get()


def current_label() -> str | None:
    """The audit label of the current principal (column default for audited rows)."""
    p = _CURRENT.get()
    return p.label if p is not None else None


def current_user() -> str | None:
    """The user the current principal acts for (owner of the jobs it submits)."""
    p = _CURRENT.get()
    return p.user if p is not None else None


def set_current(principal: Principal | None) -> None:
    """Bind ``principal`` to the current context (a request's task)."""
    _CURRENT.set(principal)


@contextmanager
def acting_as(principal: Principal | None) -> Iterator[None]:
    """Run a block as ``principal`` (the CLI and tests)."""
    token = _CURRENT.set(principal)
    try:
        yield
    finally:
        _CURRENT.reset(token)
