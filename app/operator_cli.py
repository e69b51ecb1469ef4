"""Operator commands over a running sidecar's HTTP API: ``yarn-sidecar decisions ...`` and
``yarn-sidecar jobs ...`` (the mission's "operators inspect decisions through ... a CLI").

They only read and write through the public API, so they work against a sidecar on another host
(``--url``, or ``YARN_SIDECAR_URL``). Without either, the URL is the one ``yarn-sidecar serve``
listens on with the same environment (``YARN_SIDECAR_API_HOST``, ``YARN_SIDECAR_API_PORT`` and
https when ``YARN_SIDECAR_API_TLS_CERTFILE`` is set), so an operator on the sidecar's host needs no
flag. Output is a short table, or the API's JSON with ``--json``.

What the operator typed never reaches the sidecar unchecked: ids are percent-encoded into one path
segment, JSON refuses NaN and Infinity (the API's JSON cannot carry them), and a token is
stripped of surrounding whitespace and refused with a control or non-ASCII character inside. No
error message shows a token or the password of a URL.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from app.redact import redact_text

DEFAULT_URL = "http://127.0.0.1:8000"
_WILDCARD_HOSTS = {"0.0.0.0", "::", ""}


def default_url(env: Mapping[str, str]) -> str:
    """``YARN_SIDECAR_URL``, else where ``serve`` listens under the same environment."""
    if env.get("YARN_SIDECAR_URL"):
        return env["YARN_SIDECAR_URL"]
    host = env.get("YARN_SIDECAR_API_HOST", "127.0.0.1")
    # A wildcard bind answers on loopback; the wildcard itself is not an address to connect to.
    host = "127.0.0.1" if host in _WILDCARD_HOSTS else host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    port = env.get("YARN_SIDECAR_API_PORT", "8000")
    scheme = "https" if env.get("YARN_SIDECAR_API_TLS_CERTFILE") else "http"
    return f"{scheme}://{host}:{port}"


class OperatorError(Exception):
    """A request the sidecar refused or could not answer; the message is for the operator.

    ``usage`` marks a filter flag the sidecar refused (a 400 or 422 on a list): the command line
    was wrong, so it exits with 2 like argparse's own usage errors; everything else exits 1."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


def _client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30.0)


