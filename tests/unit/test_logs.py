"""``YARN_SIDECAR_LOG_FORMAT``: text lines or one JSON object per line."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from app.logs import configure_logging
from app.settings import LogFormat


@pytest.fixture(autouse=True)
def _restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_format_is_one_object_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(LogFormat.JSON, "INFO")
    log = logging.getLogger("yarn_sidecar.test")
    log.info("poll %s", "ok")
    log.debug("hidden at INFO")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    lines = capsys.readouterr().err.strip().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["message"] for r in records] == ["poll ok", "failed"]
    assert records[0]["level"] == "INFO" and records[0]["logger"] == "yarn_sidecar.test"
    assert records[0]["ts"].endswith("Z")
    assert "ValueError: boom" in records[1]["exc"]


def test_text_format_is_human_readable(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(LogFormat.TEXT, "WARNING")
    logging.getLogger("yarn_sidecar.test").warning("RM standby")
    err = capsys.readouterr().err
    assert "WARNING yarn_sidecar.test: RM standby" in err
    with pytest.raises(json.JSONDecodeError):
        json.loads(err)
