"""RRF and its baselines against Table 9.3 (docs/policies.md "RRF"), IWA by hand, and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.policies.base import PolicyError
from app.policies.rrf import core as rrf
from app.policies.rrf.core import Res, Tenant

TOL = 1e-9

# Table 9.3's input: capacity <20 GHz, 10 GB>; shares and demands per VM.
TABLE_9_3 = {
    "VM1": Tenant(Res(500, 500), Res(6, 3)),
    "VM2": Tenant(Res(500, 500), Res(8, 1)),
    "VM3": Tenant(Res(1000, 1000), Res(8, 8)),
}
CAPACITY = Res(20, 10)

# Rows of docs/policies.md's worked example; wdrf VM2/VM3 are 56/9 and 7/9 (see test_wdrf_by_hand).
EXPECTED: dict[str, dict[str, tuple[float, float]]] = {
    "tshirt": {"VM1": (5, 2.5), "VM2": (5, 2.5), "VM3": (10, 5)},
    "wmmf": {"VM1": (6, 3), "VM2": (6, 1), "VM3": (8, 6)},
    "wdrf": {"VM1": (6, 3), "VM2": (56 / 9, 7 / 9), "VM3": (56 / 9, 56 / 9)},
    "rrf": {"VM1": (5, 2.5), "VM2": (7, 1), "VM3": (8, 6.5)},
}


def assert_alloc(actual: dict[str, Res], expected: dict[str, tuple[float, float]]) -> None:
    assert set(actual) == set(expected)
    for name, (vcores, memory) in expected.items():
        assert actual[name].vcores == pytest.approx(vcores, abs=TOL), name
        assert actual[name].memory == pytest.approx(memory, abs=TOL), name


@pytest.mark.parametrize("algorithm", ["tshirt", "wmmf", "wdrf", "rrf"])
def test_table_9_3_rows(algorithm: str) -> None:
    assert_alloc(rrf.allocate(TABLE_9_3, CAPACITY, algorithm), EXPECTED[algorithm])


def test_wdrf_by_hand() -> None:
    # Weighted dominant share = max_k x_k / S_k(i); S = <5,2.5>, <5,2.5>, <10,5>.
    # Per unit of dominant share: VM1 <5, 2.5> (6/1.2, 3/1.2), VM2 <5, 0.625> (8/1.6, 1/1.6),
    # VM3 <5, 5> (8/1.6, 8/1.6). VM1 reaches its demand at t = 1.2 (CPU 18, memory 9.75 used).
    # Then memory runs out when 3 + (0.625 + 5) t = 10 -> t = 56/45, so VM2 and VM3 get
    # CPU 5 * 56/45 = 56/9 and memory 0.625 * 56/45 = 7/9 (VM2), 5 * 56/45 = 56/9 (VM3).
    alloc = rrf.wdrf(TABLE_9_3, CAPACITY)
    assert alloc["VM2"].vcores == pytest.approx(56 / 9, abs=TOL)
    assert alloc["VM2"].memory == pytest.approx(7 / 9, abs=TOL)
    assert alloc["VM3"].memory == pytest.approx(56 / 9, abs=TOL)
    # CPU is left over: 20 - 6 - 2 * 56/9 = 14/9 (DRF stops when a needed resource runs out).
    assert sum(a.vcores for a in alloc.values()) == pytest.approx(20 - 14 / 9, abs=TOL)


def test_contributions_in_share_units() -> None:
    # 100 shares per GHz, 200 per GB: VM2 lends 1.5 GB = 300 shares, VM3 2 GHz = 200 shares.
    assert rrf.prices(TABLE_9_3, CAPACITY) == Res(100, 200)
    assert rrf.contributions(TABLE_9_3, CAPACITY) == pytest.approx(
        {"VM1": 0.0, "VM2": 300.0, "VM3": 200.0}
    )


def test_free_rider_gains_nothing_and_contributors_trade() -> None:
    alloc = rrf.rrf(TABLE_9_3, CAPACITY)
    initial = rrf.initial_resources(TABLE_9_3, CAPACITY)
    # VM1 contributed nothing: it keeps exactly its initial resources (beta = 1).
    assert alloc["VM1"] == initial["VM1"]
    # VM2 receives all of VM3's spare CPU (10 - 8 = 2 GHz on top of its 5) ...
    spare_cpu_vm3 = initial["VM3"].vcores - TABLE_9_3["VM3"].demand.vcores
    assert alloc["VM2"].vcores == pytest.approx(initial["VM2"].vcores + spare_cpu_vm3, abs=TOL)
    # ... and VM3 all of VM2's spare memory (2.5 - 1 = 1.5 GB on top of its 5).
    spare_mem_vm2 = initial["VM2"].memory - TABLE_9_3["VM2"].demand.memory
    assert alloc["VM3"].memory == pytest.approx(initial["VM3"].memory + spare_mem_vm2, abs=TOL)
    # Under WMMF the free rider takes 1 GHz and 0.5 GB of the others' contributions.
    assert rrf.wmmf(TABLE_9_3, CAPACITY)["VM1"] == Res(6, 3)


def test_economic_fairness_degree() -> None:
    # beta = value received / value paid, in shares: VM1 (5*100 + 2.5*200)/1000 = 1,
    # VM2 (7*100 + 1*200)/1000 = 0.9, VM3 (8*100 + 6.5*200)/2000 = 1.05.
    beta = rrf.economic_fairness(TABLE_9_3, CAPACITY, [rrf.rrf(TABLE_9_3, CAPACITY)])
    assert beta == pytest.approx({"VM1": 1.0, "VM2": 0.9, "VM3": 1.05})
    # Over a window it is the mean: the T-shirt allocation is worth exactly what was paid.
    window = [rrf.rrf(TABLE_9_3, CAPACITY), rrf.tshirt(TABLE_9_3, CAPACITY)]
    beta2 = rrf.economic_fairness(TABLE_9_3, CAPACITY, window)
    assert beta2["VM2"] == pytest.approx((0.9 + 1.0) / 2)
    assert rrf.geometric_mean([1.0, 0.9, 1.05]) == pytest.approx((1.0 * 0.9 * 1.05) ** (1 / 3))


def test_uncontended_resource_gives_everyone_its_demand() -> None:
    # Memory capacity 100 > total demand 12: every allocator except T-shirt hands out demands.
    capacity = Res(20, 100)
    for algorithm in ("rrf", "wmmf", "wdrf"):
        alloc = rrf.allocate(TABLE_9_3, capacity, algorithm)
        for name, tenant in TABLE_9_3.items():
            assert alloc[name].memory == pytest.approx(tenant.demand.memory, abs=TOL), algorithm


def test_leftover_spread_by_initial_shares_when_no_unsatisfied_contributor() -> None:
    # Capacity <20, 20>, shares 1000 / 250 / 750 of 2000 -> S = 10, 2.5, 7.5 of each resource.
    # Memory demands equal the initial shares (uncontended: 20 <= 20). CPU: A needs 6 of its 10 and
    # lends 4 GHz = 400 shares; B and C are unsatisfied and contributed nothing (Lambda 0), so
    # the 4 spare GHz go 2.5 : 7.5 = 1 : 3 by initial shares: B 2.5 + 1 = 3.5, C 7.5 + 3 = 10.5.
    tenants = {
        "A": Tenant(Res(1000, 1000), Res(6, 10)),
        "B": Tenant(Res(250, 250), Res(10, 2.5)),
        "C": Tenant(Res(750, 750), Res(20, 7.5)),
    }
    assert rrf.contributions(tenants, Res(20, 20)) == pytest.approx({"A": 400, "B": 0, "C": 0})
    alloc = rrf.rrf(tenants, Res(20, 20))
    assert_alloc(alloc, {"A": (6, 10), "B": (3.5, 2.5), "C": (10.5, 7.5)})


def test_iwa_splits_by_unsatisfied_demand() -> None:
    # Tenant A (shares <500,500>) with VMs a1 <200,200>, a2 <200,200>, a3 <100,100>; tenant B
    # <500,500>. Capacity <10,10>, so S(A) = <5,5> and the VMs' initial resources are <2,2>,
    # <2,2>, <1,1>. VM demands: a1 <1,4>, a2 <1,3>, a3 <3,0> -> A demands <5,7>; B <6,6>.
    vms = {
        "a1": Tenant(Res(200, 200), Res(1, 4)),
        "a2": Tenant(Res(200, 200), Res(1, 3)),
        "a3": Tenant(Res(100, 100), Res(3, 0)),
    }
    tenants = {"A": Tenant(Res(500, 500), Res(5, 7)), "B": Tenant(Res(500, 500), Res(6, 6))}
    capacity = Res(10, 10)
    alloc = rrf.rrf(tenants, capacity)
    # Nobody lends anything (A's CPU demand equals its share), so A keeps <5,5>.
    assert alloc["A"] == Res(5, 5)
    split = rrf.iwa(vms, rrf.initial_resources(tenants, capacity)["A"], alloc["A"])
    # vcores: Phi = 5 - 5 + (2-1) + (2-1) = 2, Gamma = 3-1 = 2 -> a3 = 1 + 2/2*2 = 3.
    # memory: Phi = 0 + (1-0) = 1, Gamma = (4-2) + (3-2) = 3 -> a1 = 2 + 2/3, a2 = 2 + 1/3.
    assert_alloc(split, {"a1": (1, 8 / 3), "a2": (1, 7 / 3), "a3": (3, 0)})


def test_iwa_caps_at_vm_demand_when_tenant_has_surplus() -> None:
    # Phi (4) exceeds Gamma (1): line 9 would give 1 + 1/1*4 = 5 > demand 2, so it is capped.
    vms = {"x": Tenant(Res(1, 1), Res(2, 1)), "y": Tenant(Res(1, 1), Res(1, 1))}
    split = rrf.iwa(vms, Res(2, 2), Res(6, 2))
    assert split["x"].vcores == 2
    assert split["y"].vcores == 1


def test_yarn_absolute_capacities() -> None:
    alloc = rrf.rrf(TABLE_9_3, CAPACITY)
    # GB -> MB: 2.5 GB = 2560, 1 GB = 1024, 6.5 GB = 6656.
    assert rrf.yarn_absolute_capacities(alloc, memory_mb_per_unit=1024) == {
        "VM1": "[memory=2560,vcores=5]",
        "VM2": "[memory=1024,vcores=7]",
        "VM3": "[memory=6656,vcores=8]",
    }
    # Largest remainder: 1.5 + 1.5 + 1.0 = 4 vcores; floors 1+1+1, the extra one goes to the
    # first of the tied remainders (by name). Memory 100.4 + 100.4 + 100.2 = 301: floors 300,
    # the extra MB to the largest remainder (0.4, tie a/b -> a), never above floor(301).
    caps = rrf.yarn_absolute_capacities(
        {"a": Res(1.5, 100.4), "b": Res(1.5, 100.4), "c": Res(1.0, 100.2)}
    )
    assert caps == {
        "a": "[memory=101,vcores=2]",
        "b": "[memory=100,vcores=1]",
        "c": "[memory=100,vcores=1]",
    }


def test_queue_capacities_for_parent_and_child_queues() -> None:
    tenants = {
        "root.a": Tenant(Res(500, 500), Res(5, 7)),
        "root.b": Tenant(Res(500, 500), Res(6, 6)),
    }
    vms = {
        "root.a": {
            "x": Tenant(Res(200, 200), Res(1, 4)),
            "y": Tenant(Res(200, 200), Res(1, 3)),
            "z": Tenant(Res(100, 100), Res(3, 0)),
        }
    }
    caps = rrf.queue_capacities(tenants, Res(10, 10), vms, {"memory_mb_per_unit": 1024})
    # root.a keeps <5, 5> (5120 MB); IWA gives x <1, 8/3 GB = 2730.67 MB>, y <1, 7/3 GB =
    # 2389.33 MB>, z <3, 0>: floors 2730 + 2389 = 5119 of floor(5120) -> the extra MB to x (.67).
    assert caps == {
        "root.a": "[memory=5120,vcores=5]",
        "root.b": "[memory=5120,vcores=5]",
        "root.a.x": "[memory=2731,vcores=1]",
        "root.a.y": "[memory=2389,vcores=1]",
        "root.a.z": "[memory=0,vcores=3]",
    }
    # Without IWA the children split <5, 5> by their shares 2 : 2 : 1.
    static = rrf.queue_capacities(tenants, Res(10, 10), vms, {"iwa": False})
    assert static["root.a.x"] == "[memory=2,vcores=2]"
    assert static["root.a.z"] == "[memory=1,vcores=1]"
    with pytest.raises(PolicyError) as err:
        rrf.queue_capacities(tenants, Res(10, 10), {"root.c": {}}, None)
    assert err.value.field == "vms.root.c"


@pytest.mark.parametrize(
    ("tenants", "capacity", "field"),
    [
        (TABLE_9_3, Res(0, 10), "capacity.vcores"),
        ({"VM2": Tenant(Res(1, 1), Res(1, -1))}, CAPACITY, "tenants.VM2.demand.memory"),
        ({"VM1": Tenant(Res(0, 1), Res(1, 1))}, CAPACITY, "tenants.*.shares.vcores"),
        ({}, CAPACITY, "tenants"),
    ],
)
def test_invalid_input_names_the_field(
    tenants: dict[str, Tenant], capacity: Res, field: str
) -> None:
    with pytest.raises(PolicyError) as err:
        rrf.rrf(tenants, capacity)
    assert err.value.field == field


def test_unknown_algorithm() -> None:
    with pytest.raises(PolicyError) as err:
        rrf.allocate(TABLE_9_3, CAPACITY, "drf2")
    assert err.value.field == "algorithm"


def test_registry_entry() -> None:
    (spec,) = rrf.REGISTRY
    assert (spec.name, spec.kind) == ("rrf", "queue")
    assert spec.defaults() == {"algorithm": "rrf", "iwa": True, "memory_mb_per_unit": 1.0}
    with pytest.raises(PolicyError) as err:
        spec.validate({"algorithm": "fifo"})
    assert err.value.field == "algorithm"


# ---------------------------------------------------------------- properties

amount = st.floats(min_value=0, max_value=100, allow_nan=False).map(lambda x: round(x, 3))
share = st.floats(min_value=1, max_value=1000, allow_nan=False).map(lambda x: round(x, 3))
tenant = st.builds(Tenant, st.builds(Res, share, share), st.builds(Res, amount, amount))
tenant_sets = st.dictionaries(st.sampled_from("ABCDEFGH"), tenant, min_size=1, max_size=8)
capacities = st.builds(
    Res,
    st.floats(min_value=1, max_value=200).map(lambda x: round(x, 3)),
    st.floats(min_value=1, max_value=200).map(lambda x: round(x, 3)),
)
SLACK = 1e-7


@settings(max_examples=150, deadline=None)
@given(tenant_sets, capacities, st.sampled_from(["rrf", "wmmf", "wdrf"]))
def test_never_above_demand_or_capacity(
    tenants: dict[str, Tenant], capacity: Res, algorithm: str
) -> None:
    alloc = rrf.allocate(tenants, capacity, algorithm)
    for resource in rrf.RESOURCES:
        total = sum(a[resource] for a in alloc.values())
        assert total <= capacity[resource] * (1 + SLACK) + SLACK
        for name, t in tenants.items():
            assert -SLACK <= alloc[name][resource] <= t.demand[resource] + SLACK


@settings(max_examples=150, deadline=None)
@given(tenant_sets, capacities)
def test_work_conserving_on_contended_resources(tenants: dict[str, Tenant], capacity: Res) -> None:
    # WMMF and RRF hand out all of a contended resource (total demand above capacity).
    for algorithm in ("rrf", "wmmf"):
        alloc = rrf.allocate(tenants, capacity, algorithm)
        for resource in rrf.RESOURCES:
            demand = sum(t.demand[resource] for t in tenants.values())
            if demand > capacity[resource]:
                total = sum(a[resource] for a in alloc.values())
                assert math.isclose(total, capacity[resource], rel_tol=1e-9, abs_tol=1e-7)


@settings(max_examples=200, deadline=None)
@given(tenant_sets, capacities)
def test_non_contributor_never_exceeds_share_while_contributor_unsatisfied(
    tenants: dict[str, Tenant], capacity: Res
) -> None:
    alloc = rrf.rrf(tenants, capacity)
    initial = rrf.initial_resources(tenants, capacity)
    lam = rrf.contributions(tenants, capacity)
    for resource in rrf.RESOURCES:
        contributor_short = any(
            lam[n] > 0 and alloc[n][resource] < t.demand[resource] - SLACK
            for n, t in tenants.items()
        )
        if not contributor_short:
            continue
        for name in tenants:
            if lam[name] == 0:
                assert alloc[name][resource] <= initial[name][resource] + SLACK


vm_sets = st.dictionaries(st.sampled_from("uvwxyz"), tenant, min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(vm_sets, tenant_sets, capacities)
def test_iwa_hands_out_the_tenant_result_within_vm_demands(
    vms: dict[str, Tenant], others: dict[str, Tenant], capacity: Res
) -> None:
    # The VMs form tenant "T" (demand = their sum) next to other tenants; RRF decides T's share.
    demand = Res(*(sum(v.demand[r] for v in vms.values()) for r in rrf.RESOURCES))
    shares = Res(*(sum(v.shares[r] for v in vms.values()) for r in rrf.RESOURCES))
    tenants = {**others, "T": Tenant(shares, demand)}
    alloc = rrf.rrf(tenants, capacity)["T"]
    split = rrf.iwa(vms, rrf.initial_resources(tenants, capacity)["T"], alloc)
    for resource in rrf.RESOURCES:
        assert math.isclose(
            sum(s[resource] for s in split.values()), alloc[resource], rel_tol=1e-9, abs_tol=1e-7
        )
        for name, vm in vms.items():
            assert -SLACK <= split[name][resource] <= vm.demand[resource] + SLACK
