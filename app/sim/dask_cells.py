"""Simulator cells on a Dask cluster: ``simulate compare --executor dask``, the optional engine for
sweeps wider than one machine (the ``dask`` extra; nothing else imports Dask).

The prepared workload (trace loaded, deadlines drawn) is sent to every worker once; each policy is
one task that returns what the report keeps of its run. The simulation is deterministic and a cell
owns its state, so the results equal the serial ones (only ``wall_s`` differs). Without a
scheduler address a local cluster of ``workers`` processes is started for the call and closed
after it; with one, its workers must have this package installed (they import the cell function).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

P = TypeVar("P")
R = TypeVar("R")

EXTRA_HINT = "pip install 'yarn-policy-sidecar[dask]'"


def run_cells(
    cell: Callable[[P, str], R],
    prepared: P,
    names: Sequence[str],
    address: str | None,
    workers: int,
    done: Callable[[int], None] | None = None,
) -> list[R]:
    """``cell(prepared, name)`` for every name on Dask, in the order given; ``done(k)`` after
    the ``k``-th result arrives (progress)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise ValueError(f"--executor dask needs Dask: {EXTRA_HINT}") from exc
    local: Any = None
    target: Any = address
    if address is None:
        # distributed's constructors carry no annotations
        local = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=max(1, workers),
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
        target = local
    try:
        with Client(target) as client:  # type: ignore[no-untyped-call]
            shared = client.scatter(prepared, broadcast=True)
            futures = client.map(cell, [shared] * len(names), list(names), pure=False)
            out: list[R] = []
            for k, future in enumerate(futures, start=1):
                out.append(future.result())
                if done is not None:
                    done(k)
            return out
    finally:
        if local is not None:
            local.close()
