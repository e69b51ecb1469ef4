"""The poller and controller at cluster scale: N nodes, Q queues, A running + F finished apps.

A fake ResourceManager (``tests/scaled_rm.py``: the recorded Hadoop 3.5.0 answers multiplied, in
its own process) changes between polls the way a busy cluster does; the real ``Poller`` (real
``RMClient`` over HTTP, real SQLite file or PostgreSQL database) polls it. Per size and engine the
table gives the first tick (everything new) and the median steady tick split into fetch (HTTP,
bodies read; the same requests replayed without parsing), parse (the rest of the RM
client's time: JSON to domain records) and persist (the write transaction); rows written
per steady tick (INSERT/UPDATE/DELETE row counts at the DB-API cursor) and database growth per
tick; a controller tick (advise mode: read the live tree, load inputs, decide, record) for ltrf,
fawkes:TD and rrf; and the process's peak RSS. Each cell runs in a fresh process.

``--before REV`` measures REV (in a temporary ``git worktree``) with the same fake RM and prints
the two side by side. ``--soak N`` polls the last size N times and prints RSS along the way
(memory must stay flat). The parse of the largest response is compared with ``json.loads`` and
``orjson.loads`` of the same bytes (the floor).

Run: ``.venv/bin/python benchmarks/bench_scale.py [--db sqlite,postgresql] [--ticks 5]
[--sizes 100:20:1000:500,1000:200:5000:1000,1000:200:10000:1000] [--before 89185c1]``
(PostgreSQL: ``--pg-url`` or ``YARN_SIDECAR_TEST_PG_URL``, an admin URL; a database is created
and dropped per cell.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCALED_RM = ROOT / "tests" / "scaled_rm.py"
POLICIES = ("ltrf", "fawkes:TD", "rrf")


# --- one cell (runs in a child process with the measured checkout first on sys.path) ------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_rm(size: tuple[int, int, int, int]) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(SCALED_RM), str(port), *map(str, size)])
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/ws/v1/cluster/info", timeout=2)
            return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("fake RM did not start")


def _new_database(engine_name: str, pg_url: str | None, tmp: str) -> tuple[str, Any]:
    if engine_name == "sqlite":
        return f"sqlite:///{tmp}/scale.db", None
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    assert pg_url, "PostgreSQL needs --pg-url or YARN_SIDECAR_TEST_PG_URL"
    name = f"sidecar_scale_{uuid.uuid4().hex[:10]}"
    admin = create_engine(
        make_url(pg_url).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return url, drop


def _db_bytes(engine: Any, url: str) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        if url.startswith("sqlite"):
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            path = Path(url.removeprefix("sqlite:///"))
            return path.stat().st_size
        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())


class _Timing:
    """Request spans and body sizes seen by the RM client's transport."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        # the largest ``/apps`` body: what ``_parse_floor`` parses as the client does
        self.largest: tuple[int, bytes, str] = (0, b"", "")
        self.urls: list[str] = []

    def fetch_s(self) -> float:
        if not self.spans:
            return 0.0
        return max(e for _, e in self.spans) - min(s for s, _ in self.spans)


