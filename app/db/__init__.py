"""Persistence: SQLAlchemy 2 models, engine/session setup and repository functions (issue 2.3)."""
