"""``create_app(settings) -> FastAPI``: the only lifespan; one ``AsyncExitStack`` owns every
resource (database engine, RM client, loop services), after Prefect's server (``docs/style.md``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager

import anyio.to_thread
import httpx
from fastapi import Depends, FastAPI

import app as app_pkg
from app.api.auth import metrics_access, require
from app.api.hardening import install_hardening
from app.api.routes import admission as admission_routes
from app.api.routes import (
    apps,
    dashboard,
    decisions,
    health,
    ledger,
    metrics,
    observe,
    policy,
    profiles,
    pushes,
    queues,
    whatif,
)
from app.api.routes import docs as api_docs
from app.api.routes import estimator as estimator_routes
from app.api.routes import jobs as jobs_routes
from app.api.routes import templates as templates_routes
from app.api.state import SidecarState
from app.auth.principal import Role
from app.db.retention import Windows
from app.db.session import API_THREADS, LOOP_THREADS, make_engine, make_session_factory
from app.job_templates import load_templates
from app.logs import install_redaction
from app.observability.prometheus import RMRequestMetrics, SidecarCollector
from app.observability.whatif_runs import WhatIfRuns
from app.redact import redact_url
from app.services.admission import build_admission_service
from app.services.base import LoopService
from app.services.controller import Controller
from app.services.history import HistoryCollector
from app.services.leader import Leadership
from app.services.placement import ObservedPlacement
from app.services.poller import Poller
from app.services.retention import RetentionService
from app.services.runtime import Runtime
from app.settings import Mode, Settings
from app.yarn.actuator import Actuator
from app.yarn.client import RMClient
from app.yarn.jobhistory import JobHistoryClient
from app.yarn.security import rm_client_options

log = logging.getLogger(__name__)

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

    install_redaction()
    templates = load_templates(settings.job_templates) if settings.job_templates else {}

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        _warn_if_open(settings)
        async with AsyncExitStack() as stack:
            size_thread_pools()
            engine = make_engine(settings.effective_database_url)
            stack.callback(engine.dispose)
            state = SidecarState(
                settings=settings,
                engine=engine,
                sessions=make_session_factory(engine),
                templates=templates,
            )
            loops = await _build_services(stack, state, run_loops, rm_transport)
            api.state.sidecar = state
            if run_loops:
                _start_loops(stack, state, loops)
            yield

    api = FastAPI(
        title="YARN Policy Sidecar",
        version=app_pkg.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    api_docs.install(api)
    _include_routers(api)
    api.mount("/ui/static", dashboard.static_files(), name="ui-static")
    install_hardening(api, settings)
    return api


def _warn_if_open(settings: Settings) -> None:
    """Say at start-up, loudly, when no request needs a credential."""
    if settings.auth == "none":
        log.warning(
            "authentication is OFF (YARN_SIDECAR_AUTH=none): anyone who can reach %s:%s "
            "acts as an operator",
            settings.api_host,
            settings.api_port,
        )


async def _build_services(
    stack: AsyncExitStack,
    state: SidecarState,
    run_loops: bool,
    rm_transport: httpx.AsyncBaseTransport | None,
) -> list[LoopService]:
    """Every service on ``state`` (each client's and resource's closing on ``stack``); returns
    the loops to run, in the order they tick."""
    settings = state.settings
    public_urls = tuple(redact_url(u) for u in settings.rm_urls)
    client = await _rm_client(stack, state, rm_transport)
    state.poller = Poller(
        client,
        state.sessions,
        cluster_name=settings.cluster_name,
        rm_urls=public_urls,
        interval_s=settings.poll_interval_s,
    )
    collector = await _history_collector(stack, state)
    state.controller = controller = await _controller(
        stack, state, client, public_urls, bool(collector)
    )
    state.admission = build_admission_service(settings, client, state.sessions, eager=run_loops)
    placement = _placement(state, client, controller)

    def policy_info() -> tuple[str, str]:
        cfg = controller.current(controller.clock()).cfg
        return cfg.policy, cfg.mode

    if run_loops:
        state.leadership = Leadership(
            settings.effective_database_url, state.sessions, interval_s=settings.poll_interval_s
        )
        leadership = state.leadership
        # a write is fenced once this process's epoch is no longer the current one
        state.controller.epoch = lambda: leadership.epoch
        state.admission.epoch = lambda: leadership.epoch
        state.admission.may_act = leadership.leads
    leads = state.leadership.leads if state.leadership is not None else (lambda: True)
    state.metrics.register(
        SidecarCollector(
            state.sessions, settings.cluster_name, policy_info=policy_info, leader=leads
        )
    )
    state.whatif = WhatIfRuns(state.sessions, settings.cluster_name)
    stack.callback(state.whatif.close)
    return [state.poller, *collector, state.controller, *placement, state.admission]


async def _rm_client(
    stack: AsyncExitStack, state: SidecarState, transport: httpx.AsyncBaseTransport | None
) -> RMClient:
    """The RM client every service shares, its requests counted in the sidecar's metrics."""
    settings = state.settings
    rm_metrics = RMRequestMetrics(state.metrics)
    client = RMClient(
        settings.rm_urls,
        user=settings.rm_user,
        timeout_s=settings.rm_timeout_s,
        retries=settings.rm_retries,
        transport=transport,
        **rm_client_options(settings),
        observer=rm_metrics.observe,
        on_failover=rm_metrics.failover,
    )
    await stack.enter_async_context(client)
    return client


