"""Settings: public env names, defaults, and start-up refusal naming the bad setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.settings import Mode, Settings, SettingsError, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("YARN_SIDECAR_"):
            monkeypatch.delenv(key)


def test_defaults_are_the_documented_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    s = load_settings()
    assert s.poll_interval_s == 10
    assert s.mode is Mode.ADVISE
    assert s.api_port == 8000
    assert s.effective_database_url == f"sqlite:///{tmp_path}/yarn-sidecar/sidecar.db"


def test_env_names_are_public_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YARN_SIDECAR_RM_URLS", "http://rm1:8088, http://rm2:8088/")
    monkeypatch.setenv("YARN_SIDECAR_DATABASE_URL", "postgresql://u@db/sidecar")
    monkeypatch.setenv("YARN_SIDECAR_POLL_INTERVAL_S", "2.5")
    monkeypatch.setenv("YARN_SIDECAR_MODE", "enforce")
    monkeypatch.setenv("YARN_SIDECAR_API_HOST", "0.0.0.0")
    monkeypatch.setenv("YARN_SIDECAR_API_PORT", "9001")
    monkeypatch.setenv("YARN_SIDECAR_LOG_FORMAT", "json")
    s = load_settings()
    assert s.rm_urls == ("http://rm1:8088", "http://rm2:8088")
    assert s.effective_database_url == "postgresql://u@db/sidecar"
    assert (s.poll_interval_s, s.mode, s.api_host, s.api_port) == (
        2.5,
        Mode.ENFORCE,
        "0.0.0.0",
        9001,
    )
    assert s.log_format.value == "json"


@pytest.mark.parametrize(
    ("env", "value", "named"),
    [
        ("YARN_SIDECAR_MODE", "yolo", "YARN_SIDECAR_MODE"),
        ("YARN_SIDECAR_RM_URLS", "rm1:8088", "YARN_SIDECAR_RM_URLS"),
        ("YARN_SIDECAR_RM_URLS", " , ", "YARN_SIDECAR_RM_URLS"),
        ("YARN_SIDECAR_POLL_INTERVAL_S", "0", "YARN_SIDECAR_POLL_INTERVAL_S"),
        ("YARN_SIDECAR_API_PORT", "70000", "YARN_SIDECAR_API_PORT"),
        ("YARN_SIDECAR_LOG_FORMAT", "xml", "YARN_SIDECAR_LOG_FORMAT"),
        ("YARN_SIDECAR_DATABASE_URL", "mysql://x/y", "YARN_SIDECAR_DATABASE_URL"),
        ("YARN_SIDECAR_POLICY", "fawkes:DD", "YARN_SIDECAR_POLICY.*input bytes"),
    ],
)
def test_invalid_setting_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, named: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(SettingsError, match=named):
        load_settings()


def test_config_file_is_read_and_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "sidecar.env"
    cfg.write_text("# comment\nYARN_SIDECAR_MODE=observe\npoll_interval_s = 30\n")
    monkeypatch.setenv("YARN_SIDECAR_CONFIG_FILE", str(cfg))
    monkeypatch.setenv("YARN_SIDECAR_POLL_INTERVAL_S", "5")
    s = load_settings()
    assert s.mode is Mode.OBSERVE
    assert s.poll_interval_s == 5


def test_config_file_errors_name_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "sidecar.env"
    cfg.write_text("YARN_SIDECAR_MODE=observe\nnot a setting line\n")
    monkeypatch.setenv("YARN_SIDECAR_CONFIG_FILE", str(cfg))
    with pytest.raises(SettingsError, match=rf"{cfg}:2"):
        load_settings()
    cfg.write_text("YARN_SIDECAR_COLOUR=blue\n")
    with pytest.raises(SettingsError, match=r"sidecar.env:1: unknown setting 'colour'"):
        load_settings()


def test_placement_label_is_a_node_label_name() -> None:
    assert Settings(placement_label="fast-ssd.1").placement_label == "fast-ssd.1"
    with pytest.raises(ValueError, match="placement_label"):
        Settings(placement_label="fast && rm -rf")


def test_placement_queue_is_a_queue_path_or_empty() -> None:
    assert Settings(placement_queue="root.fast_lane").placement_queue == "root.fast_lane"
    assert Settings().placement_queue == ""
    for bad in ("root..fast", "root.fast.", "root fast", "root.$(id)"):
        with pytest.raises(ValueError, match="placement_queue"):
            Settings(placement_queue=bad)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://sidecar:s3cret@rm:8088", "is not an http"),
        ("http://sidecar:s3cr/et@rm:8088", "percent-encoded"),  # '/' ends the authority
        ("http://sidecar:s3cret@rm:80x", "no valid host and port"),
    ],
)
def test_a_bad_rm_url_is_refused_without_its_password(
    monkeypatch: pytest.MonkeyPatch, url: str, why: str
) -> None:
    monkeypatch.setenv("YARN_SIDECAR_RM_URLS", url)
    with pytest.raises(SettingsError, match=why) as refused:
        load_settings()
    assert "YARN_SIDECAR_RM_URLS" in str(refused.value)
    assert "s3cr" not in str(refused.value) and "sidecar:***@" in str(refused.value)


def test_rm_urls_with_encoded_or_at_signed_passwords_are_kept() -> None:
    urls = "http://u:s3cr%2Ft@rm1:8088,http://u:p@ss@rm2:8088"
    assert Settings(rm_urls=urls).rm_urls == (
        "http://u:s3cr%2Ft@rm1:8088",
        "http://u:p@ss@rm2:8088",
    )
