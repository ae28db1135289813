"""Issue 23: a worker killed as a whole (its process group) mid-run, with the production visibility timeout.

A grid sweep, a cliff sweep and a deployment search. The broker's visibility
timeout stays at its production value (900 s): the run must not wait for it. The
killed chunk's (or cliff round's) heartbeat stops; a new worker's healer sees it
stalled and sends the work again. Only the heartbeat and the stall threshold are shortened
(``KVP_HEARTBEAT_S`` 0.5 s and ``KVP_STALL_AFTER_S`` 3 s instead of 5 s and 45 s, healer every second:
``tests/integration/conftest.py``) to keep the suite quick; the test still asks for the sweep to finish within two minutes of the kill,
with a report identical to an undisturbed run of the same definition.

Run with your own Redis database: ``REDIS_URL=redis://127.0.0.1:6379/<n>``.
"""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model

from gpuprofiles.catalog import load_catalog
from gpuprofiles.models import GpuProfile, ModelProfile
from planner.models import Report, Sweep, SweepChunk
from planner.search import selectors as search_selectors
from planner.search import services as search_services
from planner.search.models import Search, SearchChunk
from planner.sweeps import selectors, services

from .conftest import FAST_HEAL, STALL_AFTER_S, wait_for

pytestmark = pytest.mark.integration

DEFINITION = {
    "name": "kill test",
    "engine": {"num_gpu_blocks": 4000, "max_num_seqs": 64},
    "workload": {"spec": {"n": 3000, "prompt": "normal:256,64", "output": "normal:128,32",
                          "arrival": {"kind": "poisson", "rate": 4.0, "unit": "step"}}, "seed": 11},
    "axes": [{"param": "num_gpu_blocks", "values": [600, 1200, 2400, 4800]}],
}

CLIFF = {
    "name": "cliff kill test", "mode": "cliff",
    "engine": {"num_gpu_blocks": 4000, "max_num_seqs": 64},
    "workload": DEFINITION["workload"],
    "cliff": {"param": "num_gpu_blocks", "lo": 300, "hi": 4800, "resolution": 300},
}

SEARCH = {
    "model": "llama-3-1-8b",
    "workload": {"spec": {"n": 600, "prompt": "normal:1024,256", "output": "normal:128,32",
                          "arrival": {"kind": "poisson", "rate": 10, "unit": "s"}}, "seed": 0},
    "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}]},
    "space": {"gpus": ["h100-sxm5-80gb", "l40s", "l4"], "tensor_parallel": [1], "precisions": ["bf16", "fp8"],
              "max_replicas": 2},
}


def _finished(sweep: Sweep | Search):
    def check() -> bool:
        sweep.refresh_from_db()
        return sweep.is_final
    return check


def _report_body(sweep: Sweep) -> dict:
    """The report without what differs between two runs of one definition (ids and times)."""
    snapshot = dict(Report.objects.get(sweep=sweep).snapshot)
    snapshot.pop("sweep")
    return snapshot


def _killed_and_undisturbed(worker_factory, create, *, running, progress, what: str):
    """Run ``create()`` once undisturbed, then again on the same worker, its process group SIGKILLed once
    ``running(run)``; a second worker heals it. Returns ``(undisturbed, run, indices killed, seconds from
    the kill to the end)``, both runs done and the second within two minutes of the kill."""
    calm = worker_factory(concurrency=1, visibility_timeout=900, env=FAST_HEAL)
    undisturbed = create()
    wait_for(_finished(undisturbed), timeout=180, what=f"the undisturbed {what}", logs=[calm])
    assert undisturbed.status == "done", undisturbed.error

    first = calm  # one worker for both runs: its start is not what is tested, its death is
    run = create()
    wait_for(lambda: running(run), timeout=120, interval=0.05, what=f"the {what}'s work in flight", logs=[first])
    first.kill()  # SIGKILL to the whole process group: main process and pool child, nothing acknowledged
    killed_at = time.monotonic()
    killed = list(run.chunks.filter(status="running").values_list("index", flat=True))
    assert killed, "the work finished before the kill; the test saw none in flight"

    # No worker is alive, so nothing heals yet: the status must say stalled once the killed chunk's
    # heartbeat is older than the threshold (polling while a healer runs could miss the moment between
    # the stall and the resend, which is as short as the healer's tick).
    wait_for(lambda: progress(run)["status"] == "stalled", timeout=60, interval=0.5,
             what=f"the status to say the {what} is stalled", logs=[first])
    assert progress(run).get("eta_s") is None

    second = worker_factory(concurrency=1, visibility_timeout=900, env=FAST_HEAL)
    wait_for(_finished(run), timeout=120, interval=0.5, what=f"the {what} to finish after the kill",
             logs=[first, second])
    took = time.monotonic() - killed_at
    assert run.status == "done", run.error
    assert took < 120, took
    return undisturbed, run, killed, took


