"""``GET /estimator``: what Justice / PYTHIA has learned (seed 004, Algorithms 3 to 5).

MinCPUFrac, MaxCPUFrac and LastCPUFrac of TRACK_JOB, the correction of Algorithm 5 (smoothed
mean of the fraction errors), the fraction a job submitted now would get, and how many finished
applications taught it. ``GET /estimator/observations`` lists the apps considered, newest first.
Under the Promise policy it also shows the per-signature estimator, rebuilt from the database.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy.orm import Session

from app.api.deps import SessionDep, StateDep
from app.api.jobs_schemas import EstimatorOut, ObservationList, ObservationOut
from app.api.schemas import ms_to_utc
from app.db import jobs_repo
from app.jobs.promise_memory import SHARED, PromiseMemory
from app.jobs.promise_round import admitted_floor
from app.jobs.rounds import AdmissionConfig, capacity, config_from_settings, estimator_summary
from app.policies.justice.core import EstimatorState

router = APIRouter(tags=["jobs"])


@router.get("/estimator", response_model=EstimatorOut)
def get_estimator(session: SessionDep, state: StateDep) -> EstimatorOut:
    """The estimator's current state and the active admission policy."""
    if state.admission is not None:
        cfg = state.admission.peek_cfg(session)  # ``PUT /admission`` may have changed it
    else:
        cfg = config_from_settings(state.settings)
    row = jobs_repo.read_estimator(session)
    est = EstimatorState.from_dict(row.state if row else {})
    _, skipped = jobs_repo.observation_counts(session)
    summary = estimator_summary(est, cfg.params)
    memory = state.admission.promise if state.admission is not None else SHARED
    view = _promise_view(session, cfg, memory)
    return EstimatorOut(
        policy=view.pop("policy", cfg.params.variant),
        smoothing=cfg.params.smoothing,
        alpha=cfg.params.alpha,
        drop_threshold=cfg.params.drop_threshold,
        observations=est.completed,
        skipped=skipped,
        min_cpu_frac=est.min_frac,
        max_cpu_frac=est.max_frac,
        last_cpu_frac=est.last_frac,
        last_success=est.last_success,
        correction=summary["correction"],
        fraction=summary["fraction"],
        capacity_vcores=capacity(session, cfg),
        version=row.version if row else 0,
        updated_at=ms_to_utc(row.updated_ms) if row else None,
        **view,
    )


def _promise_view(session: Session, cfg: AdmissionConfig, memory: PromiseMemory) -> dict[str, Any]:
    """Promise's per-signature entries: the estimator admission plans with, brought up to date
    with the database (the same after a restart, which reads the whole history again). While
    the whole history is being read they are not shown (``loading``); where the admission
    service reads it in the background, a read that finds it needed asks the service to."""
    if cfg.promise is None:
        return {}
    cap = capacity(session, cfg)
    values = dict(cfg.promise)
    view: dict[str, Any] = {
        "policy": "promise",
        "signatures": {},
        "prediction_error": None,
        "startup": None,
        "loading": False,
        "admitted_floor_vcores": admitted_floor(session, values),
    }
    if cap is None:
        return view
    with memory.held(unless_loading=True) as held:
        est = memory.estimator(session, values, cap) if held else None
        if est is None:
            return {**view, "loading": True}
        return {
            **view,
            "signatures": est.entries(),
            "prediction_error": est.totals(),
            "startup": est.startup(),
        }


@router.get("/estimator/observations", response_model=ObservationList)
def list_observations(
    session: SessionDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> ObservationList:
    """Finished applications the estimator considered: learned from, or skipped and why."""
    rows = jobs_repo.observations(session, limit)
    return ObservationList(
        items=[
            ObservationOut(
                app_id=r.app_id,
                job_id=r.job_id,
                source=r.source,
                observed_at=ms_to_utc(r.observed_ms),
                learned=r.learned,
                censored=r.censored,
                tasks=r.tasks,
                deadline_s=r.deadline_s,
                comp_time=r.comp_time,
                cpus=r.cpus,
                success=r.success,
                estimator_version=r.estimator_version,
                reason=r.reason,
            )
            for r in rows
        ]
    )
