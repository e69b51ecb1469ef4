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
# password), and one holding spaces at the last '@' before the path (tried last). A port, digits
# followed by neither a letter nor a digit, is no such password, or "http://rm:8088: refused
# alice@REALM" would lose its text. The user ends at the first ':', as all of them read it.
_SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+.-")
_LETTERS = frozenset(string.ascii_letters)
_USER = re.compile(r"[^/?#\s:]*:")
# What ends each reading of the password (the last '@' before it closes the password), and what
# ends the reading that takes the first '@'.
_AUTHORITY_END = re.compile(r"[/?#\s]")
_QUERY_START = re.compile(r"[?#\s]")
_PATH_START = re.compile(r"[/?#\n]")
_FIRST_AT = re.compile(r"[/@\s]")
_AT = re.compile("@")
_PORT = re.compile(r"[0-9]+(?![0-9A-Za-z])|\s")
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
    finders = _Finders(text)
    sep = text.find("://")
    while sep != -1:
        start = sep
        while start > done and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        while start < sep and text[start] not in _LETTERS:
            start += 1
        user = _USER.match(text, sep + 3) if start < sep else None
        at = _password_end(text, user.end(), finders) if user else -1
        if user is None or at == -1:
            sep = text.find("://", sep + 3)
            continue
        out.append(text[done : user.end()])
        out.append("***@")
        done = at + 1
        sep = text.find("://", done)
    out.append(text[done:])
    return "".join(out)


def _password_end(text: str, begin: int, find: _Finders) -> int:
    """Index of the '@' that ends a password starting at ``begin`` (module comment), or -1."""
    first_at = find(_AT, begin)
    if first_at == len(text):
        return -1
    for stop in (_AUTHORITY_END, _QUERY_START):
        end = find(stop, begin)
        if first_at < end:  # some '@' lies before it: the last one closes the password
            return text.rfind("@", first_at, end)
    first = find(_FIRST_AT, begin)
    if first < len(text) and text[first] == "@":
        return first
    if not _PORT.match(text, begin):
        end = find(_PATH_START, begin)
        if first_at < end:
            return text.rfind("@", first_at, end)
    return -1


class _Finders:
    """Where each pattern next matches at or after a position, remembered: the positions asked
    only grow along the text, so each stretch of it is searched once per pattern and the whole
    scan stays linear in the text, however many ``://`` a line holds."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.known: dict[re.Pattern[str], tuple[int, int]] = {}  # pattern -> (from, found)

    def __call__(self, pattern: re.Pattern[str], pos: int) -> int:
        """The start of the first match at or after ``pos``, or ``len(text)``."""
        since, found = self.known.get(pattern, (-1, -1))
        if since <= pos <= found:
            return found
        match = pattern.search(self.text, pos)
        found = match.start() if match else len(self.text)
        self.known[pattern] = (pos, found)
        return found
