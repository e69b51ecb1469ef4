"""``PooledClient``: what every HTTP client of ``app.yarn`` shares: one pooled ``httpx`` client,
closed by ``aclose`` or by leaving ``async with``."""

from __future__ import annotations

from types import TracebackType
from typing import Self

import httpx


class PooledClient:
    """Base of the RM and JobHistory clients; subclasses set ``_http``."""

    _http: httpx.AsyncClient

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close pooled connections."""
        await self._http.aclose()
