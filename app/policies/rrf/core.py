"""Reciprocal Resource Fairness and its baselines (seed 002, section 9.5; ``docs/policies.md``
"RRF").

Two resources, ``vcores`` and ``memory``. A tenant buys a share vector ``s(i)``; its initial
resources are ``S_k(i) = Omega_k * s_k(i) / sum_j s_k(j)`` so one unit of resource ``k`` is worth
``price_k = sum_j s_k(j) / Omega_k`` shares (9.5.1). Implemented, all in exact closed form (no
step simulation):

- T-shirt: the static ``S_k(i)`` (Table 9.3, first row; not capped at demand).
- WMMF: weighted max-min per resource, weights ``s_k(i)``, capped at demand (9.5.2).
- weighted DRF: standard progressive filling along demand vectors with weighted dominant share
  ``max_k x_k / S_k(i)``; a tenant stops at its demand or when a resource it needs runs out
  (``docs/policies.md``: not the chapter's WDRF row).
- RRF inter-tenant trading, Algorithm 2, with the ``docs/policies.md`` corrections: ``Lambda(i)`` on
  line 20, contributions summed in share units. Lines 12 to 20 (sort by ``V_k``, binary search of
  ``v`` by eqs. 9.1/9.2) are a water-fill: a beneficiary gets ``min(D_k(i), S_k(i) + L*Lambda(i))``
  with the level ``L`` that spends the pool ``sum(S_k - D_k)`` of the contributors.
- Intra-tenant weight adjustment, Algorithm 3, and the economic fairness degree ``beta`` (9.5.4.1).

Decisions where the chapter and ``docs/policies.md`` are silent:

- Left-over after every contributing beneficiary is satisfied (only non-contributors are still
  unsatisfied) is water-filled in proportion to the initial resources ``S_k(i)`` of the resource
  in question, capped at demand (``docs/policies.md`` says "initial shares"; per resource is the
  only reading that keeps the two resources' budgets separate).
- A resource whose total demand is at most its capacity is not contended: RRF, WMMF and DRF give
  every tenant its demand of it. For DRF the progressive filling still runs on the full demand
  vectors (so contended resources are standard DRF) and the uncontended resource is then set to
  demand, as ``docs/policies.md`` requires.
- DRF: a tenant with a zero share of a resource it demands has an infinite weighted dominant
  share and receives nothing (the weighted-DRF definition with a zero weight).
- IWA: a VM's initial resources are the tenant's ``S_k(i)`` split by the VMs' share values. Line 9
  can exceed a VM's demand when the tenant received more than its VMs demand; the result is capped
  at demand (RRF never gives a tenant more than its demand, so this only matters for other inputs).
- YARN absolute capacities are integers obtained by largest-remainder rounding whose total is the
  floor of the exact total, so children never sum above the allocation (``docs/yarn.md``: the sum of
  absolute children must not exceed the parent).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.policies.base import ParamSpec, PolicyError, PolicySpec
from app.policies.rounding import absolute_capacities

RESOURCES: tuple[str, str] = ("vcores", "memory")
ALGORITHMS: tuple[str, ...] = ("rrf", "tshirt", "wmmf", "wdrf")
_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class Res:
    """An amount of the two resources (or of shares, depending on context)."""

    vcores: float
    memory: float

    def __post_init__(self) -> None:
        # ints from JSON or callers become floats so results compare and serialise uniformly
        object.__setattr__(self, "vcores", float(self.vcores))
        object.__setattr__(self, "memory", float(self.memory))

    def __getitem__(self, resource: str) -> float:
        return self.vcores if resource == "vcores" else self.memory

    @staticmethod
    def of(values: Mapping[str, float]) -> Res:
        """Build from a ``{"vcores": x, "memory": y}`` mapping."""
        return Res(float(values["vcores"]), float(values["memory"]))

    def as_dict(self) -> dict[str, float]:
        """The JSON form ``{"vcores": x, "memory": y}``."""
        return {"vcores": self.vcores, "memory": self.memory}


@dataclass(frozen=True, slots=True)
class Tenant:
    """A tenant (YARN queue) or a VM (child queue): purchased shares and current demand."""

    shares: Res
    demand: Res


Allocation = dict[str, Res]


# ---------------------------------------------------------------- validation


def validate(tenants: Mapping[str, Tenant], capacity: Res, where: str = "tenants") -> None:
    """Raise ``PolicyError`` naming the field when the input cannot be allocated."""
    for resource in RESOURCES:
        value = capacity[resource]
        if not math.isfinite(value) or value <= 0:
            raise PolicyError(f"capacity.{resource}", f"must be a finite number > 0, got {value}")
    if not tenants:
        raise PolicyError(where, "at least one tenant is required")
    for name, tenant in tenants.items():
        for part in ("shares", "demand"):
            vec = tenant.shares if part == "shares" else tenant.demand
            for resource in RESOURCES:
                value = vec[resource]
                if not math.isfinite(value) or value < 0:
                    raise PolicyError(
                        f"{where}.{name}.{part}.{resource}",
                        f"must be a finite number >= 0, got {value}",
                    )
    for resource in RESOURCES:
        if sum(t.shares[resource] for t in tenants.values()) <= 0:
            raise PolicyError(f"{where}.*.shares.{resource}", "the shares of a resource sum to 0")


# ---------------------------------------------------------------- shared helpers


def prices(tenants: Mapping[str, Tenant], capacity: Res) -> Res:
    """Shares per unit of each resource: ``sum_j s_k(j) / Omega_k`` (9.5.1)."""
    return Res(*(sum(t.shares[r] for t in tenants.values()) / capacity[r] for r in RESOURCES))


def initial_resources(tenants: Mapping[str, Tenant], capacity: Res) -> Allocation:
    """``S_k(i) = Omega_k * s_k(i) / sum_j s_k(j)``: what each tenant paid for."""
    price = prices(tenants, capacity)
    return {n: Res(*(t.shares[r] / price[r] for r in RESOURCES)) for n, t in tenants.items()}


def _contended(tenants: Mapping[str, Tenant], capacity: Res, resource: str) -> bool:
    return sum(t.demand[resource] for t in tenants.values()) > capacity[resource] + _EPS


def waterfill(
    total: float, base: Sequence[float], weight: Sequence[float], cap: Sequence[float]
) -> list[float]:
    """Exact ``x_i = min(cap_i, base_i + L * weight_i)``, the level ``L >= 0`` spending ``total``.

    Requires ``base_i <= cap_i``. When even every cap fits in ``total`` the caps are returned (the
    rest stays unallocated); a zero weight pins ``x_i`` at ``base_i``.
    """
    spare = total - sum(base)
    headroom = [max(c - b, 0.0) for b, c in zip(base, cap, strict=True)]
    growable = sum(h for h, w in zip(headroom, weight, strict=True) if w > 0)
    if spare >= growable - _EPS:
        return [b + (h if w > 0 else 0.0) for b, h, w in zip(base, headroom, weight, strict=True)]
    order = sorted(
        (h / w, i) for i, (h, w) in enumerate(zip(headroom, weight, strict=True)) if w > 0
    )
    active_weight = sum(weight[i] for _, i in order)
    level = 0.0
    for breakpoint, i in order:
        step = (breakpoint - level) * active_weight
        if step >= spare:
            break
        spare -= step
        level = breakpoint
        active_weight -= weight[i]
    level += spare / active_weight if active_weight > 0 else 0.0
    return [
        b + min(h, level * w) if w > 0 else b
        for b, h, w in zip(base, headroom, weight, strict=True)
    ]


def _per_resource(names: Sequence[str], columns: Mapping[str, Sequence[float]]) -> Allocation:
    return {n: Res(columns["vcores"][i], columns["memory"][i]) for i, n in enumerate(names)}


# ---------------------------------------------------------------- baselines


def tshirt(tenants: Mapping[str, Tenant], capacity: Res) -> Allocation:
    """Static shares: every tenant gets exactly what it paid for (Table 9.3, T-shirt row)."""
    validate(tenants, capacity)
    return initial_resources(tenants, capacity)


def wmmf(tenants: Mapping[str, Tenant], capacity: Res) -> Allocation:
    """Weighted max-min fairness on each resource separately, weights = shares (9.5.2)."""
    validate(tenants, capacity)
    names = list(tenants)
    columns = {
        r: waterfill(
            capacity[r],
            [0.0] * len(names),
            [tenants[n].shares[r] for n in names],
            [tenants[n].demand[r] for n in names],
        )
        for r in RESOURCES
    }
    return _per_resource(names, columns)


def _drf_rates(tenants: Mapping[str, Tenant], initial: Allocation) -> dict[str, tuple[Res, float]]:
    """Per tenant: resources per unit of weighted dominant share, and that share at demand."""
    rates: dict[str, tuple[Res, float]] = {}
    for name, tenant in tenants.items():
        needed = [r for r in RESOURCES if tenant.demand[r] > 0]
        if not needed or any(initial[name][r] <= 0 for r in needed):
            rates[name] = (Res(0.0, 0.0), 0.0)
            continue
        top = max(tenant.demand[r] / initial[name][r] for r in needed)
        rates[name] = (Res(*(tenant.demand[r] / top for r in RESOURCES)), top)
    return rates


def wdrf(tenants: Mapping[str, Tenant], capacity: Res) -> Allocation:
    """Weighted DRF by exact progressive filling; uncontended resources then get their demand.

    Every active tenant sits at the same weighted dominant share ``t``; ``t`` jumps from event
    to event (a tenant reaches its demand, a resource runs out), so the cost is O(n log n).
    """
    validate(tenants, capacity)
    rates = _drf_rates(tenants, initial_resources(tenants, capacity))
    fill = _Filling(rates)
    while fill.active:
        t_next, exhausted = fill.next_event(capacity)
        fill.advance(t_next, exhausted)
    alloc = {n: Res(*(rates[n][0][r] * fill.level[n] for r in RESOURCES)) for n in tenants}
    return _uncontended_get_demand(tenants, capacity, alloc)


class _Filling:
    """Progressive-filling bookkeeping: frozen usage plus the speed of the still-rising tenants."""

    def __init__(self, rates: Mapping[str, tuple[Res, float]]) -> None:
        self.rates = rates
        self.level = {n: 0.0 for n in rates}
        self.queue = sorted((top, n) for n, (_, top) in rates.items() if top > 0)
        self.active = {n for _, n in self.queue}
        self.frozen = {r: 0.0 for r in RESOURCES}
        self.speed = {r: sum(rates[n][0][r] for n in self.active) for r in RESOURCES}
        self.done: set[str] = set()
        self.pos = 0
        self.t = 0.0

    def next_event(self, capacity: Res) -> tuple[float, set[str]]:
        """The next level where a tenant saturates or resources run out (and which ones)."""
        while self.queue[self.pos][1] not in self.active:
            self.pos += 1
        t_next = self.queue[self.pos][0]
        exhausted: set[str] = set()
        for r in RESOURCES:
            if r in self.done or self.speed[r] <= 0:
                continue
            # active tenants all sit at level t, so usage is frozen + speed * t
            t_out = max((capacity[r] - self.frozen[r]) / self.speed[r], self.t)
            if t_out < t_next - _EPS:
                t_next, exhausted = t_out, {r}
            elif t_out <= t_next + _EPS:
                exhausted.add(r)
        return t_next, exhausted

    def advance(self, t_next: float, exhausted: set[str]) -> None:
        """Freeze tenants at their demand or at ``t_next`` when a resource they need ran out."""
        self.t = t_next
        while self.pos < len(self.queue) and self.queue[self.pos][0] <= t_next + _EPS:
            top, name = self.queue[self.pos]
            if name in self.active:
                self._freeze(name, top)
            self.pos += 1
        if exhausted:
            self.done |= exhausted
            for name in [n for n in self.active if any(self.rates[n][0][r] > 0 for r in exhausted)]:
                self._freeze(name, t_next)
            for r in exhausted:
                self.speed[r] = 0.0

    def _freeze(self, name: str, level: float) -> None:
        self.level[name] = level
        self.active.discard(name)
        for r in RESOURCES:
            rate = self.rates[name][0][r]
            self.frozen[r] += rate * level
            self.speed[r] -= rate


def _uncontended_get_demand(
    tenants: Mapping[str, Tenant], capacity: Res, alloc: Allocation
) -> Allocation:
    free = [r for r in RESOURCES if not _contended(tenants, capacity, r)]
    return {
        n: Res(*(tenants[n].demand[r] if r in free else a[r] for r in RESOURCES))
        for n, a in alloc.items()
    }


# ---------------------------------------------------------------- RRF (Algorithm 2)


def contributions(tenants: Mapping[str, Tenant], capacity: Res) -> dict[str, float]:
    """``Lambda(i)``: unused initial resources summed over resources in share units (lines 2-9)."""
    validate(tenants, capacity)
    initial = initial_resources(tenants, capacity)
    price = prices(tenants, capacity)
    return {
        n: sum(max(initial[n][r] - t.demand[r], 0.0) * price[r] for r in RESOURCES)
        for n, t in tenants.items()
    }


def _trade_resource(
    tenants: Mapping[str, Tenant],
    capacity: float,
    resource: str,
    initial: Allocation,
    contrib: Mapping[str, float],
) -> dict[str, float]:
    """One iteration of Algorithm 2's outer loop (lines 9-20) for ``resource``."""
    demand = {n: t.demand[resource] for n, t in tenants.items()}
    if sum(demand.values()) <= capacity + _EPS:
        return demand
    out = {n: demand[n] for n in tenants if demand[n] <= initial[n][resource]}
    beneficiaries = [n for n in tenants if n not in out]
    pool = capacity - sum(out.values())
    shares = waterfill(
        pool,
        [initial[n][resource] for n in beneficiaries],
        [contrib[n] for n in beneficiaries],
        [demand[n] for n in beneficiaries],
    )
    left = pool - sum(shares)
    # relative threshold: rounding residue of a large pool (MB) must not reach the free riders
    if left > 1e-9 * capacity:
        # Every contributing beneficiary is satisfied; spread the rest by initial shares.
        shares = waterfill(
            pool,
            shares,
            [initial[n][resource] for n in beneficiaries],
            [demand[n] for n in beneficiaries],
        )
    out.update(zip(beneficiaries, shares, strict=True))
    return out


