"""How stable a search's answer is across traffic seeds (``check_seeds``, ``docs/search.md``).

A search judges every shape on one draw of its traffic (the workload's ``seed``). Once the answer is gathered, the
search's last stage (``planner/search/services.py``, with the xPyD splits when asked) simulates the answer, and one
replica fewer, on the ``check_seeds`` seeds after the workload's (:func:`simulator.search.check_seeds`, as the
command line's ``--check-seeds``), and stores ``SeedCheck.to_dict()`` as the result's ``seed_check``. A trace is one
draw and a search without an answer has nothing to check: both say "not checked". No ORM.
"""

from __future__ import annotations

from types import SimpleNamespace

from simulator.search import Outcome, check_seeds, other_seeds, seed_check_words


def run_seed_check(result: dict, snapshot: dict, model, space, slo) -> dict | None:
    """``SeedCheck.to_dict()`` of the gathered ``result``'s answer on the snapshot's ``check_seeds`` more seeds of
    its generated workload; None without an answer."""
    from planner.search.definition import build_workload, seeds_to_check

    if not result.get("best"):
        return None
    workload = snapshot["workload"]

    def drawn(seed: int):
        return build_workload({"workload": {**workload, "seed": seed}})

    check = check_seeds(SimpleNamespace(best=Outcome.from_dict(result["best"])), drawn, model, space, slo,
                        other_seeds(int(workload.get("seed", 0)), seeds_to_check(snapshot)))
    return None if check is None else check.to_dict()


def seed_words(result: dict, snapshot: dict) -> str | None:
    """The seed check of a finished search in words (:func:`simulator.search.seed_check_words`): its verdicts, or
    ``not checked (a trace is one draw)`` / ``not checked (no answer)``; None when ``check_seeds`` was 0 (or the
    search predates it)."""
    trace = (snapshot.get("workload") or {}).get("source") != "spec"
    return seed_check_words(result.get("seed_check"), asked=int(snapshot.get("check_seeds", 0)),
                            one_draw="a trace" if trace else None)
