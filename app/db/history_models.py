"""MapReduce job history read from the JobHistory server (``app.services.history``): one row per
finished MapReduce application with its phase timings and counters, and one per task.

A row exists once the collector has asked about the app: ``status`` ``ok`` holds the job,
``missing`` means the JobHistory server did not know it after the collector's last attempt
(``attempts`` counts them; the app is not asked about again). Rows go with their application
(``ON DELETE CASCADE``), so retention of applications bounds this history too.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models import Base


class MapReduceJobRow(Base):
    """A finished MapReduce job (or the record that the JobHistory server had none)."""

    __tablename__ = "mr_jobs"
    __table_args__ = (
        Index("ix_mr_jobs_fetched", "fetched_ms"),
        Index("ix_mr_jobs_seq", "seq"),
    )

    app_id: Mapped[str] = mapped_column(
        String(100), ForeignKey("applications.app_id", ondelete="CASCADE"), primary_key=True
    )
    status: Mapped[str] = mapped_column(String(20))
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    fetched_ms: Mapped[int] = mapped_column(BigInteger)
    # The order jobs were stored in (``ok`` rows only): one collector stores one job per
    # transaction, so whoever has read up to ``seq`` N has read every job stored before it, and
    # a reader that remembers N counts each job once however late its commit or its next tick.
    seq: Mapped[int | None] = mapped_column(BigInteger)
    last_error: Mapped[str | None] = mapped_column(Text)
    job_id: Mapped[str | None] = mapped_column(String(100))
    state: Mapped[str | None] = mapped_column(String(20))
    submit_ms: Mapped[int | None] = mapped_column(BigInteger)
    start_ms: Mapped[int | None] = mapped_column(BigInteger)
    finish_ms: Mapped[int | None] = mapped_column(BigInteger)
    maps_total: Mapped[int] = mapped_column(Integer, default=0)
    maps_completed: Mapped[int] = mapped_column(Integer, default=0)
    reduces_total: Mapped[int] = mapped_column(Integer, default=0)
    reduces_completed: Mapped[int] = mapped_column(Integer, default=0)
    avg_map_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    avg_shuffle_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    avg_merge_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    avg_reduce_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    map_phase_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    reduce_phase_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    map_peak_vcores: Mapped[float] = mapped_column(Float, default=0.0)
    reduce_peak_vcores: Mapped[float] = mapped_column(Float, default=0.0)
    input_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    output_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    shuffle_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    spilled_records: Mapped[int] = mapped_column(BigInteger, default=0)
    cpu_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    vcore_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    # The cluster's vcores when the history was read: HybridMR's "cluster size" of the run.
    cluster_vcores: Mapped[float] = mapped_column(Float, default=0.0)
    counters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class MapReduceTaskRow(Base):
    """One task of a stored job."""

    __tablename__ = "mr_tasks"

    app_id: Mapped[str] = mapped_column(
        String(100), ForeignKey("mr_jobs.app_id", ondelete="CASCADE"), primary_key=True
    )
    task_id: Mapped[str] = mapped_column(String(120), primary_key=True)
    kind: Mapped[str] = mapped_column(String(10))
    state: Mapped[str] = mapped_column(String(20))
    start_ms: Mapped[int | None] = mapped_column(BigInteger)
    finish_ms: Mapped[int | None] = mapped_column(BigInteger)
    elapsed_ms: Mapped[int] = mapped_column(BigInteger, default=0)
