"""Result objects of :func:`simulator.batch.runner.simulate`, named as the oracle names them.

A :class:`SimResult` holds one configuration's outcome:

* ``totals``: the oracle's totals (``finished``, ``preemptions``,
  ``prefix_cache_hits`` ...) plus ``dropped_unservable``, ``unfinished``,
  ``recomputed_tokens``, ``prefix_cache_evictions``, block residency
  (``mean_block_lifetime_steps``, ``mean_block_idle_steps``: vLLM's KV cache
  residency metrics, measured in engine steps when a block is reused),
  ``mean_kv_usage`` and, for arrivals in seconds, ``duration_s``;
* ``requests``: per-request columns (one entry per request, submission
  order) with the oracle's names; ``-1`` (or NaN for times) where an event
  did not happen;
* ``steps``: per schedule call that scheduled tokens or preempted, columns
  ``step, time_s, num_running, num_waiting, num_scheduled_tokens,
  kv_blocks_used, kv_usage, num_preempted``; or None when not recorded.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any

import numpy as np

from simulator.engine.metrics import TokenGaps, engine_token_gaps, summarize_latency
from simulator.engine.serving import apply_serving
from simulator.speculative import spec_totals

#: Per-request columns, in output order.
REQUEST_FIELDS = (
    "id", "prompt_len", "max_tokens", "arrival", "first_scheduled_step",
    "first_token_step", "finish_step", "num_preemptions", "prefix_hit_tokens",
    "num_output_tokens", "first_token_time_s", "finish_time_s",
)
#: Fields of a request record, in output order: columns of ``requests`` (``arrival`` named
#: ``arrival_step`` or ``arrival_time``; the last two only for arrivals in seconds).
_RECORD = ("id", "prompt_len", "max_tokens", "arrival", "first_scheduled_step", "first_token_step",
           "finish_step", "num_preemptions", "prefix_hit_tokens", "num_output_tokens", "status",
           "first_token_time_s", "finish_time_s")
#: Columns where a negative value (steps, tokens) or NaN (seconds) means that the event did not happen.
_NONE_IF_NEGATIVE = frozenset({"first_scheduled_step", "first_token_step", "finish_step", "prefix_hit_tokens"})
_NONE_IF_NAN = frozenset({"first_token_time_s", "finish_time_s"})
_RECORD_CHUNK = 8_192  # requests whose record texts are made at a time (SimResult._records_json)


def jsonable(x: Any) -> Any:
    """Plain JSON types (numpy scalars/arrays converted, NaN/inf -> None)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        v = float(x)
        return v if math.isfinite(v) else None
    return x


def _compact(x: Any) -> str:
    return json.dumps(x, separators=(",", ":"))


def _number_texts(a: np.ndarray) -> list[str]:
    """What ``json.dumps(jsonable(a.tolist()))`` writes for each value of a 1-D array.

    Each distinct value is formatted once: numbers repeat a lot in these columns
    (token counts, KV usage), and a float's ``repr`` costs about a microsecond.
    """
    if a.dtype.kind in "iu":
        lo = int(a.min()) if a.size else 0
        span = int(a.max()) - lo + 1 if a.size else 0
        if 2 * span <= a.size:  # the strings of lo..max, then a lookup
            return np.array(list(map(str, range(lo, lo + span))), dtype=object)[a - lo].tolist()
        return list(map(str, a.tolist()))
    if a.dtype.kind == "f":
        # distinct bit patterns, so that -0.0 stays apart from 0.0
        bits, index = np.unique(np.ascontiguousarray(a, np.float64).view(np.int64), return_inverse=True)
        values = bits.view(np.float64)
        text = np.array(list(map(float.__repr__, values.tolist())), dtype=object)
        text[~np.isfinite(values)] = "null"
        return text[index].tolist()
    return list(map(_compact, jsonable(a.tolist())))


