"""Reads and writes of the leadership record (``app.db.leader_models``)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.leader_models import Leadership

NAME = "sidecar"


class Fenced(Exception):
    """This process's epoch is no longer current: another process leads; it must not write."""


def take_lead(session: Session, holder: str, now_ms: int) -> int:
    """Record ``holder`` as the leader under the next epoch (called once the lock is held)."""
    row = session.scalar(select(Leadership).where(Leadership.name == NAME).with_for_update())
    if row is None:
        row = Leadership(name=NAME, epoch=1, holder=holder, since_ms=now_ms)
        session.add(row)
    else:
        row.epoch += 1
        row.holder, row.since_ms = holder, now_ms
    session.flush()
    return row.epoch


def current(session: Session) -> Leadership | None:
    """The leadership record (``None`` before any process has led)."""
    return session.get(Leadership, NAME)


def check_epoch(session: Session, epoch: int | None) -> None:
    """Raise ``Fenced`` unless ``epoch`` is the current one.

    Called in the transaction that records a push or a submission before the RM write; on
    PostgreSQL the row is locked (``FOR SHARE``) until that transaction ends, so a new leader's
    ``take_lead`` waits for an attempt already recorded instead of racing it."""
    if epoch is None:
        return
    stmt = select(Leadership).where(Leadership.name == NAME).with_for_update(read=True)
    row = session.scalar(stmt)
    if row is None or row.epoch != epoch:
        now = "none" if row is None else f"{row.epoch} ({row.holder})"
        raise Fenced(f"leader epoch {epoch} is not current (current: {now})")