def _sweep_progress(sweep: Sweep) -> dict:
    return selectors.sweep_progress(sweep=sweep)


def test_a_sweep_survives_its_worker_s_process_group_being_killed(worker_factory, sender_on_redis, settings):
    settings.KVP_SWEEP_CHUNK_POINTS = 1
    settings.KVP_STALL_AFTER_S = STALL_AFTER_S
    user = get_user_model().objects.create_user("kim", password="pw-123456789")
    undisturbed, sweep, killed, took = _killed_and_undisturbed(
        worker_factory, lambda: services.sweep_create(owner=user, definition=DEFINITION),
        running=lambda s: s.chunks.filter(status=SweepChunk.Status.RUNNING).exists(),
        progress=_sweep_progress, what="sweep")
    rerun = SweepChunk.objects.get(sweep=sweep, index=killed[0])
    assert rerun.attempts == 2 and rerun.status == SweepChunk.Status.DONE
    assert _report_body(sweep) == _report_body(undisturbed)
    print(f"\nkill test: sweep finished {took:.1f} s after its worker's process group was killed")


def test_a_cliff_sweep_survives_its_worker_s_process_group_being_killed(worker_factory, sender_on_redis, settings):
    settings.KVP_STALL_AFTER_S = STALL_AFTER_S
    user = get_user_model().objects.create_user("cliff", password="pw-123456789")
    undisturbed, sweep, killed, took = _killed_and_undisturbed(
        worker_factory, lambda: services.sweep_create(owner=user, definition=CLIFF),
        # past the first round, so that the replay of a stored round is tested too
        running=lambda s: s.chunks.filter(status=SweepChunk.Status.RUNNING, index__gte=1).exists(),
        progress=_sweep_progress, what="cliff sweep")
    rounds = SweepChunk.objects.filter(sweep=undisturbed).count()
    assert rounds >= 3 and len(killed) == 1, (rounds, killed)
    rerun = SweepChunk.objects.get(sweep=sweep, index=killed[0])
    assert rerun.attempts == 2 and rerun.status == SweepChunk.Status.DONE
    assert _report_body(sweep) == _report_body(undisturbed)
    print(f"\ncliff kill test: sweep finished {took:.1f} s after its worker's process group was killed "
          f"in round {killed[0] + 1} of {rounds}")


def _answer(result: dict) -> dict:
    """What a search's report answers, independent of the order its chunks finished in.

    A chunk prunes with the cheapest answer of the chunks finished before it (``cost_bound``), so which
    other shapes are simulated or skipped as dominated, the frontier and the counts depend on that order,
    in an undisturbed run on two workers as well; so does ``elapsed_s``. The answer does not.
    """
    best = result["best"]
    return {"message": result["message"], "slo": result["slo"],
            "best": best and {k: best[k] for k in ("index", "candidate", "replicas", "cost_per_hour", "status",
                                                   "reason")},
            "rejected": sorted((o["index"], o["reason"]) for o in result["outcomes"] if o["status"] == "rejected")}


def test_a_search_survives_its_worker_s_process_group_being_killed(worker_factory, sender_on_redis, settings):
    settings.KVP_STALL_AFTER_S = STALL_AFTER_S
    load_catalog(GpuProfile, ModelProfile)  # a transactional test before this one flushed the catalog
    user = get_user_model().objects.create_user("seeker", password="pw-123456789")
    undisturbed, search, killed, took = _killed_and_undisturbed(
        worker_factory, lambda: search_services.search_create(owner=user, definition=SEARCH),
        running=lambda s: s.chunks.filter(status="running", index=0).exists(),
        progress=lambda s: search_selectors.search_progress(search=s), what="search")
    assert SearchChunk.objects.get(search=search, index=0).attempts == 2
    assert _answer(search.result) == _answer(undisturbed.result)
    print(f"\nsearch kill test: search finished {took:.1f} s after its worker's process group was killed")
