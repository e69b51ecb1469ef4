"""Sidecar settings: pydantic-settings, grouped, refused when unsafe.

The environment names (``YARN_SIDECAR_*``) are public interface. Values come, in order of
precedence, from keyword arguments, the environment, an optional config file (``.env``-style
``KEY=value`` lines named by ``YARN_SIDECAR_CONFIG_FILE``) and the defaults below. There is no
import-time singleton: ``load_settings()`` builds one and reports every invalid value by name.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlparse

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

if TYPE_CHECKING:
    from app.control.config import ControlConfig
    from app.control.guard import GuardConfig

ENV_PREFIX = "YARN_SIDECAR_"


class Mode(StrEnum):
    """How far the sidecar may go: record only, decide and record, or also push to YARN."""

    OBSERVE = "observe"
    ADVISE = "advise"
    ENFORCE = "enforce"


class LogFormat(StrEnum):
    """Human-readable lines, or one JSON object per line for log shippers."""

    TEXT = "text"
    JSON = "json"


def default_data_dir() -> Path:
    """Where the SQLite default lives: ``$XDG_DATA_HOME/yarn-sidecar`` or ``~/.local/share``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "yarn-sidecar"


# A CapacityScheduler queue path (``root.fast``), or empty.
_QUEUE_PATH_OR_EMPTY = r"^([A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*)?$"


class SettingsError(ValueError):
    """Settings could not be loaded; the message names every offending setting."""