def _segment(value: str) -> str:
    """``value`` as one path segment: ``/``, ``?`` and ``#`` escaped, and ``.`` or ``..`` too,
    which httpx would otherwise resolve against the path before it (``jobs/..`` is ``/``)."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _loads(text: str) -> Any:
    """``json.loads`` refusing NaN, Infinity and numbers too large for a float (``1e999``): the
    request body could not be encoded (httpx sends strict JSON) and the API refuses them."""

    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not a JSON number")

    def finite(token: str) -> float:
        number = float(token)
        if number in (float("inf"), float("-inf")):
            raise ValueError(f"{token} is too large for a JSON number")
        return number

    return json.loads(text, parse_constant=refuse, parse_float=finite)


def _params(text: str) -> Any:
    try:
        return _loads(text)
    except json.JSONDecodeError as exc:
        raise OperatorError(f"--params: invalid JSON: {exc.msg}", usage=True) from exc
    except ValueError as exc:
        raise OperatorError(f"--params: invalid JSON: {exc}", usage=True) from exc


def clean_token(token: str | None) -> str | None:
    """The token without surrounding whitespace (a file read with ``$(cat tok)`` on Windows line
    ends keeps its ``\\r``); ``OperatorError`` for a control or non-ASCII character inside,
    which an HTTP header cannot carry. The message never shows the token."""
    if token is None:
        return None
    token = token.strip()
    if not all(ch.isascii() and ch.isprintable() for ch in token):
        raise OperatorError(
            "--token: the token (or YARN_SIDECAR_TOKEN) contains a control or non-ASCII "
            "character; copy it again from 'yarn-sidecar tokens create'",
            usage=True,
        )
    return token or None


def _check_url(url: str) -> None:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise OperatorError(f"--url: {redact_text(url)}: {exc}", usage=True) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise OperatorError(
            f"--url: {redact_text(url)} is not an http(s) URL such as {DEFAULT_URL}", usage=True
        )


def _call(
    client: httpx.Client, method: str, path: str, *, flags: bool = False, **kwargs: Any
) -> Any:
    where = redact_text(str(client.base_url))
    try:
        resp = client.request(method, path, **kwargs)
    except httpx.LocalProtocolError:
        # Its text quotes the offending request line or header, which can be the token.
        raise OperatorError(
            f"cannot send {method} {path} to {where}: the request is not valid HTTP"
        ) from None
    except httpx.TransportError as exc:
        detail = redact_text(str(exc))
        raise OperatorError(f"cannot reach the sidecar at {where}: {detail}") from exc
    if resp.status_code >= 400:
        try:
            answer = resp.json()
        except ValueError:
            answer = None
        if isinstance(answer, dict) and "detail" in answer:
            detail = answer["detail"]
            if not isinstance(detail, str):
                detail = json.dumps(detail)
        else:
            # The sidecar's errors are JSON with a detail: this is another server or a proxy,
            # whose page would spill over many lines.
            detail = _not_the_sidecar(where, "its error")
        raise OperatorError(
            f"{method} {path} -> {resp.status_code}: {detail}",
            usage=flags and resp.status_code in (400, 422),
        )
    try:
        return resp.json()
    except ValueError:
        raise OperatorError(_not_the_sidecar(where, f"{method} {path}")) from None


def _not_the_sidecar(where: str, what: str) -> str:
    return f"{where} does not answer as the sidecar ({what} is not the sidecar's JSON); check --url"


def _table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    cells = [list(map(str, header)), *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def decisions_list(client: httpx.Client, args: argparse.Namespace) -> str:
    params = {k: v for k, v in (("kind", args.kind), ("limit", args.limit)) if v is not None}
    page = _call(client, "GET", "/decisions", params=params, flags=True)
    if args.json:
        return json.dumps(page, indent=2)
    rows = [
        (d["id"], d["created_at"], d["kind"], d["policy"], d["status"], d["reason"][:70])
        for d in page["items"]
    ]
    return _table(rows, ("id", "time", "kind", "policy", "status", "reason"))


def decisions_show(client: httpx.Client, args: argparse.Namespace) -> str:
    return json.dumps(_call(client, "GET", f"/decisions/{_segment(str(args.id))}"), indent=2)


def jobs_list(client: httpx.Client, args: argparse.Namespace) -> str:
    params = {k: v for k, v in (("state", args.state), ("limit", args.limit)) if v is not None}
    page = _call(client, "GET", "/jobs", params=params, flags=True)
    if args.json:
        return json.dumps(page, indent=2)
    rows = [
        (
            j["id"],
            j["name"],
            j["queue"],
            j["state"],
            j["granted_cpus"],
            _short_time(j["deadline_at"]),
            _outcome(j["met_deadline"]),
            j["app_id"],
            (j.get("reason") or "")[:60],
        )
        for j in page["items"]
    ]
    header = ("id", "name", "queue", "state", "cpus", "deadline", "outcome", "app", "why")
    return _table(rows, header)


def _short_time(iso: str | None) -> str:
    """``2026-11-22T15:04:05.123+00:00`` -> ``11-22T15:04:05Z`` (UTC, to the second)."""
    if not iso:
        return ""
    when = dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC)
    return when.strftime("%m-%dT%H:%M:%SZ")


def _outcome(met: bool | None) -> str:
    return "" if met is None else ("met" if met else "missed")


def jobs_show(client: httpx.Client, args: argparse.Namespace) -> str:
    job = _call(client, "GET", f"/jobs/{_segment(args.id)}")
    if args.json:
        return json.dumps(job, indent=2)
    head = f"{job['id']}  {job['name']}  {job['state']}  app={job['app_id']}"
    rows = [(d["at"], d["action"], d["cpus"], d["reason"]) for d in job["decisions"]]
    return head + "\n" + _table(rows, ("time", "action", "cpus", "reason"))


def jobs_submit(client: httpx.Client, args: argparse.Namespace) -> str:
    path = Path(args.file)
    try:
        body = _loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise OperatorError(f"{path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise OperatorError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise OperatorError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    except ValueError as exc:
        raise OperatorError(f"{path}: invalid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise OperatorError(f"{path}: a job is a JSON object")
    if args.idempotency_key:
        in_file = body.get("idempotency_key")
        if in_file is not None and in_file != args.idempotency_key:
            raise OperatorError(
                f"--idempotency-key: differs from the idempotency_key in {path}", usage=True
            )
        # The body field (README "Deadline jobs") rather than the Idempotency-Key header: a
        # header carries ASCII only, a key is any text; the API treats both as the same key.
        body = {**body, "idempotency_key": args.idempotency_key}
    job = _call(client, "POST", "/jobs", json=body)
    decision = job.get("decision") or {}
    return f"{job['id']}  {job['state']}  {decision.get('action')}: {decision.get('reason')}"


def jobs_cancel(client: httpx.Client, args: argparse.Namespace) -> str:
    job = _call(client, "DELETE", f"/jobs/{_segment(args.id)}")
    return f"{job['id']}  {job['state']}"


def policy_preview(client: httpx.Client, args: argparse.Namespace) -> str:
    """``POST /policy/preview`` on the running sidecar: queue -> current -> proposed -> why."""
    body: dict[str, Any] = {}
    if args.policy:
        body["policy"] = args.policy
    if args.mode:
        body["mode"] = args.mode
    if args.params:
        body["params"] = _params(args.params)
    result = _call(client, "POST", "/policy/preview", json=body or None, flags=True)
    if args.json:
        return json.dumps(result, indent=2, sort_keys=True)
    config = result.get("config") or {}
    head = (
        f"{config.get('policy')} in {config.get('mode')} mode: {result['status']}: "
        f"{result['reason']}"
    )
    plan = ((result.get("outputs") or {}).get("plan") or {}).get("queues") or {}
    if not plan:
        return head
    rows = []
    for queue, line in sorted(plan.items()):
        share = line.get("share")
        rows.append(
            (
                queue,
                (line.get("live") or {}).get("capacity", ""),
                (line.get("planned") or {}).get("capacity", ""),
                "" if share is None else f"{share:.4f}",
                "yes" if line.get("changed") else "",
                "; ".join(line.get("reasons") or ())[:90],
            )
        )
    table = _table(rows, ("queue", "current", "proposed", "share", "change", "why"))
    return f"{head}\n{table}"


def _job_id(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("a job id is not empty")
    return value


def _common() -> argparse.ArgumentParser:
    """Options every command that talks to a running sidecar takes."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url",
        default=default_url(os.environ),
        help="the sidecar's API (YARN_SIDECAR_URL; default: where 'serve' listens, from "
        f"YARN_SIDECAR_API_HOST/PORT, else {DEFAULT_URL})",
    )
    common.add_argument(
        "--token",
        default=os.environ.get("YARN_SIDECAR_TOKEN"),
        help="API token (YARN_SIDECAR_TOKEN; from 'yarn-sidecar tokens create')",
    )
    common.add_argument("--json", action="store_true", help="print the API's JSON")
    return common


