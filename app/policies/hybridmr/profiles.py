"""HybridMR's Phase I profile database built from the cluster's own MapReduce history (seed
``001``, section III-A1): per job signature, the completed runs with their input size, cluster
size and map / reduce / total times; Algorithm 1 (``core.estimate``) over them; the estimation
error each signature has shown so far; PRISM's phase profile (seed ``003``, section 3: per phase
duration and vcores, peak against mean) and the container-size advice that follows from it.

Pure: the database layer (``app.db.history_repo``) hands in the runs. A run names its signature's
fallback chain as plain strings (most specific first, the same rule the admission estimator uses,
``app.policies.promise.signature``), so this folder imports no other policy.

Decisions where the papers are silent:

* HybridMR's job class is the signature. A run's partition is ``native`` when its application
  asked for a node-label partition (the dedicated nodes), else ``virtual`` (the shared default
  partition). Estimates for a partition use that partition's runs only (virtualisation, here
  co-location, is what the partitions differ in); a signature's slowdown is the median run time
  on the shared partition over the median on the dedicated one, once both have runs.
* ``expected`` for a job of unknown input (a waiting or running job) is the median total time of
  the most specific chain level with at least ``min_runs`` runs; with a known input size
  Algorithm 1 decides (runs without input, such as ``SleepJob``, are left out of it).
* Estimation error is measured the way it is used: each run, in finishing order, is estimated from
  the runs of its signature before it (Algorithm 1 when both have input sizes, else the median of
  the earlier totals); the error is ``|estimate - actual| / actual``, reported as the mean (the
  paper's ~10.8 %) and the 90th percentile, which ``POST /profiles/estimate`` uses as its band.
* Placement (Algorithm 2) on YARN: the shared default partition is HybridMR's virtual one
  (interference from co-located work), a node-label partition of dedicated nodes its native one.
  A batch job goes to the labelled partition exactly when its estimated completion on the shared
  partition is at least its desired completion time (a deadline job: the time left to its
  deadline). The estimate is Algorithm 1 over the shared partition's runs when the job's input
  size and sized runs of its signature exist, else the median run time of the most specific
  level of its chain on the shared partition. Without any
  estimate the job stays on the shared partition: sending work without evidence to the small
  dedicated partition would crowd out the jobs that need it (the paper's default, native, assumes
  a cluster that is mostly native).
* Container-size advice (PRISM sizes each phase's containers from its profile): a phase's
  vcores per task are its measured vcore-milliseconds over its task-milliseconds; the advice is to
  request that many vcores (at least 1, rounded up) per task of the phase.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.policies.hybridmr import core

MIN_RUNS = 1


@dataclass(frozen=True, slots=True)
class Run:
    """One finished MapReduce job of the history."""

    app_id: str
    chain: tuple[str, ...]  # signature first, most specific to least
    finished_ms: int
    input_bytes: float
    cluster_size: float
    map_s: float
    reduce_s: float
    total_s: float
    tasks: int
    map_tasks: int = 0
    reduce_tasks: int = 0
    map_mean_vcores: float = 0.0
    map_peak_vcores: float = 0.0
    reduce_mean_vcores: float = 0.0
    reduce_peak_vcores: float = 0.0
    map_vcores_per_task: float = 1.0
    reduce_vcores_per_task: float = 1.0
    partition: str = "virtual"

    @property
    def signature(self) -> str:
        """The most specific key."""
        return self.chain[0]

    def observation(self) -> core.Observation | None:
        """The HybridMR profile row, None without an input size or a cluster size."""
        if self.input_bytes <= 0 or self.cluster_size <= 0:
            return None
        return core.Observation(
            self.signature,
            self.partition,
            self.input_bytes,
            self.cluster_size,
            max(0.0, self.map_s),
            max(0.0, self.reduce_s),
            max(0.0, self.total_s),
        )


@dataclass(frozen=True, slots=True)
class ErrorStats:
    """How far a signature's estimates have been from its runs."""

    samples: int
    mean: float | None
    p90: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"samples": self.samples, "mean": self.mean, "p90": self.p90}


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[k]


def _estimate_from(earlier: Sequence[Run], run: Run) -> float | None:
    if not earlier:
        return None
    obs = run.observation()
    rows = [o for o in (r.observation() for r in earlier) if o is not None]
    if obs is not None and rows:
        est = core.estimate(
            core.ProfileDB(tuple(rows)),
            run.signature,
            obs.input_bytes,
            obs.cluster_size,
            run.partition,
        )
        if est.total_s is not None:
            return est.total_s
    return statistics.median(r.total_s for r in earlier)


