"""Persistence: SQLAlchemy 2 models, engine/session setup and repository functions.

Importing the package registers every model module on ``Base.metadata`` (Alembic's target).
"""

from app.db import (
    auth_models,
    control_models,
    history_models,
    jobs_models,
    leader_models,
    models,
)

__all__ = [
    "auth_models",
    "control_models",
    "history_models",
    "jobs_models",
    "leader_models",
    "models",
]
