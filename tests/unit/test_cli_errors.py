"""Bad input and failures of the local commands (tokens, db upgrade, export-openapi, policy run,
serve) end in one line naming the option, file or setting, never a traceback or a password."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.auth.principal import Role
from app.cli import main
from app.db import auth_repo
from app.db.session import transaction
from tests.conftest import Db

ROOT = Path(__file__).resolve().parents[2]


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def on_db(db: Db, monkeypatch: pytest.MonkeyPatch) -> Db:
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", db.url)
    return db


def _token_rows(capsys: pytest.CaptureFixture[str]) -> dict[str, list[str]]:
    code, out, err = _cli(capsys, "tokens", "list")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["name", "role", "user", "created", "expires", "state"]
    return {line.split()[0]: line.split() for line in lines[1:]}


def test_a_zero_expiry_is_refused_and_expired_tokens_are_listed_as_such(
    on_db: Db, capsys: pytest.CaptureFixture[str]
) -> None:
    for zero in ("0m", "0h", "000d"):
        code, out, err = _cli(capsys, "tokens", "create", "--name", "t0", "--role", "viewer",
                              "--expires", zero)  # fmt: skip
        assert code == 2 and out == ""
        line = _one_error_line(err)
        assert line == f"error: --expires: {zero} is no time from now; give at least 1m"
    now_ms = int(time.time() * 1000)
    with transaction(on_db.sessions) as session:
        for name, expires in (("old", now_ms - 1000), ("live", now_ms + 3_600_000), ("ever", None)):
            auth_repo.create_token(session, name=name, role=Role.VIEWER, user=None,
                                   now_ms=now_ms - 10_000, expires_ms=expires)  # fmt: skip
        auth_repo.create_token(session, name="gone", role=Role.VIEWER, user=None,
                               now_ms=now_ms - 10_000, expires_ms=now_ms - 1000)  # fmt: skip
        auth_repo.revoke_token(session, "gone", now_ms - 500)
    rows = _token_rows(capsys)
    assert "t0" not in rows
    assert {name: row[-1] for name, row in rows.items()} == {
        "old": "expired",
        "live": "active",
        "ever": "active",
        "gone": "revoked",
    }


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "--name: must not be empty"),
        ("a\nb", "--name: 'a\\nb' has a control or whitespace character other than a space"),
        ("tab\there", "--name: 'tab\\there' has a control"),
        ("no\u00a0break", "--name: 'no\\xa0break' has a control"),
        ("esc\x1b[31m", "--name: 'esc\\x1b[31m' has a control"),
        (" lead", "--name: ' lead' starts or ends with a space"),
        ("x" * 101, "--name: at most 100 characters, got 101"),
    ],
)
def test_token_names_are_one_printable_line(
    name: str, message: str, on_db: Db, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _cli(capsys, "tokens", "create", "--name", name, "--role", "viewer")
    assert code == 2 and out == ""
    assert _one_error_line(err).startswith(f"error: {message}")
    assert _token_rows(capsys) == {}


def test_good_token_names_and_users(on_db: Db, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("ci submitter", "x" * 100, "équipe-données"):
        code, out, err = _cli(capsys, "tokens", "create", "--name", name, "--role", "viewer")
        assert code == 0, err
        assert out.startswith("ysc_")
    code, _, err = _cli(capsys, "tokens", "create", "--name", "u", "--role", "viewer",
                        "--user", "bad\nuser")  # fmt: skip
    assert code == 2 and _one_error_line(err).startswith("error: --user: 'bad\\nuser' has")
    code, out, _ = _cli(capsys, "tokens", "list")
    lines = out.splitlines()
    assert len(lines) == 4  # the header and one line a token
    cells = [re.split(r"\s{2,}", line) for line in lines[1:]]
    assert [c[:3] for c in cells] == [
        ["ci submitter", "viewer", "ci submitter"],
        ["x" * 100, "viewer", "x" * 100],
        ["équipe-données", "viewer", "équipe-données"],
    ]


def test_export_openapi_to_a_missing_directory(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "export-openapi", "-o", "/nonexistent/dir/x.yaml")
    assert code == 1
    assert _one_error_line(err) == (
        "error: --output: cannot write /nonexistent/dir/x.yaml: No such file or directory"
    )


def test_db_upgrade_failures_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", url)
    assert _cli(capsys, "db", "upgrade")[0] == 0
    code, _, err = _cli(capsys, "db", "upgrade", "--revision", "bogus")
    assert code == 1 and _one_error_line(err) == (
        f"error: database {url}: cannot migrate to bogus: Can't locate revision identified by "
        "'bogus'"
    )
    code, _, err = _cli(capsys, "db", "upgrade", "--revision=-1")
    assert code == 1 and f"error: database {url}: cannot migrate to -1: " in _one_error_line(err)
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", f"sqlite:///{tmp_path}/afile/x.db")
    code, _, err = _cli(capsys, "db", "upgrade")
    assert code == 1 and _one_error_line(err).endswith(
        f"{tmp_path}/afile exists and is not a directory"
    )
    (tmp_path / "garbage").write_text("not a database, really not" * 100)
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", f"sqlite:///{tmp_path}/garbage")
    code, _, err = _cli(capsys, "db", "upgrade")
    assert code == 1 and _one_error_line(err).endswith("file is not a database")
    # tokens migrate the database first: the same one line
    assert _cli(capsys, "tokens", "list")[2] == err


def test_db_upgrade_to_an_older_revision_is_refused_and_reports_what_it_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.db.migrate import current_revision, head_revision
    from app.db.session import make_engine

    url = f"sqlite:///{tmp_path}/s.db"
    head = head_revision(url)
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", url)
    assert _cli(capsys, "db", "upgrade", "--revision", "0010") == (
        0, f"database at 0010: {url}\n", ""
    )  # fmt: skip
    assert _cli(capsys, "db", "upgrade", "--revision", "0010")[:2] == (
        0, f"database at 0010: {url}\n"
    )  # fmt: skip
    assert _cli(capsys, "db", "upgrade")[:2] == (0, f"database at {head}: {url}\n")
    for older in ("0010", "base"):
        code, out, err = _cli(capsys, "db", "upgrade", "--revision", older)
        assert code == 2 and out == ""
        assert _one_error_line(err).startswith(
            f"error: database {url} is at {head}, newer than {older}: db upgrade never downgrades"
        )
    engine = make_engine(url)
    try:
        assert current_revision(engine) == head
    finally:
        engine.dispose()


@pytest.mark.parametrize("port", ["1", "notaport"])
def test_an_unreachable_postgresql_never_shows_its_password(
    port: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", f"postgresql://u:s3cretpw@127.0.0.1:{port}/x")
    code, out, err = _cli(capsys, "db", "upgrade")
    line = _one_error_line(err)
    assert code == 1 and "s3cretpw" not in out + err
    assert line.startswith(f"error: database postgresql://u:***@127.0.0.1:{port}/x: ")


def test_a_misspelled_database_driver_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", "postgresql+psycopg3://u:s3cret@127.0.0.1:1/x")
    code, out, err = _cli(capsys, "db", "upgrade")
    assert code == 1 and "s3cret" not in out + err
    assert _one_error_line(err) == (
        "error: database postgresql+psycopg3://u:***@127.0.0.1:1/x: no database driver "
        "'postgresql+psycopg3' (postgresql+psycopg, sqlite)"
    )
    assert _cli(capsys, "tokens", "list")[2] == err


def test_policy_run_of_a_file_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "bin.json"
    scenario.write_bytes(b'{"policy": "\xff"}')
    code, _, err = _cli(capsys, "policy", "run", str(scenario))
    assert code == 2 and _one_error_line(err) == f"error: {scenario}: not UTF-8 text (byte 12)"


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_serve_checks_its_tls_files_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key = _certificate(tmp_path)
    (tmp_path / "other").mkdir()
    _, other_key = _certificate(tmp_path / "other")
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", f"sqlite:///{tmp_path}/s.db")
    cases = [
        ("/nonexistent.pem", key,
         "YARN_SIDECAR_API_TLS_CERTFILE: /nonexistent.pem: No such file or directory"),
        (cert, "/nonexistent.key",
         "YARN_SIDECAR_API_TLS_KEYFILE: /nonexistent.key: No such file or directory"),
        (empty, key, f"YARN_SIDECAR_API_TLS_CERTFILE: {empty}: empty file"),
        (key, key, f"YARN_SIDECAR_API_TLS_CERTFILE: {key}: not a PEM certificate"),
        (cert, cert, f"YARN_SIDECAR_API_TLS_KEYFILE: {cert}: not a PEM private key"),
        (cert, other_key,
         f"YARN_SIDECAR_API_TLS_CERTFILE: {cert} and YARN_SIDECAR_API_TLS_KEYFILE: {other_key} "
         "are not a PEM certificate and its private key"),
    ]  # fmt: skip
    for certfile, keyfile, message in cases:
        monkeypatch.setenv("YARN_SIDECAR_API_TLS_CERTFILE", str(certfile))
        monkeypatch.setenv("YARN_SIDECAR_API_TLS_KEYFILE", str(keyfile))
        code, _, err = _cli(capsys, "serve", "--port", "9")
        assert code == 2 and _one_error_line(err).startswith(f"error: invalid settings: {message}")
    assert not (tmp_path / "s.db").exists()  # refused before the database is touched


def test_serve_on_a_port_in_use_stops_before_anything_runs(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("YARN_SIDECAR_")}
        env.update(
            YARN_SIDECAR_DATABASE_URL=f"sqlite:///{tmp_path}/s.db",
            YARN_SIDECAR_RM_URLS="http://127.0.0.1:9",
            YARN_SIDECAR_API_PORT=str(port),
        )
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "serve"],
            capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 1
    assert _one_error_line(done.stderr) == (
        f"error: cannot listen on 127.0.0.1:{port} (YARN_SIDECAR_API_HOST and API_PORT, or "
        "--host and --port): address already in use"
    )
    assert not (tmp_path / "s.db").exists()  # no migration, no loop, no leader election
