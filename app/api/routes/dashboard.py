"""``GET /ui``: the operator dashboard, static files shipped in the package (no CDN, no build):
``app/api/static/ui``. It reads the JSON API with the bearer token the user pastes."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

router = APIRouter(tags=["dashboard"])
UI_DIR = resources.files("app.api") / "static" / "ui"


class _Assets(StaticFiles):
    """Scripts, styles and images only: the page itself is served by ``/ui`` alone, with its
    Content-Security-Policy (at ``/ui/static/index.html`` it would run without one)."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        if path.lower().endswith((".html", ".htm")):
            raise HTTPException(404, "Not Found")
        return await super().get_response(path, scope)


def static_files() -> StaticFiles:
    """The dashboard's assets, mounted at ``/ui/static``."""
    return _Assets(directory=str(UI_DIR))


@cache
def _page() -> str:
    return (UI_DIR / "index.html").read_text(encoding="utf-8")


@router.get("/ui", response_class=HTMLResponse)
def ui() -> HTMLResponse:
    """The dashboard: queues over time, deadline jobs, decisions, policy, what-if."""
    return HTMLResponse(
        _page(),
        headers={
            # everything is same-origin; no inline script, no third party
            "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
            "style-src 'self'; script-src 'self'; frame-ancestors 'none'",
            "Cache-Control": "no-cache",
        },
    )


@router.get("/dashboard", include_in_schema=False)
def old_dashboard() -> RedirectResponse:
    """The former page's address."""
    return RedirectResponse("/ui", status_code=308)
