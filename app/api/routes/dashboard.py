"""``GET /dashboard``: a small self-contained page over the JSON API (queues, decisions, apps)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["dashboard"])


@cache
def _page() -> str:
    return (resources.files("app.api") / "static" / "dashboard.html").read_text(encoding="utf-8")


@router.get("/dashboard", response_class=HTMLResponse)
def dashboard() -> HTMLResponse:
    """The operator dashboard; it refreshes itself every 10 s."""
    return HTMLResponse(_page())
