"""Downloads of a search report: CSV (one row per simulated deployment, the xPyD splits included), JSON,
standalone HTML.

A search whose space tried speculative decoding has one more CSV column, ``speculative`` (after
``max_num_seqs``): each row's setting as the command line writes it (``eagle:3:0.7``), ``none`` without. The JSON
carries it in each candidate (``candidate.speculative``) and the seed check as ``result.seed_check`` with
``seed_check_words``."""

from __future__ import annotations

import io
import json

from django.template.loader import render_to_string

from planner.csv_cells import csv_writer
from planner.sampling_words import sampling_answer
from planner.search.seeds import seed_words

CSV_COLUMNS = ("candidate", "status", "gpu", "tensor_parallel", "pipeline_parallel", "precision", "kv_cache_dtype",
               "max_num_seqs", "replicas", "cost_per_hour_usd", "cost_per_million_output_tokens_usd", "meets",
               "goodput_share", "output_tokens_per_s", "reason")
#: After the SLO figures: ``serving`` is ``aggregated`` (the search's deployments), ``xPyD`` (a split of
#: the answer into prefill and decode instances, whose ``replicas`` is both pools together) or ``pools`` (a pair
#: of prefill and decode pools of their own shapes, named in ``candidate``; the shape cells left empty).
XPYD_COLUMNS = ("serving", "prefill_instances", "decode_instances", "kv_transfer_p90_s")


def model_id(snapshot: dict) -> str:
    """The Hugging Face repository id ``vllm serve`` loads: the profile's, else its name as one word."""
    model = snapshot.get("model") or {}
    hf = (model.get("source") or {}).get("hf_id")
    return hf or "-".join(str((model.get("spec") or {}).get("name") or "MODEL").split())


def search_launch(result: dict, snapshot: dict) -> dict | None:
    """``launch`` of a search's answer (:func:`simulator.launch.search_launch`; None when nothing meets)."""
    from simulator.launch import search_launch as launch_of

    best = result.get("best")
    if not best:
        return None
    space = snapshot.get("space") or {}
    return launch_of(best, model_id(snapshot), gpu_memory_utilization=space.get("gpu_memory_utilization", 0.9),
                     async_scheduling=space.get("async_scheduling"))


def result_with_launch(search) -> dict | None:
    """The stored result with its ``launch`` (worked out for a result stored before answers carried one)."""
    res = search.result
    if not isinstance(res, dict) or "best" not in res or "launch" in res:
        return res
    return {**res, "launch": search_launch(res, search.snapshot)}


def row_status(o: dict, t: dict | None) -> tuple[str, str]:
    """The status and reason of one row of a report: a shape's outcome, or one replica count tried of it.

    Only the answer's own replica count is ``answer`` (the reason: the cheapest that meets); any other
    count tried reads ``meets`` or ``misses`` by its own figures, with its own misses as the reason.
    """
    if t is None:
        return o["status"], o["reason"]
    if o["status"] == "answer" and t["num_instances"] == o["replicas"]:
        return "answer", o["reason"]
    if t["meets"]:
        return "meets", f"meets the SLO with {t['num_instances']} replica{'s' if t['num_instances'] > 1 else ''}"
    return "misses", "; ".join(t["misses"]) or "misses the SLO"


def figure_labels(res: dict) -> list[str]:
    """The report's latency columns: each target's label, then TPOT and ITL at each target's percentile
    (p90 when no target asks for another), so that both show whatever the SLO judges."""
    targets = [f"{t['metric'].upper()} {t['percentile']}" for t in res["slo"]["targets"]]
    pcts = list(dict.fromkeys(t["percentile"] for t in res["slo"]["targets"]))
    extra = [f"{m} {p}" for p in pcts or ["p90"] for m in ("TPOT", "ITL")]
    return targets + [lab for lab in extra if lab not in targets]


def trial_figure(t: dict | None, lab: str):
    """A row's figure (s): the target's value, or the trial's ``figures`` (None when not recorded)."""
    if t is None:
        return None
    v = (t.get("values") or {}).get(lab)
    return v if v is not None else (t.get("figures") or {}).get(lab)


def speculative_cell(candidate: dict) -> str:
    """A shape's speculative setting as the command line writes it: ``eagle:3:0.7``, or ``none``."""
    spec = candidate.get("speculative")
    if not spec:
        return "none"
    return f"{spec['method']}:{spec['num_speculative_tokens']}:{spec['acceptance_rate']:g}"


def _shape(c: dict, speculative: bool, dp: bool = False) -> list:
    """A row's shape cells: GPU to ``max_num_seqs``, then the speculative setting when the search tried any, then
    DP size and EP when it tried a DP group."""
    return [c["gpu"], c["tensor_parallel"], c["pipeline_parallel"], c["precision"], c["kv_cache_dtype"],
            c["max_num_seqs"], *([speculative_cell(c)] if speculative else []),
            *([c.get("data_parallel", 1), c.get("expert_parallel", False)] if dp else [])]


