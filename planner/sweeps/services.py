"""Writes for sweeps and reports: create, run a chunk, run a cliff search, cancel, report.

Celery tasks (``planner/tasks.py``) only call :func:`chunk_run` and
:func:`cliff_run` with ids. A grid sweep's chunks go through the one job lifecycle
(:mod:`planner.jobs`: :class:`Sweeps` supplies the run, store and gather steps), and
a cliff search's rounds are claimed, heartbeated and stored by it too. Both are
idempotent: a chunk that is already done returns at once, results are written keyed
by ``(sweep, chunk index)`` and the sweep's count of finished points is recomputed
from the chunks (never incremented), so a task delivered twice (``acks_late`` after a
worker died) neither loses nor duplicates a point.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from config.celery import app as celery_app
from planner.jobs import (
    CLAIMED,
    ChunkedJob,
    Heartbeat,
    JobCancelled,
    Watch,
    is_stalled,
    queue_options,
)
from planner.jobs import failure_message as _failure_message
from planner.jobs.quota import check_queue
from planner.models import Report, Sweep, SweepChunk
from planner.sweeps import definition as defn
from planner.sweeps import pricing
from planner.sweeps.cliff import find_cliff, max_evaluations
from planner.sweeps.points import Point, plan_chunks, resolve_point, workload_for, workload_key
from planner.sweeps.specs import PointSpecs

logger = logging.getLogger(__name__)

#: Names of the Celery tasks of :mod:`planner.tasks` this module sends (``@shared_task(name=...)``).
CHUNK_TASK = "planner.run_sweep_chunk"
CLIFF_TASK = "planner.run_cliff_sweep"


# --------------------------------------------------------------------------- create


def sweep_create(*, owner, definition: Any) -> Sweep:
    """Validate ``definition``, store the sweep and its chunks, enqueue after commit.

    Raises :class:`planner.sweeps.definition.DefinitionError` (messages per field).
    """
    norm, snapshot, points = defn.validate(definition, owner=owner)
    chunks, price = _priced_plan(snapshot, points, norm["mode"], owner=owner)
    snapshot = {**snapshot, "price": {"seconds": round(price.seconds, 3), "memory_bytes": price.memory_bytes}}
    with transaction.atomic():
        if norm["mode"] == "grid":
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


def _priced_plan(snapshot: dict, points: list[dict], mode: str, *, owner) -> tuple[list[dict], pricing.Price]:
    """Price every point, refuse what is over a limit, split chunks to fit; returns (chunks, total price).

    Raises :class:`planner.sweeps.definition.DefinitionError` (a point or a cliff search over the
    memory or chunk time limit) or :class:`QuotaExceeded` (the owner's queue would be over its quota).
    """
    if mode == "grid":
        prices = pricing.point_prices(snapshot, points)
        pricing.check_points(snapshot, points, prices)
        chunks = pricing.split_chunks(plan_chunks(points), {p["index"]: c for p, c in zip(points, prices)})
        total = pricing.budget.price_batch(prices)
    else:
        chunks, total = [], pricing.check_cliff(snapshot, owner=owner)
    # the one queue quota of every kind, the first sweep included (planner/jobs/quota.py)
    check_queue(owner=owner, price_s=total.seconds, what="This sweep")
    return chunks, total


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
    if sweep.mode == Sweep.Mode.CLIFF:
        celery_app.send_task(CLIFF_TASK, args=[sweep.pk], task_id=f"sweep-{sweep.pk}-cliff-{uuid.uuid4()}",
                             **queue_options())
        return
    SWEEPS.enqueue(sweep.pk)


# --------------------------------------------------------------------------- run


def _workload_of(sweep: Sweep, variant: dict):
    from planner.sweeps.runner import workload_of

    base = sweep.snapshot["workload"]
    return workload_of(variant, base)


class Sweeps(ChunkedJob):
    """A grid sweep's chunks in the job lifecycle: each one batched simulation of points sharing a workload."""

    job_model, chunk_model, parent, chunk_task, noun = Sweep, SweepChunk, "sweep", CHUNK_TASK, "sweep"

    def run(self, sweep: Sweep, chunk: SweepChunk, watch: Watch) -> list[dict]:
        from planner.sweeps.runner import simulate_points

        wl = _workload_of(sweep, chunk.workload)
        return simulate_points(wl, chunk.points, record_steps=True, progress=watch, finished=watch.finished)

    def store(self, sweep: Sweep, chunk: SweepChunk, results: list[dict]) -> None:
        chunk_store(sweep_id=sweep.pk, index=chunk.index, results=results)

    def stopped(self, chunk: SweepChunk, watch: Watch) -> None:
        """A chunk stopped by a cancel keeps the points it had finished (skipped, with their results), and the
        sweep counts them: a cancelled sweep shows every finished point."""
        with transaction.atomic():
            sweep = Sweep.objects.select_for_update().get(pk=chunk.sweep_id)
            SweepChunk.objects.filter(pk=chunk.pk).update(
                status=SweepChunk.Status.SKIPPED, results=sorted(watch.finished, key=lambda r: r["index"]) or None,
                finished_at=timezone.now())
            _recount(sweep)

    def cancelled(self, sweep: Sweep) -> None:
        # Running chunks stop at their next progress check (half a second), keep the points they finished and
        # mark themselves skipped (chunk_run); until then the page says the sweep is stopping.
        task_ids = list(sweep.chunks.filter(status=SweepChunk.Status.PENDING).values_list("task_id", flat=True))
        sweep.chunks.filter(status=SweepChunk.Status.PENDING).update(status=SweepChunk.Status.SKIPPED)
        if task_ids:
            transaction.on_commit(lambda: _revoke(task_ids))

    def resend(self, sweep_id: int, stalled: list, pending: list, send) -> int:
        """A grid sweep sends its pending chunks again; a cliff search its one task (it replays the stored
        rounds and simulates the missing one)."""
        if not Sweep.objects.filter(pk=sweep_id, mode=Sweep.Mode.CLIFF).exists():
            return super().resend(sweep_id, stalled, pending, send)
        logger.warning("cliff sweep %s: round %s stalled, search sent again", sweep_id, stalled[0].index)
        send(CLIFF_TASK, [sweep_id], task_id=f"sweep-{sweep_id}-cliff-{uuid.uuid4()}")
        return 1


#: The sweeps' chunks in the job lifecycle (a cliff search's rounds are claimed and stored through it too).
SWEEPS = Sweeps()


def chunk_run(*, sweep_id: int, index: int) -> str:
    """Run one chunk (ONE batched simulation) and store its results; idempotent.

    Returns what happened: ``done``, ``already-done``, ``skipped``, ``missing``, ``failed``,
    ``running-elsewhere``.
    """
    return SWEEPS.run_chunk(sweep_id, index)


def chunk_store(*, sweep_id: int, index: int, results: list[dict], workload: dict | None = None,
                points: list[dict] | None = None) -> SweepChunk:
    """Write a chunk's results (keyed by ``(sweep, index)``) and gather the sweep if it is complete."""
    fields: dict[str, Any] = {"results": results}
    if workload is not None:
        fields["workload"] = workload
    if points is not None:
        fields["points"] = points
    chunk, _ = SWEEPS.store_done(sweep_id, index, fields, gather=_gather)
    return chunk


def _gather(sweep: Sweep, chunk: SweepChunk) -> None:
    """Under the sweep's lock: count its points again; a grid sweep with every chunk done is finished."""
    _recount(sweep)
    if sweep.mode == Sweep.Mode.GRID and sweep.status not in Sweep.FINAL_STATES:
        if not sweep.chunks.exclude(status=SweepChunk.Status.DONE).exists():
            _finish(sweep)


def _recount(sweep: Sweep) -> None:
    """Points finished: every point of the done chunks, and those a cancel stopped chunks after."""
    done = 0
    for pts in sweep.chunks.filter(status=SweepChunk.Status.DONE).values_list("points", flat=True):
        done += len(pts)
    for kept in sweep.chunks.filter(status=SweepChunk.Status.SKIPPED, results__isnull=False).values_list(
            "results", flat=True):
        done += len(kept or [])
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


class _RoundNotClaimed(Exception):
    """A cliff round this worker could not claim: ``outcome`` is ``failed`` (its workers died
    :data:`planner.jobs.MAX_CHUNK_ATTEMPTS` times: the sweep is already failed) or ``running-elsewhere``."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


class _CliffRounds:
    """``evaluate`` for :func:`planner.sweeps.cliff.find_cliff`: round ``r`` is chunk ``r`` of the sweep.

    A round already stored (a run before a crash) is replayed, since the probes are
    deterministic; a missing one is simulated under a heartbeat, like a grid chunk, so
    that a worker dying mid-round is seen as a stall and healed (:mod:`planner.sweeps.stalls`).
    """

    def __init__(self, sweep: Sweep) -> None:
        self.sweep, self.snap = sweep, sweep.snapshot
        self.specs = PointSpecs.of(self.snap)  # the model and GPU as specs, once for every round's points
        self.param = self.snap["cliff"]["param"]
        self.round = self.next_index = 0
        self.stored = {ch.index: ch for ch in sweep.chunks.filter(status=SweepChunk.Status.DONE)}

    def __call__(self, xs) -> list[float]:
        r = self.round
        self.round += 1
        chunk = self.stored.get(r)
        if chunk is None:
            pts = []
            for x in xs:
                p = resolve_point(self.snap, {self.param: x}, self.next_index + len(pts), owner=self.sweep.owner,
                                  specs=self.specs)
                pts.append(Point.of({k: p[k] for k in ("index", "params", "config", "meta")}, p.engine))
            chunk = self._simulate(r, xs, pts)
        self.next_index += len(chunk.points)
        by_x = {_x_key(res["params"][self.param]): res for res in chunk.results}
        return [_metric(by_x[_x_key(x)]["metrics"], self.snap["cliff"]["metric"]) for x in xs]

    def _simulate(self, r: int, xs, pts: list[dict]) -> SweepChunk:
        from planner.sweeps.runner import simulate_points

        sweep_id, snap = self.sweep.pk, self.snap
        base_workload = workload_for(snap, {})
        chunk, _ = SweepChunk.objects.get_or_create(sweep_id=sweep_id, index=r,
                                                    defaults={"workload": base_workload, "points": pts})
        claimed = SWEEPS.claim(chunk, label=f"round {r + 1} of the cliff search")
        if claimed != CLAIMED:
            raise _RoundNotClaimed(claimed)
        groups: dict[str, list] = {}
        for p, x in zip(pts, xs):
            groups.setdefault(workload_key(workload_for(snap, {self.param: x})), []).append(p)
        results = []
        with Heartbeat(SweepChunk, chunk.pk):
            for group in groups.values():
                wl = _workload_of(self.sweep, workload_for(snap, group[0]["params"]))
                results += simulate_points(wl, group, record_steps=True, progress=Watch(SWEEPS, sweep_id, chunk.pk))
        results.sort(key=lambda res: res["index"])
        return chunk_store(sweep_id=sweep_id, index=r, results=results, workload=base_workload, points=pts)


def cliff_run(*, sweep_id: int) -> str:
    """Run a cliff search; each round is one batched simulation stored as chunk ``round``.

    Re-running after a crash replays the stored rounds (the probes are
    deterministic) and simulates only what is missing. A second delivery while a
    round runs elsewhere with a live heartbeat returns at once.
    """
    sweep = Sweep.objects.filter(pk=sweep_id).first()
    if sweep is None:
        return "missing"
    if sweep.is_final:
        return "already-done" if sweep.status == Sweep.Status.DONE else "skipped"
    beats = sweep.chunks.filter(status=SweepChunk.Status.RUNNING).values_list("heartbeat_at", flat=True)
    if any(not is_stalled(b) for b in beats):
        return "running-elsewhere"
    Sweep.objects.filter(pk=sweep_id, status=Sweep.Status.QUEUED).update(
        status=Sweep.Status.RUNNING, started_at=timezone.now())
    c = sweep.snapshot["cliff"]
    try:
        result = find_cliff(_CliffRounds(sweep), lo=c["lo"], hi=c["hi"], resolution=c["resolution"],
                            threshold=c["threshold"], relative=c["metric"] != "preemptions_per_request",
                            bad_below=c["param"] != "rate", integer=c["param"] == "num_gpu_blocks")
    except JobCancelled:
        return "skipped"
    except _RoundNotClaimed as exc:
        return exc.outcome
    except Exception as exc:  # noqa: BLE001
        logger.exception("cliff sweep %s failed", sweep_id)
        msg = _failure_message(exc)
        sweep.chunks.filter(status=SweepChunk.Status.RUNNING).update(status=SweepChunk.Status.FAILED,
                                                                     error=msg[:2000])
        SWEEPS.fail_job(sweep_id, msg)
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
    return SWEEPS.cancel(sweep, user=user)


def _revoke(task_ids: list[str]) -> None:
    """Best effort: pending tasks also see the cancelled status and skip themselves."""
    try:
        celery_app.control.revoke(task_ids)
    except Exception:  # noqa: BLE001 - the status check in chunk_run is the real guard
        logger.info("could not revoke %d sweep tasks; they will skip themselves", len(task_ids))


# --------------------------------------------------------------------------- reports


def report_create(*, sweep: Sweep) -> Report:
    """The report of a finished sweep: a self-contained snapshot (idempotent per sweep)."""
    from planner.sweeps.findings import advice_from, report_findings
    from planner.sweeps.selectors import sweep_points

    existing = Report.objects.filter(sweep=sweep).first()
    if existing:
        return existing
    points = sweep_points(sweep=sweep)
    snap = sweep.snapshot
    inputs = {k: v for k, v in snap.items() if k not in ("cliff_result", "price")}  # price: an estimate
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
    findings = report_findings(body)  # cliff, operating point, replicas, saturation, headline: once
    body["advice"] = advice_from(body, findings)
    report = Report.objects.create(owner=sweep.owner, sweep=sweep, title=sweep.name[:200] or f"Sweep {sweep.pk}",
                                   snapshot=body, findings=findings)
    report_figures_cached(report)
    return report


def report_figures_cached(report: Report) -> list:
    """The report's figures, built once from its findings and stored (reports are immutable)."""
    from planner.sweeps.figures import report_figures
    from planner.sweeps.findings import findings_of

    if report.figures is None:
        report.figures = [list(f) for f in report_figures(report.snapshot, findings=findings_of(report))]
        Report.objects.filter(pk=report.pk).update(figures=report.figures)
    return report.figures


def report_delete(*, report: Report, user) -> None:
    """Delete a report; only its owner may."""
    if report.owner_id != getattr(user, "pk", None):
        raise PermissionDenied("Only the owner can delete this report.")
    report.delete()
