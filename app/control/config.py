"""The controller's configuration, validated in one place.

Settings give the defaults (``YARN_SIDECAR_POLICY``, ``..._POLICY_PARAMS``, ``..._QUEUE_BOUNDS``
...); ``PUT /policy`` overlays them and is validated by the same ``resolve`` so a value refused at
start is refused over HTTP too, with a ``PolicyError`` naming the field.

Decisions where the issue is silent:

* The policy name is ``static``, ``fawkes:<weighting>``, ``ltrf``, ``mlrf`` or ``rrf``. A bare
  ``fawkes`` takes its weighting from the parameters (default TD) and is normalised to
  ``fawkes:<weighting>``; a suffix that contradicts ``params.weighting`` is an error.
* Queue weights (LTRF's ``w_i``, RRF's share vectors) are a separate map, default 1 per queue;
  Fawkes' minimum shares ``m_i`` are the operator's minimum bounds.
* Which queues exist is known only from the RM, at each tick, so a bound, floor, weight or
  baseline keyed by a name that is no managed queue (``a`` for ``root.a``, a queue since removed)
  is not refused here: ``unmatched_queue_keys`` names it in every tick's decision, where it is
  ignored. Refusing it would stop the controller whenever an operator removes a queue from YARN
  before its bound; the simulator also keys these maps by its own queue names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from app.control import history_view
from app.control.budget import Bounds, bounds_to_json, parse_bounds
from app.control.floors import ANY_QUEUE, parse_baseline, parse_floors
from app.policies import registry
from app.policies.base import PolicyError, PolicySpec
from app.policies.base import finite_number as _number

MODES = ("observe", "advise", "enforce")
STATIC = "static"


@dataclass(frozen=True, slots=True)
class ControlConfig:
    """Everything one tick needs to know about what to run and how carefully."""

    policy: str = STATIC
    params: Mapping[str, Any] = field(default_factory=dict)
    mode: str = "advise"
    bounds: Mapping[str, Bounds] = field(default_factory=dict)
    weights: Mapping[str, float] = field(default_factory=dict)
    max_step_pp: float = 10.0
    min_change_pp: float = 1.0
    allow_drift_overwrite: bool = False
    managed_parent: str = "root"
    interval_s: float = 60.0
    # Minimum shares in containers of the scheduler's minimum allocation per queue ("*": every
    # queue without its own entry); the baseline capacities an idle cluster returns to.
    floors: Mapping[str, int] = field(default_factory=dict)
    baseline: Mapping[str, float] = field(default_factory=dict)

    @property
    def base_policy(self) -> str:
        """``fawkes`` for ``fawkes:TD``."""
        return self.policy.split(":", 1)[0]

    def weight(self, queue: str) -> float:
        """``w_i``, 1 unless configured."""
        return self.weights.get(queue, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``GET /policy``, the audit trail)."""
        return {
            "policy": self.policy,
            "params": dict(self.params),
            "mode": self.mode,
            "bounds": bounds_to_json(self.bounds),
            "weights": dict(sorted(self.weights.items())),
            "max_step_pp": self.max_step_pp,
            "min_change_pp": self.min_change_pp,
            "allow_drift_overwrite": self.allow_drift_overwrite,
            "managed_parent": self.managed_parent,
            "interval_s": self.interval_s,
            "floors": dict(sorted(self.floors.items())),
            "baseline": dict(sorted(self.baseline.items())),
        }


