"""What the lifespan builds and the routes use, kept on ``app.state.sidecar``."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.job_templates import Template
from app.observability.whatif_runs import WhatIfRuns
from app.services.admission import AdmissionService
from app.services.controller import Controller
from app.services.leader import Leadership
from app.services.poller import Poller
from app.settings import Settings


@dataclass
class SidecarState:
    """Per-process resources created by ``app.main.create_app``'s lifespan."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    poller: Poller | None = None
    controller: Controller | None = None
    admission: AdmissionService | None = None
    leadership: Leadership | None = None
    templates: dict[str, Template] = field(default_factory=dict)
    whatif: WhatIfRuns | None = None
    # the registry /metrics exposes: one per app, so tests can run several apps in one process
    metrics: CollectorRegistry = field(
        default_factory=lambda: CollectorRegistry(auto_describe=True)
    )