def rrf(tenants: Mapping[str, Tenant], capacity: Res) -> Allocation:
    """Inter-tenant resource trading (Algorithm 2 with the ``docs/policies.md`` corrections)."""
    contrib = contributions(tenants, capacity)
    initial = initial_resources(tenants, capacity)
    columns = {r: _trade_resource(tenants, capacity[r], r, initial, contrib) for r in RESOURCES}
    return {n: Res(columns["vcores"][n], columns["memory"][n]) for n in tenants}


def allocate(tenants: Mapping[str, Tenant], capacity: Res, algorithm: str) -> Allocation:
    """Dispatch by name: ``rrf``, ``tshirt``, ``wmmf`` or ``wdrf``."""
    functions = {"rrf": rrf, "tshirt": tshirt, "wmmf": wmmf, "wdrf": wdrf}
    if algorithm not in functions:
        raise PolicyError("algorithm", f"must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    return functions[algorithm](tenants, capacity)


# ---------------------------------------------------------------- fairness degree


def asset_value(alloc: Res, price: Res) -> float:
    """The share value of an allocation vector: ``sum_k x_k * price_k``."""
    return sum(alloc[r] * price[r] for r in RESOURCES)


def economic_fairness(
    tenants: Mapping[str, Tenant], capacity: Res, allocations: Sequence[Mapping[str, Res]]
) -> dict[str, float]:
    """``beta(i) = sum_t S'_t(i) / (T * S(i))`` in share units (9.5.4.1); 1 means fair."""
    validate(tenants, capacity)
    if not allocations:
        raise PolicyError("allocations", "at least one allocation is required")
    price = prices(tenants, capacity)
    beta: dict[str, float] = {}
    for name, tenant in tenants.items():
        asset = tenant.shares.vcores + tenant.shares.memory
        received = sum(asset_value(a[name], price) for a in allocations)
        beta[name] = received / (len(allocations) * asset) if asset > 0 else math.nan
    return beta


def geometric_mean(values: Iterable[float]) -> float:
    """Geometric mean of positive values (the chapter's summary of ``beta``)."""
    items = [v for v in values if not math.isnan(v)]
    if not items or any(v <= 0 for v in items):
        return 0.0
    return math.exp(sum(math.log(v) for v in items) / len(items))


# ---------------------------------------------------------------- IWA (Algorithm 3)


def _iwa_resource(initial: Sequence[float], demand: Sequence[float], total: float) -> list[float]:
    phi = total - sum(initial)
    gamma = 0.0
    for s, d in zip(initial, demand, strict=True):
        if d >= s:
            gamma += d - s
        else:
            phi += s - d
    return [
        min(d, s + (d - s) / gamma * phi) if d >= s and gamma > 0 else d
        for s, d in zip(initial, demand, strict=True)
    ]


def iwa(
    vms: Mapping[str, Tenant], tenant_initial: Res, allocated: Res, where: str = "vms"
) -> Allocation:
    """Split a tenant's allocation among its VMs / child queues (Algorithm 3).

    ``tenant_initial`` is the tenant's ``S(i)``; a VM's initial resources are that vector split in
    proportion to the VMs' share values. ``allocated`` is the tenant's result of Algorithm 2.
    """
    if not vms:
        raise PolicyError(where, "at least one VM is required")
    names = list(vms)
    columns: dict[str, list[float]] = {}
    for r in RESOURCES:
        total_shares = sum(vms[n].shares[r] for n in names)
        if total_shares <= 0:
            raise PolicyError(f"{where}.*.shares.{r}", "the shares of a resource sum to 0")
        initial = [tenant_initial[r] * vms[n].shares[r] / total_shares for n in names]
        columns[r] = _iwa_resource(initial, [vms[n].demand[r] for n in names], allocated[r])
    return _per_resource(names, columns)


# ---------------------------------------------------------------- YARN capacities


def yarn_absolute_capacities(
    alloc: Mapping[str, Res], memory_mb_per_unit: float = 1.0
) -> dict[str, str]:
    """CapacityScheduler absolute resources per queue, ``[memory=MB,vcores=N]``, integers
    (``app.policies.rounding.absolute_capacities``).

    ``memory_mb_per_unit`` converts the allocation's memory unit to MB (1 when it is MB already,
    1024 for GB as in Table 9.3).
    """
    if not math.isfinite(memory_mb_per_unit) or memory_mb_per_unit <= 0:
        raise PolicyError("memory_mb_per_unit", f"must be > 0, got {memory_mb_per_unit}")
    return absolute_capacities(
        {n: (a.vcores, a.memory * memory_mb_per_unit) for n, a in alloc.items()}
    )


def queue_capacities(
    tenants: Mapping[str, Tenant],
    capacity: Res,
    vms: Mapping[str, Mapping[str, Tenant]] | None = None,
    params: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """What the live controller pushes: absolute resources per queue path (pure).

    ``tenants`` are leaf-or-parent queue paths; ``vms[tenant]`` their child queues, named
    ``tenant.child`` in the result and split by IWA (Algorithm 3) when ``params["iwa"]``.
    ``params`` are this policy's (``REGISTRY``), validated here.
    """
    checked = REGISTRY[0].validate(params or {})
    alloc = allocate(tenants, capacity, checked["algorithm"])
    mb = checked["memory_mb_per_unit"]
    out = yarn_absolute_capacities(alloc, mb)
    initial = initial_resources(tenants, capacity)
    for tenant, children in (vms or {}).items():
        if tenant not in alloc:
            raise PolicyError(f"vms.{tenant}", "is not a tenant")
        if checked["iwa"]:
            split = iwa(children, initial[tenant], alloc[tenant], f"vms.{tenant}")
        else:
            split = _static_split(children, alloc[tenant], f"vms.{tenant}")
        out.update(
            {f"{tenant}.{vm}": cap for vm, cap in yarn_absolute_capacities(split, mb).items()}
        )
    return out


def _static_split(children: Mapping[str, Tenant], total: Res, where: str) -> Allocation:
    """Without IWA a parent's allocation is divided by the children's share values."""
    sums = {r: sum(c.shares[r] for c in children.values()) for r in RESOURCES}
    for r in RESOURCES:
        if sums[r] <= 0:
            raise PolicyError(f"{where}.*.shares.{r}", "the shares of a resource sum to 0")
    return {
        n: Res(*(total[r] * c.shares[r] / sums[r] for r in RESOURCES)) for n, c in children.items()
    }


REGISTRY: tuple[PolicySpec, ...] = (
    PolicySpec(
        name="rrf",
        kind="queue",
        summary="Reciprocal Resource Fairness: tenants trade unused vcores for memory and back; "
        "T-shirt, WMMF and weighted DRF as baselines; absolute capacities per queue.",
        paper="seed 002 (Tang et al., chapter 9), section 9.5 (Algorithms 2 and 3, Table 9.3)",
        params=(
            ParamSpec(
                "algorithm",
                str,
                "rrf",
                "which allocation is pushed to YARN (the others are computed for comparison)",
                choices=ALGORITHMS,
            ),
            ParamSpec(
                "iwa", bool, True, "split a queue's result among its child queues (Algorithm 3)"
            ),
            ParamSpec(
                "memory_mb_per_unit",
                float,
                1.0,
                "MB per memory unit of the inputs (1 when demands are in MB)",
                minimum=0.0,
                exclusive_minimum=True,
            ),
        ),
    ),
)