async def _controller(
    stack: AsyncExitStack,
    state: SidecarState,
    client: RMClient,
    public_urls: tuple[str, ...],
    history: bool,
) -> Controller:
    """The queue controller, with the interference guard's probe client where it has URLs."""
    settings = state.settings
    guard = settings.guard_config()
    probe_http = None
    if guard is not None and any(slo.url for slo in guard.slos):
        # operator-configured probe URLs only; no proxy from the environment
        probe_http = await stack.enter_async_context(
            httpx.AsyncClient(trust_env=False, follow_redirects=False)
        )
    return Controller(
        Actuator(client),
        state.sessions,
        defaults=settings.control_config(),
        cluster_name=settings.cluster_name,
        rm_urls=public_urls,
        poll_interval_s=settings.poll_interval_s,
        history=history,
        guard=guard,
        probe_http=probe_http,
    )


def _placement(state: SidecarState, client: RMClient, controller: Controller) -> list[LoopService]:
    """HybridMR's observed placement loop, when a placement queue is configured; it follows the
    controller's mode."""
    settings = state.settings
    if not settings.placement_queue:
        return []
    return [
        ObservedPlacement(
            client,
            state.sessions,
            cluster_name=settings.cluster_name,
            target_queue=settings.placement_queue,
            interval_s=settings.poll_interval_s,
            mode=lambda: controller.current(controller.clock()).cfg.mode,
        )
    ]


async def _history_collector(stack: AsyncExitStack, state: SidecarState) -> list[LoopService]:
    """The MapReduce JobHistory collector, when a JobHistory server is configured."""
    settings = state.settings
    if not settings.jobhistory_url:
        return []
    jhs = JobHistoryClient(
        settings.jobhistory_url,
        timeout_s=settings.jobhistory_timeout_s,
        **rm_client_options(settings),
    )
    await stack.enter_async_context(jhs)
    return [
        HistoryCollector(
            jhs,
            state.sessions,
            cluster_name=settings.cluster_name,
            interval_s=settings.poll_interval_s,
        )
    ]


def _start_loops(stack: AsyncExitStack, state: SidecarState, loops: list[LoopService]) -> None:
    """Run ``loops`` and the retention pruner under the leader election (stopped on ``stack``)."""
    settings = state.settings
    pruner = RetentionService(
        state.sessions,
        Windows(
            settings.retention_raw_days,
            max(settings.retention_hourly_days, settings.retention_raw_days),
            settings.retention_decision_days,
        ),
        interval_s=settings.retention_interval_s,
        batch=settings.retention_batch,
    )
    runtime = Runtime([*loops, pruner], state.leadership)
    runtime.start()
    stack.callback(runtime.shutdown)


def _include_routers(api: FastAPI) -> None:
    """Every route, with the role reading it needs where the router does not say."""
    # Read-only resources need a viewer; the others declare their roles route by route.
    viewer = [Depends(require(Role.VIEWER))]
    # A request is matched against the routers in this order, and matching each one costs
    # (about 100 us for a route behind a dozen of them): the busiest routes, job submissions
    # and status reads and the health probes, come first.
    for router in (jobs_routes.router, health.router):
        api.include_router(router)
    for router in (queues.router, apps.router, decisions.router, ledger.router, pushes.router):
        api.include_router(router, dependencies=viewer)
    api.include_router(estimator_routes.router, dependencies=viewer)
    api.include_router(profiles.router, dependencies=viewer)
    api.include_router(templates_routes.router, dependencies=viewer)
    api.include_router(metrics.router, dependencies=[Depends(metrics_access)])
    for router in (dashboard.router, policy.router):
        api.include_router(router)
    api.include_router(admission_routes.router)
    for router in (observe.router, whatif.router):
        api.include_router(router, dependencies=viewer)


def schema_app() -> FastAPI:
    """An app for exporting the OpenAPI schema: no settings from the environment are needed."""
    return create_app(Settings(mode=Mode.OBSERVE), run_loops=False)


def size_thread_pools() -> None:
    """Worker threads no more than pooled connections (``app.db.session``): the API's sync
    routes run on AnyIO's limiter, the loops' ``asyncio.to_thread`` on the default executor."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = API_THREADS
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(LOOP_THREADS, thread_name_prefix="sidecar-loop")
    )
