"""Credentials never leave the process: URLs with a password are shown with ``***``.

RM URLs (``https://user:pw@rm:8090``) and database URLs (``postgresql://u:pw@db/x``) are
configuration, and may end up in error messages, log lines, ``/ready`` and the audit trail; every
one of those goes through ``redact_text``.
"""

from __future__ import annotations

import re

# scheme://user:password@  ->  scheme://user:***@
# The password ends at the last '@' of the authority (which ends at the first '/', '?', '#' or
# space), as httpx and RFC 3986 read it, so it may hold an '@'. SQLAlchemy also reads a password
# holding a '/', '?' or '#': where the authority has no '@', one holding a '/' ends at the last '@'
# before the query, one holding '?' or '#' at the first '@' (an '@' in a query is no password).
# The user ends at the first ':', as all of them read it. SQLAlchemy also reads a password
# holding spaces (the last alternative, tried only when no other reads one); a port followed by
# a space is no such password, or "http://rm:8088 refused alice@REALM" would lose its text.
_USERINFO = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^/?#\s:]*):"
    r"(?:[^/?#\s]*|[^?#\s]*|[^/@\s]*|(?![0-9]*(?:\s|$))[^/?#\n]*)@"
)
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
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    text = _QUERY.sub(lambda m: f"{m['key']}***", text)
    return _KEYVALUE.sub(lambda m: f"{m['key']}***", text)


def redact_url(url: str) -> str:
    """One URL, password masked."""
    return redact_text(url)
