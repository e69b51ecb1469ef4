"""Hardened input and one error shape for the HTTP API.

* Every error is ``{"detail": "<field>: <message>"}`` (``ErrorOut``), validation errors included,
  at most ``MAX_DETAIL`` characters; a message may quote the value it is about (``no job
  '<id>'``), always as JSON text.
* Before a JSON body reaches a route it is read once, within ``max_request_bytes`` (413), and
  checked for what Python's ``json`` accepts but the API and the databases cannot keep: NaN and
  Infinity, integers outside a signed 64-bit range (however many digits), NUL characters and lone
  UTF-16 surrogates (422 naming the field), invalid UTF-8 or nesting deeper than ``MAX_DEPTH``
  (400 naming ``body``). The path and the query string are checked for NUL characters and
  surrogates too (422 naming the parameter); a value the database still refuses is a 422, not a
  500.
* ``Host`` must be one of ``allowed_hosts`` (loopback names by default).
* A database outage answers a JSON 503 with ``Retry-After`` and is logged once per
  ``DB_LOG_EVERY_S``, not as a traceback per request.
* Any other exception answers ``500 {"detail": "internal error"}`` (JSON like every error; the
  exception, which may quote data, goes to the log only).
* Every response, errors included, says not to sniff its type, send no referrer, and not be
  framed (``SECURITY_HEADERS``; a page with its own Content-Security-Policy keeps it).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.db.repo import unstorable
from app.settings import Settings

log = logging.getLogger(__name__)

MAX_DEPTH = 64
MAX_DETAIL = 300
INT64 = 2**63
DB_RETRY_AFTER_S = 5
DB_LOG_EVERY_S = 60.0
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class BadInput(ValueError):
    """A JSON body the API refuses; ``status`` 400 (unreadable) or 422 (a value)."""

    def __init__(self, status: int, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.status = status
        self.field = field
        self.message = message


class _NonFinite:
    def __init__(self, literal: str) -> None:
        self.literal = literal


class _LongInt:
    """An integer literal too long for any signed 64-bit value (and for ``int()`` past 4,300
    digits): refused by size, not parsed."""


def _parse_int(literal: str) -> int | _LongInt:
    # JSON has no leading zeros: every signed 64-bit literal has at most 19 digits and a sign
    return int(literal) if len(literal) <= 20 else _LongInt()


def _path(parts: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in ("body", *parts))


def _walk(value: Any, parts: tuple[str | int, ...], depth: int) -> Iterator[BadInput]:
    if depth > MAX_DEPTH:
        yield BadInput(400, "body", f"nested deeper than {MAX_DEPTH} levels")
        return
    if isinstance(value, _NonFinite):
        yield BadInput(422, _path(parts), f"{value.literal} is not a number JSON allows")
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        if not -INT64 <= value < INT64:
            yield BadInput(422, _path(parts), "integer outside the signed 64-bit range")
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            yield BadInput(422, _path(parts), "number out of range")
    elif isinstance(value, _LongInt):
        yield BadInput(422, _path(parts), "integer outside the signed 64-bit range")
    elif isinstance(value, str):
        if (why := unstorable(value)) is not None:
            yield BadInput(422, _path(parts), why)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, (*parts, i), depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if (why := unstorable(key)) is not None:
                yield BadInput(422, _path(parts), f"a key {why}")
                return
            yield from _walk(item, (*parts, key), depth + 1)


def check_json_body(raw: bytes) -> None:
    """Raise ``BadInput`` for a body the API must refuse; other JSON errors are the route's."""
    if not raw.strip():
        return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(400, "body", "not valid UTF-8") from None
    try:
        doc = json.loads(text, parse_constant=_NonFinite, parse_int=_parse_int)
    except RecursionError:
        raise BadInput(400, "body", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        return  # not JSON: FastAPI answers 422 "body: invalid JSON"
    for problem in _walk(doc, (), 0):
        raise problem


def error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The API's one error body."""
    if len(detail) > MAX_DETAIL:
        detail = detail[: MAX_DETAIL - 3] + "..."
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _host_allowed(host_header: str, allowed: tuple[str, ...]) -> bool:
    if "*" in allowed:
        return True
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:8000
        host = host[: host.find("]") + 1] if "]" in host else host
    else:
        host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return host in {h.lower() for h in allowed}


SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
)


def _secured(send: Send) -> Send:
    """``send`` adding each of ``SECURITY_HEADERS`` the response does not set itself."""

    async def send_secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            present = {name.lower() for name, _ in headers}
            headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
            message = {**message, "headers": headers}
        await send(message)

    return send_secured


