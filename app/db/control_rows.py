"""Audit and push rows of the queue controller (``docs/style.md``, "Habits": every decision
recorded with its reasons): a tick's ``Work`` (``app.control.tick``) as ``decisions`` and
``config_pushes`` rows, and a stored configuration as ``PUT /policy`` changes."""

from __future__ import annotations

from typing import Any

from app.control.tick import KIND, PUSHING, Work, audit_inputs, audit_outputs
from app.db.control_models import ConfigPush
from app.db.models import Decision
from app.domain.live import LiveConfig, PushResult


def stored_changes(row: Any) -> dict[str, Any]:
    """A ``control_configs`` row as ``overlay`` changes."""
    limits = dict(row.limits or {})
    out: dict[str, Any] = {
        "policy": row.policy,
        "params": dict(row.params or {}),
        "mode": row.mode,
        "bounds": dict(row.bounds or {}),
    }
    keys = ("weights", "max_step_pp", "min_change_pp", "allow_drift_overwrite")
    for key in (*keys, "floors", "baseline"):
        if key in limits:
            out[key] = limits[key]
    return out


def baseline_json(row: ConfigPush) -> dict[str, Any]:
    return {
        "id": row.id,
        "status": row.status,
        "pushed_ms": row.pushed_ms,
        "values": dict(row.values),
        "version": row.version_after,
    }


def baseline_row(cluster_id: int, live: LiveConfig, now_ms: int) -> ConfigPush:
    return ConfigPush(
        cluster_id=cluster_id,
        pushed_ms=now_ms,
        parent=live.parent,
        values={q: dict(v) for q, v in live.values.items()},
        previous={},
        version_before=live.version,
        version_after=live.version,
        status="baseline",
    )


def push_row(work: Work, status: str, version_after: int | None) -> ConfigPush:
    return ConfigPush(
        cluster_id=work.ctx.cluster_id,
        pushed_ms=work.now_ms,
        parent=work.live.parent,
        values=work.plan.expected(),
        previous={q: dict(v) for q, v in work.live.values.items()},
        version_before=work.live.version,
        version_after=version_after,
        status=status,
    )


def decision_row(work: Work, result: PushResult | None, status: str, reason: str) -> Decision:
    """The decision of one tick (also the ``pushing`` record written ahead of a PUT)."""
    cfg = work.ctx.cfg
    return Decision(
        cluster_id=work.ctx.cluster_id,
        created_ms=work.now_ms,
        kind=KIND,
        policy=cfg.policy,
        mode=cfg.mode,
        params=cfg.to_dict(),
        inputs=audit_inputs(work),
        outputs=audit_outputs(work, result),
        pushed=work.plan.changes() if result is not None or status == PUSHING[0] else None,
        status=status,
        rm_response=result.message if result is not None else None,
        reason=reason,
    )