def _transport(timing: _Timing) -> Any:
    import httpx

    class Timed(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            started = time.perf_counter()
            resp = await self.inner.handle_async_request(request)
            body = await resp.aread()
            timing.spans.append((started, time.perf_counter()))
            timing.urls.append(str(request.url))
            if request.url.path.endswith("/apps") and len(body) > timing.largest[0]:
                timing.largest = (len(body), body, str(request.url))
            return httpx.Response(
                resp.status_code, headers=resp.headers, content=body, request=request
            )

        async def aclose(self) -> None:
            await self.inner.aclose()

    return Timed()


def _parse_floor(body: bytes) -> dict[str, float]:
    """Client parse path of the largest ``/apps`` body vs ``json.loads`` and ``orjson.loads``."""
    import httpx

    from app.yarn import client as client_mod
    from app.yarn import mapping, wire

    out: dict[str, float] = {}

    def best(fn: Any) -> float:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
        return min(times)

    def client_path() -> None:
        env = client_mod._decode(httpx.Response(200, content=body), wire.AppsEnvelope)
        for app in env.items():
            mapping.app_record(app)

    out["client"] = best(client_path)
    out["json"] = best(lambda: json.loads(body))
    try:
        import orjson

        out["orjson"] = best(lambda: orjson.loads(body))
    except ImportError:
        out["orjson"] = float("nan")
    return out


async def _cell_async(spec: dict[str, Any]) -> dict[str, Any]:
    import httpx
    from sqlalchemy import event

    import app
    from app.control.config import resolve
    from app.db.migrate import upgrade
    from app.db.session import make_engine, make_session_factory
    from app.services.controller import Controller
    from app.services.poller import Poller
    from app.yarn.actuator import Actuator
    from app.yarn.client import RMClient

    size = tuple(spec["size"])
    rm_proc, base = _start_rm(size)
    tmp = tempfile.mkdtemp(prefix="bench_scale_")
    url, drop = _new_database(spec["db"], spec.get("pg_url"), tmp)
    result: dict[str, Any] = {"app_module": str(Path(app.__file__).parent)}
    try:
        upgrade(url)
        engine = make_engine(url)
        rows = {"n": 0}

        @event.listens_for(engine, "after_cursor_execute")
        def _count(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
            verb = statement.lstrip()[:6].upper()
            if verb in ("INSERT", "UPDATE", "DELETE") and cursor.rowcount and cursor.rowcount > 0:
                rows["n"] += cursor.rowcount

        sessions = make_session_factory(engine)
        timing = _Timing()
        client = RMClient([base], transport=_transport(timing), timeout_s=120, retries=0)
        poller = Poller(client, sessions, cluster_name="bench", rm_urls=(base,), interval_s=10)
        phases: dict[str, float] = {}
        inner_persist = poller._persist

        def timed_persist(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner_persist(*args, **kwargs)
            finally:
                phases["persist"] = time.perf_counter() - started

        poller._persist = timed_persist  # type: ignore[method-assign]
        http = httpx.AsyncClient(base_url=base, timeout=120)

        async def fetch_floor() -> float:
            """The previous tick's requests again, bodies read and not parsed: what fetching
            costs alone (in the poll the parsing of one body delays reading the others)."""
            urls = list(dict.fromkeys(timing.urls))
            started = time.perf_counter()
            await asyncio.gather(*(http.get(u) for u in urls))
            return time.perf_counter() - started

        async def tick(now_ms: int) -> dict[str, Any]:
            fetch = await fetch_floor() if timing.urls else 0.0
            timing.urls.clear()
            timing.spans.clear()
            phases.clear()
            rows["n"] = 0
            before = _db_bytes(engine, url)
            started = time.perf_counter()
            summary = await poller.poll(now_ms, force=True)
            wall = time.perf_counter() - started
            fetch = fetch or timing.fetch_s()
            persist = phases.get("persist", 0.0)
            return {
                "ok": summary.ok,
                "error": (summary.error or "")[:200],
                "wall": wall,
                "fetch": fetch,
                "parse": max(0.0, wall - fetch - persist),
                "persist": persist,
                "rows": rows["n"],
                "bytes": _db_bytes(engine, url) - before,
            }

        now_ms = int((await http.post("/_advance")).json()["now_ms"])
        result["first"] = await tick(now_ms)
        steady = []
        rss = []
        for i in range(spec["ticks"]):
            now_ms = int((await http.post("/_advance")).json()["now_ms"])
            steady.append(await tick(now_ms))
            if spec.get("soak") and i % max(1, spec["ticks"] // 10) == 0:
                rss.append((i, _rss_mb()))
        result["steady"] = steady
        result["soak_rss"] = rss
        ctl: dict[str, float | str] = {}
        for policy in POLICIES if not spec.get("soak") else ():
            cfg = resolve(
                policy=policy,
                params={},
                mode="advise",
                bounds={},
                weights={},
                max_step_pp=10.0,
                min_change_pp=1.0,
                allow_drift_overwrite=False,
                managed_parent="root",
                interval_s=60.0,
            )
            controller = Controller(
                Actuator(client),
                sessions,
                defaults=cfg,
                cluster_name="bench",
                rm_urls=(base,),
                poll_interval_s=10,
            )
            started = time.perf_counter()
            report = await controller.control(now_ms + 1)
            ctl[policy] = time.perf_counter() - started
            ctl[policy + ":status"] = report.status
        result["controller"] = ctl
        if timing.largest[1] and not spec.get("soak"):
            result["largest"] = {"bytes": timing.largest[0], "url": timing.largest[2]}
            result["parse_floor"] = _parse_floor(timing.largest[1])
        await http.aclose()
        await client.aclose()
        engine.dispose()
    finally:
        rm_proc.terminate()
        rm_proc.wait()
        if drop:
            drop()
    result["peak_rss_mb"] = _rss_mb()
    return result


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_cell(spec: dict[str, Any]) -> None:
    print(json.dumps(asyncio.run(_cell_async(spec))))


# --- orchestration --------------------------------------------------------------------------


def _cell(code_root: Path, spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    proc = subprocess.run(
        [sys.executable, __file__, "--cell", json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        cwd=code_root,
    )
    if proc.returncode != 0:
        return {"crash": proc.stderr.strip().splitlines()[-1:] or ["?"]}
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def _worktree(rev: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"bench_scale_{rev[:12]}_{os.getpid()}"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
        check=True,
        capture_output=True,
    )
    return path


def _fmt_row(label: str, r: dict[str, Any]) -> str:
    if "crash" in r:
        return f"{label:<34} crashed: {r['crash'][0][:90]}"
    steady = [t for t in r["steady"] if t["ok"]]
    first = r["first"]
    if not steady:
        err = " ".join((r["steady"] or [first])[-1]["error"].split())
        return f"{label:<34} every tick failed ({first['wall']:.2f} s): {err[:70]}"

    def med(key: str) -> float:
        return float(statistics.median(t[key] for t in steady))

    ctl = r.get("controller", {})
    ctl_txt = " ".join(
        f"{ctl[p] * 1000:6.0f}" if isinstance(ctl.get(p), float) else f"{'-':>6}" for p in POLICIES
    )
    first_txt = f"{first['wall']:6.2f}" if first["ok"] else "  FAIL"
    return (
        f"{label:<34}{first_txt}{med('wall'):7.3f}{med('fetch'):7.3f}{med('parse'):7.3f}"
        f"{med('persist'):8.3f}{med('rows'):8.0f}{med('bytes') / 1024:9.0f} {ctl_txt}"
        f"{r['peak_rss_mb']:7.0f}"
    )


HEADER = (
    f"{'cell':<34}{'first':>6}{'tick':>7}{'fetch':>7}{'parse':>7}{'persist':>8}"
    f"{'rows':>8}{'KB/tick':>9} {'ltrf':>6} {'fwkTD':>6} {'rrf':>6}{'RSS MB':>7}"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    parser.add_argument("--db", default="sqlite,postgresql")
    parser.add_argument("--pg-url", default=os.environ.get("YARN_SIDECAR_TEST_PG_URL"))
    parser.add_argument(
        "--sizes",
        default="100:20:1000:500,1000:200:5000:1000,1000:200:10000:1000",
        help="nodes:queues:running:finished, comma-separated",
    )
    parser.add_argument("--ticks", type=int, default=5, help="steady ticks per cell")
    parser.add_argument("--before", help="also measure this git revision, side by side")
    parser.add_argument("--soak", type=int, help="poll the last size this many times; print RSS")
    parser.add_argument("--only-before", action="store_true", help="measure only --before REV")
    args = parser.parse_args()
    if args.cell:
        run_cell(json.loads(args.cell))
        return
    sizes = [tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",")]
    dbs = [d for d in args.db.split(",") if d]
    if "postgresql" in dbs and not args.pg_url:
        print("no PostgreSQL URL: measuring SQLite only")
        dbs = [d for d in dbs if d != "postgresql"]
    versions: list[tuple[str, Path]] = [("now", ROOT)]
    cleanup = None
    if args.before:
        before = _worktree(args.before)
        versions.insert(0, (args.before[:7], before))
        if args.only_before:
            versions.pop()
        cleanup = before
    try:
        if args.soak:
            for name, root in versions:
                for db in dbs:
                    spec = {"db": db, "pg_url": args.pg_url, "size": sizes[-1], "ticks": args.soak}
                    spec["soak"] = True
                    r = _cell(root, spec)
                    print(f"{name} {db} {sizes[-1]}: RSS MB by tick {r.get('soak_rss', r)}")
                    print(f"   peak {r.get('peak_rss_mb')} MB")
            return
        print(
            "times in s (controller ms); tick/fetch/parse/persist/rows/KB are medians of "
            f"{args.ticks} steady ticks; size = nodes:queues:running:finished"
        )
        print(HEADER)
        floors = []
        for size in sizes:
            for db in dbs:
                for name, root in versions:
                    spec = {"db": db, "pg_url": args.pg_url, "size": size, "ticks": args.ticks}
                    r = _cell(root, spec)
                    label = f"{name} {db[:6]} {':'.join(map(str, size))}"
                    print(_fmt_row(label, r), flush=True)
                    if "parse_floor" in r:
                        floors.append((label, r["largest"], r["parse_floor"]))
        print("\nparse of the largest response (best of 3, s): client path vs json vs orjson")
        for label, largest, f in floors:
            print(
                f"{label:<34}{largest['bytes'] / 1e6:7.1f} MB  client {f['client']:.3f}  "
                f"json {f['json']:.3f}  orjson {f['orjson']:.3f}  "
                f"({largest['url'].split('/ws/v1/cluster')[-1][:60]})"
            )
    finally:
        if cleanup is not None:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(cleanup)],
                check=False,
                capture_output=True,
            )


if __name__ == "__main__":
    main()
