"""The interference guard: HybridMR's Phase II at queue level (seed ``001``, section III-B).

HybridMR watches interactive applications against their SLAs and, when one is violated, moves or
throttles the batch tasks that interfere with it. A YARN queue controller cannot move tasks; what
it can bound is how far batch queues borrow on the shared partition. So: operators declare
interactive SLOs (a probe URL answering a latency, or a queue whose waiting apps' pending time is
the signal); while any is violated, each tick lowers the batch queues' ``maximum-capacity`` by
``step_pp`` points, never below their capacity (their guarantee) or ``floor_pp``; once every SLO
has held for ``recover_ticks`` ticks in a row (hysteresis), each tick raises it back by
``step_pp`` until the values found at the first violation are restored, and the guard clears.

Pure: the service layer reads the SLOs (``app.services.slo``) and hands the readings here; the
targets go into the plan (``app.control.plan``), so every step is bounded, pushed atomically
and audited like any other change of the queue configuration.

Decisions where the paper is silent:

* A reading that could not be taken (probe down, bad answer) counts neither way: with only such
  readings the guard holds its current caps, neither tightening on noise nor releasing blind.
* The values restored are the live ``maximum-capacity`` at the first violation of an episode; a
  violation during the restore tightens again from where the restore had got to.
* Every step (down, held, or back up) starts from the ``maximum-capacity`` the RM holds now, not
  from the caps the guard stored: a tick that pushed nothing (advise mode, drift, a refused or
  failed push) still advances the episode (its calm count, its audit) but moves no cap, so the
  first push that lands moves each queue by at most ``step_pp``. The stored ``caps`` are what the
  guard asked for at its last tick.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.policies.base import PolicyError
from app.policies.base import finite_number as _number

STATE_KEY = "guard"


@dataclass(frozen=True, slots=True)
class Slo:
    """One interactive SLO: ``url`` answers a latency in ms, or ``queue``'s longest-waiting
    app's pending time in s is the signal; violated when above ``threshold``."""

    name: str
    threshold: float
    url: str | None = None
    queue: str | None = None


@dataclass(frozen=True, slots=True)
class GuardConfig:
    """What the operator declared (``YARN_SIDECAR_INTERFERENCE_GUARD``)."""

    slos: tuple[Slo, ...]
    batch_queues: tuple[str, ...]
    step_pp: float = 10.0
    floor_pp: float = 0.0
    recover_ticks: int = 3

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GuardConfig:
        """Validated; errors name the field (``slos[0].url``...)."""
        known = {"slos", "batch_queues", "step_pp", "floor_pp", "recover_ticks"}
        for key in data:
            if key not in known:
                raise PolicyError(str(key), "unknown field of the interference guard")
        slos_in = data.get("slos")
        if not isinstance(slos_in, list) or not slos_in:
            raise PolicyError("slos", "must be a non-empty list")
        slos = tuple(_slo(item, f"slos[{k}]") for k, item in enumerate(slos_in))
        batch = data.get("batch_queues")
        if (
            not isinstance(batch, list)
            or not batch
            or not all(isinstance(q, str) and q for q in batch)
        ):
            raise PolicyError("batch_queues", "must be a non-empty list of queue paths")
        recover = data.get("recover_ticks", 3)
        if not isinstance(recover, int) or isinstance(recover, bool) or not 1 <= recover <= 1000:
            raise PolicyError("recover_ticks", "must be an integer within [1, 1000]")
        return cls(
            slos=slos,
            batch_queues=tuple(batch),
            step_pp=_number(data.get("step_pp", 10.0), "step_pp", low=0.01, high=100),
            floor_pp=_number(data.get("floor_pp", 0.0), "floor_pp", low=0, high=100),
            recover_ticks=recover,
        )


