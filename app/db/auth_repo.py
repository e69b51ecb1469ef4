"""API token storage: create (hash only), list, revoke, and look a presented token up."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.auth.principal import Principal, Role
from app.auth.tokens import new_token, token_hash
from app.db.auth_models import ApiToken


class TokenError(ValueError):
    """A token operation that cannot be done; the message names the argument."""


NAME_MAX = 100  # the column's length


def check_name(name: str, option: str = "--name") -> None:
    """A token's name (or user): 1 to 100 printable characters, no leading or trailing space.

    Printable excludes every control character and every whitespace but the plain space (tabs,
    newlines, no-break spaces), so a name is one line of ``tokens list`` and reads as typed."""
    if not name:
        raise TokenError(f"{option}: must not be empty")
    if len(name) > NAME_MAX:
        raise TokenError(f"{option}: at most {NAME_MAX} characters, got {len(name)}")
    if not name.isprintable():
        raise TokenError(
            f"{option}: {name!r} has a control or whitespace character other than a space"
        )
    if name != name.strip(" "):
        raise TokenError(f"{option}: {name!r} starts or ends with a space")


def create_token(
    session: Session,
    *,
    name: str,
    role: Role,
    user: str | None,
    now_ms: int,
    expires_ms: int | None = None,
) -> tuple[ApiToken, str]:
    """Store a new token and return its row and the token itself (shown once, never stored)."""
    check_name(name)
    if user is not None:
        check_name(user, "--user")
    if session.scalar(select(ApiToken.id).where(ApiToken.name == name)) is not None:
        raise TokenError(f"--name: a token named {name!r} already exists")
    token = new_token()
    row = ApiToken(
        name=name,
        role=role.value,
        user=user or name,
        token_hash=token_hash(token),
        created_ms=now_ms,
        expires_ms=expires_ms,
    )
    session.add(row)
    session.flush()
    return row, token


def list_tokens(session: Session) -> list[ApiToken]:
    """Every token, oldest first (hashes included; callers print none)."""
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def revoke_token(session: Session, name: str, now_ms: int) -> bool:
    """Revoke by name; ``False`` when there is no such live token."""
    result = session.execute(
        update(ApiToken)
        .where(ApiToken.name == name, ApiToken.revoked_ms.is_(None))
        .values(revoked_ms=now_ms)
    )
    return bool(getattr(result, "rowcount", 0))


def authenticate(session: Session, token: str, now_ms: int) -> Principal | None:
    """The principal of a live token, or ``None`` (unknown, revoked or expired)."""
    row = session.scalar(select(ApiToken).where(ApiToken.token_hash == token_hash(token)))
    if row is None or row.revoked_ms is not None:
        return None
    if row.expires_ms is not None and row.expires_ms <= now_ms:
        return None
    return Principal(user=row.user, role=Role(row.role), token=row.name)