class Settings(BaseSettings):
    """Every knob of the sidecar. Field names map to ``YARN_SIDECAR_<NAME>``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        frozen=True,
        case_sensitive=False,
    )

    # rm: where the ResourceManager(s) are; several for RM HA.
    rm_urls: Annotated[tuple[str, ...], NoDecode] = ("http://127.0.0.1:8088",)
    rm_user: str = "yarn-sidecar"
    rm_timeout_s: float = Field(10.0, gt=0, le=300)
    rm_retries: int = Field(2, ge=0, le=10)
    # The MapReduce JobHistory server (http://jhs:19888): job tasks, phase times and counters for
    # profiles and Fawkes' DD/TT/JS; read with the RM's auth and TLS options. Empty: not read.
    jobhistory_url: str = ""
    jobhistory_timeout_s: float = Field(10.0, gt=0, le=300)
    # HybridMR placement of deadline jobs: the node label of the dedicated partition a job goes
    # to when the shared partition would miss its deadline by its profile; empty: off.
    placement_label: str = Field("", max_length=200, pattern=r"^[A-Za-z0-9_\-.]*$")
    # The queue whose default-node-label-expression is the labelled partition: observed jobs
    # that HybridMR would place there are moved into it (empty: observed jobs are not moved).
    placement_queue: str = Field("", max_length=500, pattern=_QUEUE_PATH_OR_EMPTY)

    # db
    cluster_name: str = Field("default", min_length=1, max_length=100)
    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str = ""

    # loop
    poll_interval_s: float = Field(10.0, ge=0.5, le=3600)
    mode: Mode = Mode.ADVISE

    # api
    api_host: str = "127.0.0.1"
    api_port: int = Field(8000, ge=1, le=65535)
    log_format: LogFormat = LogFormat.TEXT
    log_level: str = "INFO"

    # policy: the queue controller (app.services.controller)
    policy: str = "static"  # static | fawkes:<weighting> | ltrf | mlrf | rrf
    policy_interval_s: float = Field(60.0, ge=1, le=86400)
    policy_params: dict[str, Any] = Field(default_factory=dict)  # JSON
    managed_parent: str = Field("root", min_length=1, max_length=500)
    queue_bounds: dict[str, Any] = Field(default_factory=dict)  # {"root.a": {"min": 10, "max": 60}}
    queue_weights: dict[str, Any] = Field(default_factory=dict)  # {"root.a": 2}; default 1
    max_step_pp: float = Field(10.0, ge=0.01, le=100)
    min_change_pp: float = Field(1.0, ge=0, le=100)
    allow_drift_overwrite: bool = False
    # minimum shares and the idle-cluster baseline (app.control.floors, app.control.idle)
    queue_floors: dict[str, Any] = Field(default_factory=dict)  # {"*": 2, "root.deadline": 3}
    queue_baseline: dict[str, Any] = Field(default_factory=dict)  # {"root.a": 60, "root.b": 40}
    # The interference guard (HybridMR Phase II at queue level, ``app.control.guard``):
    # {"slos": [{"name", "url" + "max_latency_ms" | "queue" + "max_pending_s"}], "batch_queues":
    # [...], "step_pp": 10, "floor_pp": 0, "recover_ticks": 3}; empty: off.
    interference_guard: dict[str, Any] = Field(default_factory=dict)

    # jobs: deadline-tagged jobs admitted by Justice / PYTHIA (docs/policies.md)
    deadline_queue: str = Field("root.deadline", min_length=1, max_length=500)
    # Further queues POST /jobs may name (the deadline queue is always allowed).
    job_queues: Annotated[tuple[str, ...], NoDecode] = ()
    admission_policy: Literal["justice", "pythia", "promise"] = "justice"
    admission_smoothing: Literal["mean", "ewma"] = "mean"
    admission_alpha: float = Field(0.5, gt=0, le=1)
    drop_threshold: int = Field(1000, ge=0)
    # 0: the vcores of the RUNNING NodeManagers at the latest poll.
    deadline_capacity_vcores: int = Field(0, ge=0)
    # Jobs at or below drop_threshold run on past their deadline (they teach the estimator); their
    # YARN lifetime ends at deadline + factor * deadline_s. Larger jobs end at the deadline.
    job_overrun_factor: float = Field(1.0, ge=0, le=100)
    admission_interval_s: float = Field(5.0, ge=0.2, le=3600)
    # Promise admission (app/policies/promise): per-signature history, wave-aware grants
    promise_quantile: float = Field(0.95, ge=0.5, le=1.0)
    promise_min_samples: int = Field(3, ge=1, le=10_000)
    promise_window: int = Field(64, ge=1, le=100_000)
    promise_am_containers: int = Field(1, ge=0, le=100)
    promise_startup_s: float = Field(10.0, ge=0, le=3600)
    promise_crowd_out: bool = True
    # cluster.json of a distributed-shell harness (hadoop-docker/minicluster/run): enables the
    # built-in `sleep` job template (AM classpath, JVM options, staging directory).
    dshell_harness: Path | None = None

    # security: who may call the API and what a job may run (README "Operations: security")
    # token: bearer API tokens with roles; none: no authentication (loopback binds only).
    auth: Literal["token", "none"] = "token"
    # /metrics without a token (for a scraper on a trusted network); otherwise a scrape token.
    metrics_open: bool = False
    # Host header values the API answers ("*" for any); loopback names by default.
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ("localhost", "127.0.0.1", "[::1]")
    # Largest request body accepted (bytes).
    max_request_bytes: int = Field(1_048_576, ge=1024, le=1_073_741_824)
    # Raw ApplicationMaster commands in POST /jobs: operators only, or nobody.
    raw_commands: Literal["operator", "disabled"] = "operator"
    # Operator-defined job templates (YAML); see examples/job-templates.yaml.
    job_templates: Path | None = None
    # Environment variables a raw application may set, and roots its local resources may come from.
    env_allowlist: Annotated[tuple[str, ...], NoDecode] = (
        "JAVA_HOME",
        "HADOOP_CONF_DIR",
        "CLASSPATH",
    )
    resource_roots: Annotated[tuple[str, ...], NoDecode] = ("hdfs://", "viewfs://")
    # HTTPS for the sidecar's own API (uvicorn's TLS options).
    api_tls_certfile: Path | None = None
    api_tls_keyfile: Path | None = None
    # Idle keep-alive connections stay open this long: longer than the idle expiry of the
    # clients and proxies in front (httpx and requests pools: 5 s; load balancers: 60 s), so a
    # client never sends a request on a connection the server is closing at that moment, which
    # fails it with a reset. uvicorn's own default is 5 s, the same as httpx's.
    api_keep_alive_s: int = Field(75, ge=1, le=3600)
    # Retention (app/db/retention.py): raw samples for raw_days, hourly means until hourly_days,
    # decisions for decision_days; run every retention_interval_s by the leader.
    retention_raw_days: float = Field(7.0, gt=0, le=3650)
    retention_hourly_days: float = Field(365.0, gt=0, le=36500)
    retention_decision_days: float = Field(365.0, gt=0, le=36500)
    retention_interval_s: float = Field(3600.0, ge=10, le=86400)
    retention_batch: int = Field(5000, ge=100, le=1_000_000)
    # towards the RM: simple (user.name) or kerberos (SPNEGO with a keytab); TLS trust and identity.
    rm_auth: Literal["simple", "kerberos"] = "simple"
    rm_principal: str = ""
    rm_keytab: Path | None = None
    rm_ca_bundle: Path | None = None
    rm_client_cert: Path | None = None
    rm_client_key: Path | None = None

    @field_validator(
        "allowed_hosts", "env_allowlist", "resource_roots", "job_queues", mode="before"
    )
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @model_validator(mode="after")
    def _check_security(self) -> Settings:
        if self.auth == "none" and not is_loopback(self.api_host):
            raise ValueError(
                f"{ENV_PREFIX}AUTH: 'none' is only allowed on a loopback bind, and "
                f"{ENV_PREFIX}API_HOST is {self.api_host!r}"
            )
        if (self.api_tls_certfile is None) != (self.api_tls_keyfile is None):
            raise ValueError(
                f"{ENV_PREFIX}API_TLS_CERTFILE: give both it and {ENV_PREFIX}API_TLS_KEYFILE"
            )
        if self.rm_auth == "kerberos" and (not self.rm_principal or self.rm_keytab is None):
            raise ValueError(
                f"{ENV_PREFIX}RM_AUTH: kerberos needs {ENV_PREFIX}RM_PRINCIPAL and "
                f"{ENV_PREFIX}RM_KEYTAB"
            )
        return self

    @field_validator("rm_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("rm_urls")
    @classmethod
    def _check_urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one ResourceManager URL is required")
        from app.redact import redact_url

        for url in value:
            shown = redact_url(url)  # the error is printed and logged: never its password
            parsed = urlparse(url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValueError(f"{shown!r} is not an http(s) URL such as http://rm-host:8088")
            try:
                port = parsed.port
            except ValueError:
                port = -1
            if not parsed.hostname or port == -1:
                # e.g. a '/' in the password ends the authority there: every client would read
                # another host or port than the operator meant
                raise ValueError(
                    f"{shown!r} has no valid host and port; write '@', '/', ':' in a user name "
                    "or password percent-encoded (%40, %2F, %3A)"
                )
        return tuple(url.rstrip("/") for url in value)

    @field_validator("database_url")
    @classmethod
    def _check_db_url(cls, value: str) -> str:
        if value and not value.startswith(("sqlite", "postgresql")):
            raise ValueError("only sqlite:// and postgresql:// URLs are supported")
        return value

    @field_validator("log_level")
    @classmethod
    def _check_level(cls, value: str) -> str:
        upper = value.upper()
        if upper not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return upper

    @model_validator(mode="after")
    def _check_control(self) -> Settings:
        from app.policies.base import PolicyError

        try:
            self.control_config()
        except PolicyError as exc:
            # Named after the setting: policy -> POLICY, params.x -> POLICY_PARAMS, bounds.q ->
            # QUEUE_BOUNDS, weights.q -> QUEUE_WEIGHTS.
            raise ValueError(f"{_control_setting(exc.field)}: {exc.message}") from None
        return self

    @model_validator(mode="after")
    def _check_guard(self) -> Settings:
        from app.policies.base import PolicyError

        try:
            self.guard_config()
        except PolicyError as exc:
            raise ValueError(f"{ENV_PREFIX}INTERFERENCE_GUARD: {exc}") from None
        return self

    def guard_config(self) -> GuardConfig | None:
        """The interference guard's configuration, None when off (validated)."""
        from app.control.guard import GuardConfig

        return GuardConfig.from_dict(self.interference_guard) if self.interference_guard else None

    def control_config(self) -> ControlConfig:
        """The queue controller's configuration from these settings (validated)."""
        from app.control.config import HISTORY_VIEW, LIVE_VIEW, check_observable, resolve

        cfg = resolve(
            policy=self.policy,
            params=self.policy_params,
            mode=self.mode.value,
            bounds=self.queue_bounds,
            weights=self.queue_weights,
            max_step_pp=self.max_step_pp,
            min_change_pp=self.min_change_pp,
            allow_drift_overwrite=self.allow_drift_overwrite,
            managed_parent=self.managed_parent,
            interval_s=self.policy_interval_s,
            floors=self.queue_floors,
            baseline=self.queue_baseline,
        )
        check_observable(cfg, HISTORY_VIEW if self.jobhistory_url else LIVE_VIEW)
        return cfg

    def check_api_tls(self) -> None:
        """``SettingsError`` unless the API's certificate and key files load as a pair.

        Checked when ``serve`` starts, not on every load: the other commands never read the files,
        and may run as a user who cannot. uvicorn reads them only once the app has started, and
        its errors (``FileNotFoundError`` without the path, ``SSLError: PEM lib``) name neither
        file nor setting."""
        cert, key = self.api_tls_certfile, self.api_tls_keyfile
        if cert is None or key is None:
            return
        for name, path, marker, what in (
            ("API_TLS_CERTFILE", cert, b"-----BEGIN CERTIFICATE-----", "a PEM certificate"),
            ("API_TLS_KEYFILE", key, b"PRIVATE KEY-----", "a PEM private key"),
        ):
            try:
                content = path.read_bytes()
            except OSError as exc:
                raise SettingsError(
                    f"invalid settings: {ENV_PREFIX}{name}: {path}: {exc.strerror}"
                ) from None
            if marker not in content:
                problem = "empty file" if not content.strip() else f"not {what}"
                raise SettingsError(f"invalid settings: {ENV_PREFIX}{name}: {path}: {problem}")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(cert, key, password=_no_passphrase)
        except _Encrypted:
            return  # uvicorn asks for the passphrase, as it always did; nothing more to check
        except ssl.SSLError as exc:
            raise SettingsError(
                f"invalid settings: {ENV_PREFIX}API_TLS_CERTFILE: {cert} and "
                f"{ENV_PREFIX}API_TLS_KEYFILE: {key} are not a PEM certificate and its private "
                f"key ({exc.reason or exc})"
            ) from None
        except OSError as exc:
            raise SettingsError(
                f"invalid settings: {ENV_PREFIX}API_TLS_CERTFILE: {cert}: {exc.strerror}"
            ) from None

    @property
    def effective_database_url(self) -> str:
        """The configured URL, or a SQLite file in the data directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'sidecar.db'}"


class _Encrypted(Exception):
    """The API's private key needs a passphrase."""


