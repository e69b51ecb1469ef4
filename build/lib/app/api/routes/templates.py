"""``GET /templates``: the operator's job templates a submitter may run, with their parameters."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import StateDep
from app.api.jobs_schemas import TemplateList, TemplateOut, TemplateParamOut
from app.job_templates import ChoiceParam, FloatParam, IntParam, StringParam, Template

router = APIRouter(tags=["jobs"])


def _param(spec: IntParam | FloatParam | ChoiceParam | StringParam) -> TemplateParamOut:
    out = TemplateParamOut(type=spec.type, description=spec.description, default=spec.default)
    if isinstance(spec, IntParam | FloatParam):
        return out.model_copy(update={"min": spec.min, "max": spec.max})
    if isinstance(spec, ChoiceParam):
        return out.model_copy(update={"choices": list(spec.choices)})
    return out.model_copy(update={"pattern": spec.pattern})


def template_out(name: str, t: Template) -> TemplateOut:
    """A template as the API shows it (the command itself is the operator's business)."""
    return TemplateOut(
        name=name,
        description=t.description,
        application_type=t.application_type,
        parameters={p: _param(spec) for p, spec in t.parameters.items()},
        queues=list(t.queues),
        max_memory_mb=t.memory_mb.max,
        max_vcores=t.vcores.max,
    )


@router.get("/templates", response_model=TemplateList)
def list_templates(state: StateDep) -> TemplateList:
    """Job templates for ``POST /jobs`` with ``run: {"kind": "template", ...}``."""
    return TemplateList(items=[template_out(n, t) for n, t in sorted(state.templates.items())])
