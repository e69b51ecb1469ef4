"""What a caller may run through ``POST /jobs`` and whose jobs it may touch.

Raw ApplicationMaster commands are an operator's tool (or disabled by setting); a raw command's
environment and local resources are checked against the operator's allow-lists, so a submitted
job cannot preload a library into the AM or ship files from the sidecar host. Jobs run only in the
configured deadline queue. Submitters manage only their own jobs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import HTTPException, status

from app.api.auth import forbidden
from app.api.jobs_schemas import ApplicationRun, JobIn, TemplateRun
from app.auth.principal import Principal, Role
from app.job_templates import Template, TemplateError, render
from app.settings import Settings

# Never accepted, whatever the allow-list says: they change what the AM's processes load.
DENIED_ENV_PREFIXES = ("LD_", "DYLD_")


def _unprocessable(message: str) -> HTTPException:
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, message)


def check_run(body: JobIn, principal: Principal, settings: Settings) -> None:
    """403 or 422 (naming the field) unless ``principal`` may submit ``body`` as it is."""
    queues = (settings.deadline_queue, *settings.job_queues)
    if body.queue is not None and body.queue not in queues:
        raise _unprocessable(
            f"queue: must be one of {', '.join(queues)} "
            "(YARN_SIDECAR_DEADLINE_QUEUE, YARN_SIDECAR_JOB_QUEUES)"
        )
    if isinstance(body.run, ApplicationRun):
        if settings.raw_commands == "disabled":
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                "run.kind: raw application commands are disabled (YARN_SIDECAR_RAW_COMMANDS); "
                "use a job template",
            )
        if principal.role is not Role.OPERATOR:
            raise forbidden(Role.OPERATOR, "run.kind 'application' (a raw command)")
        check_application(body.run, settings)


def render_template(
    body: JobIn, principal: Principal, settings: Settings, templates: Mapping[str, Template]
) -> dict[str, Any] | None:
    """The stored run of a template job (``None`` for other kinds), or a 422 naming the field."""
    run = body.run
    if not isinstance(run, TemplateRun):
        return None
    template = templates.get(run.template)
    if template is None:
        known = ", ".join(sorted(templates)) or "none configured (YARN_SIDECAR_JOB_TEMPLATES)"
        raise _unprocessable(f"run.template: unknown template; known: {known}")
    try:
        rendered = render(
            run.template,
            template,
            run.parameters,
            queue=body.queue or settings.deadline_queue,
            memory_mb=run.memory_mb,
            vcores=run.vcores,
        )
    except TemplateError as exc:
        raise _unprocessable(str(exc)) from exc
    return rendered


def run_as(principal: Principal, settings: Settings) -> str | None:
    """The YARN user a job runs as: the authenticated caller; with authentication off, the
    sidecar's own ``YARN_SIDECAR_RM_USER``."""
    return principal.user if settings.auth == "token" else None


def check_application(run: ApplicationRun, settings: Settings) -> None:
    """The environment and local resources of a raw application against the allow-lists."""
    allowed = set(settings.env_allowlist)
    for name in run.environment:
        if name.upper().startswith(DENIED_ENV_PREFIXES) or name not in allowed:
            raise _unprocessable(
                f"run.environment.{name[:100]}: not in YARN_SIDECAR_ENV_ALLOWLIST "
                f"({', '.join(sorted(allowed))})"
            )
    for i, res in enumerate(run.local_resources):
        url = res.resource
        if ".." in url.split("/") or not url.startswith(settings.resource_roots):
            raise _unprocessable(
                f"run.local_resources.{i}.resource: must start with one of "
                f"{', '.join(settings.resource_roots)} (YARN_SIDECAR_RESOURCE_ROOTS)"
            )


def may_manage(principal: Principal, owner: str | None) -> bool:
    """Operators manage every job; submitters only their own."""
    return principal.role is Role.OPERATOR or (owner is not None and owner == principal.user)
