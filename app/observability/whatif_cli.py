"""``yarn-sidecar simulate --from-db [--since 7d] --policy X``: the what-if on the cluster's own
history from the command line. It extends the simulator's ``simulate`` command rather than
replacing it: without ``--from-db`` the command runs on traces exactly as before.

``yarn-sidecar simulate phases --from-db``: PRISM against task-level containers on the MapReduce
jobs the history collector stored (``app.sim.phases.recorded_jobs``) instead of synthetic ones."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from app.observability import whatif
from app.sim.jobs import JobError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.domain.history import MapReduceJob

Command = Callable[[argparse.Namespace], int]
_T = TypeVar("_T")


class DatabaseUnavailable(Exception):
    """The database cannot be read; one line, any password in it masked."""


_UPGRADE = "run `yarn-sidecar db upgrade` first"


def _reason(exc: BaseException, url: str) -> str:
    """The driver's message of ``exc`` on one line, passwords masked (a driver may quote the
    URL or its connection string)."""
    from app.cli_errors import one_line

    return one_line(str(getattr(exc, "orig", None) or exc), url)


def _read_db(settings: Any, read: Callable[[Session], _T]) -> _T:
    """``read`` in one session on the configured database, the engine disposed after; a missing,
    unmigrated or unreachable database is ``DatabaseUnavailable``, and a SQLite file that does
    not exist is not created (connecting would)."""
    from sqlalchemy import inspect
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, DBAPIError

    from app.cli_errors import redact_database_url
    from app.db.session import make_engine, make_session_factory

    url = settings.effective_database_url
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            name = parsed.database or ""
            as_uri = str(parsed.query.get("uri", "")).lower() == "true"
            if name not in ("", ":memory:") and not as_uri and not Path(name).is_file():
                raise DatabaseUnavailable(f"no database at {name}: {_UPGRADE}")
        engine = make_engine(url)
    except (ArgumentError, ImportError) as exc:
        where = redact_database_url(url)
        raise DatabaseUnavailable(f"cannot use {where}: {_reason(exc, url)}") from None
    try:
        try:
            with engine.connect() as conn:
                migrated = inspect(conn).has_table("clusters")
        except DBAPIError as exc:
            raise DatabaseUnavailable(f"cannot reach the database: {_reason(exc, url)}") from None
        if not migrated:
            raise DatabaseUnavailable(f"the database has no sidecar tables: {_UPGRADE}")
        try:
            with make_session_factory(engine)() as session:
                return read(session)
        except DBAPIError as exc:
            raise DatabaseUnavailable(
                f"reading the database failed: {_reason(exc, url)} (if it is older than this "
                "version, run `yarn-sidecar db upgrade`)"
            ) from None
    finally:
        engine.dispose()


def extend(simulate: argparse.ArgumentParser, settings: Callable[[], Any]) -> None:
    """Add ``--from-db`` and ``--since`` to the ``simulate`` parser; ``settings()`` gives the
    database URL and cluster name (the serve settings, ``YARN_SIDECAR_*``)."""
    simulate.add_argument(
        "--from-db",
        action="store_true",
        help="replay the finished applications recorded in the sidecar's database "
        "(YARN_SIDECAR_DATABASE_URL) instead of a trace",
    )
    simulate.add_argument(
        "--since",
        default=None,
        help="with --from-db: how far back, e.g. 7d, 12h, 30m (default all)",
    )
    original: Command = simulate.get_default("func")

    def dispatch(args: argparse.Namespace) -> int:
        if not args.from_db:
            if args.since is not None:
                print("simulate: --since needs --from-db", file=sys.stderr)
                return 2
            return original(args)
        if args.decisions:
            # the what-if's report is per queue and per period, not per job: say so rather than
            # write nothing
            print("simulate: --decisions replays a trace; not with --from-db", file=sys.stderr)
            return 2
        return cmd_from_db(args, settings())

    simulate.set_defaults(func=dispatch)


def _capacity(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError as exc:
        raise whatif.WhatIfError("capacity", f"with --from-db give vcores, got {text!r}") from exc
    return value


def _params(raw: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in raw:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise whatif.WhatIfError("param", f"{item!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def cmd_from_db(args: argparse.Namespace, settings: Any) -> int:
    """Replay, print actual vs replay, write ``summary.json`` and ``report.html`` to ``--out``."""
    try:
        now_ms = int(time.time() * 1000)
        spec = whatif.WhatIfSpec(
            policy=args.policy,
            since_ms=whatif.since_ms(args.since, now_ms) if args.since else None,
            until_ms=None,
            capacity_vcores=_capacity(args.capacity),
            params=_params(args.param),
            interval_s=args.interval,
        )
        spec.validate()
        history = _read_db(
            settings, lambda session: whatif.load_history(session, settings.cluster_name, spec)
        )
        outcome = whatif.run(history, spec, None if args.quiet else _bar())
    except (whatif.WhatIfError, JobError, DatabaseUnavailable) as exc:
        print(f"simulate: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = outcome.to_dict()
    (out / "summary.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    (out / "report.html").write_text(whatif.html_report(outcome, plots=not args.no_plots))
    _print(data)
    print(f"wrote {out / 'report.html'}")
    return 0


def _bar() -> whatif.Progress:
    last = [-1]

    def update(done: int, total: int) -> None:
        pct = 100 * done // total if total else 100
        if pct != last[0] and pct % 10 == 0:
            last[0] = pct
            print(f"replay {pct:3d}% ({done}/{total} jobs)", file=sys.stderr)

    return update


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else ("-" if v is None else str(v))


def _print(data: dict[str, Any]) -> None:
    a, r = data["actual"], data["replay"]
    rows = [
        ("", "actual", "replay"),
        ("mean slowdown", _fmt(a["overall_slowdown"]), _fmt(r["overall_slowdown"])),
        ("deadlines met", _fmt(a["deadlines_met"]), _fmt(r["deadlines_met"])),
        ("deadlines missed", _fmt(a["deadlines_missed"]), _fmt(r["deadlines_missed"])),
        ("utilization", _fmt(a["utilization"]), _fmt(r["utilization"])),
    ]
    rows += [
        (f"slowdown {q['queue']}", _fmt(q["actual_slowdown"]), _fmt(q["replay_slowdown"]))
        for q in data["queues"]
    ]
    width = max(len(x[0]) for x in rows)
    print(f"{data['jobs']} jobs on {data['capacity_vcores']} vcores under {data['policy']}")
    for name, x, y in rows:
        print(f"{name:<{width}}  {x:>10}  {y:>10}")


def extend_phases(phases_parser: argparse.ArgumentParser, settings: Callable[[], Any]) -> None:
    """Add ``--from-db`` and ``--limit`` to ``simulate phases``."""
    phases_parser.add_argument(
        "--from-db",
        action="store_true",
        help="the MapReduce jobs stored from the JobHistory server (YARN_SIDECAR_DATABASE_URL) "
        "at their real submission times, instead of synthetic jobs",
    )
    phases_parser.add_argument(
        "--limit", type=int, default=2000, help="with --from-db: the newest N jobs (2000)"
    )
    original: Command = phases_parser.get_default("func")

    def dispatch(args: argparse.Namespace) -> int:
        return cmd_phases_from_db(args, settings()) if args.from_db else original(args)

    phases_parser.set_defaults(func=dispatch)


def cmd_phases_from_db(args: argparse.Namespace, settings: Any) -> int:
    """Both models on the recorded jobs: one line of the ``phases`` table."""
    from app.db import history_repo, jobs_repo
    from app.sim import cli as sim_cli
    from app.sim import phases

    if args.limit < 1:
        print("simulate phases: --limit must be >= 1", file=sys.stderr)
        return 2
    try:
        sim_cli.check_phase_nodes(args)
    except ValueError as exc:
        print(f"simulate phases: {exc}", file=sys.stderr)
        return 2

    def stored(session: Session) -> list[MapReduceJob]:
        cluster_id = jobs_repo.cluster_id(session, settings.cluster_name)
        if cluster_id is None:
            return []
        return history_repo.stored_jobs(session, cluster_id, limit=args.limit)

    try:
        jobs = phases.recorded_jobs(_read_db(settings, stored))
    except DatabaseUnavailable as exc:
        print(f"simulate phases: {exc}", file=sys.stderr)
        return 2
    if not jobs:
        print(
            "simulate phases: no MapReduce job history in the database "
            "(set YARN_SIDECAR_JOBHISTORY_URL so the sidecar collects it)",
            file=sys.stderr,
        )
        return 2
    try:
        row = sim_cli.phases_row("db", "-", jobs, args)
    except ValueError as exc:
        print(f"simulate phases: {exc}", file=sys.stderr)
        return 2
    print(sim_cli.PHASES_HEADER)
    print(row)
    return 0
