"""Writes for sweeps and reports: create, run a chunk, run a cliff search, cancel, report.

Celery tasks (``planner/tasks.py``) only call :func:`chunk_run` and
:func:`cliff_run` with ids. Both are idempotent: a chunk that is already done
returns at once, results are written with ``update_or_create`` keyed by
``(sweep, chunk index)`` and the sweep's count of finished points is
recomputed from the chunks (never incremented), so a task delivered twice
(``acks_late`` after a worker died) neither loses nor duplicates a point.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from config.celery import app as celery_app
from planner.models import Report, Sweep, SweepChunk
from planner.sweeps import definition as defn
from planner.sweeps.cliff import find_cliff, max_evaluations

logger = logging.getLogger(__name__)

#: Seconds between progress writes from inside a running simulation.
PROGRESS_INTERVAL_S = 0.5


class SweepCancelled(Exception):
    """Raised inside a running simulation when its sweep was cancelled."""


#: Names of the Celery tasks of :mod:`planner.tasks` this module sends (``@shared_task(name=...)``).
CHUNK_TASK = "planner.run_sweep_chunk"
CLIFF_TASK = "planner.run_cliff_sweep"

def _queue() -> str | None:
    return getattr(settings, "KVP_SWEEP_QUEUE", None) or None


# --------------------------------------------------------------------------- create


def sweep_create(*, owner, definition: Any) -> Sweep:
    """Validate ``definition``, store the sweep and its chunks, enqueue after commit.

    Raises :class:`planner.sweeps.definition.DefinitionError` (messages per field).
    """
    norm, snapshot, points = defn.validate(definition, owner=owner)
    with transaction.atomic():
        if norm["mode"] == "grid":
            chunks = defn.plan_chunks(points)
            sweep = Sweep.objects.create(
                owner=owner, name=norm["name"] or _default_name(snapshot), mode=Sweep.Mode.GRID,
                definition=norm, snapshot=snapshot, total_points=len(points), num_chunks=len(chunks))
            SweepChunk.objects.bulk_create([
                SweepChunk(sweep=sweep, index=i, workload=c["workload"], points=c["points"],
                           task_id=str(uuid.uuid4()))
                for i, c in enumerate(chunks)
            ])
        else:
            c = snapshot["cliff"]
            sweep = Sweep.objects.create(
                owner=owner, name=norm["name"] or _default_name(snapshot), mode=Sweep.Mode.CLIFF,
                definition=norm, snapshot=snapshot,
                total_points=max_evaluations(c["lo"], c["hi"], c["resolution"]), num_chunks=0)
        sweep_id = sweep.pk
        transaction.on_commit(lambda: sweep_enqueue(sweep_id))
    return sweep


def _default_name(snapshot: dict) -> str:
    parts = []
    if snapshot.get("model"):
        parts.append(snapshot["model"]["spec"]["name"])
    if snapshot.get("gpu"):
        parts.append(snapshot["gpu"]["spec"]["name"])
    if snapshot.get("cliff"):
        parts.append(f"cliff in {snapshot['cliff']['param']}")
    else:
        parts.append(" x ".join(a["param"] for a in snapshot["axes"]) + " sweep")
    return ", ".join(parts)[:200]


def sweep_enqueue(sweep_id: int) -> None:
    """Send the sweep's tasks to the broker (chunk tasks in parallel, or one cliff task).

    By task name: :mod:`planner.tasks` calls into this module, so it is not imported here.
    """
    sweep = Sweep.objects.get(pk=sweep_id)
    queue = _queue()
    opts = {"queue": queue} if queue else {}
    if sweep.mode == Sweep.Mode.CLIFF:
        celery_app.send_task(CLIFF_TASK, args=[sweep.pk], task_id=f"sweep-{sweep.pk}-cliff-{uuid.uuid4()}", **opts)
        return
    for chunk in sweep.chunks.filter(status=SweepChunk.Status.PENDING).only("index", "task_id"):
        celery_app.send_task(CHUNK_TASK, args=[sweep.pk, chunk.index], task_id=chunk.task_id, **opts)


# --------------------------------------------------------------------------- run


class _Progress:
    """Throttled progress writer that also notices a cancelled sweep."""

    def __init__(self, sweep_id: int, chunk_id: int | None) -> None:
        self.sweep_id, self.chunk_id = sweep_id, chunk_id
        self.last = 0.0

    def __call__(self, fraction: float) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL_S:
            return
        self.last = now
        if self.chunk_id is not None:
            SweepChunk.objects.filter(pk=self.chunk_id).update(progress=max(0.0, min(1.0, float(fraction))))
        if Sweep.objects.filter(pk=self.sweep_id, status=Sweep.Status.CANCELLED).exists():
            raise SweepCancelled()


def _workload_of(sweep: Sweep, variant: dict):
    from planner.sweeps.runner import build_workload

    base = sweep.snapshot["workload"]
    return build_workload(variant, base.get("trace"), base.get("format", "csv"))


def _mark_running(sweep_id: int) -> None:
    Sweep.objects.filter(pk=sweep_id, status=Sweep.Status.QUEUED).update(
        status=Sweep.Status.RUNNING, started_at=timezone.now())


def chunk_run(*, sweep_id: int, index: int) -> str:
    """Run one chunk (ONE batched simulation) and store its results; idempotent.

    Returns what happened: ``done``, ``already-done``, ``skipped``, ``missing``, ``failed``.
    """
    from planner.sweeps.runner import simulate_points

    chunk = SweepChunk.objects.select_related("sweep").filter(sweep_id=sweep_id, index=index).first()
    if chunk is None:
        return "missing"
    if chunk.status == SweepChunk.Status.DONE:
        return "already-done"
    sweep = chunk.sweep
    if sweep.is_final:
        SweepChunk.objects.filter(pk=chunk.pk).exclude(status=SweepChunk.Status.DONE).update(
            status=SweepChunk.Status.SKIPPED)
        return "skipped"
    _mark_running(sweep_id)
    SweepChunk.objects.filter(pk=chunk.pk).update(status=SweepChunk.Status.RUNNING, started_at=timezone.now(),
                                                  attempts=chunk.attempts + 1, progress=0.0)
    try:
        wl = _workload_of(sweep, chunk.workload)
        results = simulate_points(wl, chunk.points, record_steps=True, progress=_Progress(sweep_id, chunk.pk))
    except SweepCancelled:
        SweepChunk.objects.filter(pk=chunk.pk).update(status=SweepChunk.Status.SKIPPED)
        return "skipped"
    except Exception as exc:  # noqa: BLE001 - stored and shown; the sweep fails with the reason
        from celery.exceptions import SoftTimeLimitExceeded

        msg = "time limit exceeded for this chunk" if isinstance(exc, SoftTimeLimitExceeded) else \
            f"{type(exc).__name__}: {exc}"
        logger.exception("sweep %s chunk %s failed", sweep_id, index)
        SweepChunk.objects.filter(pk=chunk.pk).update(status=SweepChunk.Status.FAILED, error=msg[:2000])
        _fail(sweep_id, f"chunk {index}: {msg}")
        return "failed"
    chunk_store(sweep_id=sweep_id, index=index, results=results)
    return "done"


def chunk_store(*, sweep_id: int, index: int, results: list[dict], workload: dict | None = None,
                points: list[dict] | None = None) -> SweepChunk:
    """Write a chunk's results (keyed by ``(sweep, index)``) and gather the sweep if it is complete."""
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep_id)
        defaults: dict[str, Any] = {"results": results, "status": SweepChunk.Status.DONE,
                                    "finished_at": timezone.now(), "progress": 1.0, "error": ""}
        if workload is not None:
            defaults["workload"] = workload
        if points is not None:
            defaults["points"] = points
        chunk, _ = SweepChunk.objects.update_or_create(sweep=sweep, index=index, defaults=defaults)
        _recount(sweep)
        if sweep.mode == Sweep.Mode.GRID and sweep.status not in Sweep.FINAL_STATES:
            if not sweep.chunks.exclude(status=SweepChunk.Status.DONE).exists():
                _finish(sweep)
    return chunk


