#!/usr/bin/env python3
"""Record the speculative-decoding golden cases of ``tests/data/oracle_spec`` (never imported by the suite).

Runs vLLM 0.33.0's real ``Scheduler`` / ``AsyncScheduler`` through the project's oracle tool
``run_oracle_spec.py`` (``tools/vllm_oracle/``, its CPU-only venv; see its README) for every case
of :data:`CASES`, in one process (vLLM's import costs ~15 s)::

    VENV/bin/python record.py --tool DIR/run_oracle_spec.py --out tests/data/oracle_spec [--only NAME ...]

It writes ``workloads/WL.json`` (compact form: shared prefixes and ``prompt_len``, made with the
tool's ``make_workload.py`` or, for ``cached_prompts`` and ``aligned_stops``, written here),
``configs/CASE.json`` (what the planner's ``EngineConfig.from_dict`` and the tool both read) and
``runs/CASE.json.gz`` (the tool's output, steps columnar, gzip, its two wall-clock totals left out).

``--ablate`` records nothing: it reruns every case with each of vLLM's rules switched off in turn
(``r1_...`` to ``r8_...`` below) and writes, in ``expected.json`` under ``exercises``, the rules whose
absence changes the case's outcome (``--keep-ablated DIR``: also vLLM's run with all of them off).

The tool takes ``method`` ngram / eagle / draft_model. EAGLE-3 and MTP differ from EAGLE in the
scheduler only through vLLM's own ``SpeculativeConfig`` (``use_eagle()``, lookahead tokens, hash
lookahead, drafting slots), so this script runs the tool with ``eagle`` and makes vLLM build the
real ``SpeculativeConfig(method="eagle3")`` / ``SpeculativeConfig(method="mtp")`` in its place
(:func:`_real_method`); for MTP the "checkpoint" is a tiny DeepSeek-V3 config with
``num_nextn_predict_layers`` MTP modules (1 = DeepSeek-V3; 3 = a multi-module MTP). The recorded
``config`` and ``effective_vllm_config.spec_method`` name the real method.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import inspect
import json
import os
import random
import sys
import tempfile
import textwrap
from pathlib import Path

B = 16

#: Workloads: make_workload.py arguments (compact form), or "hand" (written by _cached_prompts).
WORKLOADS = {
    # 48 requests at step 0; prompts ~N(256, 64), outputs ~N(48, 24): KV pressure at ~300 blocks
    "burst48": "--n 48 --prompt-dist normal:256,64 --prompt-min 32 --prompt-max 512 "
               "--output-dist normal:128,48 --output-min 1 --output-max 256 --arrival burst --seed 1",
    # 48 requests, Poisson at 1 per step; outputs lognormal (some of a few tokens)
    "poisson48": "--n 48 --prompt-dist normal:192,64 --prompt-min 32 --prompt-max 512 "
                 "--output-dist lognormal:40,30 --output-min 1 --output-max 160 --arrival poisson:1 --seed 2",
    # 75 % share one 256-token (block-aligned) system prompt, all at step 0
    "prefix256": "--n 48 --prompt-dist normal:128,48 --prompt-min 16 --prompt-max 384 "
                 "--output-dist normal:40,20 --output-min 1 --output-max 128 --arrival burst "
                 "--shared-prefix-len 256 --shared-prefix-frac 0.75 --seed 3",
    # 75 % share one 200-token prefix (not block-aligned), Poisson at 2 per step
    "prefix200": "--n 48 --prompt-dist normal:128,48 --prompt-min 16 --prompt-max 384 "
                 "--output-dist normal:40,20 --output-min 1 --output-max 128 --arrival poisson:2 "
                 "--shared-prefix-len 200 --shared-prefix-frac 0.75 --seed 4",
    # 64 requests that stop after 1 to 8 tokens (inside a verification), half of them sharing one
    # 128-token prefix, Poisson at 3 per step
    "short_out": "--n 64 --prompt-dist normal:96,32 --prompt-min 16 --prompt-max 256 "
                 "--output-dist uniform:1,8 --arrival poisson:3 --shared-prefix-len 128 "
                 "--shared-prefix-frac 0.5 --seed 6",
    # 24 long decoders (short prompts): preempted requests re-hit their own verified blocks
    "long_decode": "--n 24 --prompt-dist normal:64,16 --prompt-min 16 --prompt-max 128 "
                   "--output-dist normal:200,50 --output-min 64 --output-max 320 --arrival burst --seed 7",
    # 64 requests with prompts of 4 to 24 tokens (a prompt takes one step), Poisson at 2 per step:
    # with a 64-token budget the budget binds, not the blocks
    "tiny_prompts": "--n 64 --prompt-dist uniform:4,24 --prompt-min 4 --prompt-max 24 "
                    "--output-dist normal:60,20 --output-min 8 --output-max 120 --arrival poisson:2 --seed 9",
    # 64 requests sharing one 257-token prefix, each with a unique tail of 1 to 5 tokens, Poisson at
    # 2 per step: once the prefix is cached a prompt needs fewer than 1 + k tokens, so under a
    # 64-token budget the next step cannot give every new decoder its 1 + k
    "prefix_tails": "--n 64 --prompt-dist uniform:1,5 --prompt-min 1 --prompt-max 5 "
                    "--output-dist normal:60,20 --output-min 8 --output-max 120 --arrival poisson:2 "
                    "--shared-prefix-len 257 --shared-prefix-frac 1.0 --seed 10",
    "cached_prompts": "hand",
    "aligned_stops": "hand",
}


def _cached_prompts() -> dict:
    """Requests whose whole prompt is a shared prefix of 16 m + 1 tokens: once it is cached, a later
    arrival hits all but its last token (1 token to compute: vLLM pads it to 1 + k)."""
    rng = random.Random(8)
    prefixes = {"p0": [rng.randrange(3, 32000) for _ in range(16 * 16 + 1)],   # 257 tokens
                "p1": [rng.randrange(3, 32000) for _ in range(16 * 10 + 1)]}   # 161 tokens
    reqs = [{"id": "0", "arrival_step": 0, "max_tokens": 40, "prefix": "p0", "prompt_len": 257},
            {"id": "1", "arrival_step": 0, "max_tokens": 30, "prefix": "p1", "prompt_len": 161}]
    step = 2
    for i in range(2, 32):
        p = "p0" if i % 2 == 0 else "p1"
        plen = len(prefixes[p])
        if i % 5 == 0:
            plen += rng.randrange(8, 80)  # a few with a tail of their own
        reqs.append({"id": str(i), "arrival_step": step, "max_tokens": rng.randrange(4, 48),
                     "prefix": p, "prompt_len": plen})
        step += rng.choice((0, 1, 2, 3))
    return {"generator": "tests/data/oracle_spec/record.py::_cached_prompts (random.Random(8))",
            "seed": 8, "prefixes": prefixes, "requests": reqs}


def _aligned_stops() -> dict:
    """Requests whose prompt + output is a whole number of blocks, arriving two a step: with high
    acceptance a verification runs past the stop and the last token fills the last block."""
    reqs = [{"id": str(i), "arrival_step": i // 2, "max_tokens": B * (6 + i % 5),
             "prompt_len": 64 + B * (i % 4)} for i in range(32)]
    return {"generator": "tests/data/oracle_spec/record.py::_aligned_stops", "seed": 0,
            "prefixes": {}, "requests": reqs}


def _spec(method: str, k: int, acc="0.7", seed: int = 0) -> dict:
    sp: dict = {"method": method, "num_speculative_tokens": k}
    if isinstance(acc, list):
        sp["acceptance_length_probs"] = acc
    else:
        sp["acceptance_rate"] = float(acc)
    sp["seed"] = seed
    return sp


def _case(wl: str, method: str, k: int, blocks: int, pc: bool, mode: str, mbt: int = 512,
          acc="0.7", mtp_layers: int = 1, seed: int = 0) -> dict:
    tag = method if method != "mtp" or mtp_layers == 1 else f"mtp{mtp_layers}"
    name = f"{wl}__{tag}-k{k}__b{blocks}__pc-{'on' if pc else 'off'}__{mode}__mbt{mbt}"
    if isinstance(acc, list):
        name += "__accA" + str(acc.index(1.0))
    elif acc != "0.7":
        name += "__acc" + acc
    cfg = {"block_size": B, "max_num_seqs": min(256, mbt), "max_num_batched_tokens": mbt,
           "enable_chunked_prefill": True, "long_prefill_token_threshold": 0,
           "num_gpu_blocks": blocks, "enable_prefix_caching": pc,
           "async_scheduling": mode == "async", "speculative": _spec(method, k, acc, seed)}
    if mtp_layers > 1:
        cfg["speculative"]["num_mtp_modules"] = mtp_layers  # (the planner's field; the tool gets the checkpoint)
    return {"name": name, "workload": wl, "config": cfg, "mtp_layers": mtp_layers}


CASES = [
    # n-gram
    _case("burst48", "ngram", 3, 10000, True, "sync"),
    _case("burst48", "ngram", 3, 300, True, "sync"),
    _case("burst48", "ngram", 3, 300, False, "sync"),
    _case("burst48", "ngram", 1, 300, True, "async"),
    _case("burst48", "ngram", 3, 300, True, "sync", acc="0.0"),
    _case("poisson48", "ngram", 5, 10000, True, "async", mbt=128),
    _case("poisson48", "ngram", 1, 10000, False, "sync"),
    _case("cached_prompts", "ngram", 3, 10000, True, "sync"),
    _case("cached_prompts", "ngram", 3, 10000, True, "async"),
    _case("short_out", "ngram", 5, 40, True, "sync", acc="1.0"),
    _case("prefix256", "ngram", 3, 200, True, "sync"),
    _case("prefix256", "ngram", 3, 10000, True, "async"),
    _case("long_decode", "ngram", 3, 120, True, "sync"),
    # EAGLE
    _case("burst48", "eagle", 3, 10000, True, "sync"),
    _case("burst48", "eagle", 3, 300, True, "sync"),
    _case("burst48", "eagle", 3, 300, False, "sync"),
    _case("burst48", "eagle", 1, 300, False, "async"),
    _case("burst48", "eagle", 5, 300, True, "async"),
    _case("burst48", "eagle", 3, 300, True, "async", acc=[0.0, 0.0, 1.0, 0.0]),
    _case("prefix256", "eagle", 3, 10000, True, "sync"),
    _case("prefix256", "eagle", 3, 10000, True, "async"),
    _case("prefix200", "eagle", 3, 10000, True, "sync"),
    _case("cached_prompts", "eagle", 3, 10000, True, "sync"),
    _case("short_out", "eagle", 3, 40, True, "async", acc="1.0"),
    _case("poisson48", "eagle", 3, 10000, False, "async", mbt=128),
    _case("long_decode", "eagle", 5, 120, True, "sync"),
    # EAGLE-3
    _case("burst48", "eagle3", 3, 300, True, "sync"),
    _case("prefix256", "eagle3", 1, 250, True, "async"),
    _case("cached_prompts", "eagle3", 5, 10000, True, "async"),
    _case("poisson48", "eagle3", 3, 10000, True, "async", mbt=128),
    _case("short_out", "eagle3", 5, 10000, False, "sync", acc="1.0"),
    _case("prefix200", "eagle3", 3, 200, True, "sync"),
    # MTP (DeepSeek-V3: one MTP module)
    _case("burst48", "mtp", 1, 300, True, "sync"),
    _case("prefix256", "mtp", 3, 10000, True, "sync"),
    _case("cached_prompts", "mtp", 3, 10000, True, "sync"),
    _case("poisson48", "mtp", 3, 160, True, "async", mbt=128),
    _case("long_decode", "mtp", 3, 120, False, "async"),
    _case("short_out", "mtp", 1, 40, True, "sync", acc="1.0"),
    # MTP with three modules (multi-module MTP: vLLM's prefill lookahead of k)
    _case("prefix256", "mtp", 3, 10000, True, "sync", mtp_layers=3),
    _case("burst48", "mtp", 3, 300, True, "async", mtp_layers=3),
    _case("tiny_prompts", "mtp", 3, 10000, False, "sync", mbt=64, mtp_layers=3),
    # a 64-token budget: prompts of a few tokens, each taking one step
    _case("tiny_prompts", "ngram", 3, 10000, True, "async", mbt=64),
    _case("tiny_prompts", "eagle", 3, 10000, False, "async", mbt=64),
    _case("tiny_prompts", "mtp", 5, 50, True, "async", mbt=64),
    _case("tiny_prompts", "draft_model", 1, 10000, True, "async", mbt=64),
    _case("tiny_prompts", "ngram", 5, 10000, True, "sync", mbt=64),
    # a 64-token budget that leaves running decoders out of an async step (prompts of 2 to 6
    # tokens past a cached prefix: fewer than the 1 + k each wants at its next step)
    _case("prefix_tails", "ngram", 5, 10000, True, "async", mbt=64),
    _case("prefix_tails", "eagle", 3, 10000, True, "async", mbt=64),
    _case("prefix_tails", "eagle3", 5, 10000, True, "async", mbt=64),
    _case("prefix_tails", "draft_model", 3, 10000, True, "async", mbt=64),
    _case("prefix_tails", "ngram", 5, 10000, True, "sync", mbt=64),
    # KV pressure with prefix caching: blocks verified, then the request preempted (or finished)
    _case("long_decode", "eagle3", 3, 120, True, "sync"),
    _case("long_decode", "draft_model", 5, 120, True, "sync"),
    _case("burst48", "ngram", 5, 200, True, "sync", acc="0.9"),
    _case("short_out", "ngram", 3, 40, True, "async", acc="1.0"),
    _case("long_decode", "ngram", 5, 120, True, "async", acc="1.0"),
    _case("long_decode", "eagle", 3, 160, True, "sync", acc="0.9"),
    # prompt + output a whole number of blocks: a stop inside a verification at a block's end
    _case("aligned_stops", "ngram", 3, 110, True, "sync", acc="1.0"),
    _case("aligned_stops", "ngram", 5, 80, True, "async", acc="1.0"),
    _case("aligned_stops", "draft_model", 5, 110, True, "sync", acc="1.0"),
    _case("aligned_stops", "eagle", 5, 110, True, "async", acc="1.0"),
    # draft model
    _case("burst48", "draft_model", 3, 10000, True, "sync"),
    _case("burst48", "draft_model", 3, 300, True, "sync"),
    _case("burst48", "draft_model", 1, 300, False, "async"),
    _case("poisson48", "draft_model", 5, 10000, True, "async", mbt=128),
    _case("cached_prompts", "draft_model", 3, 10000, True, "sync"),
    _case("prefix256", "draft_model", 3, 10000, True, "sync"),
    _case("short_out", "draft_model", 5, 40, True, "sync", acc="1.0"),
    _case("long_decode", "draft_model", 3, 120, True, "async"),
]


def _load_tool(path: str):
    spec = importlib.util.spec_from_file_location("run_oracle_spec", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["run_oracle_spec"] = mod
    spec.loader.exec_module(mod)
    return mod


def make_workload(tool_dir: Path, name: str) -> dict:
    args = WORKLOADS[name]
    if args == "hand":
        return {"cached_prompts": _cached_prompts, "aligned_stops": _aligned_stops}[name]()
    spec = importlib.util.spec_from_file_location("make_workload", tool_dir / "make_workload.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "wl.json"
        mod.main(args.split() + ["--compact", "-o", str(out)])
        return json.loads(out.read_text())


def _mtp_dir(tool, layers: int) -> str:
    """A tiny DeepSeek-V3 config.json with ``layers`` MTP modules (no weights are ever loaded)."""
    cfg = dict(tool.TINY_MODEL_CONFIG)
    cfg.update({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
                "num_nextn_predict_layers": layers, "kv_lora_rank": 16, "q_lora_rank": None,
                "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 4,
                "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_shared_experts": 1,
                "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0,
                "scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": True,
                "moe_layer_freq": 1})
    d = tempfile.mkdtemp(prefix="oracle_tiny_mtp_")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    return d


@contextlib.contextmanager
def _real_method(tool, method: str, mtp_layers: int):
    """While the tool builds its scheduler (with ``method="eagle"``), vLLM's ``SpeculativeConfig``
    is built with ``method`` instead (and, for MTP, the tiny DeepSeek-V3 MTP config as its model)."""
    import vllm.config as vc

    # (everything the run imports later is imported first: modules that annotate with the class)
    import vllm.sampling_params  # noqa: F401
    import vllm.v1.core.sched.async_scheduler  # noqa: F401
    import vllm.v1.outputs  # noqa: F401
    import vllm.v1.request  # noqa: F401
    import vllm.v1.structured_output  # noqa: F401

    real = vc.SpeculativeConfig
    mtp_model = _mtp_dir(tool, mtp_layers) if method == "mtp" else None

    def build(**kw):
        kw["method"] = method
        if mtp_model is not None:
            kw["model"] = mtp_model
        return real(**kw)

    vc.SpeculativeConfig = build
    try:
        yield
    finally:
        vc.SpeculativeConfig = real


def record(tool, workload: dict, case: dict, patches=()) -> dict:
    """One case through the tool: its output (steps columnar). ``patches``: context managers entered
    around the run (the ablations of the analysis script; none for the recorded cases)."""
    cfg = json.loads(json.dumps(case["config"]))
    cfg["speculative"].pop("num_mtp_modules", None)  # (the tool refuses it: vLLM reads the MTP checkpoint's)
    method = cfg["speculative"]["method"]
    with contextlib.ExitStack() as stack:
        if method in ("eagle3", "mtp"):
            cfg["speculative"]["method"] = "eagle"
            stack.enter_context(_real_method(tool, method, case["mtp_layers"]))
        for p in patches:
            stack.enter_context(p)
        out = tool.run(workload, cfg)
    out["config"]["speculative"]["method"] = method
    if method == "mtp":
        out["config"]["mtp_num_nextn_predict_layers"] = case["mtp_layers"]
    out["steps"] = tool.to_columnar(out["steps"])
    for k in ("wall_build_s", "wall_run_s"):
        out["totals"].pop(k, None)  # (machine-dependent: kept out of the golden data)
    return out


# --------------------------------------------------------------------------------------------------
# Ablations (--ablate): which rule changes each case. Each switches one rule of vLLM 0.33 off, that is
# makes vLLM do what the planner's engine did before it followed the rule (docs/speculative_decoding.md, "vLLM 0.33's
# rules, step by step"); a rule "changes the outcome" of a case when vLLM without it schedules
# differently (tokens per request per step, preemptions, KV blocks used, a request's first-token or
# finish step, preemptions or prefix hits).
# --------------------------------------------------------------------------------------------------
def _patched(cls, name: str, edits: list[tuple[str, str]]):
    """cls.name recompiled from its vLLM source with textual edits (each must apply once)."""
    import vllm.v1.core.sched.scheduler as smod
    fn = getattr(cls, name)
    src = textwrap.dedent(inspect.getsource(fn))
    for old, new in edits:
        assert src.count(old) == 1, (name, old, src.count(old))
        src = src.replace(old, new)
    g = dict(vars(smod))
    exec(compile(src, f"<patched {name}>", "exec"), g)
    return g[name]


@contextlib.contextmanager
def _swap(cls, name, new):
    old = cls.__dict__[name]
    setattr(cls, name, new)
    try:
        yield
    finally:
        setattr(cls, name, old)


def r1_sync_cache_after_verification():
    """R1 off: synchronous scheduling caches no block after a verification (only allocate_slots does)."""
    from vllm.v1.core.sched.scheduler import Scheduler
    return _swap(Scheduler, "update_from_output", _patched(Scheduler, "update_from_output", [
        ("and (has_output_placeholders or self.num_spec_tokens > 0)", "and has_output_placeholders")]))


def r2_lookahead_at_admission():
    """R2 off: no lookahead slots for a waiting or preempted request being admitted."""
    from vllm.v1.core.kv_cache_manager import KVCacheManager
    from vllm.v1.request import RequestStatus
    real = KVCacheManager.allocate_slots

    def alloc(self, request, num_new_tokens, *a, **kw):
        if request.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED):
            kw["num_lookahead_tokens"] = 0
        return real(self, request, num_new_tokens, *a, **kw)
    return _swap(KVCacheManager, "allocate_slots", alloc)


def r3_async_keeps_placeholders():
    """R3 off: after an async schedule call, running requests it left out drop their draft placeholders."""
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    real = AsyncScheduler._update_after_schedule

    def after(self, so):
        real(self, so)
        for r in self.running:
            if r.request_id not in so.num_scheduled_tokens:
                r.spec_token_ids = []
    return _swap(AsyncScheduler, "_update_after_schedule", after)


@contextlib.contextmanager
def r4_hash_with_next_token():
    """R4 off: block hashes cover the block's tokens only (num_hash_lookahead_tokens 0)."""
    import vllm.v1.core.kv_cache_utils as ku
    real = ku.get_request_block_hasher
    ku.get_request_block_hasher = lambda bs, fn, look=0: real(bs, fn, 0)
    try:
        yield
    finally:
        ku.get_request_block_hasher = real


