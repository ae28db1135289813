"""Plain-language recommendations drawn from a sweep's results, each with its numbers.

The rules follow the tuning guide of seed 002 ("vLLM KV Cache Architecture and
Profiling Guide", *Interpreting Results* and *Tune Based on Results*):

* mean KV usage under 40% -> under-used: raise ``max_num_seqs`` or lower ``max_model_len``;
* mean KV usage over 90% or frequent preemptions -> over-used: more KV blocks
  (``gpu_memory_utilization``) or fewer concurrent sequences;
* the operating point within 20% above the cliff -> more blocks or fewer sequences;
* prefix-cache hit rate over 50% -> high sharing: a CPU tier is worth sizing;
  under 10% with prefix caching on -> little sharing;
* requests dropped as unservable -> the cache cannot hold one request;
* served request rate under 80% of the offered rate -> overloaded, the queue grows without bound;
* prefix-affinity routing with one instance taking over half the requests -> lopsided;
* points where the deployment is saturated (throughput flat, the queue growing: :mod:`planner.sweeps.saturation`),
  and where its capacity lies;
* the cheapest point per output token *that meets the latency targets* (or that none does), never a saturated
  one: a saturated deployment's cost per token is the sweep's lowest because it cannot keep up.

Advice that does not apply is left out: no low-sharing remark when the workload
shares nothing, no "raise max_num_seqs" when running requests never reached the cap.

Pure functions over the report body (``inputs`` + ``points``), no ORM. :func:`advise` takes the report's
findings (cliff, operating point, replicas, saturation) when the caller has computed them already
(:mod:`planner.sweeps.findings`, once per report), and computes what it is not given.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from planner.sweeps.cliff import grid_knee
from planner.sweeps.labels import value_text
from planner.sweeps.saturation import detect_saturation, offered_and_served, saturated_indices
from simulator.base import ms_target

#: Preemptions per request above which the sweep counts a point as "past the cliff".
PREEMPTION_LIMIT = 0.02


@dataclass(frozen=True)
class Advice:
    code: str
    level: str  # "info" | "warning"
    text: str
    numbers: dict

    def to_dict(self) -> dict:
        return asdict(self)


def _fmt_int(x) -> str:
    return f"{int(round(x)):,}"


def kilo_tokens(tokens: float) -> str:
    return f"{tokens / 1000:,.0f} K" if tokens >= 10_000 else f"{tokens / 1000:,.1f} K"


def params_text(params: dict, arrival_unit: str = "step") -> str:
    """A point's axis values in words, with the axes' labels and units (``planner.sweeps.axes.AXES``).

    ``{"num_gpu_blocks": 2400}`` -> "2,400 KV blocks"; ``{"rate": 4.0, "num_instances": 2}`` ->
    "request rate 4 requests/s, 2 replicas" (lower case: it goes inside a sentence).
    """
    parts = []
    for k, v in params.items():
        if k == "cpu_tier_gib" and isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"a {v:,.4g} GiB CPU KV tier" if v > 0 else "no CPU KV tier")
            continue
        text = value_text(k, v, arrival_unit)
        # mid-sentence: "request rate 4 requests/s", but "GPU memory utilization 0.9", "KV blocks"
        parts.append(text[:1].lower() + text[1:] if text[1:2].islower() else text)
    return ", ".join(parts)


def detect_cliff(body: dict) -> dict | None:
    """Where preemptions rise sharply, from a cliff search or a one-axis KV grid.

    Returns ``{"param", "x", "bad", "metric", "limit", "block_size"}`` or ``None``.
    """
    inputs = body.get("inputs", {})
    cr = body.get("cliff_result")
    if cr and cr.get("status") == "found":
        c = inputs["cliff"]
        return {"param": c["param"], "x": cr["cliff"], "bad": cr["bad"], "metric": c["metric"],
                "limit": cr["limit"], "block_size": inputs["engine"]["block_size"], "source": "search"}
    axes = inputs.get("axes") or []
    if len(axes) != 1 or axes[0]["param"] not in ("num_gpu_blocks", "gpu_memory_utilization", "rate"):
        return None
    param = axes[0]["param"]
    pts = [p for p in body.get("points", []) if p["metrics"].get("preemptions_per_request") is not None]
    if len(pts) < 3:
        return None
    xs = [p["params"][param] for p in pts]
    vals = [p["metrics"]["preemptions_per_request"] for p in pts]
    knee = grid_knee(xs, vals, PREEMPTION_LIMIT, bad_below=param != "rate")
    if knee is None or all(v <= PREEMPTION_LIMIT for v in vals):
        return None
    return {"param": param, "x": knee, "bad": None, "metric": "preemptions_per_request", "limit": PREEMPTION_LIMIT,
            "block_size": inputs["engine"]["block_size"], "source": "grid"}


def cliff_sentence(body: dict, cliff: dict | None = None) -> str | None:
    """"Below about 8,400 blocks (134 K tokens) preemptions rise sharply; your deployment has about 26,000"."""
    cliff = cliff or detect_cliff(body)
    if not cliff:
        return None
    inputs = body.get("inputs", {})
    what = "preemptions rise sharply" if cliff["metric"] == "preemptions_per_request" else \
        f"TTFT p99 jumps above {cliff['limit']:,.0f} steps"
    if cliff["param"] == "num_gpu_blocks":
        bs = cliff["block_size"]
        text = (f"Below about {_fmt_int(cliff['x'])} blocks ({kilo_tokens((cliff['x'] - 1) * bs)} tokens) {what}")
        base = (inputs.get("sizing") or {}).get("num_gpu_blocks")
        if base:
            text += f"; your deployment has about {_fmt_int(base)}"
        return text + "."
    if cliff["param"] == "gpu_memory_utilization":
        return f"Below a GPU memory utilization of about {cliff['x']:.3f} {what}."
    unit = "requests per second" if (inputs.get("workload") or {}).get("arrival_unit") == "s" else "requests per step"
    return f"Above about {cliff['x']:,.3g} {unit} {what}."


def operating_point(body: dict) -> dict | None:
    """The point closest to the base deployment (the one the user runs today)."""
    pts = body.get("points") or []
    if not pts:
        return None
    inputs = body.get("inputs", {})
    engine = inputs.get("engine", {})
    base_vals = {**engine}
    if inputs.get("deployment"):
        base_vals.update(inputs["deployment"])
    wl = inputs.get("workload") or {}
    if wl.get("source") == "spec":
        base_vals["rate"] = wl["spec"]["arrival"].get("rate")
    base_vals.update(prompt_scale=1.0, output_scale=1.0)

    def distance(p):
        d = 0.0
        for k, v in p["params"].items():
            b = base_vals.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and isinstance(b, (int, float)) and b:
                d += abs(v - b) / abs(b)
            elif b is not None and v != b:
                d += 1.0
        return d

    return min(pts, key=distance)


_UNSET = object()


def advise(body: dict, *, cliff=_UNSET, op=_UNSET, replicas=_UNSET, saturation=_UNSET) -> list[Advice]:
    """Recommendations for a report body; an empty list when nothing stands out.

    ``cliff`` (:func:`detect_cliff`), ``op`` (:func:`operating_point`), ``replicas`` (:func:`replicas_for_rate`)
    and ``saturation`` (:func:`planner.sweeps.saturation.detect_saturation`): the report's findings when the
    caller has them; each one not given is computed here.
    """
    out: list[Advice] = []
    pts = body.get("points") or []
    if not pts:
        return out
    inputs = body.get("inputs", {})
    engine = inputs.get("engine", {})
    op = operating_point(body) if op is _UNSET else op
    cliff = detect_cliff(body) if cliff is _UNSET else cliff
    replicas = replicas_for_rate(body) if replicas is _UNSET else replicas
    saturation = detect_saturation(body) if saturation is _UNSET else saturation
    m = op["metrics"]
    arrival_unit = (inputs.get("workload") or {}).get("arrival_unit", "step")
    label = params_text(op["params"], arrival_unit)
    at = f" (at {label})" if label else ""
    seqs = op.get("params", {}).get("max_num_seqs", engine.get("max_num_seqs"))

    mean_u = m.get("mean_kv_usage")
    ppr = m.get("preemptions_per_request") or 0.0
    if mean_u is not None and mean_u < 0.40 and ppr == 0:
        out.append(_underused(mean_u, at, seqs, m.get("peak_running")))
    if (mean_u is not None and mean_u > 0.90) or ppr > PREEMPTION_LIMIT:
        out.append(Advice("kv_overused", "warning",
                          f"KV cache is over-used{at}: mean usage {mean_u or 0:.0%}, "
                          f"{ppr:.2f} preemptions per request ({m.get('preemptions', 0):,} in all, "
                          f"{m.get('recomputed_tokens', 0):,} tokens recomputed). Add KV blocks (raise "
                          f"gpu_memory_utilization, a larger GPU, more GPUs) or lower max_num_seqs.",
                          {"mean_kv_usage": mean_u, "preemptions_per_request": ppr,
                           "preemptions": m.get("preemptions")}))

    out.extend(_cliff_advice(cliff, inputs, engine))
    hit = m.get("prefix_cache_hit_rate")
    pc_on = op["params"].get("enable_prefix_caching", engine.get("enable_prefix_caching", True))
    if hit is not None and hit > 0.5:
        out.append(Advice("cpu_tier", "info",
                          f"Prefix-cache hit rate is {hit:.0%}{at}: prompts share a lot, so a CPU tier for "
                          f"evicted prefix blocks is worth sizing (evictions so far: "
                          f"{op['totals'].get('prefix_cache_evictions', 0):,} blocks).",
                          {"prefix_cache_hit_rate": hit, "prefix_cache_evictions":
                           op["totals"].get("prefix_cache_evictions")}))
    elif hit is not None and hit < 0.10 and pc_on and workload_shares(inputs) is not False:
        out.append(Advice("low_sharing", "info",
                          f"Prefix-cache hit rate is only {hit:.0%}{at}: little sharing in this workload; "
                          f"prefix caching costs little but buys little here.",
                          {"prefix_cache_hit_rate": hit}))
    dropped = max(p["metrics"].get("dropped_unservable", 0) for p in pts)
    if dropped:
        worst = max(pts, key=lambda p: p["metrics"].get("dropped_unservable", 0))
        out.append(Advice("unservable", "warning",
                          f"{dropped:,} requests were dropped as unservable at "
                          f"{_fmt_int(worst['metrics']['num_gpu_blocks'])} blocks: their whole context never "
                          f"fits in the KV cache. Add blocks or lower max_model_len.",
                          {"dropped_unservable": dropped, "num_gpu_blocks": worst["metrics"]["num_gpu_blocks"]}))
    for rep in replicas:
        if rep["num_instances"] is None:
            out.append(Advice("replicas", "warning",
                              f"{rep['where']}no replica count in this sweep (up to {rep['max_tried']}) meets "
                              f"{rep['slo_text']}: add replicas to the axis or relax the targets.",
                              rep))
        else:
            out.append(Advice("replicas", "info",
                              f"{rep['where']}{rep['num_instances']} replica"
                              f"{'s are' if rep['num_instances'] != 1 else ' is'} the fewest that meet "
                              f"{rep['slo_text']} (TTFT {rep['pct']} {(rep['ttft_s'] or 0) * 1000:,.0f} ms, ITL "
                              f"{rep['pct']} {(rep['itl_s'] or 0) * 1000:,.1f} ms).",
                              rep))
    over = overload(op, inputs)
    if over:
        out.append(Advice("overload", "warning",
                          f"The offered load exceeds what this deployment serves{at}: "
                          f"{over['offered']:,.3g} requests/s arrive but it completes about {over['served']:,.3g} "
                          f"requests/s ({over['served'] / over['offered']:.0%}); the queue grows without bound "
                          f"for as long as the traffic lasts (TTFT p99 {(over['ttft_p99_s'] or 0) * 1000:,.0f} ms). "
                          f"Add about {over['offered'] / over['served']:.1f}x the capacity (replicas or GPUs).",
                          over))
    out.extend(affinity_warnings(pts, arrival_unit))
    saturated = saturation_advice(saturation, arrival_unit)
    if saturated:
        out.append(saturated)
    cheapest = cheapest_advice(pts, inputs.get("slo"), arrival_unit, saturated=saturated_indices(saturation))
    if cheapest:
        out.append(cheapest)
    return out


def saturation_advice(saturation: dict | None, arrival_unit: str) -> Advice | None:
    """The points where the deployment is saturated, the evidence, and where its capacity lies."""
    points = (saturation or {}).get("points") or []
    if not points:
        return None
    unit = "requests/s" if arrival_unit == "s" else "requests/step"
    if all(set(p["params"]) == {"rate"} for p in points):  # a rate axis alone: "request rates of 32 and 128 ..."
        rates = [f"{p['params']['rate']:,.4g}" for p in points]
        where = (f"a request rate of {rates[0]}" if len(rates) == 1 else
                 f"request rates of {', '.join(rates[:-1])} and {rates[-1]}") + f" {unit}"
    else:
        names = [params_text(p["params"], arrival_unit) for p in points]
        where = names[0] if len(names) == 1 else "; ".join(names[:-1]) + " and " + names[-1]
    first = next((p for p in points if p["why"][0] != "more traffic than a rate already saturated"), points[0])
    text = (f"The deployment is saturated at {where}: {first['why'][0]}"
            f"{'; ' + first['why'][1] if len(first['why']) > 1 else ''}. More traffic there only lengthens the "
            "queue, so those points' cost per token is not one this deployment can serve at a usable latency.")
    for cap in (saturation or {}).get("capacity") or []:
        at = params_text(cap["params"], arrival_unit)
        at = f" (at {at})" if at else ""
        if cap["below"] is None:
            text += f" It is saturated already at the lowest rate swept, {cap['above']:,.4g} {unit}{at}."
        else:
            text += f" Its capacity lies between {cap['below']:,.4g} and {cap['above']:,.4g} {unit}{at}."
    return Advice("saturated", "warning", text, {"points": [p["index"] for p in points],
                                                 "capacity": (saturation or {}).get("capacity") or []})


def _cliff_advice(cliff: dict | None, inputs: dict, engine: dict) -> list[Advice]:
    """The deployment below the KV cliff, or within 20 % above it."""
    out: list[Advice] = []
    if cliff and cliff["param"] == "num_gpu_blocks":
        base = (inputs.get("sizing") or {}).get("num_gpu_blocks") or engine.get("num_gpu_blocks")
        if base and base < cliff["x"]:
            out.append(Advice("below_cliff", "warning",
                              f"Your deployment's {_fmt_int(base)} blocks are below the cliff at about "
                              f"{_fmt_int(cliff['x'])} blocks: expect preemptions. You need about "
                              f"{cliff['x'] / base:.1f}x the KV cache, or fewer concurrent sequences.",
                              {"num_gpu_blocks": base, "cliff_blocks": cliff["x"]}))
        elif base and base < 1.2 * cliff["x"]:
            out.append(Advice("near_cliff", "warning",
                              f"Your deployment's {_fmt_int(base)} blocks are within 20% of the cliff at about "
                              f"{_fmt_int(cliff['x'])} blocks ({base / cliff['x'] - 1:.0%} above it): a little "
                              f"more traffic or longer requests will preempt. Add blocks or lower max_num_seqs.",
                              {"num_gpu_blocks": base, "cliff_blocks": cliff["x"]}))
    return out


def _underused(mean_u: float, at: str, seqs, peak) -> Advice:
    """Low KV usage: raise ``max_num_seqs`` only when running requests reached the cap."""
    if seqs and peak is not None and peak >= seqs:
        tip = (f"running requests hit the max_num_seqs cap of {seqs:,}, so raise max_num_seqs (or lower "
               f"max_model_len) to use the memory")
    else:
        tip = (f"the traffic, not the max_num_seqs cap, limits concurrency (at most {peak or 0:,} requests ran at "
               f"once{f' of {seqs:,} allowed' if seqs else ''}), so a smaller GPU or a lower "
               "gpu_memory_utilization would serve it as well")
    return Advice("kv_underused", "info",
                  f"Mean KV cache usage is {mean_u:.0%}{at}, under the 40% the tuning guide calls under-used: {tip}.",
                  {"mean_kv_usage": mean_u, "max_num_seqs": seqs, "peak_running": peak})


def workload_shares(inputs: dict) -> bool | None:
    """Whether the workload has shared prefixes or multi-turn context (None: a trace, unknown)."""
    wl = inputs.get("workload") or {}
    if wl.get("source") != "spec":
        return None
    spec = wl.get("spec") or {}
    return bool(spec.get("prefixes")) or bool(spec.get("turns"))


#: Served / offered request rate below which a point counts as overloaded.
OVERLOAD_RATIO = 0.8


def overload(point: dict, inputs: dict) -> dict | None:
    """Offered vs served request rate (:func:`planner.sweeps.saturation.offered_and_served`) of a point, when
    served < :data:`OVERLOAD_RATIO` of offered."""
    rates = offered_and_served(point, inputs)
    if rates is None or rates[1] >= OVERLOAD_RATIO * rates[0]:
        return None
    offered, served = rates
    m = point["metrics"]
    return {"offered": offered, "served": served, "ttft_p99_s": m.get("ttft_p99_s"), "duration_s": m["duration_s"]}


#: Share of a cluster's requests one instance may take before prefix affinity is called lopsided.
AFFINITY_SHARE = 0.5


def affinity_warnings(pts: list[dict], arrival_unit: str) -> list[Advice]:
    """Prefix-affinity points where one instance takes most of the load (the worst one)."""
    worst = None
    for p in pts:
        m = p["metrics"]
        n, imb = m.get("num_instances"), m.get("request_imbalance")
        if not n or n < 2 or imb is None or "prefix-affinity" not in str(m.get("routing", "")):
            continue
        share = imb / n  # max / mean over N instances = N x the largest share
        if share > AFFINITY_SHARE and (worst is None or share > worst[0]):
            worst = (share, p)
    if worst is None:
        return []
    share, p = worst
    m = p["metrics"]
    lbl = params_text(p["params"], arrival_unit)
    return [Advice("affinity_imbalance", "warning",
                   f"With {m['routing']} routing one of {m['num_instances']} replicas takes {share:.0%} of the "
                   f"requests{f' (at {lbl})' if lbl else ''}: it is the bottleneck and the others idle. Weight "
                   f"the router toward load (e.g. weighted:prefix-affinity:1,queue-depth:1) or use round-robin.",
                   {"largest_share": share, "num_instances": m["num_instances"], "routing": m["routing"]})]


def meets_slo(m: dict, slo: dict) -> bool:
    """Every request finished and the SLO percentile of TTFT and ITL within its target."""
    pct = slo.get("percentile", "p90")
    if m.get("finished") != m.get("requests"):
        return False
    t, i = m.get(f"ttft_{pct}_s"), m.get(f"itl_{pct}_s")
    if slo.get("ttft_s") is not None and (t is None or t > slo["ttft_s"]):
        return False
    return not (slo.get("itl_s") is not None and i is not None and i > slo["itl_s"])


def slo_words(slo: dict) -> str:
    pct = slo.get("percentile", "p90")
    parts = []
    if slo.get("ttft_s") is not None:
        parts.append(f"TTFT {pct} ≤ {ms_target(slo['ttft_s'])} ms")
    if slo.get("itl_s") is not None:
        parts.append(f"ITL {pct} ≤ {ms_target(slo['itl_s'])} ms")
    return " and ".join(parts)


def cheapest_advice(pts: list[dict], slo: dict | None, arrival_unit: str, *,
                    saturated: set[int] | frozenset[int] = frozenset()) -> Advice | None:
    """The cheapest point per output token that meets the latency targets (or that none does).

    A ``saturated`` point (its index) is never the one recommended: it looks cheapest because its GPUs are busy
    all the time while its queue grows. When it would have been, the advice says so.
    """
    priced = [p for p in pts if p["metrics"].get("cost_per_m_output_tokens")]
    if len(priced) < 2:
        return None

    def cost(p):
        return p["metrics"]["cost_per_m_output_tokens"]

    def name(p):
        lbl = params_text(p["params"], arrival_unit)
        return lbl[:1].upper() + lbl[1:]

    keeping_up = [p for p in priced if p["index"] not in saturated]
    cheapest_of_all = min(priced, key=cost)
    not_that = ""
    if cheapest_of_all["index"] in saturated:
        not_that = (f" {name(cheapest_of_all)} looks cheaper (${cost(cheapest_of_all):,.2f} per million output "
                    "tokens) but the deployment is saturated there, so it is not recommended.")
    if not keeping_up:
        return Advice("cheapest", "warning",
                      f"Every priced point is saturated, so no cheapest point is recommended: the lowest cost per "
                      f"token here (${cost(cheapest_of_all):,.2f} per million output tokens, {name(cheapest_of_all)}) "
                      "is that of a deployment that cannot keep up. Add replicas or GPUs, or sweep lower rates.",
                      {"meets": None, "saturated": True, "cost_per_m_output_tokens": cost(cheapest_of_all)})
    if slo and (slo.get("ttft_s") is not None or slo.get("itl_s") is not None):
        ok = [p for p in keeping_up if meets_slo(p["metrics"], slo)]
        words = slo_words(slo)
        if not ok:
            cheap = min(keeping_up, key=cost)
            return Advice("cheapest", "warning",
                          f"No point in this sweep meets {words}. The cheapest point that keeps up, {name(cheap)} at "
                          f"${cost(cheap):,.2f} per million output tokens, misses it; add replicas or GPUs "
                          f"to the sweep or relax the targets.{not_that}",
                          {"meets": False, "cost_per_m_output_tokens": cost(cheap)})
        best = min(ok, key=cost)
        return Advice("cheapest", "info",
                      f"Cheapest point that meets {words}: {name(best)} at ${cost(best):,.2f} per million output "
                      f"tokens (${best['metrics']['cost_per_hour']:,.2f}/h); {len(priced) - len(ok)} of "
                      f"{len(priced)} priced points miss the targets or are saturated.{not_that}",
                      {"meets": True, "cost_per_m_output_tokens": cost(best),
                       "cost_per_hour": best["metrics"]["cost_per_hour"]})
    best, worst = min(keeping_up, key=cost), max(priced, key=cost)
    among = " among the points that keep up" if saturated else ""
    return Advice("cheapest", "info",
                  f"Cheapest per output token{among}: {name(best)} at ${cost(best):,.2f} per million output tokens "
                  f"(${best['metrics']['cost_per_hour']:,.2f}/h), against ${cost(worst):,.2f} for the dearest "
                  f"point.{not_that} No latency target was given, so this says nothing about latency: add one "
                  "(slo) to name the cheapest point that meets it.",
                  {"meets": None, "cost_per_m_output_tokens": cost(best), "cost_per_hour": best["metrics"]["cost_per_hour"]})


def replicas_for_rate(body: dict) -> list[dict]:
    """The smallest replica count meeting the sweep's SLOs, per request rate (or once).

    Needs ``inputs.slo`` and a ``num_instances`` axis; points at the same other
    axis value (the rate, usually) are compared. A count meets the SLOs when
    every request finished and the SLO percentile of TTFT and of the
    inter-token latency is within its target. Returns one dict per group:
    ``{"where", "rate", "num_instances", "ttft_s", "itl_s", "pct", "slo_text", "max_tried"}``.
    """
    inputs = body.get("inputs", {})
    slo = inputs.get("slo")
    axes = [a["param"] for a in inputs.get("axes") or []]
    if not slo or "num_instances" not in axes:
        return []
    pct = slo.get("percentile", "p90")
    other = [a for a in axes if a != "num_instances"]
    groups: dict = {}
    for p in body.get("points") or []:
        key = p["params"].get(other[0]) if other else None
        groups.setdefault(key, []).append(p)
    slo_text = slo_words(slo)
    out = []
    for key, pts in groups.items():
        ok = sorted((p for p in pts if meets_slo(p["metrics"], slo)), key=lambda p: p["params"]["num_instances"])
        where = ""
        if other:
            name = other[0]
            unit = (inputs.get("workload") or {}).get("arrival_unit", "step")
            where = (f"At {key:,.4g} requests/{'s' if unit == 's' else 'step'}, "
                     if name == "rate" and isinstance(key, (int, float)) else f"At {params_text({name: key}, unit)}, ")
        best = ok[0]["metrics"] if ok else None
        out.append({"where": where, "group": key, "num_instances": ok[0]["params"]["num_instances"] if ok else None,
                    "ttft_s": best.get(f"ttft_{pct}_s") if best else None,
                    "itl_s": best.get(f"itl_{pct}_s") if best else None,
                    "pct": pct, "slo_text": slo_text,
                    "max_tried": max(p["params"]["num_instances"] for p in pts)})
    return out