def to_csv(search) -> str:
    """One row per simulated deployment, plus one per candidate never simulated (with its reason), then one
    per xPyD split of the answer (a search with ``disaggregated``); latencies in seconds."""
    res = search.result
    labels = figure_labels(res)
    buf = io.StringIO()
    w = csv_writer(buf)
    spec = any(o["candidate"].get("speculative") for o in res["outcomes"])
    columns = list(CSV_COLUMNS)
    if spec:
        columns.insert(columns.index("max_num_seqs") + 1, "speculative")
    dp = any("data_parallel" in o["candidate"] for o in res["outcomes"])  # a DP group tried: its DP and EP
    if dp:
        at = columns.index("replicas")
        columns[at:at] = ["data_parallel", "expert_parallel"]
    w.writerow([*columns, *(f"{lab} (s)" for lab in labels), *XPYD_COLUMNS])
    aggregated = ["aggregated", "", "", ""]
    for o in res["outcomes"]:
        c = o["candidate"]
        shape = _shape(c, spec, dp)
        if not o["trials"]:
            w.writerow([c["label"], o["status"], *shape, "", "", "", "", "", "", o["reason"], *([""] * len(labels)),
                        *aggregated])
        for t in o["trials"]:
            status, why = row_status(o, t)
            w.writerow([c["label"], status, *shape, t["num_instances"], _num(t["cost_per_hour"]),
                        _num(t["cost_per_million_tokens"]), t["meets"], _num(t["goodput"]),
                        _num(t["output_tokens_per_s"]), why, *(_num(trial_figure(t, lab)) for lab in labels),
                        *aggregated])
    _xpyd_rows(w, res, labels, spec, dp)
    _pools_rows(w, res, labels, len(_shape(res["outcomes"][0]["candidate"], spec, dp)) if res["outcomes"] else 6)
    return buf.getvalue()


def _pools_rows(w, res: dict, labels: list[str], shape_cells: int) -> None:
    """The pairs of pools the joint search checked (``disaggregated.pools``), then those it left out."""
    pools = res.get("disaggregated_pools")
    if not pools:
        return
    for r in pools["pairs"]:
        if r.get("left_out"):
            w.writerow([r["name"], "left out", *([""] * shape_cells), "", "", "", "", "", "", r["left_out"],
                        *([""] * len(labels)), "pools", "", "", ""])
            continue
        status = "answer" if r == pools["best"] else ("meets" if r["meets"] else "misses")
        w.writerow([r["name"], status, *([""] * shape_cells), r["prefill"]["instances"] + r["decode"]["instances"],
                    _num(r["cost_per_hour"]), "", r["meets"], _num(r["goodput"]), "",
                    "; ".join(r["misses"]) or "meets the SLO", *(_num((r["values"] or {}).get(lab)) for lab in labels),
                    "pools", r["prefill"]["instances"], r["decode"]["instances"], _num(r["transfer_p90_s"])])


def _xpyd_rows(w, res: dict, labels: list[str], spec: bool = False, dp: bool = False) -> None:
    """The xPyD splits of the answer, on the answer's shape, in the columns of the other rows."""
    alt = res.get("disaggregated")
    if not alt:
        return
    c = res["best"]["candidate"]
    for r in alt["splits"]:
        w.writerow([r["name"], "split", *_shape(c, spec, dp), r["prefill_instances"] + r["decode_instances"],
                    _num(r["cost_per_hour"]), _num(r.get("cost_per_million_tokens")), r["meets"],
                    _num(r["goodput"]), _num(r["output_tokens_per_s"]),
                    "; ".join(r["misses"]) or "meets the SLO",
                    *(_num((r["values"] or {}).get(lab)) for lab in labels),
                    "xPyD", r["prefill_instances"], r["decode_instances"], _num(r["transfer_p90_s"])])


def _num(v) -> str:
    return "" if v is None else f"{v:.6g}"


def to_json(search) -> str:
    return json.dumps({"report": {"slug": search.slug, "title": search.name,
                                  "created_at": search.created_at.isoformat()},
                       "definition": search.definition, "inputs": search.snapshot, "result": result_with_launch(search),
                       "sampling_words": sampling_answer(search.snapshot)["sampling_words"],
                       "seed_check_words": seed_words(search.result, search.snapshot)},
                      indent=1)


def to_html(search, context: dict) -> str:
    from planner.plotly_assets import plotly_js

    return render_to_string("planner/search/standalone.html", {**context, "plotly_js": plotly_js()})