def r5_stop_trims_computed():
    """R5 off: a stop inside a verification leaves num_computed_tokens untrimmed (so caching reaches further)."""
    from vllm.v1.core.sched.scheduler import Scheduler
    return _swap(Scheduler, "_update_request_with_output", _patched(Scheduler, "_update_request_with_output", [
        ("request.num_computed_tokens -= len(new_token_ids) - num_new", "pass")]))


def r6_draft_model_slot():
    """R6 off: the draft model takes no input slot beyond the tokens scheduled."""
    from vllm.config.speculative import SpeculativeConfig
    return _swap(SpeculativeConfig, "max_num_new_slots_for_drafting", property(lambda self: 0))


def r7_pad_cached_prompt():
    """R7 off: a request admitted with one token to compute is not padded to 1 + k."""
    from vllm.v1.core.sched.scheduler import Scheduler
    return _swap(Scheduler, "schedule", _patched(Scheduler, "schedule", [
        ("(self.num_spec_tokens > 0 and self.dynamic_sd_lookup is None)", "(False)")]))


def r8_mtp_prefill_lookahead():
    """R8 off: a prefill chunk may end within num_prefill_lookahead tokens of the prompt's end."""
    from vllm.v1.core.sched.scheduler import Scheduler
    return _swap(Scheduler, "_reserve_prefill_lookahead",
                 lambda self, request, num_computed_tokens, num_new_tokens: num_new_tokens)