class GuardMiddleware:
    """Host check, body size limit and the JSON body checks, before routing; security headers
    on every response."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.allowed = settings.allowed_hosts
        self.max_bytes = settings.max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _secured(send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if not _host_allowed(headers.get("host", ""), self.allowed):
            await error(400, "Host: not an allowed host (YARN_SIDECAR_ALLOWED_HOSTS)")(
                scope, receive, send
            )
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await error(413, f"body: larger than {self.max_bytes} bytes")(scope, receive, send)
            return
        if (problem := _bad_location(scope)) is not None:
            await error(422, problem)(scope, receive, send)
            return
        if scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([], message, receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await error(413, f"body: larger than {self.max_bytes} bytes")(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        raw = b"".join(chunks)
        try:
            check_json_body(raw)
        except BadInput as exc:
            await error(exc.status, str(exc))(scope, receive, send)
            return
        await self.app(scope, _replay([raw], None, receive), send)


def _bad_location(scope: Scope) -> str | None:
    """What in the path or the query string no database can keep (``unstorable``): every
    string parameter reaches a query or a row."""
    if (why := unstorable(scope["path"])) is not None:
        return f"path: {why}"
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True, errors="replace"):
        if (why := unstorable(name)) is not None:
            return f"query: a parameter name {why}"
        if (why := unstorable(value)) is not None:
            return f"query.{name}: {why}"
    return None


def _replay(bodies: list[bytes], first: Message | None, receive: Receive) -> Receive:
    pending: list[Message] = [
        {"type": "http.request", "body": b, "more_body": False} for b in bodies
    ]
    if first is not None:
        pending.append(first)

    async def again() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return again


def _loc(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and p.startswith("function-"))]
    # Discriminated unions add the tag to the path (run.application.command): keep it readable.
    return ".".join(parts) or "request"


class _DbOutage:
    def __init__(self) -> None:
        self.last_log = 0.0

    def note(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self.last_log >= DB_LOG_EVERY_S:
            self.last_log = now
            log.error("database unavailable: %s (answering 503)", type(exc).__name__)


def install_hardening(api: FastAPI, settings: Settings) -> None:
    """Error handlers, the guard middleware and the error shape in the OpenAPI document."""
    outage = _DbOutage()

    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            detail = "body: could not be parsed as JSON"
        return error(exc.status_code, detail, dict(exc.headers or {}))

    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        if first.get("type") == "json_invalid":
            return error(422, "body: invalid JSON")
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return error(422, f"{_loc(tuple(first.get('loc', ())))}: {msg}{more}")

    async def on_db(request: Request, exc: Exception) -> JSONResponse:
        outage.note(exc)
        return error(
            503, "database: unavailable, retry later", {"Retry-After": str(DB_RETRY_AFTER_S)}
        )

    async def on_data(request: Request, exc: Exception) -> JSONResponse:
        # The database refused a value the checks above let through: the caller's input, not
        # an outage. Which value its message does not say in a form worth echoing.
        log.warning("database refused a value: %s", type(exc.__cause__ or exc).__name__)
        return error(422, "request: holds a value the database cannot store")

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error(
            "unexpected error answering %s %s",
            request.method,
            request.url.path,
            exc_info=(type(exc), exc, exc.__traceback__),
        )
        return error(500, "internal error")

    api.add_exception_handler(StarletteHTTPException, on_http)  # type: ignore[arg-type]
    api.add_exception_handler(Exception, on_unexpected)
    api.add_exception_handler(DataError, on_data)
    api.add_exception_handler(RequestValidationError, on_validation)  # type: ignore[arg-type]
    for kind in (OperationalError, InterfaceError, PoolTimeout):
        api.add_exception_handler(kind, on_db)
    api.add_middleware(GuardMiddleware, settings=settings)
    api.openapi = lambda: _openapi(api)  # type: ignore[method-assign]


ERROR_RESPONSES = {
    "400": "Unreadable request (not UTF-8, nested too deeply, bad cursor) or Host not allowed.",
    "401": "No valid bearer token.",
    "403": "The token's role does not allow this.",
    "413": "Request body larger than YARN_SIDECAR_MAX_REQUEST_BYTES.",
    "422": "Invalid request; the detail names the field.",
    "503": "Database or a service unavailable; see Retry-After.",
}


def _openapi(api: FastAPI) -> dict[str, Any]:
    if api.openapi_schema:
        return api.openapi_schema
    schema = get_openapi(
        title=api.title, version=api.version, description=api.description, routes=api.routes
    )
    comps = schema.setdefault("components", {}).setdefault("schemas", {})
    comps["ErrorOut"] = {
        "title": "ErrorOut",
        "type": "object",
        "properties": {"detail": {"type": "string", "title": "Detail"}},
        "required": ["detail"],
        "description": "Every 4xx and 5xx: the detail starts with the field it is about.",
    }
    comps.pop("HTTPValidationError", None)
    comps.pop("ValidationError", None)
    ref = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}}
    for item in schema.get("paths", {}).values():
        for op in item.values():
            responses = op.setdefault("responses", {})
            secured = bool(op.get("security"))
            codes = ["400", "413", "422", "503"] + (["401", "403"] if secured else [])
            for code in codes:
                # A route's own 503 body (/ready) stays; FastAPI's 422 is replaced by ours.
                if code == "422" or code not in responses:
                    responses[code] = {"description": ERROR_RESPONSES[code], **ref}
    api.openapi_schema = schema
    return schema
