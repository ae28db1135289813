"""Where a deployment is saturated, read from a sweep's own points (issue 33 item 8).

A saturated deployment serves no more when more is offered: its throughput stays flat, the queue grows for as
long as the traffic lasts and time to first token climbs with it. Its cost per output token is then the
lowest of the sweep (the GPUs are busy all the time), which is why the cheapest point per token must never be
recommended there. A point counts as saturated when its own numbers show one of:

* **served < 80 % of offered**: finished requests over the run (first arrival to last finish) against the
  Poisson or gamma arrival rate, for arrivals in seconds (:func:`planner.sweeps.advice.overload`'s rule);
* **flat throughput**: along a request-rate axis (the other axes equal), throughput rose by less than a third
  of what the rate rose by since the point before, while TTFT p99 at least doubled; every higher rate of the
  same group is saturated too;
* **a standing queue**: at its peak a quarter of all requests waited at once, with TTFT p99 ten times its p50
  or more.

Pure functions over a report body (``inputs`` + ``points``), no ORM.
"""

from __future__ import annotations

SERVED_SHARE = 0.8  # served / offered below this: the queue grows without bound
FLAT_GAIN = 1 / 3  # throughput's relative gain below this share of the rate's relative gain: flat
TTFT_JUMP = 2.0  # ... while TTFT p99 grows at least this many times
QUEUE_SHARE = 0.25  # peak waiting requests at or above this share of all requests ...
QUEUE_TTFT_RATIO = 10.0  # ... with TTFT p99 at least this many times its p50


def _throughput(m: dict) -> tuple[float | None, str]:
    if m.get("throughput_tok_s"):
        return m["throughput_tok_s"], "tokens/s"
    return m.get("throughput_tok_per_step"), "tokens/step"


def _ttft_p99(m: dict) -> tuple[float | None, str]:
    if m.get("ttft_p99_s") is not None:
        return m["ttft_p99_s"], "s"
    return m.get("ttft_p99_steps"), "steps"


def _time(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:,.0f} ms" if value < 1 else f"{value:,.1f} s"
    return f"{value:,.0f} steps"


def offered_and_served(point: dict, inputs: dict) -> tuple[float, float] | None:
    """``(offered, served)`` requests/s of a point whose arrivals are Poisson or gamma in seconds, else None.

    Offered: the workload's (or the point's ``rate`` axis) requests/s; served: finished requests over the
    simulated duration (first arrival to last finish)."""
    wl = inputs.get("workload") or {}
    arrival = (wl.get("spec") or {}).get("arrival") or {}
    if wl.get("arrival_unit") != "s" or arrival.get("kind") not in ("poisson", "gamma"):
        return None
    m = point["metrics"]
    offered = point["params"].get("rate", arrival.get("rate"))
    duration, done = m.get("duration_s"), m.get("finished")
    if not offered or not duration or not done:
        return None
    return float(offered), done / duration


def _served(point: dict, inputs: dict) -> str | None:
    """"11 of the 32 requests/s offered are served (35 %)" when under :data:`SERVED_SHARE`, else None."""
    rates = offered_and_served(point, inputs)
    if rates is None or rates[1] >= SERVED_SHARE * rates[0]:
        return None
    offered, served = rates
    return f"only {served:,.3g} of the {offered:,.4g} requests/s offered are served ({served / offered:.0%})"


def _queue(point: dict) -> str | None:
    m = point["metrics"]
    waiting, n = m.get("peak_waiting"), m.get("requests")
    p99, unit = _ttft_p99(m)
    p50 = m.get("ttft_p50_s" if unit == "s" else "ttft_p50_steps")
    if not waiting or not n or p99 is None or waiting < QUEUE_SHARE * n:
        return None
    if p50 and p99 < QUEUE_TTFT_RATIO * p50:
        return None
    return f"{waiting:,} of its {n:,} requests waited at once, and TTFT p99 reached {_time(p99, unit)}"


def _flat(prev: dict, point: dict, arrival_unit: str) -> str | None:
    """Throughput flat while the rate rose and TTFT p99 at least doubled, since ``prev`` (a lower rate)."""
    r0, r1 = prev["params"]["rate"], point["params"]["rate"]
    (t0, tu), (t1, _) = _throughput(prev["metrics"]), _throughput(point["metrics"])
    (l0, lu), (l1, _) = _ttft_p99(prev["metrics"]), _ttft_p99(point["metrics"])
    if not (r0 and r1 > r0 and t0 and t1 is not None and l0 is not None and l1 is not None):
        return None
    rate_gain, tput_gain = r1 / r0 - 1, t1 / t0 - 1
    if tput_gain >= FLAT_GAIN * rate_gain or l1 < TTFT_JUMP * max(l0, 1e-12):
        return None
    unit = "requests/s" if arrival_unit == "s" else "requests/step"
    return (f"throughput went from {t0:,.0f} to {t1:,.0f} {tu} ({tput_gain:+.0%}) while the rate rose from "
            f"{r0:,.4g} to {r1:,.4g} {unit} ({rate_gain:+.0%}), and TTFT p99 from {_time(l0, lu)} to {_time(l1, lu)}")


def _groups(points: list[dict]) -> list[list[dict]]:
    """Points with a ``rate`` grouped by their other axes' values, each group sorted by rate."""
    groups: dict[tuple, list[dict]] = {}
    for p in points:
        if isinstance(p["params"].get("rate"), (int, float)):
            key = tuple(sorted((k, str(v)) for k, v in p["params"].items() if k != "rate"))
            groups.setdefault(key, []).append(p)
    return [sorted(g, key=lambda p: p["params"]["rate"]) for g in groups.values()]


def detect_saturation(body: dict) -> dict:
    """The saturated points of a report body: ``{"points": [{"index", "params", "why"}], "capacity": [...]}``.

    ``why`` lists the evidence in words (served share, flat throughput, standing queue); ``capacity`` gives,
    per group of a rate axis, the last rate that kept up and the first that did not (``{"below", "above",
    "params"}``, ``params`` the group's other axes). Empty lists when nothing is saturated.
    """
    inputs = body.get("inputs") or {}
    points = body.get("points") or []
    unit = (inputs.get("workload") or {}).get("arrival_unit", "step")
    why: dict[int, list[str]] = {}
    for p in points:
        for reason in (_served(p, inputs), _queue(p)):
            if reason:
                why.setdefault(p["index"], []).append(reason)
    capacity = []
    for group in _groups(points):
        flat = False
        for prev, p in zip(group, group[1:]):
            reason = _flat(prev, p, unit)
            if reason:
                why.setdefault(p["index"], []).insert(0, reason)
            elif flat and p["index"] not in why:
                why[p["index"]] = ["more traffic than a rate already saturated"]
            flat = flat or bool(reason)
        first = next((p for p in group if p["index"] in why), None)
        if first is not None:
            ok = [p for p in group if p["params"]["rate"] < first["params"]["rate"] and p["index"] not in why]
            capacity.append({"below": ok[-1]["params"]["rate"] if ok else None, "above": first["params"]["rate"],
                             "params": {k: v for k, v in first["params"].items() if k != "rate"}})
    out = [{"index": p["index"], "params": p["params"], "why": why[p["index"]]} for p in points if p["index"] in why]
    return {"points": out, "capacity": capacity}


def saturated_indices(saturation: dict | None) -> set[int]:
    """The indices of the saturated points of :func:`detect_saturation`'s answer."""
    return {p["index"] for p in (saturation or {}).get("points") or []}