RULES = {"R1": r1_sync_cache_after_verification, "R2": r2_lookahead_at_admission,
         "R3": r3_async_keeps_placeholders, "R4": r4_hash_with_next_token,
         "R5": r5_stop_trims_computed, "R6": r6_draft_model_slot, "R7": r7_pad_cached_prompt,
         "R8": r8_mtp_prefill_lookahead}


def applicable(case: dict) -> list[str]:
    """The rules that can apply to a case (the others are not in vLLM's path for it)."""
    c = case["config"]
    m = c["speculative"]["method"]
    out = []
    if not c["async_scheduling"]:
        out.append("R1")
    if m != "ngram":
        out.append("R2")
    if c["async_scheduling"]:
        out.append("R3")
    if m in ("eagle", "eagle3", "mtp") and c["enable_prefix_caching"]:
        out.append("R4")
    out.append("R5")
    if m == "draft_model":
        out.append("R6")
    out.append("R7")
    if m == "mtp" and case["mtp_layers"] > 1:
        out.append("R8")
    return out


def signature(out: dict):
    """What a run decided: per schedule call (step, tokens per request, preempted, blocks used), per request."""
    s = out["steps"]
    pre = s.get("preempted_ids") or [None] * len(s["step"])
    steps = [(st, tuple(zip(ids, toks)), tuple(sorted(p or [])), u) for st, ids, toks, p, u in
             zip(s["step"], s["sched_ids"], s["sched_tokens"], pre, s["kv_blocks_used"])]
    reqs = [(r["id"], r["first_token_step"], r["finish_step"], r["num_preemptions"], r["prefix_hit_tokens"])
            for r in out["requests"]]
    return steps, reqs