@dataclass(frozen=True, eq=False)
class SimResult:
    """One configuration's simulated outcome.

    Parameters
    ----------
    totals : dict of str to number
    requests : dict of str to ndarray, each shape (n,)
        ``id`` is a tuple of str; arrival is ``arrival_step`` (steps) or
        ``arrival_time`` (seconds) after the workload's unit.
    steps : dict of str to ndarray, each shape (num_points,), or None
    arrival_unit : {"step", "s"}
    token_gaps : TokenGaps, optional
        Every inter-token gap of the requests the ``itl_gaps_known`` column
        marks (:func:`simulator.engine.metrics.engine_token_gaps`); None: no
        request's gaps are known (each counts its TPOT).
    """

    totals: dict[str, Any]
    requests: dict[str, Any]
    steps: dict[str, np.ndarray] | None
    arrival_unit: str = "step"
    token_gaps: TokenGaps | None = None

    def _record_layout(self) -> list[tuple[str, str]]:
        """``(key, column)`` of each field of a request record, in output order."""
        time_mode = self.arrival_unit == "s"
        arrival = "arrival_time" if time_mode else "arrival_step"
        return [(arrival if col == "arrival" else col, col) for col in (_RECORD if time_mode else _RECORD[:-2])]

    def _numbers(self, col: str) -> np.ndarray:
        """A numeric column of ``requests`` as written (step arrivals as whole numbers)."""
        a = np.asarray(self.requests[col])
        return a.astype(np.int64) if col == "arrival" and self.arrival_unit != "s" else a

    def _record_column(self, col: str) -> list[Any]:
        """One field of every request record: plain Python values, None where no event."""
        if col in ("id", "status"):
            return list(self.requests[col])
        a = self._numbers(col)
        out = a.tolist()
        missing = a < 0 if col in _NONE_IF_NEGATIVE else np.isnan(a) if col in _NONE_IF_NAN else None
        if missing is not None:
            for i in np.flatnonzero(missing).tolist():
                out[i] = None
        return out

    def request_records(self) -> list[dict[str, Any]]:
        """Per-request dicts in the oracle's names (``None`` where no event)."""
        layout = self._record_layout()
        keys = [k for k, _ in layout]
        return [dict(zip(keys, row)) for row in zip(*(self._record_column(col) for _, col in layout))]

    def _records_json(self, chunk: int | None = None) -> Iterator[str]:
        """The compact JSON of :meth:`request_records` (non-finite floats as null), one text per ``chunk``
        requests, each written column by column (the small texts of one chunk held at a time)."""
        chunk = chunk or _RECORD_CHUNK
        layout = self._record_layout()
        n = len(self.requests["id"])
        numbers = {col: self._numbers(col) for _, col in layout if col not in ("id", "status")}
        for start in range(0, n, chunk):
            stop = min(start + chunk, n)
            pieces: list[Iterable[str]] = []
            for i, (key, col) in enumerate(layout):
                if col in ("id", "status"):  # as json.dumps writes a str
                    text = list(map(encode_basestring_ascii, self.requests[col][start:stop]))
                else:
                    a = numbers[col][start:stop]
                    text = _number_texts(a)
                    if col in _NONE_IF_NEGATIVE:
                        for j in np.flatnonzero(a < 0).tolist():
                            text[j] = "null"
                name = _compact(key) + ":"
                if i:
                    lead = itertools.repeat("," + name)
                else:  # the first record of all opens with "{", every other with ",{"
                    lead = itertools.chain(["{" + name] if start == 0 else [",{" + name], itertools.repeat(",{" + name))
                pieces += [lead, text]
            pieces.append(itertools.repeat("}"))
            yield "".join(itertools.chain.from_iterable(zip(*pieces)))

    def latency(self, slo_ttft_s: float | None = None, slo_tpot_s: float | None = None):
        """TTFT / TPOT / ITL / E2E percentiles, throughput and goodput (:func:`simulator.engine.metrics.summarize_latency`).

        Only for workloads with arrivals in seconds (``None`` otherwise: a
        step-unit workload has no arrival times to measure from). ITL is over
        every token gap (:attr:`token_gaps`); a request whose gaps the engine
        could not tell one by one (preempted, speculative) counts its TPOT for
        each of its gaps (``itl_requests_approximate``). ``slo_tpot_s``: the
        goodput threshold on each request's TPOT.
        """
        if self.arrival_unit != "s":
            return None
        req = self.requests
        return summarize_latency(
            arrival_time=req["arrival"], first_token_time=req["first_token_time_s"],
            finish_time=req["finish_time_s"], num_output_tokens=req["num_output_tokens"],
            num_prompt_tokens=req["prompt_len"], token_gaps=self.token_gaps,
            gaps_known=req.get("itl_gaps_known") if self.token_gaps is not None else None,
            slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ``{"totals", "requests"[, "steps"][, "latency"]}`` (latency for arrivals in seconds)."""
        d: dict[str, Any] = {"totals": dict(self.totals), "requests": self.request_records()}
        lat = self.latency()
        if lat is not None:
            d["latency"] = lat.to_dict()
        if self.steps is not None:
            d["steps"] = {k: v.tolist() for k, v in self.steps.items()}
        return d

    def to_json(self, *, steps: bool = True) -> str:
        """:meth:`to_dict` as compact JSON text, NaN and infinities as null (without ``steps`` if not ``steps``).

        The text of ``json.dumps(jsonable(self.to_dict()), separators=(",", ":"))``,
        but the requests are written column by column instead of as one dict
        each (100,000 requests in about 0.2 s instead of 1.4 s).
        """
        return "".join(self.json_pieces(steps=steps))

    def json_pieces(self, *, steps: bool = True) -> Iterator[str]:
        """The text of :meth:`to_json` in pieces, to write without holding it whole (``"".join`` of them is it)."""
        yield '{"totals":'
        yield _compact(jsonable(self.totals))
        yield ',"requests":['
        yield from self._records_json()
        yield "]"
        lat = self.latency()
        if lat is not None:
            yield ',"latency":'
            yield _compact(jsonable(lat.to_dict()))
        if steps and self.steps is not None:
            yield ',"steps":{'
            for i, (k, v) in enumerate(self.steps.items()):
                yield from ("," * (i > 0), _compact(str(k)), ":[", ",".join(_number_texts(np.asarray(v))), "]")
            yield "}"
        yield "}"


def assemble_result(sim, record_steps: bool, max_points: int | None, pool=None, tiers=None) -> SimResult:
    """Assemble a SimResult from a finished :class:`FastEngine` (or the scalar reference).

    ``pool``, ``tiers``: the block pool and KV tiers to report (default the engine's), for a
    configuration that shared the engine's schedule (:mod:`simulator.batch.sharing`).
    """
    wl, rs = sim.wl, sim.requests  # the per-request arrays (RequestState)
    t = dict(sim.t)
    if pool is None:
        pool = sim.pool
    usable = pool.usable
    t["unfinished"] = sim.unfinished
    t["requests_preempted_at_least_once"] = int((rs.npre > 0).sum())
    q_ = t["prefix_cache_queries"]
    t["prefix_cache_hit_rate"] = t["prefix_cache_hits"] / q_ if q_ else 0.0
    t["peak_kv_usage"] = t["peak_kv_blocks_used"] / usable
    steps = t.pop("kv_block_steps")
    t["mean_kv_usage"] = steps / t["num_steps"] / usable if t["num_steps"] else 0.0
    t["prefix_cache_evictions"] = pool.evictions
    t["mean_block_lifetime_steps"] = pool.lifetime_sum / pool.reuses if pool.reuses else 0.0
    t["mean_block_idle_steps"] = pool.idle_sum / pool.reuses if pool.reuses else 0.0
    if tiers is None:
        tiers = getattr(sim, "tiers", None)  # the scalar reference kernel has none
    if tiers is not None:
        t.update(tiers.totals())
    t.update(spec_totals(sim))  # speculative decoding's acceptance figures (none without draft tokens)
    if wl.arrival_unit == "s" or getattr(getattr(sim, "cfg", None), "cost_model", None) is not None:
        t["duration_s"] = sim.clock
    status = rs.status
    names = np.array(["waiting", "running", "waiting", "finished", "dropped_unservable"])
    requests = {
        "id": wl.ids,
        "prompt_len": wl.prompt_len,
        "max_tokens": wl.output_len,
        "arrival": wl.arrival,
        "first_scheduled_step": rs.first_sched.copy(),
        "first_token_step": rs.first_token.copy(),
        "finish_step": rs.finish.copy(),
        "num_preemptions": rs.npre.copy(),
        "prefix_hit_tokens": rs.hit_first.copy(),
        "num_output_tokens": rs.tok - wl.prompt_len,
        "first_token_time_s": rs.first_token_t.copy(),
        "finish_time_s": rs.finish_t.copy(),
        "status": tuple(names[status].tolist()),
    }
    series = None
    if record_steps and sim.log is not None:
        log = sim.log
        series = {
            "step": np.array(log["step"], np.int64),
            "time_s": np.array(log["time_s"], np.float64),
            "num_running": np.array(log["num_running"], np.int64),
            "num_waiting": np.array(log["num_waiting"], np.int64),
            "num_scheduled_tokens": np.array(log["num_scheduled_tokens"], np.int64),
            "kv_blocks_used": np.array(log["kv_blocks_used"], np.int64),
            "num_preempted": np.array(log["num_preempted"], np.int64),
        }
        series["kv_usage"] = series["kv_blocks_used"] / usable
        if wl.arrival_unit != "s":
            del series["time_s"]
        m = len(series["step"])
        if max_points is not None and m > max_points:
            idx = np.unique(np.linspace(0, m - 1, max_points).round().astype(np.int64))
            series = {k: v[idx] for k, v in series.items()}
    cfg = getattr(sim, "cfg", None)
    gaps = None
    if wl.arrival_unit == "s" and getattr(sim, "step_ends", None) is not None:
        gaps, known = engine_token_gaps(
            np.asarray(sim.step_ends, np.float64), rs.first_token, rs.finish, requests["num_output_tokens"],
            rs.npre, rs.first_token_t, rs.finish_t, getattr(getattr(cfg, "cost_model", None),
                                                              "serve_output_token_s", 0.0))
        requests["itl_gaps_known"] = known
    result = SimResult(totals=t, requests=requests, steps=series, arrival_unit=wl.arrival_unit, token_gaps=gaps)
    # time a served request pays outside the engine steps, added here once for every caller (docs/cost-model.md)
    return apply_serving(result, getattr(cfg, "cost_model", None), bool(getattr(cfg, "async_scheduling", False)))
