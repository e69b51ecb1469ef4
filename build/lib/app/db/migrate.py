"""Alembic driven from code (``yarn-sidecar db upgrade``), no alembic.ini needed at run time."""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from app.db.session import _normalise


def migrations_dir() -> Path:
    """Where the Alembic scripts are: ``migrations/`` of the source tree (a checkout or an
    editable install), else the data directory an installed wheel put them in."""
    source = Path(__file__).resolve().parents[2] / "migrations"
    if (source / "env.py").is_file():
        return source
    for prefix in (sysconfig.get_path("data"), sys.prefix, sys.base_prefix):
        shipped = Path(prefix) / "share" / "yarn-sidecar" / "migrations"
        if (shipped / "env.py").is_file():
            return shipped
    raise FileNotFoundError(
        f"no Alembic migrations found in {source} or <prefix>/share/yarn-sidecar/migrations"
    )


def alembic_config(database_url: str) -> Config:
    """An Alembic config pointing at the migrations (source tree or installed package)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    # ConfigParser interpolation would eat '%' in passwords.
    cfg.set_main_option("sqlalchemy.url", _normalise(database_url).replace("%", "%%"))
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (creating a SQLite file if needed)."""
    if database_url.startswith("sqlite:///"):
        Path(database_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Migrate the database down to ``revision``."""
    command.downgrade(alembic_config(database_url), revision)


def head_revision(database_url: str) -> str | None:
    """The newest revision the code knows."""
    return ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (``None`` when never migrated)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
