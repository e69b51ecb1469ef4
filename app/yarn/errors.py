"""One exception hierarchy for the RM client (``docs/style.md`` httpx anchor: map errors at the
edge).

Every failure talking to the ResourceManager surfaces as an ``RMError``; no httpx exception leaves
``app.yarn``. The split follows kopf's temporary-vs-permanent distinction: ``RMUnavailable`` is
worth retrying later, ``RMRejected`` is the RM's considered answer (``docs/yarn.md`` section 2,
"Errors"), ``RMProtocolError`` means the RM said 2xx but the body is not what the API promises.
"""

from __future__ import annotations


class RMError(Exception):
    """Base of every error raised by ``app.yarn``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RMUnavailable(RMError):
    """Temporary: refused connections, timeouts, 5xx, or only standby RMs after trying them all."""


class RMUnreachable(RMUnavailable):
    """Temporary, and the request provably reached no RM (every attempt failed before sending:
    refused or timed-out connections, standby RMs): a write was not applied and may be re-sent."""


class RMRejected(RMError):
    """Permanent: the RM answered 4xx; ``message`` is its own text (RemoteException or plain)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"RM rejected the request ({status}): {message}")
        self.status = status
        self.message = message


class RMNotFound(RMRejected):
    """The RM answered 404 (unknown app id, node, path; also any IOException, see docs/yarn.md
    s.2)."""


class RMProtocolError(RMError):
    """The RM answered 2xx with a body that is not JSON or does not have the documented shape."""
