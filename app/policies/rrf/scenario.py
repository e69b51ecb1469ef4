"""Playground handler for RRF scenarios (``docs/policies.md`` "Playground scenarios", RRF; seed 002
9.5).

Input: ``{"policy": "rrf", "capacity": {"vcores": V, "memory": M}, "tenants": {name: {"shares":
{...}, "demand": {...}, "vms": {vm: {"shares": {...}, "demand": {...}}}}}}``; ``vms`` is optional
and a tenant with ``vms`` may omit ``demand`` (it is then the sum of its VMs' demands; when both are
given they must agree). One extension: ``memory_mb_per_unit`` (default 1) converts memory to MB for
the ``yarn`` absolute capacities.

Output: ``rrf``, ``tshirt``, ``wmmf``, ``wdrf`` allocations per tenant, ``iwa`` per tenant and VM
(Algorithm 3 applied to the tenant's RRF result) when any tenant has VMs, ``contributions``
(``Lambda(i)`` in shares), ``beta`` (economic fairness degree of each allocation) and ``yarn`` (the
RRF result as CapacityScheduler absolute resources).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.policies.base import PolicyError, finite_number
from app.policies.rrf import core as policy
from app.policies.rrf.core import RESOURCES, Res, Tenant
from app.policies.scenario import as_mapping, check_keys, require

_TOP_KEYS = ("policy", "capacity", "tenants", "memory_mb_per_unit")
_TENANT_KEYS = ("shares", "demand", "vms")
_VM_KEYS = ("shares", "demand")
_SUM_TOLERANCE = 1e-9


def _vector(value: Any, where: str, *, positive: bool = False) -> Res:
    obj = as_mapping(value, where)
    check_keys(obj, RESOURCES, where)
    nums = [
        finite_number(
            require(obj, r, where),
            f"{where}.{r}",
            low=0.0,
            positive=positive,
        )
        for r in RESOURCES
    ]
    return Res(*nums)


def _vms(value: Any, where: str) -> dict[str, Tenant]:
    obj = as_mapping(value, where)
    if not obj:
        raise PolicyError(where, "at least one VM is required")
    out: dict[str, Tenant] = {}
    for name, raw in obj.items():
        vm_where = f"{where}.{name}"
        vm = as_mapping(raw, vm_where)
        check_keys(vm, _VM_KEYS, vm_where)
        out[name] = Tenant(
            _vector(require(vm, "shares", vm_where), f"{vm_where}.shares"),
            _vector(require(vm, "demand", vm_where), f"{vm_where}.demand"),
        )
    return out


def _tenant_demand(raw: Mapping[str, Any], vms: Mapping[str, Tenant] | None, where: str) -> Res:
    if vms is None:
        return _vector(require(raw, "demand", where), f"{where}.demand")
    total = Res(*(sum(vm.demand[r] for vm in vms.values()) for r in RESOURCES))
    if "demand" not in raw:
        return total
    demand = _vector(raw["demand"], f"{where}.demand")
    for r in RESOURCES:
        if abs(demand[r] - total[r]) > _SUM_TOLERANCE * max(1.0, total[r]):
            raise PolicyError(
                f"{where}.demand.{r}", f"must equal the sum of its VMs' demands ({total[r]:g})"
            )
    return demand


def parse(
    scenario: Mapping[str, Any],
) -> tuple[Res, dict[str, Tenant], dict[str, dict[str, Tenant]], float]:
    """Validate a scenario: capacity, tenants, VMs per tenant and the MB conversion factor."""
    check_keys(scenario, _TOP_KEYS, "")
    capacity = _vector(require(scenario, "capacity", ""), "capacity", positive=True)
    raw_tenants = as_mapping(require(scenario, "tenants", ""), "tenants")
    if not raw_tenants:
        raise PolicyError("tenants", "at least one tenant is required")
    tenants: dict[str, Tenant] = {}
    vms: dict[str, dict[str, Tenant]] = {}
    for name, value in raw_tenants.items():
        where = f"tenants.{name}"
        raw = as_mapping(value, where)
        check_keys(raw, _TENANT_KEYS, where)
        children = _vms(raw["vms"], f"{where}.vms") if "vms" in raw else None
        shares = _vector(require(raw, "shares", where), f"{where}.shares")
        tenants[name] = Tenant(shares, _tenant_demand(raw, children, where))
        if children is not None:
            vms[name] = children
    mb = finite_number(scenario.get("memory_mb_per_unit", 1.0), "memory_mb_per_unit", positive=True)
    return capacity, tenants, vms, mb


def _json(alloc: Mapping[str, Res]) -> dict[str, dict[str, float]]:
    return {name: vec.as_dict() for name, vec in alloc.items()}


def run(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """Run every allocator on the scenario; errors name the offending field."""
    capacity, tenants, vms, mb = parse(scenario)
    try:
        allocations = {a: policy.allocate(tenants, capacity, a) for a in policy.ALGORITHMS}
        initial = policy.initial_resources(tenants, capacity)
        result: dict[str, Any] = {a: _json(alloc) for a, alloc in allocations.items()}
        if vms:
            result["iwa"] = {
                t: _json(
                    policy.iwa(children, initial[t], allocations["rrf"][t], f"tenants.{t}.vms")
                )
                for t, children in vms.items()
            }
        result["contributions"] = policy.contributions(tenants, capacity)
        result["beta"] = {
            a: policy.economic_fairness(tenants, capacity, [alloc])
            for a, alloc in allocations.items()
        }
        result["yarn"] = policy.yarn_absolute_capacities(allocations["rrf"], mb)
    except PolicyError as exc:
        raise PolicyError(exc.field, exc.message) from exc
    return result


def _cell(vec: Mapping[str, float]) -> str:
    return f"<{vec['vcores']:.4g}, {vec['memory']:.4g}>"


def table(result: Mapping[str, Any]) -> str:
    """Human-readable comparison: one row per allocator, one column per tenant."""
    names = list(result["rrf"])
    rows = [["allocation", *names]]
    for algorithm in policy.ALGORITHMS:
        rows.append([algorithm, *(_cell(result[algorithm][n]) for n in names)])
    rows.append(["beta (rrf)", *(f"{result['beta']['rrf'][n]:.4g}" for n in names)])
    rows.append(["yarn (rrf)", *(result["yarn"][n] for n in names)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    for tenant, children in result.get("iwa", {}).items():
        split = ", ".join(f"{vm} {_cell(vec)}" for vm, vec in children.items())
        lines.append(f"iwa {tenant}: {split}")
    return "\n".join(lines)
