"""``GET /admission`` and ``PUT /admission``: the operator's view of and hand on the admission
policy (Justice, PYTHIA, Promise: every policy with an admission adapter in the registry).

A change is validated through the registry (422 naming the field), stored in the database (a
restart keeps it, and every replica's next admission round runs it) and recorded in the audit
trail as a ``policy`` decision. ``YARN_SIDECAR_ADMISSION_POLICY`` is the policy until the first
``PUT``."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, status
from pydantic import BaseModel, ConfigDict, Field

from app.api.auth import require
from app.api.deps import StateDep
from app.api.schemas import ErrorOut
from app.api.state import SidecarState
from app.auth.principal import Role
from app.jobs.rounds import AdmissionConfig, policy_of
from app.policies import registry
from app.policies.base import PolicyError
from app.services.admission import AdmissionService

router = APIRouter(tags=["admission"])

MAX_PARAMS = 100


class AdmissionIn(BaseModel):
    """The admission policy to run and its parameters (omitted ones take their defaults)."""

    model_config = ConfigDict(extra="forbid")

    policy: str = Field(description="A registered admission policy: justice, pythia or promise.")
    params: dict[str, Any] = Field(
        default_factory=dict, max_length=MAX_PARAMS, description="Parameters (registry)."
    )


class AdmissionParamOut(BaseModel):
    """One parameter of an admission policy."""

    name: str
    type: str
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: list[str] | None = None


class AdmissionPolicyOut(BaseModel):
    """A registered admission policy."""

    name: str
    summary: str
    paper: str
    params: list[AdmissionParamOut]


class AdmissionOut(BaseModel):
    """The admission policy the next round runs, where it was chosen, and the alternatives."""

    policy: str
    params: dict[str, Any]
    source: str = Field(description="operator (PUT /admission) or settings.")
    policies: list[AdmissionPolicyOut]


def _service(state: SidecarState) -> AdmissionService:
    if state.admission is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "the admission service is not running"
        )
    return state.admission


def _policies() -> list[AdmissionPolicyOut]:
    out = []
    for name in registry.admission_names():
        spec = registry.lookup(name)
        params = [
            AdmissionParamOut(
                name=p.name,
                type=p.kind.__name__,
                default=p.default,
                doc=p.doc,
                minimum=p.minimum,
                maximum=p.maximum,
                choices=list(p.choices) if p.choices is not None else None,
            )
            for p in spec.params
        ]
        out.append(
            AdmissionPolicyOut(name=name, summary=spec.summary, paper=spec.paper, params=params)
        )
    return out


def _out(cfg: AdmissionConfig, source: str) -> AdmissionOut:
    policy = policy_of(cfg)
    return AdmissionOut(
        policy=policy.name, params=dict(policy.params), source=source, policies=_policies()
    )


def _read(service: AdmissionService) -> tuple[AdmissionConfig, str]:
    with service.sessions() as session:
        return service.peek_cfg(session), service.policy_source(session)


@router.get(
    "/admission",
    response_model=AdmissionOut,
    dependencies=[Depends(require(Role.VIEWER))],
    responses={503: {"model": ErrorOut}},
)
async def get_admission(state: StateDep) -> AdmissionOut:
    """The active admission policy, its parameters and the registered admission policies."""
    cfg, source = await asyncio.to_thread(_read, _service(state))
    return _out(cfg, source)


@router.put(
    "/admission",
    response_model=AdmissionOut,
    dependencies=[Depends(require(Role.OPERATOR))],
    responses={422: {"model": ErrorOut}, 503: {"model": ErrorOut}},
)
async def put_admission(body: AdmissionIn, state: StateDep) -> AdmissionOut:
    """Switch the admission policy; the next admission round (on any replica) runs it."""
    service = _service(state)
    try:
        cfg = await asyncio.to_thread(service.set_policy, body.policy, body.params, service.clock())
    except PolicyError as exc:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, f"{exc.field}: {exc.message}"
        ) from exc
    return _out(cfg, "operator")
