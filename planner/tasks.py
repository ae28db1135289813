"""Celery tasks: thin adapters that receive ids and call the job kinds' services (sweeps, searches, day plans).

Each chunk task runs one chunk through the one job lifecycle (:mod:`planner.jobs`). All are idempotent (a
finished chunk returns at once; results are keyed by ``(job, chunk index)``), so late acknowledgement is safe: a worker
killed mid-chunk leaves the message unacknowledged, another worker runs the
chunk again, and nothing is lost or counted twice. Time limits come from
``CELERY_TASK_TIME_LIMIT`` / ``CELERY_TASK_SOFT_TIME_LIMIT`` (per chunk).
"""

from __future__ import annotations

from celery import shared_task

from planner import healer  # noqa: F401  (registers the worker's healer on worker_ready)
from planner.dayplans import services as dayplan_services
from planner.runs import services as run_services
from planner.search import services as search_services
from planner.sweeps import runner, services

#: The simulator is imported here, in the worker's main process before its pool forks, so that no chunk's
#: time (and no progress estimate made from it) includes the import.
PRELOADED = (runner,)


@shared_task(name="planner.run_sweep_chunk", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_sweep_chunk(sweep_id: int, index: int) -> str:
    """Simulate chunk ``index`` of sweep ``sweep_id`` (one batched simulation) and store it."""
    return services.chunk_run(sweep_id=int(sweep_id), index=int(index))


@shared_task(name="planner.run_cliff_sweep", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_cliff_sweep(sweep_id: int) -> str:
    """Bisect for the cliff of sweep ``sweep_id``; each round is one batched simulation."""
    return services.cliff_run(sweep_id=int(sweep_id))


@shared_task(name="planner.run_search_chunk", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_search_chunk(search_id: int, index: int) -> str:
    """Search chunk ``index`` (one GPU type's candidates) of deployment search ``search_id`` and store it."""
    return search_services.chunk_run(search_id=int(search_id), index=int(index))


@shared_task(name="planner.run_day_plan_chunk", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_day_plan_chunk(plan_id: int, index: int) -> str:
    """Simulate chunk ``index`` of day plan ``plan_id`` from the previous chunk's handover and store it."""
    return dayplan_services.chunk_run(plan_id=int(plan_id), index=int(index))


@shared_task(name="planner.answer_day_plan", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def answer_day_plan(plan_id: int) -> str:
    """Join day plan ``plan_id``'s stored chunks into its answer (a cancelled plan: its finished hours)."""
    return dayplan_services.plan_answer(plan_id=int(plan_id))


@shared_task(name="planner.run_worker_run", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_worker_run(run_id: int, index: int = 0) -> str:
    """Run ``run_id`` (a simulation, replicas search or calibration a web request priced over the inline bound)."""
    return run_services.chunk_run(run_id=int(run_id))