def _no_passphrase() -> bytes:
    raise _Encrypted


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts local connections."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _read_config_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines; keys with or without the ``YARN_SIDECAR_`` prefix; ``#`` comments."""
    values: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SettingsError(f"config file {path}: {exc.strerror}") from exc
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise SettingsError(f"config file {path}:{lineno}: expected KEY=value, got {raw!r}")
        key, _, val = line.partition("=")
        key = key.strip().upper().removeprefix(ENV_PREFIX).lower()
        if key not in Settings.model_fields:
            raise SettingsError(f"config file {path}:{lineno}: unknown setting {key!r}")
        values[key] = val.strip().strip('"').strip("'")
    return values


def load_settings(**overrides: Any) -> Settings:
    """Build settings from overrides, environment and optional config file, or raise
    ``SettingsError`` naming each invalid setting by its environment variable."""
    config_file = os.environ.get(f"{ENV_PREFIX}CONFIG_FILE")
    file_values = _read_config_file(Path(config_file)) if config_file else {}
    env_keys = {k.upper() for k in os.environ}
    # Environment beats the file: only pass file values the environment does not set.
    from_file = {k: v for k, v in file_values.items() if f"{ENV_PREFIX}{k.upper()}" not in env_keys}
    try:
        return Settings(**{**from_file, **overrides})
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from None


def _control_setting(field: str) -> str:
    head = field.split(".", 1)[0]
    name = {
        "params": "policy_params",
        "bounds": "queue_bounds",
        "weights": "queue_weights",
        "floors": "queue_floors",
        "baseline": "queue_baseline",
        "interval_s": "policy_interval_s",
    }
    return f"{ENV_PREFIX}{name.get(head, head).upper()} ({field})"


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        if not err["loc"]:  # a whole-model check names its settings itself
            parts.append(str(err["msg"]).removeprefix("Value error, "))
            continue
        name = str(err["loc"][0])
        parts.append(f"{ENV_PREFIX}{name.upper()}: {err['msg']}")
    return "invalid settings: " + "; ".join(parts)
