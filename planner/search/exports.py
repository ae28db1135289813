"""Downloads of a search report: CSV (one row per simulated deployment, the xPyD splits included), JSON,
standalone HTML."""

from __future__ import annotations

import io
import json

from django.template.loader import render_to_string

from planner.csv_cells import csv_writer
from planner.sampling_words import sampling_answer

CSV_COLUMNS = ("candidate", "status", "gpu", "tensor_parallel", "pipeline_parallel", "precision", "kv_cache_dtype",
               "max_num_seqs", "replicas", "cost_per_hour_usd", "cost_per_million_output_tokens_usd", "meets",
               "goodput_share", "output_tokens_per_s", "reason")
#: After the SLO figures: ``serving`` is ``aggregated`` (the search's deployments) or ``xPyD`` (a split of
#: the answer into prefill and decode instances, whose ``replicas`` is both pools together).
XPYD_COLUMNS = ("serving", "prefill_instances", "decode_instances", "kv_transfer_p90_s")


def to_csv(search) -> str:
    """One row per simulated deployment, plus one per candidate never simulated (with its reason), then one
    per xPyD split of the answer (a search with ``disaggregated``); latencies in seconds."""
    res = search.result
    labels = [f"{t['metric'].upper()} {t['percentile']}" for t in res["slo"]["targets"]]
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow([*CSV_COLUMNS, *(f"{lab} (s)" for lab in labels), *XPYD_COLUMNS])
    aggregated = ["aggregated", "", "", ""]
    for o in res["outcomes"]:
        c = o["candidate"]
        head = [c["label"], o["status"], c["gpu"], c["tensor_parallel"], c["pipeline_parallel"], c["precision"],
                c["kv_cache_dtype"], c["max_num_seqs"]]
        if not o["trials"]:
            w.writerow([*head, "", "", "", "", "", "", o["reason"], *([""] * len(labels)), *aggregated])
        for t in o["trials"]:
            why = "; ".join(t["misses"]) or o["reason"]
            w.writerow([*head, t["num_instances"], _num(t["cost_per_hour"]), _num(t["cost_per_million_tokens"]),
                        t["meets"], _num(t["goodput"]), _num(t["output_tokens_per_s"]), why,
                        *(_num((t["values"] or {}).get(lab)) for lab in labels), *aggregated])
    _xpyd_rows(w, res, labels)
    return buf.getvalue()


def _xpyd_rows(w, res: dict, labels: list[str]) -> None:
    """The xPyD splits of the answer, on the answer's shape, in the columns of the other rows."""
    alt = res.get("disaggregated")
    if not alt:
        return
    c = res["best"]["candidate"]
    for r in alt["splits"]:
        w.writerow([r["name"], "split", c["gpu"], c["tensor_parallel"], c["pipeline_parallel"], c["precision"],
                    c["kv_cache_dtype"], c["max_num_seqs"], r["prefill_instances"] + r["decode_instances"],
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
                       "definition": search.definition, "inputs": search.snapshot, "result": search.result,
                       "sampling_words": sampling_answer(search.snapshot)["sampling_words"]},
                      indent=1)


def to_html(search, context: dict) -> str:
    from planner.plotly_assets import plotly_js

    return render_to_string("planner/search/standalone.html", {**context, "plotly_js": plotly_js()})
