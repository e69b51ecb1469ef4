"""The security group of the settings: refused when unsafe, lists from the environment."""

from __future__ import annotations

import pytest

from app.settings import SettingsError, is_loopback, load_settings


def test_lists_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("YARN_SIDECAR_ALLOWED_HOSTS")
    monkeypatch.delenv("YARN_SIDECAR_AUTH")
    s = load_settings()
    assert (s.auth, s.allowed_hosts, s.raw_commands) == (
        "token",
        ("localhost", "127.0.0.1", "[::1]"),
        "operator",
    )
    monkeypatch.setenv("YARN_SIDECAR_ALLOWED_HOSTS", "sidecar.example.com, 10.0.0.5")
    monkeypatch.setenv("YARN_SIDECAR_ENV_ALLOWLIST", "JAVA_HOME")
    s = load_settings()
    assert s.allowed_hosts == ("sidecar.example.com", "10.0.0.5")
    assert s.env_allowlist == ("JAVA_HOME",)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"api_tls_certfile": "/x.pem"}, "YARN_SIDECAR_API_TLS_CERTFILE: give both"),
        ({"rm_auth": "kerberos"}, "YARN_SIDECAR_RM_AUTH: kerberos needs"),
        ({"raw_commands": "everyone"}, "YARN_SIDECAR_RAW_COMMANDS"),
        ({"auth": "none", "api_host": "10.1.2.3"}, "YARN_SIDECAR_AUTH: 'none' is only allowed"),
    ],
)
def test_unsafe_or_incomplete_settings_are_refused(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(**overrides)


def test_loopback() -> None:
    assert all(map(is_loopback, ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "10.0.0.1", "::", "sidecar.example.com")))
