"""Logging: text lines for people, or one JSON object per line (``YARN_SIDECAR_LOG_FORMAT``)."""

from __future__ import annotations

import json
import logging
import sys
import time

from app.redact import redact_text
from app.settings import LogFormat


class RedactingRecord(logging.LogRecord):
    """A record whose message never carries a URL password, whoever logged it."""

    def getMessage(self) -> str:
        return redact_text(super().getMessage())


def install_redaction() -> None:
    """Make every log record of the process redact credentials (idempotent)."""
    logging.setLogRecordFactory(RedactingRecord)


class RedactingFormatter(logging.Formatter):
    """Text lines, tracebacks included, with credentials masked."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with UTC timestamps."""

    def format(self, record: logging.LogRecord) -> str:
        payload = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            payload["exc"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(payload)


def configure_logging(fmt: LogFormat, level: str) -> None:
    """Install one stderr handler on the root logger (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt is LogFormat.JSON:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    install_redaction()
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # One line per RM request or scheduler run would drown the sidecar's own messages.
    for chatty in ("httpx", "httpcore", "apscheduler"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, root.level))