class ProfileBook:
    """The profiles of every signature seen, from runs in finishing order."""

    def __init__(self, runs: Iterable[Run], *, min_runs: int = MIN_RUNS) -> None:
        self.runs = tuple(sorted(runs, key=lambda r: (r.finished_ms, r.app_id)))
        self.min_runs = max(1, min_runs)
        self._by_key: dict[str, list[Run]] = {}
        for run in self.runs:
            for key in run.chain:
                self._by_key.setdefault(key, []).append(run)

    def signatures(self) -> list[str]:
        """Every signature with at least one run, sorted."""
        return sorted({r.signature for r in self.runs})

    def of(self, signature: str) -> list[Run]:
        """The runs of one signature, in finishing order."""
        return [r for r in self._by_key.get(signature, []) if r.signature == signature]

    def level(
        self, chain: Sequence[str], partition: str | None = None
    ) -> tuple[str, list[Run]] | None:
        """The most specific key of ``chain`` with at least ``min_runs`` runs (on ``partition``
        only, when given)."""
        for key in chain:
            runs = self._by_key.get(key, [])
            if partition is not None:
                runs = [r for r in runs if r.partition == partition]
            if len(runs) >= self.min_runs:
                return key, runs
        return None

    def expected_total_s(self, chain: Sequence[str], partition: str | None = None) -> float | None:
        """Median total time at the most specific known level (module docstring)."""
        found = self.level(chain, partition)
        return statistics.median(r.total_s for r in found[1]) if found else None

    def slowdown(self, signature: str) -> float | None:
        """Median run time on the shared partition over that on the dedicated one."""
        shared = [r.total_s for r in self.of(signature) if r.partition == "virtual"]
        dedicated = [r.total_s for r in self.of(signature) if r.partition == "native"]
        if not shared or not dedicated or statistics.median(dedicated) <= 0:
            return None
        return statistics.median(shared) / statistics.median(dedicated)

    def expected_input_bytes(self, chain: Sequence[str]) -> float | None:
        """Mean input size at the most specific level whose runs read input."""
        for key in chain:
            sizes = [r.input_bytes for r in self._by_key.get(key, []) if r.input_bytes > 0]
            if len(sizes) >= self.min_runs:
                return sum(sizes) / len(sizes)
        return None

    def estimate(
        self, signature: str, input_bytes: float, cluster_size: float, partition: str = "virtual"
    ) -> core.Estimate:
        """Algorithm 1 over the signature's runs with an input size."""
        rows = tuple(o for o in (r.observation() for r in self.of(signature)) if o is not None)
        return core.estimate(core.ProfileDB(rows), signature, input_bytes, cluster_size, partition)

    def errors(self, signature: str) -> ErrorStats:
        """Relative errors of estimating each run from the runs before it (module docstring)."""
        runs = self.of(signature)
        errs: list[float] = []
        for k, run in enumerate(runs):
            est = _estimate_from(runs[:k], run)
            if est is not None and run.total_s > 0:
                errs.append(abs(est - run.total_s) / run.total_s)
        if not errs:
            return ErrorStats(0, None, None)
        return ErrorStats(len(errs), sum(errs) / len(errs), _quantile(errs, 0.9))

    def phase_profile(self, signature: str) -> dict[str, Any]:
        """PRISM's phase profile of a signature: mean per phase over its runs, and the advice."""
        runs = self.of(signature)
        if not runs:
            return {}
        out: dict[str, Any] = {}
        for phase in ("map", "reduce"):
            per_task = [getattr(r, f"{phase}_vcores_per_task") for r in runs]
            vcores = max(per_task)
            out[phase] = {
                "duration_s": _mean([getattr(r, f"{phase}_s") for r in runs]),
                "tasks": _mean([getattr(r, f"{phase}_tasks") for r in runs]),
                "mean_vcores": _mean([getattr(r, f"{phase}_mean_vcores") for r in runs]),
                "peak_vcores": _mean([getattr(r, f"{phase}_peak_vcores") for r in runs]),
                "vcores_per_task": vcores,
                "advice": {"vcores_per_container": max(1, math.ceil(vcores - 1e-9))},
            }
        return out

    def summary(self, signature: str) -> dict[str, Any]:
        """One signature's entry of ``GET /profiles``."""
        runs = self.of(signature)
        sized = [r.input_bytes for r in runs if r.input_bytes > 0]
        return {
            "signature": signature,
            "runs": len(runs),
            "partitions": {
                p: sum(1 for r in runs if r.partition == p)
                for p in ("virtual", "native")
                if any(r.partition == p for r in runs)
            },
            "slowdown": self.slowdown(signature),
            "median_total_s": statistics.median(r.total_s for r in runs) if runs else None,
            "mean_input_bytes": sum(sized) / len(sized) if sized else None,
            "last_finished_ms": runs[-1].finished_ms if runs else None,
            "error": self.errors(signature).to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Placement:
    """Algorithm 2's choice for one live job, with the numbers behind it."""

    partition: str  # "native" (the labelled partition) or "virtual" (the shared one)
    estimate_s: float | None
    desired_s: float
    rule: str | None
    reason: str

    def numbers(self) -> dict[str, Any]:
        """The numbers behind the choice, for the job's decision record (beside its reason)."""
        return {
            "partition": self.partition,
            "estimate_s": self.estimate_s,
            "desired_s": self.desired_s,
            "rule": self.rule,
        }


def place(
    book: ProfileBook,
    chain: Sequence[str],
    input_bytes: float | None,
    desired_s: float,
    shared_size: float,
) -> Placement:
    """Algorithm 2 for one batch job on the shared partition of ``shared_size`` vcores (module
    docstring)."""
    estimate_s: float | None = None
    rule: str | None = None
    if input_bytes and input_bytes > 0 and shared_size > 0:
        est = book.estimate(chain[0], input_bytes, shared_size, "virtual")
        estimate_s, rule = est.total_s, est.rule
    if estimate_s is None:
        found = book.level(chain, "virtual")
        if found is not None:
            estimate_s = statistics.median(r.total_s for r in found[1])
            rule = f"median of {len(found[1])} shared-partition runs of {found[0]}"
    if estimate_s is None:
        why = "no profile of this job: it stays on the shared partition"
        return Placement("virtual", None, desired_s, None, why)
    if estimate_s >= desired_s:
        why = (
            f"shared-partition estimate {estimate_s:.6g} s >= desired {desired_s:.6g} s "
            f"({rule}): the shared partition would miss it"
        )
        return Placement("native", estimate_s, desired_s, rule, why)
    why = (
        f"shared-partition estimate {estimate_s:.6g} s < desired {desired_s:.6g} s ({rule}): "
        "the shared partition meets it"
    )
    return Placement("virtual", estimate_s, desired_s, rule, why)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
