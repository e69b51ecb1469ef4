"""The ``/ui`` dashboard in a real browser: Playwright driving Debian's headless Chromium against
the sidecar served by uvicorn on a free port, over an hour of recorded data with real controller
ticks. Pages load without console errors, the charts show the stored numbers, an operator
switches the mode and the change appears in /decisions, a what-if run completes. Screenshots go
to ``reports/ui/``."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from app.db import observe_repo, repo
from app.db.migrate import upgrade
from app.db.session import make_engine, make_session_factory
from app.main import create_app
from app.settings import Settings
from tests import operator_data as od

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REPORTS = Path(__file__).resolve().parents[2] / "reports" / "ui"

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium missing (scripts/bootstrap installs Debian's chromium)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, database URL) of a sidecar serving the recorded hour."""
    url = f"sqlite:///{tmp_path_factory.mktemp('ui')}/sidecar.db"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    od.seed_history(sessions)
    od.seed_jobs(sessions, count=120)
    # Module-scoped, so built before the per-test environment defaults: the page's own token
    # handling is what the test checks, the API's authentication has its own tests.
    settings = Settings(database_url=url, cluster_name=od.CLUSTER, poll_interval_s=60, auth="none")
    api = create_app(settings, run_loops=False, rm_transport=httpx.MockTransport(od.RecordedRM()))
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    controller = api.state.sidecar.controller
    controller.clock = lambda: od.NOW_MS
    asyncio.run(od.run_ticks(api))
    try:
        yield f"http://127.0.0.1:{port}", url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        engine.dispose()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def _shot(page: object, name: str) -> None:
    REPORTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(REPORTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def test_operator_walks_every_page(sidecar: tuple[str, str], browser: object) -> None:
    base, db_url = sidecar
    engine = make_engine(db_url)
    with make_session_factory(engine)() as s:
        cluster = repo.get_cluster(s, od.CLUSTER)
        assert cluster is not None
        stored = observe_repo.decision_numbers(observe_repo.latest_queue_decision(s, cluster.id))
    engine.dispose()
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)  # type: ignore[attr-defined]
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    # Queues: the table and the charts carry the recorded numbers
    page.goto(base + "/ui#queues")
    page.wait_for_selector("#queue-table tbody tr[data-queue='root.etl']")
    assert page.locator("#queue-table tbody tr").count() == 4  # leaves only
    default = page.locator("#queue-table tr[data-queue='root.default'] td").nth(1)
    assert default.inner_text() == "40.00"
    page.click("#queue-table tr[data-queue='root.etl']")
    page.wait_for_selector("#queue-title:has-text('root.etl')")
    usage = page.locator(
        ".chart[data-chart='Usage'] .legend span[data-series='used of own capacity']"
    )
    usage.wait_for()
    last_used = od.etl_used(od.NOW_MS) / (od.NODE_VCORES * 0.2) * 100
    assert float(usage.get_attribute("data-last") or "nan") == pytest.approx(last_used)
    weight = page.locator(".chart[data-chart='Policy weight'] .legend span[data-series='weight']")
    assert float(weight.get_attribute("data-last") or "nan") == pytest.approx(
        stored["root.etl"]["weight"]
    )
    assert page.locator(".chart[data-chart='Capacity'] path[data-series='configured']").count() == 1
    assert page.locator(".chart[data-chart='LTRF debt'] path[data-series='debt']").count() == 1
    page.fill("#queue-filter", "adh")
    expect(page.locator("#queue-table tbody tr")).to_have_count(1)
    page.fill("#queue-filter", "")
    page.click("#queue-table tr[data-queue='root.etl']")
    page.wait_for_selector(".chart[data-chart='Usage']")
    _shot(page, "queues")

    # Deadline jobs: paged (50 a page), filtered by state, ETA and outcome columns
    page.click("#tabs a[data-page='jobs']")
    expect(page.locator("#job-table tbody tr")).to_have_count(50)
    page.click("#job-pager button:has-text('next')")
    page.wait_for_selector("#job-pager span:has-text('page 2')")
    page.click("#job-states button[data-state='finished']")
    page.wait_for_selector("#job-pager span:has-text('page 1')")
    states = page.locator("#job-table tbody tr td:nth-child(4)").all_inner_texts()
    assert states and set(states) == {"finished"}
    outcomes = set(page.locator("#job-table tbody tr td:nth-child(9)").all_inner_texts())
    assert outcomes == {"met", "missed"}
    page.locator("#job-table tbody tr").first.click()
    page.wait_for_selector("#job-detail table")
    _shot(page, "jobs")

    # Policy: the operator switches the mode through PUT /policy ...
    page.click("#tabs a[data-page='policy']")
    page.wait_for_selector("#policy-current dd:has-text('enforce')")
    page.select_option("#policy-mode", "advise")
    page.click("#policy-apply")
    expect(page.locator("#policy-result")).to_have_text("applied: fawkes:TD · advise")
    expect(page.locator("#active-policy")).to_have_text("fawkes:TD · advise")
    _shot(page, "policy")

    # ... and the change is the newest decision, explained; a push is explained from its inputs
    page.click("#tabs a[data-page='decisions']")
    first = page.locator("#decision-table tbody tr").first
    first.wait_for()
    assert "policy" in first.inner_text() and "operator changed mode" in first.inner_text()
    page.select_option("#decision-kind", "queue")
    kinds = page.locator("#decision-table tbody tr td:nth-child(3)")
    expect(kinds.first).to_have_text("queue")
    assert set(kinds.all_inner_texts()) == {"queue"}
    page.locator("#decision-table tbody tr").first.click()
    page.wait_for_selector("#decision-detail table.explain tbody tr")
    assert "root.etl" in page.inner_text("#decision-detail table.explain")
    _shot(page, "decisions")

    # What-if: the recorded period replayed under LTRF, with progress, beside what happened
    page.click("#tabs a[data-page='whatif']")
    page.wait_for_selector("#whatif-policy option[value='ltrf']", state="attached")
    page.select_option("#whatif-policy", "ltrf")
    page.select_option("#whatif-since", "")
    page.click("#whatif-run")
    page.wait_for_selector("#whatif-summary tr[data-queue='root.etl']", timeout=60_000)
    with page.expect_download() as download:
        page.click("#whatif-download")
    REPORTS.mkdir(parents=True, exist_ok=True)
    target = REPORTS / "whatif-report.html"
    download.value.save_as(str(target))
    assert "Per-queue mean slowdown" in target.read_text()
    _shot(page, "whatif")

    assert problems == []
    context.close()


