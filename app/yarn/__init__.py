"""The sidecar's only door to the YARN ResourceManager REST API (``docs/yarn.md``,
``docs/style.md``).

``RMClient`` speaks HTTP; ``wire`` holds the RM's JSON as received; ``mapping`` turns it into the
domain snapshot; every failure is an ``RMError``.
"""

from app.yarn.client import RMClient
from app.yarn.errors import RMError, RMNotFound, RMProtocolError, RMRejected, RMUnavailable
from app.yarn.wire import NewApplication, SchedConfUpdate

__all__ = [
    "NewApplication",
    "RMClient",
    "RMError",
    "RMNotFound",
    "RMProtocolError",
    "RMRejected",
    "RMUnavailable",
    "SchedConfUpdate",
]
