"""What the command-line tools say when a database or a file is not as they need it: one line
naming it, never a traceback, never a password (``app.cli``, ``app.tokens_cli``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from app.redact import redact_text


class CommandFailed(Exception):
    """A command that could not be done; the message is the whole error line (exit 1)."""


@contextmanager
def database_errors(url: str, revision: str = "head") -> Iterator[None]:
    """Turn what migrating or opening the database at ``url`` can raise into ``CommandFailed``
    naming the database, its password masked."""
    from alembic.util import CommandError
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError

    where = redact_database_url(url)
    try:
        make_url(url)
    except (ArgumentError, ValueError) as exc:
        # the URL passed the settings' scheme check but not SQLAlchemy's parser (a bad port)
        raise CommandFailed(f"database {where}: invalid URL: {one_line(str(exc), url)}") from None
    try:
        # a misspelled driver (``postgresql+psycopg3``) is only found when the dialect loads
        make_url(url).get_dialect()
    except NoSuchModuleError:
        driver = make_url(url).drivername
        raise CommandFailed(
            f"database {where}: no database driver {driver!r} (postgresql+psycopg, sqlite)"
        ) from None
    try:
        yield
    except CommandError as exc:
        raise CommandFailed(f"database {where}: cannot migrate to {revision}: {exc}") from None
    except DBAPIError as exc:
        reason = one_line(str(exc.orig), url)
        raise CommandFailed(f"database {where}: {reason}") from None
    except FileExistsError as exc:
        # the SQLite file's directory is created on first use; a file is in its way
        raise CommandFailed(
            f"database {where}: {exc.filename} exists and is not a directory"
        ) from None
    except OSError as exc:
        raise CommandFailed(f"database {where}: {exc.filename}: {exc.strerror}") from None


def one_line(message: str, url: str) -> str:
    """A driver's message on one line, the password of the database at ``url`` masked even where
    the message quotes it bare."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    text = redact_text(" ".join(message.split()))
    try:
        password = make_url(url).password
    except (ArgumentError, ValueError):
        password = None  # redact_text has masked what looks like one
    return text.replace(str(password), "***") if password else text


def redact_database_url(url: str) -> str:
    """``url`` with its password masked, parsed as SQLAlchemy parses it where it can."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        # SQLAlchemy ends a password at its first '@': the rest of one holding a raw '@' would
        # show as the host, unless masked as a URL's userinfo is.
        return redact_text(make_url(url).render_as_string(hide_password=True))
    except (ArgumentError, ValueError):
        return redact_text(url)
