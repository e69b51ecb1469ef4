"""Promise: deadline admission from per-signature history.

``signature`` (what makes jobs recurring) and ``estimator`` (their work bounds) feed the planner:
``core`` (one round, ``admit``), ``model`` (its inputs, parameters and decisions), ``grants``
(waves and release timelines), ``risk`` (tries, exact grants, promises after a wait,
exploration) and ``loss`` (the arrival meter and the loss system pricing a hold's crowd-out);
``admission`` is its adapter behind the admission seam."""

from dataclasses import replace

from app.policies.promise import admission, core

REGISTRY = tuple(replace(spec, admission=admission.make) for spec in core.REGISTRY)

__all__ = ["REGISTRY"]
