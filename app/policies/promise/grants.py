"""Grants in waves, and release timelines: the arithmetic each of Promise's decisions is made of.

Grants respect waves: ``n`` tasks on ``g`` containers take ``ceil(n / g)`` task durations
(``waves``), so a grant is always the smallest ``g`` with a given wave count (``aligned``); the
Oracle's grants that do not divide the task count lose a whole partial wave (seed 004, chapter 5).
With divisible work (``PromiseParams.divisible``, the simulator's fluid model) ``n`` tasks take
``n / g``. A round plans on a timeline of the vcores free from each moment on, as running jobs
release their grants (``timeline``). Pure.
"""

from __future__ import annotations

import math

EPS = 1e-9


def waves(tasks: int, cpus: int, divisible: bool = False) -> float:
    """Task waves of ``tasks`` equal tasks on ``cpus`` containers: ``ceil(n / g)``, or ``n / g``
    when the work is ``divisible`` (``PromiseParams.divisible``)."""
    width = min(cpus, tasks)
    return tasks / width if divisible else -(-tasks // width)


def count_waves(w: float) -> str:
    """Waves in a reason: whole ones as they are, divisible ones to two decimals."""
    return str(w) if isinstance(w, int) else f"{w:.2f}"


def aligned(tasks: int, cpus: int, divisible: bool = False) -> int:
    """The fewest containers that give the same number of waves as ``cpus`` (with divisible
    work, every container shortens the run: all of them, up to the task count)."""
    if divisible:
        return min(cpus, tasks)
    return -(-tasks // -(-tasks // min(cpus, tasks)))


def min_grant(
    tasks: int, limit: int, task_s: float, time_left: float, divisible: bool = False
) -> int | None:
    """Smallest grant (``<= limit``) whose waves finish within ``time_left``; None if none."""
    if task_s <= 0:
        return 1
    fit = time_left / task_s + EPS
    if fit < 1:
        return None  # not one task's duration left: no grant runs a task faster
    if divisible:
        g = max(1, math.ceil(tasks / fit))
    else:
        whole = math.floor(fit)
        g = -(-tasks // whole) if whole < tasks else 1
    return g if g <= limit else None


def timeline(free: int, releases: list[tuple[float, int]], now: float) -> list[tuple[float, int]]:
    """``(time, vcores free from then on)`` steps, starting with ``(now, free)``."""
    steps = [(now, free)]
    level = free
    for t, cpus in sorted(releases):
        level += cpus
        if t <= steps[-1][0] + EPS:
            steps[-1] = (steps[-1][0], level)
        else:
            steps.append((t, level))
    return steps


def earliest_finish(
    steps: list[tuple[float, int]], tasks: int, limit: int, task_s: float, am: int, div: bool
) -> tuple[float, float, int]:
    """Earliest (finish, start, grant) over the release steps with the largest grant available."""
    best = (math.inf, math.inf, 0)
    for t, level in steps:
        g = min(limit, level - am)
        if g < 1:
            continue
        g = aligned(tasks, g, div)
        fin = t + waves(tasks, g, div) * task_s
        if fin < best[0] - EPS:
            best = (fin, t, g)
    return best


def first_start(
    steps: list[tuple[float, int]],
    tasks: int,
    limit: int,
    task_s: float,
    due: float,
    am: int,
    div: bool,
) -> tuple[float, int, int] | None:
    """The first release step from which a grant finishes ``tasks`` of ``task_s`` by ``due``:
    ``(time, vcores spare beside it, grant)``; None if none does."""
    for t, level in steps:
        if task_s > 0 and (due - t) / task_s + EPS < 1:
            return None  # not one wave fits, nor from any later step
        need = min_grant(tasks, limit, task_s, due - t, div)
        if need is not None and need + am <= level:
            return (t, level - need - am, need)
    return None
