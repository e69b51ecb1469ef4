"""Reading the interactive SLOs of the interference guard (``app.control.guard``): latency probes
over HTTP and queue pending times from the poller's history.

A probe URL is the operator's, from the settings, never a caller's; it answers a latency in
milliseconds as a bare number, or JSON ``{"latency_ms": n}`` (or a JSON number). A probe that
times out, refuses or answers anything else gives an unknown reading, with the reason. A queue
SLO's value is how long, in seconds, its longest-waiting application (submitted, not yet running)
has waited by the RM's submit time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import httpx
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.control.guard import GuardConfig, Reading, Slo
from app.db.models import Application
from app.domain.model import queue_names
from app.redact import redact_url
from app.yarn.client import PENDING_APP_STATES

PROBE_TIMEOUT_S = 2.0
_MAX_BODY = 4096


def _latency(body: str) -> float | None:
    text = body.strip()[:_MAX_BODY]
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict):
        data = data.get("latency_ms")
    if isinstance(data, bool) or not isinstance(data, int | float) or not math.isfinite(data):
        return None
    return float(data)


async def probe(http: httpx.AsyncClient, slo: Slo) -> Reading:
    """One latency probe."""
    assert slo.url is not None
    where = redact_url(slo.url)
    try:
        resp = await http.get(slo.url, timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return Reading(slo.name, None, slo.threshold, f"{where}: {type(exc).__name__}")
    if resp.status_code != 200:
        return Reading(slo.name, None, slo.threshold, f"{where} answered {resp.status_code}")
    value = _latency(resp.text)
    if value is None:
        return Reading(slo.name, None, slo.threshold, f"{where} did not answer a latency")
    return Reading(slo.name, value, slo.threshold, f"{where}: {value:g} ms")


def queue_pending_s(session: Session, cluster_id: int, queue: str, now_ms: int) -> float:
    """The longest wait of an app submitted to ``queue`` (leaf or full path) and not running."""
    names = queue_names(queue)
    oldest = session.scalar(
        select(func.min(Application.submitted_ms)).where(
            Application.cluster_id == cluster_id,
            Application.queue.in_(sorted(names)),
            Application.state.in_(list(PENDING_APP_STATES)),
            Application.gone_ms.is_(None),
        )
    )
    return max(0.0, (now_ms - oldest) / 1000) if oldest is not None else 0.0


async def read_probes(http: httpx.AsyncClient, cfg: GuardConfig) -> dict[str, Reading]:
    """Every URL SLO's reading, by SLO name."""
    return {slo.name: await probe(http, slo) for slo in cfg.slos if slo.url is not None}


def read_queues(
    session: Session, cluster_id: int, cfg: GuardConfig, now_ms: int
) -> dict[str, Reading]:
    """Every queue SLO's reading, by SLO name."""
    out: dict[str, Reading] = {}
    for slo in cfg.slos:
        if slo.queue is not None:
            value = queue_pending_s(session, cluster_id, slo.queue, now_ms)
            out[slo.name] = Reading(slo.name, value, slo.threshold, f"{slo.queue}: {value:g} s")
    return out


def in_order(cfg: GuardConfig, *parts: dict[str, Reading]) -> Sequence[Reading]:
    """The readings in the order the SLOs were declared."""
    merged = {k: v for part in parts for k, v in part.items()}
    return [merged[s.name] for s in cfg.slos if s.name in merged]