def first_diff(a, b):
    """The first step where two signatures part (None: the same run)."""
    for x, y in zip(a[0], b[0]):
        if x != y:
            return x[0]
    if len(a[0]) != len(b[0]):
        return min(len(a[0]), len(b[0]))
    return None if a[1] == b[1] else "requests"


def ablate(tool, workload: dict, case: dict, keep: Path | None) -> dict:
    """{rule: first step where vLLM without it departs from vLLM, or None} for the case's rules."""
    real = signature(record(tool, workload, case))
    rules = applicable(case)
    out = {r: first_diff(real, signature(record(tool, workload, case, [RULES[r]()]))) for r in rules}
    if keep is not None:  # vLLM with every rule off: what the engine should do today
        write_json(keep / f"{case['name']}.json.gz", record(tool, workload, case, [RULES[r]() for r in rules]))
    return out


def write_json(path: Path, obj, indent=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(obj, separators=(",", ":") if indent is None else None, indent=indent)
    if path.suffix == ".gz":
        with gzip.GzipFile(path, "wb", mtime=0) as f:  # (mtime 0: the same bytes every time)
            f.write(text.encode())
    else:
        path.write_text(text + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tool", required=True, help="path of run_oracle_spec.py")
    ap.add_argument("--out", required=True, help="output directory (tests/data/oracle_spec)")
    ap.add_argument("--only", nargs="*", help="case names to record (default: all)")
    ap.add_argument("--ablate", action="store_true",
                    help="instead of recording: which rules change each case (expected.json 'exercises')")
    ap.add_argument("--keep-ablated", help="with --ablate: write vLLM's run with every rule off here")
    a = ap.parse_args(argv)
    tool = _load_tool(a.tool)
    out = Path(a.out)
    expected = out / "expected.json"
    exp = json.loads(expected.read_text()) if expected.exists() else {"diverges": {}}
    wls = {}
    for case in CASES:
        if a.only and case["name"] not in a.only:
            continue
        wl = case["workload"]
        if a.ablate:
            wls.setdefault(wl, json.loads((out / "workloads" / f"{wl}.json").read_text()))
            keep = Path(a.keep_ablated) if a.keep_ablated else None
            changes = ablate(tool, wls[wl], case, keep)
            exp.setdefault("exercises", {})[case["name"]] = sorted(r for r, v in changes.items() if v is not None)
            print(case["name"], {r: v for r, v in changes.items() if v is not None}, flush=True)
            write_json(expected, exp, indent=1)
            continue
        if wl not in wls:
            wls[wl] = make_workload(Path(a.tool).parent, wl)
            write_json(out / "workloads" / f"{wl}.json", wls[wl])
        write_json(out / "configs" / f"{case['name']}.json", case["config"], indent=1)
        res = record(tool, wls[wl], case)
        write_json(out / "runs" / f"{case['name']}.json.gz", res)
        t = res["totals"]
        print(f"{case['name']}: steps={t['num_steps']} preemptions={t['preemptions']} "
              f"padded={t.get('spec_num_padded_drafts')} hits={t['prefix_cache_hits']}", flush=True)


if __name__ == "__main__":
    main()
