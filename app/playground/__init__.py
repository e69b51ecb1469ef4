"""The policy playground behind ``yarn-sidecar policy run SCENARIO.json`` (``docs/policies.md``,
"Playground scenarios").

A scenario names its policy; ``run_scenario`` dispatches to the module that owns that policy's
scenario format. Each such module exposes ``run(scenario) -> dict`` and ``table(result) -> str`` and
raises ``PolicyError`` (naming the field) on bad input.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, cast

from app.policies import registry
from app.policies.base import PolicyError


class _ScenarioModule(Protocol):
    def run(self, scenario: Mapping[str, Any]) -> dict[str, Any]: ...

    def table(self, result: Mapping[str, Any]) -> str: ...


def load_scenario(path: Path) -> dict[str, Any]:
    """Read a scenario file; a syntax error names the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(str(path), f"cannot read scenario: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise PolicyError(str(path), f"not UTF-8 text (byte {exc.start})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PolicyError(f"{path}:{exc.lineno}:{exc.colno}", f"invalid JSON: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise PolicyError(str(path), "a scenario must be a JSON object")
    return data


def _module_for(scenario: Mapping[str, Any]) -> _ScenarioModule:
    policy = scenario.get("policy")
    known = registry.names()
    if not isinstance(policy, str) or policy not in known:
        raise PolicyError("policy", f"must be one of {', '.join(known)}, got {policy!r}")
    # each policy folder owns its scenario format in ``<folder>/scenario.py``
    module = importlib.import_module(f"{registry.family(policy)}.scenario")
    return cast(_ScenarioModule, module)


def run_scenario(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and run one scenario; returns the JSON-ready decisions."""
    return _module_for(scenario).run(scenario)


def render(scenario: Mapping[str, Any], result: Mapping[str, Any], fmt: str) -> str:
    """Render a result as JSON (the public format) or as a human-readable table."""
    if fmt == "json":
        return json.dumps(result, indent=2, sort_keys=False)
    return _module_for(scenario).table(result)


__all__ = ["PolicyError", "load_scenario", "render", "run_scenario"]
