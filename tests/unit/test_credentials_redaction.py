"""An RM or database URL's password is never printed or stored: not by ``redact_text`` when it
holds an '@' or a '/', not by the poller, not by ``poll-once``, not by ``simulate --from-db``."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.cli import main
from app.db import repo
from app.db.models import Cluster, PollRecord
from app.db.session import transaction
from app.redact import redact_text
from app.services.poller import Poller
from app.yarn import client as client_module
from tests.conftest import Db
from tests.db.test_poll_storable import ScriptedRM
from tests.factories import snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rm"
# An '@' in an RM password: httpx reads the userinfo up to the last '@' (a '/' would end it).
PASSWORD = "p@ssw0rd"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # httpx and RFC 3986: the userinfo ends at the last '@' of the authority
        ("http://sidecar:p@ssw0rd@rm:8088/ws/v1", "http://sidecar:***@rm:8088/ws/v1"),
        ("GET http://u:a@b@c@rm:8088/x failed", "GET http://u:***@rm:8088/x failed"),
        ("http://alice@corp:pw@rm:8088", "http://alice@corp:***@rm:8088"),
        # SQLAlchemy reads a password holding a '/' (base64) or a '?'
        ("postgresql://sidecar:ab/cd+ef==@db/sidecar", "postgresql://sidecar:***@db/sidecar"),
        ("postgresql://sidecar:a/b@c@db/sidecar", "postgresql://sidecar:***@db/sidecar"),
        ("postgresql://sidecar:ab?c@db/x", "postgresql://sidecar:***@db/x"),
        # each URL of a line on its own; an '@' in a query or a user alone is no password
        ("[http://a:x@h1/p,https://b:y/z@h2:1/q]", "[http://a:***@h1/p,https://b:***@h2:1/q]"),
        (
            "http://rm:8088/ws/v1/cluster/apps?user=a@b",
            "http://rm:8088/ws/v1/cluster/apps?user=a@b",
        ),
        ("http://bob@rm:8088/ws", "http://bob@rm:8088/ws"),
        # SQLAlchemy reads a password holding spaces; a port then text with an '@' is none
        ("postgresql://sidecar:pa ss@db/sidecar", "postgresql://sidecar:***@db/sidecar"),
        ("http://rm:8088 refused alice@REALM", "http://rm:8088 refused alice@REALM"),
        # libpq key=value strings and environment lines
        ("host=db user=s password=s3cret dbname=x", "host=db user=s password=*** dbname=x"),
        ("password='a b\\'c' host=db", "password=*** host=db"),
        ("PGPASSWORD=s3cret psql", "PGPASSWORD=*** psql"),
        ("the password is wrong", "the password is wrong"),
        # a port followed by punctuation, then text with an '@', is no password
        ("GET http://rm:8088: 401 for alice@REALM", "GET http://rm:8088: 401 for alice@REALM"),
        ("http://rm:8088, user alice@REALM denied", "http://rm:8088, user alice@REALM denied"),
        # however long the user or the password (tokens used as passwords run to kilobytes)
        ("postgresql://u:" + "p" * 5000 + "@db/x", "postgresql://u:***@db/x"),
        ("https://" + "u" * 5000 + ":pw@rm/ws", "https://" + "u" * 5000 + ":***@rm/ws"),
        ("https://u:" + "a@" * 3000 + "z@rm:8090/ws", "https://u:***@rm:8090/ws"),
    ],
)
def test_redact_text_masks_the_whole_password_of_a_url(text: str, shown: str) -> None:
    assert redact_text(text) == shown


async def test_the_poller_stores_and_reports_rm_urls_without_their_password(db: Db) -> None:
    url = f"http://sidecar:{PASSWORD}@rm1:8088"
    rm = ScriptedRM([snapshot(10_000, rm_url=url), RuntimeError("lost")], active_url=url)
    poller = Poller(rm, db.sessions, cluster_name="c", rm_urls=(url,), interval_s=10)

    ok = await poller.poll(10_000, force=True)
    failed = await poller.poll(20_000, force=True)

    masked = "http://sidecar:***@rm1:8088"
    assert (ok.rm_url, failed.rm_url) == (masked, masked)
    with db.sessions() as s:
        cluster = s.scalar(select(Cluster))
        assert cluster is not None
        assert (cluster.rm_urls, cluster.active_rm_url) == (masked, masked)
        assert list(s.scalars(select(PollRecord.rm_url))) == [masked, masked]
    # Every loop's cluster row keeps the configured URLs masked, whoever passes them raw.
    with transaction(db.sessions) as s:
        assert repo.ensure_cluster(s, "c", (url, "http://rm2:8088"), 30_000).rm_urls == (
            f"{masked},http://rm2:8088"
        )


def _recorded_rm(request: httpx.Request) -> httpx.Response:
    """The recorded RM answers, behind HTTP Basic auth (an RM behind an authenticating proxy)."""
    want = "Basic " + base64.b64encode(f"sidecar:{PASSWORD}".encode()).decode()
    if request.headers.get("Authorization") != want:
        return httpx.Response(401)
    path = request.url.path.removeprefix("/ws/v1/cluster/")
    name = {"info": "info.json", "metrics": "metrics.json", "scheduler": "scheduler.json"}.get(
        path, "nodes.json" if path == "nodes" else None
    )
    if path == "apps":
        finished = "FINISHED" in str(request.url.params)
        name = "apps_empty.json" if finished else "apps_running.json"
    if name is None:
        return httpx.Response(404)
    return httpx.Response(200, content=(FIXTURES / name).read_bytes())


def test_poll_once_prints_and_stores_the_rm_url_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = client_module.RMClient

    def recorded_client(*args: Any, **kwargs: Any) -> Any:
        return real(*args, transport=httpx.MockTransport(_recorded_rm), **kwargs)

    monkeypatch.setattr(client_module, "RMClient", recorded_client)
    monkeypatch.setenv("YARN_SIDECAR_RM_URLS", f"http://sidecar:{PASSWORD}@rm.example:8088")
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", f"sqlite:///{tmp_path}/s.db")
    monkeypatch.setenv("YARN_SIDECAR_RM_RETRIES", "0")

    assert main(["poll-once"]) == 0

    printed = capsys.readouterr()
    assert printed.out.startswith("polled http://sidecar:***@rm.example:8088: 4 apps upserted")
    assert "ssw0rd" not in printed.out + printed.err
    with sqlite3.connect(tmp_path / "s.db") as conn:
        stored = [
            *conn.execute("SELECT rm_urls, active_rm_url FROM clusters").fetchone(),
            *(r for (r,) in conn.execute("SELECT rm_url FROM polls")),
        ]
    assert stored == ["http://sidecar:***@rm.example:8088"] * 3


@pytest.mark.parametrize("password", ["s3cret", "Zm9v/YmFy", "Zm9v@YmFy"])
def test_simulate_from_db_with_an_unknown_driver_masks_the_database_password(
    password: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"postgresql+psycopg3://sidecar:{password}@db/sidecar"
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", url)

    assert main(["simulate", "--from-db", "--policy", "ltrf"]) != 0

    err = capsys.readouterr().err
    assert "cannot use postgresql+psycopg3://sidecar:***@db/sidecar" in err
    assert "YmFy" not in err and "s3cret" not in err


@pytest.mark.parametrize("piece", ["a://:x", "a://b:", "http://u:", "://:@"])
def test_redact_text_reads_a_long_hostile_line_to_its_end(piece: str) -> None:
    # uvicorn logs the caller's raw query string, and every log line is redacted: a line of
    # pieces that start a URL with a password and never finish one is still read to its end
    # (how long that takes is bench_redact.py's business).
    junk = piece * (60_000 // len(piece))
    line = f"GET /health?q={junk} postgresql://u:s3cret@db/x"
    shown = redact_text(line)
    assert shown.endswith(" postgresql://u:***@db/x")
    assert "s3cret" not in shown and len(shown) > 60_000