def configure_preview(policy_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``yarn-sidecar policy preview``: asks the running sidecar, pushes nothing."""
    preview = policy_sub.add_parser(
        "preview",
        parents=[_common()],
        help="what the running sidecar's queue controller would decide now (pushes nothing)",
    )
    preview.add_argument("--policy", help="preview another policy than the active one")
    preview.add_argument("--params", help="the policy's parameters as a JSON object")
    preview.add_argument("--mode", choices=("observe", "advise", "enforce"))
    preview.set_defaults(func=_run(policy_preview))


def configure(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``decisions`` and ``jobs`` to the top-level parser."""
    common = _common()

    dec = sub.add_parser("decisions", help="inspect the audit trail of a running sidecar")
    dsub = dec.add_subparsers(dest="decisions_command", required=True, metavar="ACTION")
    dl = dsub.add_parser("list", parents=[common], help="recent decisions, newest first")
    dl.add_argument("--kind", help="queue, admission, policy")
    dl.add_argument("--limit", type=int, default=20)
    dl.set_defaults(func=_run(decisions_list))
    ds = dsub.add_parser("show", parents=[common], help="one decision with its inputs and plan")
    ds.add_argument("id", type=int)
    ds.set_defaults(func=_run(decisions_show))

    jobs = sub.add_parser("jobs", help="deadline jobs on a running sidecar")
    jsub = jobs.add_subparsers(dest="jobs_command", required=True, metavar="ACTION")
    jl = jsub.add_parser("list", parents=[common], help="jobs, newest first")
    jl.add_argument("--state", help="queued, admitted, submitted, finished, dropped, ...")
    jl.add_argument("--limit", type=int, default=20)
    jl.set_defaults(func=_run(jobs_list))
    js = jsub.add_parser("show", parents=[common], help="one job with every decision")
    js.add_argument("id", type=_job_id)
    js.set_defaults(func=_run(jobs_show))
    jsubmit = jsub.add_parser("submit", parents=[common], help="submit a job from a JSON file")
    jsubmit.add_argument("file", help="the POST /jobs body as JSON")
    jsubmit.add_argument(
        "--idempotency-key",
        help="retries with the same key make one job (sent as the body's idempotency_key)",
    )
    jsubmit.set_defaults(func=_run(jobs_submit))
    jc = jsub.add_parser("cancel", parents=[common], help="cancel a job (kills its YARN app)")
    jc.add_argument("id", type=_job_id)
    jc.set_defaults(func=_run(jobs_cancel))

    configure_admission(sub)


def _run(
    action: Callable[[httpx.Client, argparse.Namespace], str],
) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            _check_url(args.url)
            token = clean_token(args.token)
            # Looked up at call time so tests can serve the API in-process.
            with _client(args.url) as client:
                if token:
                    client.headers["Authorization"] = f"Bearer {token}"
                try:
                    print(action(client, args))
                except (KeyError, TypeError, AttributeError, ValueError) as exc:
                    # A 200 whose JSON lacks the sidecar's fields: another service at --url.
                    where = redact_text(str(client.base_url))
                    raise OperatorError(_not_the_sidecar(where, "its answer")) from exc
        except OperatorError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2 if exc.usage else 1
        return 0

    return run


def admission_show(client: httpx.Client, args: argparse.Namespace) -> str:
    """``GET /admission``: the admission policy the next round runs, and the alternatives."""
    result = _call(client, "GET", "/admission")
    if args.json:
        return json.dumps(result, indent=2, sort_keys=True)
    params = ", ".join(f"{k}={v}" for k, v in sorted(result["params"].items()))
    others = ", ".join(p["name"] for p in result["policies"])
    return f"{result['policy']} ({result['source']}): {params}\nregistered: {others}"


def admission_set(client: httpx.Client, args: argparse.Namespace) -> str:
    """``PUT /admission``: switch the admission policy (the next round runs it)."""
    body: dict[str, Any] = {"policy": args.policy}
    if args.params:
        body["params"] = _params(args.params)
    _call(client, "PUT", "/admission", json=body, flags=True)
    return admission_show(client, args)


def configure_admission(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``yarn-sidecar admission show|set`` against a running sidecar."""
    common = _common()
    adm = sub.add_parser("admission", help="the admission policy of a running sidecar")
    asub = adm.add_subparsers(dest="admission_command", required=True, metavar="ACTION")
    show = asub.add_parser("show", parents=[common], help="the active admission policy")
    show.set_defaults(func=_run(admission_show))
    put = asub.add_parser("set", parents=[common], help="switch the admission policy")
    put.add_argument("policy", help="justice, pythia or promise")
    put.add_argument("--params", help="the policy's parameters as a JSON object")
    put.set_defaults(func=_run(admission_set))
