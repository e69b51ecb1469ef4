"""Who lent what to whom in one stretch of measured usage (seed 002, section 9.4.2: under the
loan agreement a tenant lends the unused part of its share *to others*; 9.4.3: when B does not
take A's unused resources, A's total simply stays lower - nothing was lent).

Per rectangle of the ledger (usage ``u_i`` and entitlement ``e_i`` in vcores, held for ``dt``):

* a lender has spare ``s_i = max(0, e_i - u_i)``, a borrower uses ``b_j = max(0, u_j - e_j)``
  beyond its entitlement;
* everything borrowed was lent: the lenders lend ``B = sum b_j`` between them in proportion to
  their spare, ``lent_i = s_i * B / S`` (``S = sum s_i``), and lender ``i`` lent
  ``s_i / S * b_j`` to borrower ``j``;
* the debt moves by ``lent_i - borrowed_i``: the debts of all queues always sum to 0, and an
  interval in which nobody borrowed (an idle cluster) changes no debt.

When the queues use more than the entitlements cover (``B > S``: usage on a NodeManager that is
not counted in the cluster's size, such as one being decommissioned that still runs containers,
or a poll taken before the NodeManagers re-registered), the lenders lend all their spare and each
borrower is charged its part of that, ``borrowed_j = b_j * S / B``: what no queue could have lent
is no debt, so the debts still sum to 0.

``entitlement`` mode is the former reading, kept as an option: the debt moves by ``e_i - u_i``,
so an entitled queue "lends" its unused entitlement even when nobody uses it. Entitlements sum to
the cluster (over the entitled queues) and usage normally does not exceed it, so ``B <= S`` and
the two modes agree whenever the cluster is fully used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

USED = "used"
ENTITLEMENT = "entitlement"
MODES = (USED, ENTITLEMENT)


@dataclass(frozen=True, slots=True)
class Loans:
    """Rates (vcores) over one rectangle: lent and borrowed per queue, and lender -> borrower."""

    lent: Mapping[str, float]
    borrowed: Mapping[str, float]
    to: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def debt_rate(self, queues: Mapping[str, object]) -> dict[str, float]:
        """``lent_i - borrowed_i`` per queue of ``queues``."""
        return {q: self.lent.get(q, 0.0) - self.borrowed.get(q, 0.0) for q in queues}


def loans(used: Mapping[str, float], entitlement: Mapping[str, float], mode: str = USED) -> Loans:
    """The loans of one rectangle (see the module docstring)."""
    names = sorted(set(used) | set(entitlement))
    spare = {q: max(0.0, entitlement.get(q, 0.0) - used.get(q, 0.0)) for q in names}
    beyond = {q: max(0.0, used.get(q, 0.0) - entitlement.get(q, 0.0)) for q in names}
    total_spare, total_beyond = sum(spare.values()), sum(beyond.values())
    to: dict[str, dict[str, float]] = {}
    if total_spare > 0 and total_beyond > 0:
        # B <= S unless the RM reports more in use than the entitled cluster (a node leaving):
        # nobody lends more than its spare
        scale = min(1.0, total_beyond / total_spare)
        for lender, s in spare.items():
            if s > 0:
                to[lender] = {b: s * scale * v / total_beyond for b, v in beyond.items() if v > 0}
    if mode == ENTITLEMENT:
        # every unused entitled vcore counts as lent, whether or not anyone used it
        return Loans(spare, beyond, to)
    lent = {q: sum(to.get(q, {}).values()) for q in names}
    covered = min(1.0, total_spare / total_beyond) if total_beyond > 0 else 0.0
    return Loans(lent, {q: b * covered for q, b in beyond.items()}, to)
