"""Acting on YARN right after a submission or cancellation, with kicks coalesced: while one
act pass runs, further kicks only ask it to run once more."""

from __future__ import annotations

import asyncio
import contextvars

from app.services.admission.common import ServiceState


class Kicks(ServiceState):
    """``kick`` and the loop it starts."""

    def kick(self) -> None:
        """Act on YARN soon (after an admission or a cancellation) when the loops are running.

        Only the act step runs: the request already ran its admission round. Kicks coalesce:
        while one runs, further kicks only ask it to run once more, so a burst of submissions
        costs a few passes, not one per request.
        """
        if not self.eager or not self.options.writes_enabled or not self.may_act():
            return
        if self._kicked is not None and not self._kicked.done():
            self._kick_again = True
            return
        # A fresh context: the pass acts for the sidecar, not for the request that kicked it,
        # so the steps it records (and its worker threads) carry no request's principal.
        self._kicked = asyncio.get_running_loop().create_task(
            self._kick_loop(), context=contextvars.Context()
        )

    async def _kick_loop(self) -> None:
        while True:
            self._kick_again = False
            try:
                await self.act()
            except Exception:
                self.log.exception("acting after a submission failed; the next tick retries")
            if not self._kick_again:
                return
