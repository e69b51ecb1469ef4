"""``yarn-sidecar``: serve | db upgrade | poll-once | policy run | simulate | export-openapi.

Errors go to stderr with a non-zero exit code and name what is wrong (a setting, a file and line).
A failure the operator can act on (a database that cannot be reached or migrated, a port in use, a
file that cannot be written) is one line, never a traceback, and never shows a password.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import socket
import sys
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

import yaml

import app as app_pkg
from app.cli_errors import CommandFailed, database_errors, redact_database_url
from app.observability.whatif_cli import extend as extend_simulate
from app.observability.whatif_cli import extend_phases
from app.operator_cli import configure as configure_operator
from app.operator_cli import configure_preview
from app.settings import Settings, SettingsError, load_settings
from app.sim.cli import configure as configure_sim
from app.sim.cli import subcommand
from app.tokens_cli import configure as configure_tokens

log = logging.getLogger(__name__)


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {}
    if getattr(args, "host", None):
        overrides["api_host"] = args.host
    if getattr(args, "port", None):
        overrides["api_port"] = args.port
    return load_settings(**overrides)


def cmd_serve(args: argparse.Namespace) -> int:
    """Migrate the database, then serve the API and run the loops until interrupted."""
    from app.db.migrate import upgrade
    from app.logs import configure_logging

    settings = _settings(args)
    settings.check_api_tls()
    configure_logging(settings.log_format, settings.log_level)
    # Bound before the app starts: a port in use then stops the command before any loop runs
    # (bound by uvicorn, after the lifespan had started them, it left a leader tick cancelled
    # mid-flight, logged as a traceback, and a "leads" line after the shutdown).
    sockets = _bind(settings.api_host, settings.api_port)
    try:
        if not args.no_migrate:
            with database_errors(settings.effective_database_url):
                upgrade(settings.effective_database_url)
        return _serve(settings, sockets)
    finally:
        for sock in sockets:
            sock.close()


def _bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for ``host``:``port`` bound as asyncio's ``create_server`` (uvicorn's)
    binds them: every address the host resolves to, IPv6 ones IPv6-only, addresses reusable."""
    try:
        infos = set(
            socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        )
    except OSError as exc:
        raise CommandFailed(
            f"cannot listen on {host}:{port} (YARN_SIDECAR_API_HOST): {exc.strerror or exc}"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in sorted(infos, key=repr):
            try:
                sock = socket.socket(family, kind, proto)
            except OSError:
                continue  # a family this host does not support, as asyncio skips it
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                reason = (exc.strerror or str(exc)).lower()
                raise CommandFailed(
                    f"cannot listen on {host}:{port} (YARN_SIDECAR_API_HOST and API_PORT, or "
                    f"--host and --port): {reason}"
                ) from None
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    if not sockets:
        raise CommandFailed(f"cannot listen on {host}:{port}: no usable address")
    return sockets


def _serve(settings: Settings, sockets: list[socket.socket]) -> int:
    import uvicorn

    from app.main import create_app

    tls = {}
    if settings.api_tls_certfile is not None and settings.api_tls_keyfile is not None:
        # HTTPS for the sidecar's own API; uvicorn serves TLS itself.
        tls = {
            "ssl_certfile": str(settings.api_tls_certfile),
            "ssl_keyfile": str(settings.api_tls_keyfile),
        }
    api = create_app(settings)
    # What is imported and built by now lives as long as the process: frozen, the collector no
    # longer walks it. Unfrozen, a full collection walked ~220,000 objects with the GIL held for
    # ~100 ms, stalling every request, and an admission round over 10,000 waiting jobs
    # allocates enough to set one off; frozen, such a collection takes a few milliseconds.
    gc.freeze()
    config = uvicorn.Config(
        api,
        host=settings.api_host,
        port=settings.api_port,
        log_config=None,
        lifespan="on",
        timeout_keep_alive=settings.api_keep_alive_s,
        **tls,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    scheme = "https" if tls else "http"
    for sock in sockets:
        host, port = sock.getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        log.info("serving on %s://%s:%d (Press CTRL+C to quit)", scheme, host, port)
    with suppress(KeyboardInterrupt):
        server.run(sockets=sockets)
    # uvicorn.run's exit code when the app did not start (its lifespan failed)
    return 0 if server.started else 3


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    """Migrate the configured database to ``--revision`` (default head); a revision older than
    the database's is refused (Alembic's upgrade to an ancestor would quietly do nothing)."""
    from alembic.script import ScriptDirectory
    from sqlalchemy.pool import NullPool

    from app.db.migrate import alembic_config, current_revision, upgrade
    from app.db.session import make_engine

    settings = _settings(args)
    url = settings.effective_database_url
    with database_errors(url, args.revision):
        engine = make_engine(url, poolclass=NullPool)
        try:
            before = current_revision(engine)
            script = ScriptDirectory.from_config(alembic_config(url))
            # relative targets ("-1") are Alembic's to reject, as before
            if before is not None and not args.revision.startswith(("-", "+")):
                target = script.get_revisions(args.revision)
                older = {s.revision for s in script.iterate_revisions(before, "base")} - {before}
                if not target or target[0].revision in older:
                    print(
                        f"error: database {redact_database_url(url)} is at {before}, newer than "
                        f"{args.revision}: db upgrade never downgrades (restore the backup taken "
                        "before the upgrade)",
                        file=sys.stderr,
                    )
                    return 2
            upgrade(url, args.revision)
            reached = current_revision(engine) or "base"
        finally:
            engine.dispose()
    print(f"database at {reached}: {redact_database_url(url)}")
    return 0


def cmd_poll_once(args: argparse.Namespace) -> int:
    """One poller tick against the configured RM; prints what was recorded."""
    from app.db.migrate import upgrade
    from app.db.session import make_engine, make_session_factory
    from app.redact import redact_url
    from app.services.base import wall_clock_ms
    from app.services.poller import Poller
    from app.yarn.client import RMClient
    from app.yarn.security import rm_client_options

    settings = _settings(args)
    with database_errors(settings.effective_database_url):
        upgrade(settings.effective_database_url)
    engine = make_engine(settings.effective_database_url)

    async def once() -> int:
        async with RMClient(
            settings.rm_urls,
            user=settings.rm_user,
            timeout_s=settings.rm_timeout_s,
            retries=settings.rm_retries,
            **rm_client_options(settings),
        ) as client:
            poller = Poller(
                client,
                make_session_factory(engine),
                cluster_name=settings.cluster_name,
                rm_urls=tuple(redact_url(u) for u in settings.rm_urls),
                interval_s=settings.poll_interval_s,
            )
            summary = await poller.poll(wall_clock_ms(), force=True)
        if summary.ok:
            print(
                f"polled {redact_url(summary.rm_url or '')}: {summary.apps} apps upserted, "
                f"{summary.queues} queue samples, {summary.nodes} node samples, "
                f"finished-app watermark {summary.watermark_ms}"
            )
            return 0
        print(f"poll failed: {summary.error}", file=sys.stderr)
        return 1

    try:
        return asyncio.run(once())
    finally:
        engine.dispose()


def cmd_export_openapi(args: argparse.Namespace) -> int:
    """Write the OpenAPI schema as YAML (stdout by default)."""
    from app.main import schema_app

    text = openapi_yaml(schema_app().openapi())
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandFailed(f"--output: cannot write {args.output}: {exc.strerror}") from None
    return 0


def openapi_yaml(schema: dict[str, object]) -> str:
    """The schema as stable YAML (key order kept, so diffs stay readable)."""
    # Round-trip through JSON so only plain types reach the YAML dumper.
    plain = json.loads(json.dumps(schema))
    return yaml.safe_dump(plain, sort_keys=False, allow_unicode=True, width=100)


def cmd_policy_run(args: argparse.Namespace) -> int:
    """Run a playground scenario and print the decisions."""
    from app.playground import PolicyError, load_scenario, render, run_scenario

    path = Path(args.scenario)
    try:
        scenario = load_scenario(path)
        result = run_scenario(scenario)
    except PolicyError as exc:
        where = exc.field if exc.field.startswith(str(path)) else f"{path}: {exc.field}"
        print(f"error: {where}: {exc.message}", file=sys.stderr)
        return 2
    print(render(scenario, result, args.format))
    return 0


def cmd_policy_list(args: argparse.Namespace) -> int:
    """Print the policy registry: each policy's kind, paper section and parameters."""
    from app.policies import registry

    for name in registry.names():
        spec = registry.POLICIES[name]
        print(f"{name}  [{spec.kind}]  {spec.summary}")
        print(f"    paper: {spec.paper}")
        for p in spec.params:
            print(f"    {p.name} = {p.default!r}: {p.doc}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    parser = argparse.ArgumentParser(
        prog="yarn-sidecar",
        description="Policy sidecar for the Hadoop YARN ResourceManager. Settings come from "
        "YARN_SIDECAR_* environment variables (see README).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {app_pkg.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser(
        "serve", help="run the API and the loops (poller, controller, admission)"
    )
    serve.add_argument("--host", help="bind address (YARN_SIDECAR_API_HOST)")
    serve.add_argument("--port", type=int, help="port (YARN_SIDECAR_API_PORT)")
    serve.add_argument("--no-migrate", action="store_true", help="skip 'db upgrade' at start")
    serve.set_defaults(func=cmd_serve)

    db = sub.add_parser("db", help="database maintenance")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    up = db_sub.add_parser("upgrade", help="apply migrations (SQLite or PostgreSQL)")
    up.add_argument("--revision", default="head", help="target revision (default: head)")
    up.set_defaults(func=cmd_db_upgrade)

    poll = sub.add_parser("poll-once", help="poll the RM once and print a summary")
    poll.set_defaults(func=cmd_poll_once)

    export = sub.add_parser("export-openapi", help="write the OpenAPI schema as YAML")
    export.add_argument("-o", "--output", help="output file (default: stdout)")
    export.set_defaults(func=cmd_export_openapi)

    policy = sub.add_parser("policy", help="policy playground")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    run = policy_sub.add_parser("run", help="run a scenario file and print the decisions")
    run.add_argument("scenario", help="scenario JSON (see examples/scenarios/)")
    run.add_argument("--format", choices=("json", "table"), default="json")
    run.set_defaults(func=cmd_policy_run)
    listing = policy_sub.add_parser("list", help="print every registered policy and its parameters")
    listing.set_defaults(func=cmd_policy_list)
    configure_preview(policy_sub)

    configure_sim(sub)
    extend_simulate(sub.choices["simulate"], lambda: load_settings())
    extend_phases(subcommand(sub.choices["simulate"], "phases"), lambda: load_settings())
    configure_operator(sub)
    configure_tokens(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``yarn-sidecar`` console script."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except CommandFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
