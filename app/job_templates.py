"""Operator-defined job templates: what a submitter may run on the cluster.

A template (YAML, ``YARN_SIDECAR_JOB_TEMPLATES``) fixes the ApplicationMaster command, its
environment and local resources, the application type, the queues and the resource limits; the
caller only fills typed, validated parameters. YARN runs an AM command through a shell, so every
parameter value is checked against its type (int and float ranges, a list of choices, or a string
pattern over a shell-inert alphabet) and is shell-quoted where it is substituted: no
caller-controlled string reaches a shell as code.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

NAME = r"^[a-z][a-z0-9-]{0,62}$"
PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
# Characters a string parameter may ever contain, whatever its pattern says; matched whole
# (``fullmatch``: ``$`` would also match before a trailing newline).
SAFE = re.compile(r"[A-Za-z0-9._:/=,@+-]*")


class TemplateError(ValueError):
    """A template file or a template request that is not valid; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IntParam(_Strict):
    type: Literal["int"]
    min: int = 0
    max: int = 2**31 - 1
    default: int | None = None
    description: str = ""


class FloatParam(_Strict):
    type: Literal["float"]
    min: float = 0.0
    max: float = 1e12
    default: float | None = None
    description: str = ""


class ChoiceParam(_Strict):
    type: Literal["choice"]
    choices: tuple[str, ...] = Field(min_length=1)
    default: str | None = None
    description: str = ""


class StringParam(_Strict):
    type: Literal["string"]
    pattern: str = r"^[A-Za-z0-9._-]{1,100}$"
    max_length: int = Field(200, ge=1, le=4000)
    default: str | None = None
    description: str = ""


Param = Annotated[IntParam | FloatParam | ChoiceParam | StringParam, Field(discriminator="type")]


class Limit(_Strict):
    default: int = Field(ge=1)
    max: int = Field(ge=1)


class LocalResource(_Strict):
    name: str
    resource: str
    type: Literal["FILE", "ARCHIVE", "PATTERN"] = "FILE"
    visibility: Literal["PUBLIC", "PRIVATE", "APPLICATION"] = "APPLICATION"
    size: int = Field(ge=0)
    timestamp: int = Field(ge=0)


class Template(_Strict):
    """One template as the operator wrote it."""

    description: str = ""
    application_type: str = Field("YARN", min_length=1, max_length=100)
    command: tuple[str, ...] = Field(min_length=1)
    parameters: dict[str, Param] = Field(default_factory=dict)
    queues: tuple[str, ...] = ()
    memory_mb: Limit = Limit(default=1024, max=8192)
    vcores: Limit = Limit(default=1, max=4)
    environment: dict[str, str] = Field(default_factory=dict)
    local_resources: tuple[LocalResource, ...] = ()
    max_app_attempts: int = Field(1, ge=1, le=10)
    # Each task runs in a container of its own (``app.jobs.first_wave``): MapReduce, not Spark.
    task_containers: bool = False

    @model_validator(mode="after")
    def _placeholders_declared(self) -> Template:
        for token in self.command:
            for name in PLACEHOLDER.findall(token):
                if name not in self.parameters:
                    raise ValueError(f"command: placeholder {{{name}}} is not a parameter")
        return self


class TemplateFile(_Strict):
    templates: dict[Annotated[str, Field(pattern=NAME)], Template]


def load_templates(path: Path) -> dict[str, Template]:
    """Read and validate a template file; ``TemplateError`` names the file and the field."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TemplateError(f"{path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise TemplateError(f"{path}: not YAML: {exc}") from exc
    try:
        return dict(TemplateFile.model_validate(doc).templates)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise TemplateError(f"{path}: {where}: {err['msg']}") from None


def _value(name: str, spec: Any, given: Any) -> str:
    field = f"run.parameters.{name}"
    if given is None:
        if spec.default is None:
            raise TemplateError(f"{field}: required")
        given = spec.default
    if isinstance(spec, IntParam):
        if isinstance(given, bool) or not isinstance(given, int):
            raise TemplateError(f"{field}: must be an integer")
        if not spec.min <= given <= spec.max:
            raise TemplateError(f"{field}: must be within [{spec.min}, {spec.max}]")
        return str(given)
    if isinstance(spec, FloatParam):
        if (
            isinstance(given, bool)
            or not isinstance(given, int | float)
            or not math.isfinite(given)
        ):
            raise TemplateError(f"{field}: must be a finite number")
        if not spec.min <= given <= spec.max:
            raise TemplateError(f"{field}: must be within [{spec.min:g}, {spec.max:g}]")
        return f"{float(given):g}"
    if not isinstance(given, str):
        raise TemplateError(f"{field}: must be a string")
    if isinstance(spec, ChoiceParam):
        if given not in spec.choices:
            raise TemplateError(f"{field}: must be one of {', '.join(spec.choices)}")
        return given
    if (
        len(given) > spec.max_length
        or not re.fullmatch(spec.pattern, given)
        or not SAFE.fullmatch(given)
    ):
        raise TemplateError(f"{field}: must match {spec.pattern} (letters, digits, ._:/=,@+-)")
    return given


def render(
    name: str,
    template: Template,
    parameters: Mapping[str, Any],
    *,
    queue: str,
    memory_mb: int | None,
    vcores: int | None,
) -> dict[str, Any]:
    """The stored ``run`` of a job from a template: an application run with the rendered
    command, plus the template's name and the parameters for the record."""
    unknown = sorted(set(parameters) - set(template.parameters))
    if unknown:
        raise TemplateError(f"run.parameters.{unknown[0]}: not a parameter of template {name!r}")
    if template.queues and queue not in template.queues:
        raise TemplateError(f"queue: template {name!r} runs in {', '.join(template.queues)}")
    values = {p: _value(p, spec, parameters.get(p)) for p, spec in template.parameters.items()}
    mem = template.memory_mb.default if memory_mb is None else memory_mb
    cores = template.vcores.default if vcores is None else vcores
    if mem > template.memory_mb.max:
        raise TemplateError(f"run.memory_mb: at most {template.memory_mb.max} for {name!r}")
    if cores > template.vcores.max:
        raise TemplateError(f"run.vcores: at most {template.vcores.max} for {name!r}")
    command = " ".join(
        PLACEHOLDER.sub(lambda m: shlex.quote(values[m.group(1)]), token)
        for token in template.command
    )
    return {
        "kind": "application",
        "template": name,
        "parameters": values,
        "command": command,
        "resource": {"memory_mb": mem, "vcores": cores},
        "environment": dict(template.environment),
        "local_resources": [r.model_dump() for r in template.local_resources],
        "application_type": template.application_type,
        "max_app_attempts": template.max_app_attempts,
        "priority": 0,
        "task_containers": template.task_containers,
    }
