"""``GET /profiles``, ``GET /profiles/{signature}``, ``POST /profiles/estimate``: job profiles
from the MapReduce history (HybridMR Phase I and Algorithm 1, PRISM's phase profiles;
``app.policies.hybridmr.profiles``). Read-only; empty until a JobHistory server is read."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, status
from sqlalchemy.orm import Session

from app.api.deps import SessionDep, StateDep
from app.api.history_schemas import (
    EstimateIn,
    EstimateOut,
    ProfileListOut,
    ProfileOut,
    ProfileSummaryOut,
    RunOut,
)
from app.api.schemas import ErrorOut
from app.db import history_repo, repo
from app.policies.hybridmr.profiles import ProfileBook

router = APIRouter(tags=["profiles"])
RECENT_RUNS = 20


def _book(session: Session, cluster_name: str) -> ProfileBook:
    cluster = repo.get_cluster(session, cluster_name)
    if cluster is None:
        return ProfileBook(())
    return ProfileBook(history_repo.runs(session, cluster.id, limit=history_repo.PROFILE_RUNS))


def _known(book: ProfileBook, signature: str) -> None:
    if not book.of(signature):
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"signature: no profile {signature!r} in the history"
        )


@router.get("/profiles", response_model=ProfileListOut)
def list_profiles(session: SessionDep, state: StateDep) -> ProfileListOut:
    """Every job signature with MapReduce history, with its run count and estimation error."""
    book = _book(session, state.settings.cluster_name)
    return ProfileListOut(items=[ProfileSummaryOut(**book.summary(s)) for s in book.signatures()])


@router.get(
    "/profiles/{signature:path}", response_model=ProfileOut, responses={404: {"model": ErrorOut}}
)
def get_profile(
    session: SessionDep,
    state: StateDep,
    signature: Annotated[str, Path(description="A signature as GET /profiles lists it.")],
) -> ProfileOut:
    """One signature: its runs, phase profile and container-size advice."""
    book = _book(session, state.settings.cluster_name)
    _known(book, signature)
    runs = book.of(signature)[-RECENT_RUNS:]
    return ProfileOut(
        **book.summary(signature),
        phases=book.phase_profile(signature),
        recent_runs=[
            RunOut(
                app_id=r.app_id,
                partition=r.partition,
                finished_ms=r.finished_ms,
                input_bytes=r.input_bytes,
                cluster_size=r.cluster_size,
                map_s=r.map_s,
                reduce_s=r.reduce_s,
                total_s=r.total_s,
                tasks=r.tasks,
            )
            for r in reversed(runs)
        ],
    )


@router.post(
    "/profiles/estimate",
    response_model=EstimateOut,
    responses={404: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
def estimate(body: EstimateIn, session: SessionDep, state: StateDep) -> EstimateOut:
    """Completion time of a signature's job on an input size and cluster size (HybridMR
    Algorithm 1), with a band from the signature's 90th-percentile error so far."""
    book = _book(session, state.settings.cluster_name)
    _known(book, body.signature)
    est = book.estimate(body.signature, body.input_bytes, body.cluster_size)
    err = book.errors(body.signature)
    band = err.p90
    total = est.total_s
    return EstimateOut(
        signature=body.signature,
        rule=est.rule,
        map_s=est.map_s,
        reduce_s=est.reduce_s,
        total_s=total,
        low_s=total * max(0.0, 1 - band) if total is not None and band is not None else None,
        high_s=total * (1 + band) if total is not None and band is not None else None,
        error=err.to_dict(),
        reason=est.reason,
    )