def _recount(sweep: Sweep) -> None:
    done = 0
    for pts in sweep.chunks.filter(status=SweepChunk.Status.DONE).values_list("points", flat=True):
        done += len(pts)
    sweep.points_done = done
    sweep.save(update_fields=["points_done"])


def _finish(sweep: Sweep, cliff: dict | None = None) -> None:
    sweep.status = Sweep.Status.DONE
    sweep.finished_at = timezone.now()
    if cliff is not None:
        sweep.snapshot = {**sweep.snapshot, "cliff_result": cliff}
        sweep.total_points = sweep.points_done
    sweep.save(update_fields=["status", "finished_at", "snapshot", "total_points"])
    report_create(sweep=sweep)


def _fail(sweep_id: int, message: str) -> None:
    Sweep.objects.filter(pk=sweep_id).exclude(status__in=Sweep.FINAL_STATES).update(
        status=Sweep.Status.FAILED, error=message[:4000], finished_at=timezone.now())


def cliff_run(*, sweep_id: int) -> str:
    """Run a cliff search; each round is one batched simulation stored as chunk ``round``.

    Re-running after a crash replays the stored rounds (the probes are
    deterministic) and simulates only what is missing.
    """
    from planner.sweeps.runner import simulate_points

    sweep = Sweep.objects.filter(pk=sweep_id).first()
    if sweep is None:
        return "missing"
    if sweep.is_final:
        return "already-done" if sweep.status == Sweep.Status.DONE else "skipped"
    _mark_running(sweep_id)
    snap = sweep.snapshot
    c = snap["cliff"]
    param, metric = c["param"], c["metric"]
    state = {"round": 0, "next_index": 0}
    stored = {ch.index: ch for ch in sweep.chunks.filter(status=SweepChunk.Status.DONE)}

    def evaluate(xs):
        r = state["round"]
        state["round"] += 1
        chunk = stored.get(r)
        if chunk is None:
            pts = []
            for x in xs:
                p = defn.resolve_point(snap, {param: x}, state["next_index"], owner=sweep.owner)
                state["next_index"] += 1
                pts.append({k: p[k] for k in ("index", "params", "config", "meta")})
            variant_groups: dict[str, list] = {}
            for p, x in zip(pts, xs):
                variant_groups.setdefault(defn.workload_key(defn.workload_for(snap, {param: x})), []).append(p)
            results = []
            for group in variant_groups.values():
                wl = _workload_of(sweep, defn.workload_for(snap, group[0]["params"]))
                results += simulate_points(wl, group, record_steps=True, progress=_Progress(sweep_id, None))
            results.sort(key=lambda r_: r_["index"])
            chunk = chunk_store(sweep_id=sweep_id, index=r, results=results,
                                workload=defn.workload_for(snap, {}), points=pts)
        else:
            state["next_index"] += len(chunk.points)
        by_x = {_x_key(res["params"][param]): res for res in chunk.results}
        return [_metric(by_x[_x_key(x)]["metrics"], metric) for x in xs]

    try:
        result = find_cliff(evaluate, lo=c["lo"], hi=c["hi"], resolution=c["resolution"], threshold=c["threshold"],
                            relative=metric != "preemptions_per_request", bad_below=param != "rate",
                            integer=param == "num_gpu_blocks")
    except SweepCancelled:
        return "skipped"
    except Exception as exc:  # noqa: BLE001
        logger.exception("cliff sweep %s failed", sweep_id)
        _fail(sweep_id, f"{type(exc).__name__}: {exc}")
        return "failed"
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep_id)
        if sweep.status not in Sweep.FINAL_STATES:
            _recount(sweep)
            _finish(sweep, cliff=result.to_dict())
    return "done"


