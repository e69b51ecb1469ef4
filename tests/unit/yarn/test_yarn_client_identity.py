"""Whom the RM sees: apps run as the API caller (``user.name`` or Kerberos ``doAs``), credentials
in the RM URL are masked in every error message."""

from __future__ import annotations

import json

import httpx
import pytest

from app.yarn.client import RMClient
from app.yarn.errors import RMUnavailable


class _Ticket(httpx.Auth):
    """Stands in for SPNEGO: marks each request as carrying a ticket."""

    def auth_flow(self, request: httpx.Request):  # type: ignore[no-untyped-def]
        request.headers["Authorization"] = "Negotiate dGlja2V0"
        yield request


def _client(auth: httpx.Auth | None, seen: list[httpx.Request]) -> RMClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(202)

    return RMClient(
        ("http://rm:8088",), user="svc", auth=auth, transport=httpx.MockTransport(handler)
    )


@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        (None, {"user.name": "alice"}),
        (_Ticket(), {"doAs": "alice"}),
    ],
)
async def test_submission_runs_as_the_caller(
    auth: httpx.Auth | None, expected: dict[str, str]
) -> None:
    seen: list[httpx.Request] = []
    async with _client(auth, seen) as client:
        await client.submit_application({"application-id": "application_1_0001", "run_as": "alice"})
        await client.submit_application({"application-id": "application_1_0002"})
    first, second = seen
    assert dict(first.url.params) == expected
    assert "run_as" not in json.loads(first.content)
    assert dict(second.url.params) == ({"user.name": "svc"} if auth is None else {})
    if auth is not None:
        assert first.headers["Authorization"].startswith("Negotiate")


async def test_rm_url_credentials_are_masked_in_errors() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = RMClient(
        ("http://svc:pa55word@rm:8088",), retries=0, transport=httpx.MockTransport(refuse)
    )
    async with client:
        with pytest.raises(RMUnavailable) as err:
            await client.cluster_info()
    assert "pa55word" not in str(err.value) and "svc:***@rm:8088" in str(err.value)
