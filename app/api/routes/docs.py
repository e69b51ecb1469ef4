"""``/docs`` (Swagger UI) and ``/redoc`` served from the installed package, never from a CDN.

Most Hadoop clusters have no route to the internet, so FastAPI's default pages (which load their
JavaScript from jsDelivr) render blank there. The assets come from the ``fastapi-offline``
distribution's static folder (pinned in ``pyproject.toml``, installed from PyPI like any other
dependency); only those files are used, not its application class. The pages carry no data: the
schema they render is fetched from ``/openapi.json``, and calls made from them carry the user's
token.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, FastAPI, Response
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_PATH = "/docs/static"
# ReDoc's sidebar shows a logo fetched from Redocly's CDN; offline that is a failed request on
# every page view, so the bundle is served with the logo pointing at the local favicon.
_REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
# The pages run their own inline start-up script and nothing from elsewhere: a browser that
# honours this makes no request off the sidecar even if an asset tries to.
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; font-src 'self' data:; "
    "frame-ancestors 'none'"
)


def assets_dir() -> Path:
    """Where the Swagger UI and ReDoc bundles are installed."""
    return Path(str(files("fastapi_offline") / "static"))


@cache
def redoc_bundle() -> bytes:
    """The ReDoc bundle with its one external URL made local."""
    raw = (assets_dir() / "redoc.standalone.js").read_bytes()
    return raw.replace(_REDOC_LOGO, f"{ASSETS_PATH}/favicon.png".encode())


def _page(html: HTMLResponse) -> HTMLResponse:
    html.headers["Content-Security-Policy"] = CSP
    return html


def install(api: FastAPI) -> None:
    """Serve ``/docs``, ``/docs/oauth2-redirect``, ``/redoc`` and their assets from the package.

    The app must be created with ``docs_url=None, redoc_url=None`` so these replace FastAPI's."""
    router = APIRouter(include_in_schema=False)
    title = f"{api.title} - API"

    @router.get("/docs", response_class=HTMLResponse)
    async def swagger_ui() -> HTMLResponse:
        return _page(
            get_swagger_ui_html(
                openapi_url=api.openapi_url or "/openapi.json",
                title=title,
                oauth2_redirect_url="/docs/oauth2-redirect",
                swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
                swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
                swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
                swagger_ui_parameters={"persistAuthorization": False},
            )
        )

    @router.get("/docs/oauth2-redirect", response_class=HTMLResponse)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @router.get("/redoc", response_class=HTMLResponse)
    async def redoc() -> HTMLResponse:
        return _page(
            get_redoc_html(
                openapi_url=api.openapi_url or "/openapi.json",
                title=title,
                redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
                redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
                with_google_fonts=False,
            )
        )

    @router.get(f"{ASSETS_PATH}/redoc.standalone.js")
    async def redoc_js() -> Response:
        return Response(
            redoc_bundle(),
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    api.include_router(router)
    api.mount(ASSETS_PATH, StaticFiles(directory=assets_dir()), name="docs-static")