def _slo(item: Any, where: str) -> Slo:
    if not isinstance(item, Mapping):
        raise PolicyError(where, "must be an object")
    for key in item:
        if key not in {"name", "url", "queue", "max_latency_ms", "max_pending_s"}:
            raise PolicyError(f"{where}.{key}", "unknown field of an SLO")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise PolicyError(f"{where}.name", "is required")
    url, queue = item.get("url"), item.get("queue")
    if (url is None) == (queue is None):
        raise PolicyError(where, "needs exactly one of url (a latency probe) or queue")
    if url is not None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise PolicyError(f"{where}.url", "must be an http:// or https:// URL")
        return Slo(
            name, _number(item.get("max_latency_ms"), f"{where}.max_latency_ms", low=0), url=url
        )
    if not isinstance(queue, str) or not queue:
        raise PolicyError(f"{where}.queue", "must be a queue path")
    return Slo(
        name, _number(item.get("max_pending_s"), f"{where}.max_pending_s", low=0), queue=queue
    )


@dataclass(frozen=True, slots=True)
class Reading:
    """One SLO's value at a tick; ``value`` None: it could not be read (``detail`` says why)."""

    slo: str
    value: float | None
    threshold: float
    detail: str = ""

    @property
    def violated(self) -> bool | None:
        """Above the threshold; None when unknown."""
        return None if self.value is None else self.value > self.threshold

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "slo": self.slo,
            "value": self.value,
            "threshold": self.threshold,
            "violated": self.violated,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class GuardStep:
    """One tick of the guard: the new state, the ``maximum-capacity`` targets in hundredths of a
    percent (empty: the guard leaves the queues alone) and why."""

    state: dict[str, Any]
    targets: dict[str, int]
    reason: str

    def audit(self, readings: Sequence[Reading], before: Mapping[str, Any]) -> dict[str, Any]:
        """The decision record's ``guard`` part."""
        return {
            "readings": [r.to_dict() for r in readings],
            "state_before": dict(before),
            "state_after": self.state,
            "targets_pp": {q: h / 100 for q, h in sorted(self.targets.items())},
            "reason": self.reason,
        }


def step(
    state: Mapping[str, Any],
    readings: Sequence[Reading],
    live_capacity_h: Mapping[str, int],
    live_max_h: Mapping[str, int],
    cfg: GuardConfig,
) -> GuardStep:
    """One tick (module docstring). Capacities in hundredths of a percent of the parent."""
    known = [r for r in readings if r.violated is not None]
    violated = [r.slo for r in known if r.violated]
    active = bool(state.get("baseline"))
    step_h = round(cfg.step_pp * 100)
    queues = [q for q in cfg.batch_queues if q in live_max_h]
    floor = {q: max(live_capacity_h.get(q, 0), round(cfg.floor_pp * 100)) for q in queues}
    if violated:
        baseline = _ints(state["baseline"]) if active else {q: live_max_h[q] for q in queues}
        caps = {q: max(floor.get(q, 0), live_max_h.get(q, h) - step_h) for q, h in baseline.items()}
        why = f"SLO {', '.join(violated)} violated: batch queues' maximum-capacity lowered"
        return GuardStep({"baseline": baseline, "caps": caps, "calm": 0}, caps, why)
    if not active:
        return GuardStep({}, {}, "every SLO holds" if known else "no SLO could be read")
    baseline = _ints(state["baseline"])
    caps = {q: max(floor.get(q, 0), live_max_h.get(q, h)) for q, h in baseline.items()}
    if not known:
        return GuardStep(dict(state), caps, "no SLO could be read: caps held")
    calm = int(state.get("calm", 0)) + 1
    if calm < cfg.recover_ticks:
        why = f"every SLO holds ({calm} of {cfg.recover_ticks} ticks before restoring)"
        return GuardStep({"baseline": baseline, "caps": caps, "calm": calm}, caps, why)
    caps = {q: min(baseline.get(q, h), h + step_h) for q, h in caps.items()}
    if caps == baseline:
        return GuardStep({}, baseline, "every SLO held: maximum-capacity restored")
    why = "every SLO holds: maximum-capacity raised toward its value before the violation"
    return GuardStep({"baseline": baseline, "caps": caps, "calm": calm}, caps, why)


def _ints(values: Mapping[str, Any]) -> dict[str, int]:
    return {str(q): int(h) for q, h in values.items()}
