"""Audit and push rows of the queue controller (``docs/style.md``, "Habits": every decision
recorded with its reasons): a tick's ``Work`` (``app.control.tick``) as ``decisions`` and
``config_pushes`` rows, and the ``PUT /policy`` configuration stored and read back as the changes
the operator made."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from app.control.config import ControlConfig
from app.control.tick import KIND, PUSHING, Work, audit_inputs, audit_outputs
from app.db import control_repo
from app.db.control_models import ConfigPush
from app.db.models import Decision
from app.domain.live import LiveConfig, PushResult

# The fields an operator set through ``PUT /policy``, kept in the row's ``limits``. The row's
# columns hold the whole configuration in force when it was saved (mode, policy ...), but only
# these override the settings at the next start: a PUT that tuned a parameter must not pin the
# mode the process happened to run in then.
OPERATOR_FIELDS = "operator_fields"


def save_operator_config(
    session: Session,
    cluster_id: int,
    cfg: ControlConfig,
    changes: Mapping[str, Any],
    now_ms: int,
) -> None:
    """Store ``cfg`` after ``PUT /policy`` ``changes``, with the fields set by the operator: these
    and those of earlier PUTs. Parameters belong to their policy, so setting them sets it too."""
    before = control_repo.get_control_config(session, cluster_id)
    fields = set(changes) | (set(_operator_fields(before)) if before is not None else set())
    if "params" in fields:
        fields.add("policy")
    row = control_repo.save_control_config(session, cluster_id, cfg.to_dict(), now_ms)
    row.limits = {**row.limits, OPERATOR_FIELDS: sorted(fields)}


def _operator_fields(row: Any) -> list[str]:
    """The fields an operator set; a row stored before they were recorded counts as all of its
    fields (as it was read then)."""
    fields = dict(row.limits or {}).get(OPERATOR_FIELDS)
    return list(fields) if isinstance(fields, list) else list(_all_changes(row))


def stored_changes(row: Any) -> dict[str, Any]:
    """A ``control_configs`` row as ``overlay`` changes: the fields the operator set."""
    fields = set(_operator_fields(row))
    return {k: v for k, v in _all_changes(row).items() if k in fields}


def _all_changes(row: Any) -> dict[str, Any]:
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