def _x_key(x) -> str:
    return f"{float(x):.9g}"


def _metric(metrics: dict, name: str) -> float:
    v = metrics.get(name)
    return float("inf") if v is None else float(v)


# --------------------------------------------------------------------------- cancel


def sweep_cancel(*, sweep: Sweep, user) -> Sweep:
    """Cancel a running or queued sweep (owner only); finished sweeps are left as they are."""
    if sweep.owner_id != getattr(user, "pk", None):
        raise PermissionDenied("Only the owner can cancel this sweep.")
    with transaction.atomic():
        locked = Sweep.objects.select_for_update().get(pk=sweep.pk)
        if locked.status in Sweep.FINAL_STATES:
            return locked
        locked.status = Sweep.Status.CANCELLED
        locked.finished_at = timezone.now()
        locked.save(update_fields=["status", "finished_at"])
        task_ids = list(locked.chunks.filter(status=SweepChunk.Status.PENDING).values_list("task_id", flat=True))
        locked.chunks.filter(status=SweepChunk.Status.PENDING).update(status=SweepChunk.Status.SKIPPED)
    if task_ids:
        transaction.on_commit(lambda: _revoke(task_ids))
    return locked


def _revoke(task_ids: list[str]) -> None:
    """Best effort: pending tasks also see the cancelled status and skip themselves."""
    try:
        celery_app.control.revoke(task_ids)
    except Exception:  # noqa: BLE001 - the status check in chunk_run is the real guard
        logger.info("could not revoke %d sweep tasks; they will skip themselves", len(task_ids))


# --------------------------------------------------------------------------- reports


def report_create(*, sweep: Sweep) -> Report:
    """The report of a finished sweep: a self-contained snapshot (idempotent per sweep)."""
    from planner.sweeps.advice import advise
    from planner.sweeps.selectors import sweep_points

    existing = Report.objects.filter(sweep=sweep).first()
    if existing:
        return existing
    points = sweep_points(sweep=sweep)
    snap = sweep.snapshot
    inputs = {k: v for k, v in snap.items() if k not in ("cliff_result",)}
    if inputs.get("workload", {}).get("source") == "trace":
        inputs["workload"] = dict(inputs["workload"])  # the trace text is kept: the report must be re-runnable
    body = {
        "version": 1,
        "sweep": {"id": sweep.pk, "name": sweep.name, "mode": sweep.mode, "created_at": sweep.created_at.isoformat(),
                  "finished_at": sweep.finished_at.isoformat() if sweep.finished_at else None},
        "definition": sweep.definition,
        "inputs": inputs,
        "points": points,
        "cliff_result": snap.get("cliff_result"),
    }
    body["advice"] = [a.to_dict() for a in advise(body)]
    report = Report.objects.create(owner=sweep.owner, sweep=sweep, title=sweep.name[:200] or f"Sweep {sweep.pk}",
                                   snapshot=body)
    report_figures_cached(report)
    return report


def report_figures_cached(report: Report) -> list:
    """The report's figures, built once and stored (reports are immutable)."""
    from planner.sweeps.figures import report_figures

    if report.figures is None:
        report.figures = [list(f) for f in report_figures(report.snapshot)]
        Report.objects.filter(pk=report.pk).update(figures=report.figures)
    return report.figures


def report_delete(*, report: Report, user) -> None:
    """Delete a report; only its owner may."""
    if report.owner_id != getattr(user, "pk", None):
        raise PermissionDenied("Only the owner can delete this report.")
    report.delete()
