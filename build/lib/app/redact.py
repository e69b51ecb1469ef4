"""Credentials never leave the process: URLs with a password are shown with ``***``.

RM URLs (``https://user:pw@rm:8090``) and database URLs (``postgresql://u:pw@db/x``) are
configuration, and may end up in error messages, log lines, ``/ready`` and the audit trail; every
one of those goes through ``redact_text``.
"""

from __future__ import annotations

import re

# scheme://user:password@  ->  scheme://user:***@
_USERINFO = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^/@\s:]*):(?P<pw>[^/@\s]*)@"
)
# ?password=... / &token=... query parameters
_QUERY = re.compile(r"(?i)(?P<key>[?&](?:password|passwd|pwd|token|secret|api_key)=)[^&\s\"']*")


def redact_text(text: str) -> str:
    """``text`` with the password of every URL in it, and secret query values, masked."""
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    return _QUERY.sub(lambda m: f"{m['key']}***", text)


def redact_url(url: str) -> str:
    """One URL, password masked."""
    return redact_text(url)
