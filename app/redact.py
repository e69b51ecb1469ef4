"""Credentials never leave the process: URLs with a password are shown with ``***``.

RM URLs (``https://user:pw@rm:8090``) and database URLs (``postgresql://u:pw@db/x``) are
configuration, and may end up in error messages, log lines, ``/ready`` and the audit trail; every
one of those goes through ``redact_text``. It runs on every log line, including uvicorn's access
line with the caller's raw query string, on the event loop: its time is linear in the text's
length, whatever the text (a backtracking pattern took 21 s over a 49 KB query of
``a://:x`` pieces, and every request waited meanwhile).
"""

from __future__ import annotations

import re
import string

# scheme://user:password@  ->  scheme://user:***@
# The password ends at the last '@' of the authority (which ends at the first '/', '?', '#' or
# whitespace), as httpx and RFC 3986 read it, so it may hold an '@'. SQLAlchemy also reads a
# password holding a '/', '?' or '#': where the authority has no '@', one holding a '/' ends at
# the last '@' before the query, one holding '?' or '#' at the first '@' (an '@' in a query is no
# password), and one holding spaces at the last '@' before the path (tried last; a port followed
# by a space is no such password, or "http://rm:8088 refused alice@REALM" would lose its text).
# The user ends at the first ':', as all of them read it.
_SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")
_LETTERS = frozenset(string.ascii_letters)
# No real user:password is longer; the bound keeps each "://" of a hostile line cheap.
_USERINFO_MAX = 512
_USER = re.compile(r"[^/?#\s:]*:")
# Each reading of the password: what ends its part of the authority, and which '@' of that
# part closes it (the last, or the first when the part ends at an '@').
_AUTHORITY_END = re.compile(r"[/?#\s]")
_QUERY_START = re.compile(r"[?#\s]")
_FIRST_AT = re.compile(r"[/@\s]")
_PATH_START = re.compile(r"[/?#\n]")
_PORT_THEN_SPACE = re.compile(r"[0-9]*(?:\s|$)")
# ?password=... / &token=... query parameters
_QUERY = re.compile(r"(?i)(?P<key>[?&](?:password|passwd|pwd|token|secret|api_key)=)[^&\s\"']*")
# libpq's key=value connection strings (password=secret, password='a \' b') and environment
# lines such as PGPASSWORD=secret
_KEYVALUE = re.compile(
    r"(?i)(?P<key>(?<![\w.-])(?:\w*(?:password|passwd)|pwd)\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s'&]+)"
)


def redact_text(text: str) -> str:
    """``text`` with the password of every URL in it, secret query values and libpq
    ``password=`` values masked."""
    text = _mask_userinfo(text)
    text = _QUERY.sub(lambda m: f"{m['key']}***", text)
    return _KEYVALUE.sub(lambda m: f"{m['key']}***", text)


def redact_url(url: str) -> str:
    """One URL, password masked."""
    return redact_text(url)


def _mask_userinfo(text: str) -> str:
    out: list[str] = []
    done = 0  # text before this is copied to out
    sep = text.find("://")
    while sep != -1:
        start = sep
        while start > done and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < sep and text[start] not in _LETTERS:
            start += 1
        user = _USER.match(text, sep + 3, sep + 3 + _USERINFO_MAX) if start < sep else None
        at = _password_end(text, user.end()) if user else -1
        if user is None or at == -1:
            sep = text.find("://", sep + 3)
            continue
        out.append(text[done : user.end()])
        out.append("***@")
        done = at + 1
        sep = text.find("://", done)
    out.append(text[done:])
    return "".join(out)


def _password_end(text: str, begin: int) -> int:
    """Index of the '@' that ends a password starting at ``begin`` (module comment), or -1."""
    if text.find("@", begin, begin + _USERINFO_MAX) == -1:
        return -1
    window = text[begin : begin + _USERINFO_MAX]
    for end in (_AUTHORITY_END, _QUERY_START):
        at = _part(window, end).rfind("@")
        if at != -1:
            return begin + at
    first = _FIRST_AT.search(window)
    if first is not None and window[first.start()] == "@":
        return begin + first.start()
    if not _PORT_THEN_SPACE.match(window):
        at = _part(window, _PATH_START).rfind("@")
        if at != -1:
            return begin + at
    return -1


def _part(window: str, end: re.Pattern[str]) -> str:
    found = end.search(window)
    return window if found is None else window[: found.start()]
