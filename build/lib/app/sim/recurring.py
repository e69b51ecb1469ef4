"""A seeded synthetic mix of recurring jobs: the workload history-based estimation is for
(3Sigma, Jockey: most production jobs are re-runs of a few templates whose work repeats).

``templates`` job templates, each a (user, task count, task seconds) drawn once like
``trace.synthetic`` draws a job (60 % one-task, log-uniform tail, log-normal task times); every job
picks a template (Zipf-like weights, so a few templates recur often) and varies its task time by
a log-normal factor of ``run_sigma``. Users are the templates' owners (``user``), queues ``a``
and ``b``; each job carries its template's name, as a recurring YARN application does.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from app.sim.jobs import SimJob


@dataclass(frozen=True, slots=True)
class RecurringSpec:
    """Parameters of the generator."""

    jobs: int = 2000
    templates: int = 60
    users: int = 12
    mean_interarrival_s: float = 5.0
    one_task_fraction: float = 0.6
    max_tasks: int = 2000
    task_median_s: float = 30.0
    task_sigma: float = 1.0
    run_sigma: float = 0.15


def recurring(spec: RecurringSpec, seed: int) -> list[SimJob]:
    """Reproducible: the same ``(spec, seed)`` always gives the same jobs."""
    rng = random.Random(seed)
    templates: list[tuple[str, str, str, int, float]] = []
    for k in range(spec.templates):
        user = str(rng.randrange(spec.users))
        queue = "a" if rng.random() < 0.7 else "b"
        if rng.random() < spec.one_task_fraction:
            tasks = 1
        else:
            tasks = max(2, int(math.exp(rng.uniform(math.log(2), math.log(spec.max_tasks)))))
        task_s = rng.lognormvariate(math.log(spec.task_median_s), spec.task_sigma)
        templates.append((_template_name(k), user, queue, tasks, task_s))
    weights = [1.0 / (k + 1) for k in range(spec.templates)]
    t = 0.0
    jobs: list[SimJob] = []
    for i in range(spec.jobs):
        t += rng.expovariate(1.0 / spec.mean_interarrival_s)
        name, user, queue, tasks, task_s = rng.choices(templates, weights)[0]
        work = tasks * task_s * rng.lognormvariate(0.0, spec.run_sigma)
        jobs.append(SimJob(f"r{i}", t, tasks, work, queue=queue, user=user, name=name))
    return jobs


def _template_name(k: int) -> str:
    """``etl-b``, ``etl-ba``...: letters only, so signature normalisation keeps them apart."""
    letters = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        letters = chr(ord("a") + r) + letters
    return f"etl-{letters}"
