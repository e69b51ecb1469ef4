"""API bearer tokens: generation and the stored hash (the token itself is shown once).

Tokens are 256 random bits, so a single SHA-256 is enough to make the stored value useless to a
reader of the database (no dictionary to try); the comparison runs on the hash, in SQL.
"""

from __future__ import annotations

import hashlib
import secrets

PREFIX = "ysc_"


def new_token() -> str:
    """A fresh token: a recognisable prefix and 43 URL-safe characters."""
    return PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """The value stored and looked up."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def looks_like_token(value: str) -> bool:
    """Cheap shape check before touching the database."""
    return value.startswith(PREFIX) and 20 <= len(value) <= 200 and value.isascii()