def _hold_series(page: object, etl: bool) -> list[object]:
    """Hold back the page's queue-series requests for ``root.etl`` (``etl``) or for every other
    queue (not ``etl``), letting the rest through; the held routes, to release later."""
    held: list[object] = []

    def route(r: object) -> None:
        if ("root.etl" in r.request.url) == etl:  # type: ignore[attr-defined]
            held.append(r)
        else:
            r.continue_()  # type: ignore[attr-defined]

    page.route("**/queues/series?*", route)  # type: ignore[attr-defined]
    return held


def test_an_older_slower_answer_does_not_double_or_replace_the_newer_charts(
    sidecar: tuple[str, str], browser: object
) -> None:
    """The page selects the first queue on load; the operator clicks another before that queue's
    series has come back. The first answer is held until the clicked queue's charts are drawn,
    then released: one set of charts stays, the clicked queue's."""
    base, _ = sidecar
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    held = _hold_series(page, etl=False)
    page.goto(base + "/ui#queues")
    page.wait_for_selector("#queue-table tbody tr[data-queue='root.etl']")
    assert held, "the page asked for the first queue's series on load"
    page.click("#queue-table tr[data-queue='root.etl']")
    usage = ".chart[data-chart='Usage']"
    page.wait_for_selector(usage)
    with page.expect_response(lambda r: "/queues/series" in r.url and "root.etl" not in r.url):
        for route in held:
            route.continue_()  # type: ignore[attr-defined]
    page.wait_for_timeout(300)
    assert page.locator(usage).count() == 1
    span = page.locator(usage + " .legend span[data-series='used of own capacity']")
    last_used = od.etl_used(od.NOW_MS) / (od.NODE_VCORES * 0.2) * 100
    assert float(span.get_attribute("data-last") or "nan") == pytest.approx(last_used)
    assert page.locator("#queue-title").inner_text() == "root.etl"
    context.close()