def _policy_and_params(name: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    if not isinstance(name, str) or not name:
        raise PolicyError("policy", f"must be a policy name, got {name!r}")
    if name == STATIC:
        if params:
            raise PolicyError(
                f"params.{sorted(params)[0]}", "the static policy takes no parameters"
            )
        return STATIC, {}
    spec = registry.lookup(name, field="policy")
    if spec.kind != "queue":
        raise PolicyError("policy", f"{spec.name!r} is an {spec.kind} policy, not a queue policy")
    base, _, suffix = name.partition(":")
    values = dict(params)
    key = spec.suffix_param
    if suffix:
        if key is None:
            raise PolicyError("policy", f"{base} takes no ':<value>' suffix, got {name!r}")
        if key in values and values[key] != suffix:
            raise PolicyError(f"params.{key}", f"{values[key]!r} contradicts policy {name!r}")
        values[key] = suffix
        try:
            spec.validate({key: suffix})
        except PolicyError as exc:
            raise PolicyError("policy", f"{key} {exc.message}") from None
    validated = spec.validate(values, prefix="params.")
    if key is not None:
        return f"{base}:{validated[key]}", validated
    return base, validated


def _weights(raw: Mapping[str, Any]) -> dict[str, float]:
    if not isinstance(raw, Mapping):
        raise PolicyError("weights", "must be an object mapping queue paths to weights")
    out = {}
    for queue, value in raw.items():
        out[queue] = _number(value, f"weights.{queue}", low=0.0)
        if out[queue] == 0:
            raise PolicyError(f"weights.{queue}", "must be > 0")
    return out


def resolve(
    *,
    policy: str,
    params: Mapping[str, Any],
    mode: str,
    bounds: Mapping[str, Any],
    weights: Mapping[str, Any],
    max_step_pp: float,
    min_change_pp: float,
    allow_drift_overwrite: bool,
    managed_parent: str,
    interval_s: float,
    floors: Mapping[str, Any] | None = None,
    baseline: Mapping[str, Any] | None = None,
) -> ControlConfig:
    """A validated configuration; every invalid value raises ``PolicyError`` naming its field."""
    if not isinstance(params, Mapping):
        raise PolicyError("params", "must be an object")
    if not isinstance(bounds, Mapping):
        raise PolicyError("bounds", "must be an object mapping queue paths to {min, max}")
    name, values = _policy_and_params(policy, params)
    if mode not in MODES:
        raise PolicyError("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    if not isinstance(allow_drift_overwrite, bool):
        raise PolicyError("allow_drift_overwrite", "must be true or false")
    parsed = parse_bounds(bounds)
    lows = sum(b.min_h for b in parsed.values())
    if lows > 10000:
        raise PolicyError("bounds", f"minimums sum to {lows / 100}, more than 100")
    if name != STATIC and registry.lookup(name).absolute and parsed:
        # An absolute policy pushes resources; a percentage bound of a queue has no fixed meaning
        # in vcores and MB (it depends on the parent), so refuse rather than ignore it.
        raise PolicyError("bounds", f"not supported with {name} (absolute capacities)")
    cfg = ControlConfig(
        policy=name,
        params=values,
        mode=mode,
        bounds=parsed,
        weights=_weights(weights),
        max_step_pp=_number(max_step_pp, "max_step_pp", low=0.01, high=100.0),
        min_change_pp=_number(min_change_pp, "min_change_pp", low=0.0, high=100.0),
        allow_drift_overwrite=allow_drift_overwrite,
        managed_parent=managed_parent,
        interval_s=_number(interval_s, "interval_s", low=1.0),
        floors=parse_floors(floors or {}),
        baseline=parse_baseline(baseline or {}),
    )
    if name != STATIC and "interval_s" not in params and _has_param(name, "interval_s"):
        # A policy's own interval (Fawkes' T) is the controller's averaging interval unless the
        # operator says otherwise.
        cfg = replace(cfg, params={**cfg.params, "interval_s": cfg.interval_s})
    return cfg


def overlay(base: ControlConfig, changes: Mapping[str, Any]) -> ControlConfig:
    """``base`` with the fields of ``changes`` replaced, validated again (``PUT /policy``).

    Changing the policy without giving parameters starts from that policy's defaults.
    """
    known = {"policy", "params", "mode", "bounds", "weights", "max_step_pp", "min_change_pp"}
    known |= {"allow_drift_overwrite", "floors", "baseline"}
    for key in changes:
        if key not in known:
            raise PolicyError(key, "unknown field")
    current = base.to_dict()
    policy_changed = "policy" in changes and changes["policy"] != base.policy
    params = changes.get("params", {} if policy_changed else _user_params(base))
    default_policy = base.policy
    suffix = _suffix_param(base.policy)
    if suffix is not None and suffix in params:
        default_policy = base.base_policy  # the parameter picks the suffix
    return resolve(
        policy=changes.get("policy", default_policy),
        params=params,
        mode=changes.get("mode", base.mode),
        bounds=changes.get("bounds", current["bounds"]),
        weights=changes.get("weights", current["weights"]),
        max_step_pp=changes.get("max_step_pp", base.max_step_pp),
        min_change_pp=changes.get("min_change_pp", base.min_change_pp),
        allow_drift_overwrite=changes.get("allow_drift_overwrite", base.allow_drift_overwrite),
        managed_parent=base.managed_parent,
        interval_s=base.interval_s,
        floors=changes.get("floors", current["floors"]),
        baseline=changes.get("baseline", current["baseline"]),
    )


def unmatched_queue_keys(cfg: ControlConfig, queues: Iterable[str]) -> list[str]:
    """A note for every key of ``bounds``, ``floors``, ``weights`` and ``baseline`` that names
    none of ``queues`` (the managed queues the RM holds); ``"*"`` of ``floors`` names them all."""
    managed = set(queues)
    maps: dict[str, Iterable[str]] = {
        "bounds": cfg.bounds,
        "floors": (q for q in cfg.floors if q != ANY_QUEUE),
        "weights": cfg.weights,
        "baseline": cfg.baseline,
    }
    notes = []
    for name, keys in maps.items():
        for key in sorted(k for k in keys if k not in managed):
            path = f"{cfg.managed_parent}.{key}"
            hint = f" (did you mean {path}?)" if path in managed else ""
            notes.append(f"{name}.{key} names no queue under {cfg.managed_parent}: ignored{hint}")
    return notes


def _user_params(cfg: ControlConfig) -> dict[str, Any]:
    """The parameters as an operator would give them again (the weighting lives in the name)."""
    values = dict(cfg.params)
    key = _suffix_param(cfg.policy)
    if key is not None:
        values.pop(key, None)
    return values


def _suffix_param(policy: str) -> str | None:
    return None if policy == STATIC else registry.lookup(policy).suffix_param


def _has_param(policy: str, param: str) -> bool:
    return any(p.name == param for p in registry.lookup(policy).params)


# The optional fields of the observation view that the live controller fills from the RM alone:
# none, since the ResourceManager's REST API reports no input sizes, task completions or per-job
# slowdowns. With a JobHistory server read, the MapReduce history fills them (``HISTORY_VIEW``).
LIVE_VIEW: frozenset[str] = frozenset()
HISTORY_VIEW: frozenset[str] = LIVE_VIEW | history_view.FIELDS


def check_observable(cfg: ControlConfig, known: frozenset[str] = LIVE_VIEW) -> None:
    """Refuse a configuration whose policy would decide on view fields the caller cannot fill
    (``PolicySpec.needs``): ``PolicyError`` naming ``policy`` and what is missing. The simulator,
    whose view has every field, does not call it."""
    if cfg.policy == STATIC:
        return
    spec = registry.lookup(cfg.policy)
    if spec.needs is None:
        return
    missing = {f: what for f, what in spec.needs(cfg.params).items() if f not in known}
    if not missing:
        return
    usable = _usable_suffixes(spec, cfg.params, known)
    hint = f", or choose one of {', '.join(usable)}" if usable else ""
    raise PolicyError(
        "policy",
        f"{cfg.policy} decides on {' and '.join(missing.values())}, which the RM does not "
        f"report: set YARN_SIDECAR_JOBHISTORY_URL to a MapReduce JobHistory server{hint}",
    )


def _usable_suffixes(
    spec: PolicySpec, params: Mapping[str, Any], known: frozenset[str]
) -> list[str]:
    key = spec.suffix_param
    param = next((p for p in spec.params if p.name == key), None)
    if spec.needs is None or key is None or param is None or not param.choices:
        return []
    return [
        f"{spec.name}:{c}" for c in param.choices if set(spec.needs({**params, key: c})) <= known
    ]
