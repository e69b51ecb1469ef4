"""``yarn-sidecar tokens create|list|revoke``: API tokens, managed on the sidecar's database.

The token is printed once, by ``create``; only its SHA-256 is stored, so a lost token is revoked
and replaced, never recovered. A name (and user) is 1 to 100 printable characters, spaces only
inside, so each token is one line of ``list``; ``list`` shows each token's state at the time it
runs: ``active``, ``expired`` or ``revoked``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
import time
from typing import TYPE_CHECKING

from app.settings import load_settings

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from app.db.auth_models import ApiToken

_DURATION = re.compile(r"^(\d{1,6})([dhm])$")


def parse_expiry(value: str, now_ms: int) -> int:
    """``30d``, ``12h``, ``90m`` from now, or an ISO 8601 time; epoch ms, in the future."""
    m = _DURATION.match(value)
    if m:
        if int(m.group(1)) == 0:
            # a token that expires as it is made, as an ISO time in the past is refused
            raise ValueError(f"--expires: {value} is no time from now; give at least 1m")
        unit = {"d": 86_400_000, "h": 3_600_000, "m": 60_000}[m.group(2)]
        return now_ms + int(m.group(1)) * unit
    try:
        at = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"--expires: {value!r} is neither 30d/12h/90m nor an ISO 8601 time"
        ) from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    ms = int(at.timestamp() * 1000)
    if ms <= now_ms:
        raise ValueError(f"--expires: {value} is in the past")
    return ms


def _iso(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _state(row: ApiToken, now_ms: int) -> str:
    if row.revoked_ms is not None:
        return "revoked"
    # expired as app.db.auth_repo.authenticate refuses it: at its expiry time
    if row.expires_ms is not None and row.expires_ms <= now_ms:
        return "expired"
    return "active"


def _sessions() -> tuple[Engine, sessionmaker[Session]]:
    from app.cli_errors import database_errors
    from app.db.migrate import upgrade
    from app.db.session import make_engine, make_session_factory

    settings = load_settings()
    with database_errors(settings.effective_database_url):
        upgrade(settings.effective_database_url)
    engine = make_engine(settings.effective_database_url)
    return engine, make_session_factory(engine)


def cmd_create(args: argparse.Namespace) -> int:
    from app.auth.principal import Role
    from app.db import auth_repo
    from app.db.session import transaction

    now_ms = int(time.time() * 1000)
    try:
        # checked before the database is opened: a bad name needs no database to be refused
        auth_repo.check_name(args.name)
        if args.user is not None:
            auth_repo.check_name(args.user, "--user")
        expires = parse_expiry(args.expires, now_ms) if args.expires is not None else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    engine, sessions = _sessions()
    try:
        with transaction(sessions) as session:
            row, token = auth_repo.create_token(
                session,
                name=args.name,
                role=Role(args.role),
                user=args.user,
                now_ms=now_ms,
                expires_ms=expires,
            )
            summary = (
                f"token {row.name!r}: role {row.role}, user {row.user}, expires {_iso(expires)}"
            )
    except auth_repo.TokenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    print(token)
    print(
        f"{summary}. Shown once; use it as 'Authorization: Bearer <token>' or YARN_SIDECAR_TOKEN.",
        file=sys.stderr,
    )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from app.db import auth_repo

    now_ms = int(time.time() * 1000)
    engine, sessions = _sessions()
    try:
        with sessions() as session:
            rows = auth_repo.list_tokens(session)
            lines = [
                (
                    r.name,
                    r.role,
                    r.user,
                    _iso(r.created_ms),
                    _iso(r.expires_ms),
                    _state(r, now_ms),
                )
                for r in rows
            ]
    finally:
        engine.dispose()
    header = ("name", "role", "user", "created", "expires", "state")
    cells = [header, *lines]
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    from app.db import auth_repo
    from app.db.session import transaction

    engine, sessions = _sessions()
    try:
        with transaction(sessions) as session:
            done = auth_repo.revoke_token(session, args.name, int(time.time() * 1000))
    finally:
        engine.dispose()
    if not done:
        print(f"error: name: no active token {args.name!r}", file=sys.stderr)
        return 2
    print(f"revoked {args.name}")
    return 0


def configure(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tokens`` to the top-level parser."""
    tokens = sub.add_parser(
        "tokens", help="API tokens and their roles (on the configured database)"
    )
    tsub = tokens.add_subparsers(dest="tokens_command", required=True, metavar="ACTION")
    create = tsub.add_parser("create", help="create a token and print it (once)")
    create.add_argument(
        "--name",
        required=True,
        help="unique name, e.g. ci-submitter: 1 to 100 printable characters, spaces only inside",
    )
    create.add_argument(
        "--role", required=True, choices=("scrape", "viewer", "submitter", "operator")
    )
    create.add_argument("--user", help="user it acts for (YARN user of its jobs); default: --name")
    create.add_argument("--expires", help="30d, 12h, 90m or an ISO 8601 time (default: never)")
    create.set_defaults(func=cmd_create)
    lst = tsub.add_parser("list", help="every token (never the token itself)")
    lst.set_defaults(func=cmd_list)
    revoke = tsub.add_parser("revoke", help="revoke a token by name")
    revoke.add_argument("name")
    revoke.set_defaults(func=cmd_revoke)