def test_a_queues_title_never_stands_over_the_previous_queues_charts(
    sidecar: tuple[str, str], browser: object
) -> None:
    """The first queue's charts are drawn; the operator clicks another queue, whose series is
    held back: under the new title no chart shows until its own series has come."""
    base, _ = sidecar
    context = browser.new_context(viewport={"width": 1400, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    held = _hold_series(page, etl=True)
    page.goto(base + "/ui#queues")
    usage = ".chart[data-chart='Usage']"
    page.wait_for_selector(usage)  # the first queue's
    page.click("#queue-table tr[data-queue='root.etl']")
    page.wait_for_selector("#queue-title:has-text('root.etl')")
    assert held, "the clicked queue's series was asked for"
    assert page.locator(usage).count() == 0
    for route in held:
        route.continue_()  # type: ignore[attr-defined]
    span = page.locator(usage + " .legend span[data-series='used of own capacity']")
    span.wait_for()
    last_used = od.etl_used(od.NOW_MS) / (od.NODE_VCORES * 0.2) * 100
    assert float(span.get_attribute("data-last") or "nan") == pytest.approx(last_used)
    context.close()


def test_token_is_sent_as_a_bearer_header(sidecar: tuple[str, str], browser: object) -> None:
    base, _ = sidecar
    context = browser.new_context()  # type: ignore[attr-defined]
    page = context.new_page()
    seen: list[str | None] = []
    page.on(
        "request",
        lambda r: seen.append(r.headers.get("authorization")) if "/overview" in r.url else None,
    )
    page.goto(base + "/ui#queues")
    page.wait_for_selector("#queue-table tbody tr")
    page.fill("#token", "s3cret-token")
    page.dispatch_event("#token", "change")
    page.wait_for_timeout(500)
    assert page.evaluate("() => sessionStorage.getItem('yarn-sidecar-token')") == "s3cret-token"
    assert seen[0] is None and seen[-1] == "Bearer s3cret-token"
    context.close()


def test_api_docs_render_with_no_network(sidecar: tuple[str, str], browser: object) -> None:
    """``/docs`` and ``/redoc`` come up on a host with no route to the internet: every request
    that leaves the sidecar is refused, and none is even attempted."""
    base, _ = sidecar
    context = browser.new_context()  # type: ignore[attr-defined]
    outside: list[str] = []

    def only_the_sidecar(route: object, request: object) -> None:
        url = request.url  # type: ignore[attr-defined]
        if url.startswith(base + "/"):
            route.continue_()  # type: ignore[attr-defined]
        else:
            outside.append(url)
            route.abort()  # type: ignore[attr-defined]

    context.route("**/*", only_the_sidecar)
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    page.goto(base + "/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("YARN Policy Sidecar")
    # the operations are rendered from /openapi.json, with the bearer-token Authorize button
    expect(page.locator(".opblock-summary-path[data-path='/policy']").first).to_be_visible()
    expect(page.locator("button.authorize")).to_be_visible()
    _shot(page, "docs")

    page.goto(base + "/redoc")
    expect(page.locator("h1").first).to_contain_text("YARN Policy Sidecar")
    expect(page.get_by_text("/policy/preview").first).to_be_attached()
    context.close()
    assert outside == [], outside
    assert problems == [], problems
