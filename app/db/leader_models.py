"""The leadership record: which sidecar process runs the control loops, and its epoch.

Several sidecars may serve one PostgreSQL database; one of them (the holder of a session advisory
lock, ``app.services.leader``) polls, controls and admits. The epoch grows by one each time a
process takes the lead. Every push and every submission records the epoch it was made under and
checks, in the transaction that records the attempt, that the epoch is still current, so a
deposed leader's write is refused (fenced) rather than raced.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models import Base


class Leadership(Base):
    """One row per database (``name`` is always ``"sidecar"``)."""

    __tablename__ = "leadership"

    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    epoch: Mapped[int] = mapped_column(BigInteger)
    holder: Mapped[str] = mapped_column(String(300))
    since_ms: Mapped[int] = mapped_column(BigInteger)
