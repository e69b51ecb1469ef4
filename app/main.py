"""``create_app(settings) -> FastAPI``: the only lifespan; one ``AsyncExitStack`` owns every
resource (database engine, RM client, loop services), after Prefect's server (``style.md``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
from fastapi import FastAPI

import app as app_pkg
from app.api.routes import (
    apps,
    dashboard,
    decisions,
    health,
    ledger,
    metrics,
    observe,
    policy,
    queues,
    whatif,
)
from app.api.routes import estimator as estimator_routes
from app.api.routes import jobs as jobs_routes
from app.api.state import SidecarState
from app.db.session import make_engine, make_session_factory
from app.observability.prometheus import RMRequestMetrics, SidecarCollector
from app.observability.whatif_runs import WhatIfRuns
from app.services.admission import build_admission_service
from app.services.controller import Controller
from app.services.poller import Poller
from app.services.runtime import Runtime
from app.settings import Mode, Settings
from app.yarn.actuator import Actuator
from app.yarn.client import RMClient

DESCRIPTION = (
    "A policy sidecar for the Hadoop YARN ResourceManager. It polls the RM's REST API, keeps the "
    "cluster's history, and decides queue shares and job admission with research policies "
    "(Fawkes, LTRF, RRF, PYTHIA / Justice), pushing them to YARN only in `enforce` mode."
)


def create_app(
    settings: Settings,
    *,
    run_loops: bool = True,
    rm_transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """Build the application. ``run_loops=False`` serves the API without polling (tests, docs)."""

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            engine = make_engine(settings.effective_database_url)
            stack.callback(engine.dispose)
            state = SidecarState(
                settings=settings, engine=engine, sessions=make_session_factory(engine)
            )
            rm_metrics = RMRequestMetrics(state.metrics)
            client = RMClient(
                settings.rm_urls,
                user=settings.rm_user,
                timeout_s=settings.rm_timeout_s,
                retries=settings.rm_retries,
                transport=rm_transport,
                observer=rm_metrics.observe,
            )
            await stack.enter_async_context(client)
            state.poller = Poller(
                client,
                state.sessions,
                cluster_name=settings.cluster_name,
                rm_urls=settings.rm_urls,
                interval_s=settings.poll_interval_s,
            )
            state.controller = Controller(
                Actuator(client),
                state.sessions,
                defaults=settings.control_config(),
                cluster_name=settings.cluster_name,
                rm_urls=settings.rm_urls,
                poll_interval_s=settings.poll_interval_s,
            )
            state.admission = build_admission_service(
                settings, client, state.sessions, eager=run_loops
            )
            controller = state.controller

            def policy_info() -> tuple[str, str]:
                cfg = controller.current(controller.clock()).cfg
                return cfg.policy, cfg.mode

            state.metrics.register(
                SidecarCollector(
                    state.sessions, settings.cluster_name, policy_info=policy_info
                )
            )
            state.whatif = WhatIfRuns(state.sessions, settings.cluster_name)
            stack.callback(state.whatif.close)
            api.state.sidecar = state
            if run_loops:
                runtime = Runtime([state.poller, state.controller, state.admission])
                runtime.start()
                stack.callback(runtime.shutdown)
            yield

    api = FastAPI(
        title="YARN Policy Sidecar",
        version=app_pkg.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    for router in (health.router, queues.router, apps.router, metrics.router, dashboard.router):
        api.include_router(router)
    for router in (decisions.router, policy.router, ledger.router):
        api.include_router(router)
    api.include_router(jobs_routes.router)
    api.include_router(estimator_routes.router)
    api.include_router(observe.router)
    api.include_router(whatif.router)
    api.mount("/ui/static", dashboard.static_files(), name="ui-static")
    return api


def schema_app() -> FastAPI:
    """An app for exporting the OpenAPI schema: no settings from the environment are needed."""
    return create_app(Settings(mode=Mode.OBSERVE), run_loops=False)
