"""``GET /metrics``: the Prometheus exposition of ``app.observability.prometheus``, written by
``prometheus_client`` (text format, or OpenMetrics when the scraper asks for it)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import exposition

from app.api.deps import StateDep

router = APIRouter(tags=["metrics"])


# What the exposition is, for clients generated from the OpenAPI document
_EXPOSITION: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The Prometheus text format, or OpenMetrics when the scraper asks for it.",
        "content": {
            "text/plain": {"schema": {"type": "string"}},
            "application/openmetrics-text": {"schema": {"type": "string"}},
        },
    }
}


@router.get("/metrics", response_class=Response, responses=_EXPOSITION)
async def metrics(request: Request, state: StateDep) -> Response:
    """Prometheus metrics: queue capacities and policy numbers, admissions, jobs, deadlines, the
    estimator, pushes, drift, RM latency and errors, polls, leader status (README "Metrics")."""
    accept = request.headers.get("accept", "")
    # the collector reads the database: keep it off the event loop
    encoder, content_type = exposition.choose_encoder(accept)
    body = await asyncio.to_thread(encoder, state.metrics)
    return Response(body, media_type=content_type)
