"""First-principles memory of vLLM's start-up profiling, besides the weights and the KV cache.

vLLM (v1 ``gpu_worker.determine_available_memory``) loads the weights, runs one
dummy forward of ``max_num_batched_tokens`` tokens and one dummy sampler run,
and takes off the budget: the activation peak (:func:`activation_bytes`), the
memory torch does not see (:func:`non_torch_bytes`: CUDA context, NCCL
buffers), from vLLM 0.21 its CUDA-graph estimate (:data:`CUDAGRAPH_GIB`,
:func:`cudagraph_subtracted`), the LoRA slots (:func:`lora_bytes_per_gpu`) and a
multimodal model's encoder cache (:func:`encoder_cache_bytes`). What changes
with the vLLM version is in :class:`VersionRules`. Each term's source is in
``docs/sizing.md`` ("First-principles memory", "Version rules").

Pure: no Django. Units: ``# bytes`` unless a name ends in ``_gib``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simulator.base import DTYPE_BYTES, GIB, DeploymentSpec, GpuSpec, ModelSpec, SpecError
from simulator.sizing.moe_parallel import expert_split, shared_expert_tp, uses_all2all

#: Dtypes a model computes in (vLLM's ``--dtype``); every other dtype is a storage format.
ACTIVATION_DTYPES = ("fp32", "bf16", "fp16")


def compute_dtype(model: ModelSpec, deployment: DeploymentSpec) -> str:
    """The activation dtype vLLM runs the model in.

    ``deployment.dtype`` when it is bf16 / fp16 / fp32; for ``auto`` or a
    storage type (``int4``, ``fp8``... the weights' format, not vLLM's
    ``--dtype``), the checkpoint's 16-bit dtype, bf16 for fp32 or quantized
    checkpoints, as vLLM does. Never a sub-16-bit type: activations (and so
    the ``auto`` KV cache) stay bf16/fp16 whatever the weights are stored in.
    """
    if deployment.dtype in ACTIVATION_DTYPES:
        return deployment.dtype
    d = model.weights_dtype
    return d if d in ("bf16", "fp16") else "bf16"



#: Bytes per (sequence x vocabulary) entry of vLLM's dummy sampler run at profiling, by sampler path
#: (:func:`sampler_path`). The sort-based top-k/top-p path keeps alive, per logit: the bf16 logits of
#: ``compute_logits`` (2), their fp32 copy (4), ``logits.sort`` values (4) and int64 indices (8), the top-p softmax
#: and cumsum (4 + 4), the mask (1), the scattered logits (4), probabilities and exponential noise (4 + 4): 39 bytes
#: (``topk_topp_sampler.apply_top_k_top_p``); fitted 38.5 on the logs in docs/sizing.md.
SAMPLER_BYTES_PER_LOGIT = {
    "v0": 38.5,  # V0 engine (<= 0.6): dummy top-k/top-p sampling, full sort (R01, R16, R18)
    "0.7-0.10": 12.0,  # V1 0.7 - 0.10: dummy sampler, no top-k/top-p warm-up in the profile (R30, R32, R35)
    "mrv1": 38.5,  # model runner V1 from 0.11: top-k/top-p with a full sort (llm-d 0.11 H100 logs, R42; vLLM #33920)
    "mrv2": 5.0,  # model runner V2 (dense models from 0.25, all from 0.29): no full-vocabulary sort (R13, R19, R21)
}
#: vLLM 0.25.0 (release notes, PR #44443): model runner V2 the default for dense models; 0.29: for all models.
MRV2_DENSE_SINCE = (0, 25)
MRV2_ALL_SINCE = (0, 29)
#: vLLM 0.29: "batch-sharded sampling" splits the sampler's logits over the TP ranks (release notes).
SHARDED_SAMPLING_SINCE = (0, 29)
#: The post-KV warm-up (``gpu_worker.compile_or_warm_up_model``: ``_dummy_run(max_num_reqs)`` then
#: ``_dummy_sampler_run``, after the KV cache and the CUDA graphs took their memory) needs this many times the
#: profiled sampler transient on model runner V1's sort-based path. Fitted, not derived: gpt-oss-20b on an H100 dies
#: warming up the sampler at gpu_memory_utilization 0.95 (issue 31: needs > 1.48), while R42 (0.9), R36 (Mistral
#: Small at 0.95) and llm-d's 0.11 runs at 0.9 start.
WARMUP_SAMPLER_FACTOR = 1.6
#: Non-torch memory (CUDA context not counted by torch, cuBLAS workspaces), one GPU.
NON_TORCH_GIB = 0.13  # GiB
#: Extra non-torch memory with tensor parallelism (NCCL communicator buffers, custom all-reduce IPC buffers):
#: R32 (0.10.1.1 TP 2, custom all-reduce off) and llm-d's 0.11 H100 TP 2 run (0.55 printed); R13 (0.27.1 TP 2 over
#: PCIe) fits it too.
NON_TORCH_MULTI_GPU_GIB = 0.42  # GiB
#: Extra non-torch memory with tensor parallelism over NVLink from vLLM 0.16: NCCL's NVLink-SHARP / symmetric-memory
#: all-reduce buffers come on top (about 2 GiB per GPU in all on the vLLM 0.19 H100 logs issue 31 cites). The
#: latency study's vLLM 0.15.1 H100 runs (simulator/data/latency_trainval: TP 2 and 4, measured KV blocks) still
#: show the small figure, so 0.16 is the first release it can be (approximate); by 0.25 it is gone again (vLLM PR
#: #48601, 2026-07-14, main after 0.24: "0.6 GiB for non-torch memory" at TP 4 on H100), so the window ends there.
NON_TORCH_NVLINK_TP_GIB = 1.87  # GiB
NVLINK_TP_SINCE = (0, 16)
NVLINK_TP_UNTIL = (0, 25)
#: A GPU-to-GPU link at least this fast (GB/s, both directions) counts as NVLink (H100 SXM 900, A100 SXM 600;
#: PCIe Gen5 x16 128).
NVLINK_MIN_GBPS = 300.0
#: Extra non-torch memory with pipeline parallelism alone: NCCL point-to-point send/recv buffers, no all-reduce
#: (an estimate: "much less" than TP per issue 31; no published log prints it).
NON_TORCH_PP_GIB = 0.10  # GiB
#: Extra non-torch memory of an MoE model's expert-parallel group when DP > 1 (the all-gather / reduce-scatter
#: all-to-all of vLLM's default ``allgather_reducescatter`` backend runs over the EP group's own NCCL communicator).
#: An estimate, the TP communicator's figure: no public DP / EP start-up log found prints it (docs/moe_parallelism.md).
NON_TORCH_EP_GROUP_GIB = 0.42  # GiB
#: CUDA-graph memory estimate when it is subtracted (median of the logs: 0.39-1.88 GiB, some negative).
CUDAGRAPH_GIB = 0.5  # GiB
#: Hidden-size-wide buffers alive at the forward peak (residual, hidden states, layer output).
FORWARD_HIDDEN_COPIES = 3


#: The newest vLLM these rules were checked against (the default when no version is given).
NEWEST_VLLM = "0.28"
#: First vLLM release that subtracts its CUDA-graph memory estimate before sizing the KV cache by default
#: (its start-up log: "CUDA graph memory profiling is enabled (default since v0.21.0)"; the estimate came in
#: vLLM PR #30515, off by default, and ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0`` turns it off again).
CUDAGRAPH_SUBTRACTED_SINCE = (0, 21)
#: First vLLM release whose "GPU KV cache size" is ``int(max concurrency x max_model_len)`` for hybrid models
#: (``kv_cache_utils._report_kv_cache_config``); before, ``num_blocks // num_groups x block_size``. vLLM 0.19.0
#: still printed the latter (vLLM issue #40691: 290,864 tokens beside 33.04x of 32,768); the fix is PR #40694
#: (2026-04-23), so 0.20 is our dating of the first release with it (approximate, no release note says so).
HYBRID_CONCURRENCY_TOKENS_SINCE = (0, 20)
#: First vLLM release whose engine schedules asynchronously by default (``--async-scheduling`` on: the engine core
#: keeps two steps in flight, ``EngineCore.step_with_batch_queue``; the sim-to-real study's vLLM 0.15.1 runs are
#: async). Read by the search, the sweeps and the replicas through :func:`default_async_scheduling` (issue 30).
ASYNC_SCHEDULING_SINCE = (0, 14)


def _version_tuple(version: str | None) -> tuple[int, int]:
    if version is None:
        return tuple(int(x) for x in NEWEST_VLLM.split("."))  # type: ignore[return-value]
    nums = re.findall(r"\d+", version)
    return (int(nums[0]) if nums else 0, int(nums[1]) if len(nums) > 1 else 0)


def _version_key(version: str | None) -> str:
    major, minor = _version_tuple(version)
    if major > 0 or minor >= 11:
        return "v1"
    if minor >= 7:
        return "0.7-0.10"
    return "v0"


def sampler_path(model: ModelSpec | None, version: str | None) -> str:
    """The sampler warm-up vLLM ``version`` profiles for ``model``: a key of :data:`SAMPLER_BYTES_PER_LOGIT`.

    ``v0`` (< 0.7), ``0.7-0.10``, then model runner V1 (``mrv1``, sort-based top-k/top-p) until model runner V2
    (``mrv2``) became the default: dense models from 0.25 (:data:`MRV2_DENSE_SINCE`), MoE models from 0.29.
    """
    key = _version_key(version)
    if key != "v1":
        return key
    vt = _version_tuple(version)
    moe = bool(model is not None and model.is_moe)
    return "mrv2" if vt >= MRV2_ALL_SINCE or (vt >= MRV2_DENSE_SINCE and not moe) else "mrv1"


@dataclass(frozen=True)
class VersionRules:
    """What changes with the vLLM version (docs/sizing.md, "Version rules").

    Attributes
    ----------
    version : str
        The version the rules are for (``NEWEST_VLLM`` when none was given).
    sampler_key : str
        Row of :data:`SAMPLER_BYTES_PER_LOGIT` for a dense model (:func:`sampler_path` per model).
    cudagraph_subtracted : bool
        The CUDA-graph estimate comes off the KV budget before sizing (>= 0.21 by default).
    hybrid_tokens_rule : str
        ``"blocks_per_group"`` (< 0.20: "GPU KV cache size" = blocks // groups x block_size) or
        ``"concurrency_x_len"`` (>= 0.20: int(max concurrency x max_model_len)) for hybrid models
        (:data:`HYBRID_CONCURRENCY_TOKENS_SINCE`).
    async_scheduling : bool
        The engine schedules asynchronously by default (>= 0.14, :data:`ASYNC_SCHEDULING_SINCE`).
    """

    version: str
    sampler_key: str
    cudagraph_subtracted: bool
    hybrid_tokens_rule: str
    async_scheduling: bool = True

    @property
    def summary(self) -> str:
        cg = "CUDA-graph memory subtracted before sizing" if self.cudagraph_subtracted else \
            "CUDA-graph memory not subtracted"
        tok = "hybrid KV size = blocks / groups x block_size" if self.hybrid_tokens_rule == "blocks_per_group" \
            else "hybrid KV size = max concurrency x max_model_len"
        return f"vLLM {self.version} rules: sampler profile '{self.sampler_key}', {cg}, {tok}"


def cudagraph_subtracted(deployment: DeploymentSpec) -> bool:
    """Whether the CUDA-graph estimate comes off the KV budget: ``subtract_cudagraph`` when given, else the
    vLLM version's default (:data:`CUDAGRAPH_SUBTRACTED_SINCE`)."""
    if deployment.subtract_cudagraph is not None:
        return deployment.subtract_cudagraph
    return version_rules(deployment.vllm_version).cudagraph_subtracted


def version_rules(version: str | None) -> VersionRules:
    """The :class:`VersionRules` of a vLLM version (``None`` = the newest, :data:`NEWEST_VLLM`)."""
    vt = _version_tuple(version)
    return VersionRules(
        version=(version or NEWEST_VLLM).strip().lstrip("v"),
        sampler_key=sampler_path(None, version),
        cudagraph_subtracted=vt >= CUDAGRAPH_SUBTRACTED_SINCE,
        hybrid_tokens_rule="blocks_per_group" if vt < HYBRID_CONCURRENCY_TOKENS_SINCE else "concurrency_x_len",
        async_scheduling=vt >= ASYNC_SCHEDULING_SINCE,
    )


def default_async_scheduling(version: str | None, chosen: bool | None = None) -> bool:
    """Whether a deployment of vLLM ``version`` (None: the newest) schedules asynchronously: ``chosen`` when
    given (the synchronous scheduler one option away), else the version's default (:data:`ASYNC_SCHEDULING_SINCE`)."""
    if chosen is not None:
        return bool(chosen)
    return version_rules(version).async_scheduling


def default_batch_knobs(model: ModelSpec, gpu: GpuSpec, deployment: DeploymentSpec) -> tuple[int, int, int]:
    """``(max_model_len, max_num_batched_tokens, max_num_seqs)`` with vLLM's defaults filled in.

    vLLM's online-serving defaults: 8192 tokens / 1024 sequences on GPUs with
    >= 70 GiB other than A100, else 2048 / 256. The V0 engine (``vllm_version``
    < 0.7) without chunked prefill batches ``max(max_model_len, 2048)`` tokens.
    """
    mml = deployment.max_model_len or model.max_position_embeddings
    if mml is None:
        raise SpecError("required (the model gives no max_position_embeddings)", field="max_model_len")
    big = gpu.memory_gib >= 70 and "a100" not in gpu.name.lower()
    v0 = _version_key(deployment.vllm_version) == "v0"
    if deployment.max_num_batched_tokens is not None:
        mnbt = deployment.max_num_batched_tokens
    elif v0:
        mnbt = max(mml, 2048)
    else:
        mnbt = 8192 if big else 2048
    seqs = deployment.max_num_seqs or (1024 if big and not v0 else 256)
    return mml, mnbt, seqs


def forward_activation_bytes(model: ModelSpec, deployment: DeploymentSpec, max_num_batched_tokens: int) -> float:
    """Peak of the dummy forward pass of ``max_num_batched_tokens`` tokens (``profile_run`` -> ``_dummy_run``).  # bytes

    ``T x a x (3 x hidden + widest)``: ``T = max_num_batched_tokens``, ``a`` the compute dtype's bytes, three
    hidden-wide buffers (residual, hidden states, layer output) and the widest per-rank intermediate of one layer:
    ``3 x I / tp`` for a gated MLP, ``top_k x (3 x I_expert / tp + hidden)`` plus shared experts for MoE (the
    fused-MoE caches), ``(2 q_heads + 2 kv_heads) x head_dim / tp`` for attention. R01: 2.06 vs 2.07 GiB printed.
    Under DP / EP the expert width is the per-GPU one (:func:`simulator.sizing.moe_parallel.expert_split`:
    whole experts with EP, split ``TP x DP`` ways without) and the shared experts' split
    :func:`~simulator.sizing.moe_parallel.shared_expert_tp`; the token count stays ``T`` (an approximation: vLLM's
    DP MoE chunks the gathered tokens, ``VLLM_MOE_DP_CHUNK_SIZE``).
    """
    tp = deployment.tensor_parallel_size
    a = DTYPE_BYTES[compute_dtype(model, deployment)]
    H = model.hidden_size
    mats = 3 if model.gated_mlp else 2
    widths = [mats * model.intermediate_size / tp] if (not model.is_moe or model.num_dense_layers) else []
    if model.is_moe:
        ie = model.moe_intermediate_size or model.intermediate_size
        w = model.num_experts_per_tok * (mats * ie / expert_split(deployment) + H)
        si = model.shared_expert_intermediate_size or ie
        w += model.num_shared_experts * mats * si / shared_expert_tp(deployment)
        widths.append(w)
    widths.append((model.num_attention_heads * 2 + 2 * model.num_kv_heads) * model.head_dim / tp)
    return float(max_num_batched_tokens * a * (FORWARD_HIDDEN_COPIES * H + max(widths)))


def sampler_requests(deployment: DeploymentSpec, max_num_batched_tokens: int, max_num_seqs: int) -> float:
    """Dummy requests the sampler warm-up samples on one GPU: ``min(max_num_seqs, T)`` (``_dummy_run`` gives one
    logit row per request), divided by TP from vLLM 0.29 (batch-sharded sampling).  # requests"""
    n = min(max_num_seqs, max_num_batched_tokens)
    if _version_tuple(deployment.vllm_version) >= SHARDED_SAMPLING_SINCE:
        return n / deployment.tensor_parallel_size
    return float(n)


def sampler_bytes(model: ModelSpec, deployment: DeploymentSpec, max_num_batched_tokens: int,
                  max_num_seqs: int) -> float:
    """Peak of the dummy sampler run (``profile_run`` -> ``_dummy_sampler_run``) on the last pipeline stage.  # bytes

    ``requests x vocab x b``: :func:`sampler_requests` rows of full-vocabulary logits, ``b`` bytes per logit of
    the version's sampler path (:func:`sampler_path`, :data:`SAMPLER_BYTES_PER_LOGIT`).
    """
    b = SAMPLER_BYTES_PER_LOGIT[sampler_path(model, deployment.vllm_version)]
    return float(sampler_requests(deployment, max_num_batched_tokens, max_num_seqs) * model.vocab_size * b)


def activation_bytes(model: ModelSpec, deployment: DeploymentSpec, max_num_batched_tokens: int,
                     max_num_seqs: int) -> float:
    """Peak activation of vLLM's profiling run on one GPU: ``max(forward, sampler)``.  # bytes

    The forward pass (:func:`forward_activation_bytes`) and the sampler warm-up (:func:`sampler_bytes`) run one
    after the other in ``profile_run``; torch's peak is the larger of the two.
    """
    return max(forward_activation_bytes(model, deployment, max_num_batched_tokens),
               sampler_bytes(model, deployment, max_num_batched_tokens, max_num_seqs))


def warmup_sampler_need_bytes(model: ModelSpec, deployment: DeploymentSpec, max_num_batched_tokens: int,
                              max_num_seqs: int) -> float:
    """Free memory the post-KV sampler warm-up needs on one GPU (``compile_or_warm_up_model``).  # bytes

    ``WARMUP_SAMPLER_FACTOR x sampler`` on model runner V1 (``mrv1``), one sampler on model runner V2 and 0.7-0.10;
    0 for the V0 engine, which samples inside its profile run and has no warm-up after the KV cache.
    """
    path = sampler_path(model, deployment.vllm_version)
    if path == "v0":
        return 0.0
    factor = WARMUP_SAMPLER_FACTOR if path == "mrv1" else 1.0
    return factor * sampler_bytes(model, deployment, max_num_batched_tokens, max_num_seqs)


def non_torch_rule(deployment: DeploymentSpec, gpu: GpuSpec | None = None,
                   model: ModelSpec | None = None) -> tuple[float, str]:
    """``(GiB, rule)``: non-torch memory on one GPU by communication pattern and vLLM version.

    ``NON_TORCH_GIB`` (CUDA context, cuBLAS workspaces) plus, with TP >= 2, ``NON_TORCH_MULTI_GPU_GIB`` (NCCL and
    custom all-reduce) and on vLLM 0.16 - 0.24 over NVLink ``NON_TORCH_NVLINK_TP_GIB`` more; with pipeline parallelism
    alone ``NON_TORCH_PP_GIB`` (point-to-point buffers); an MoE ``model`` with DP > 1 adds the expert-parallel
    group's communicator (``NON_TORCH_EP_GROUP_GIB``). An unknown link counts as PCIe.
    """
    tp, pp = deployment.tensor_parallel_size, deployment.pipeline_parallel_size
    gib, rule = NON_TORCH_GIB, f"{NON_TORCH_GIB} GiB CUDA context and workspaces"
    if tp > 1:
        nvlink = bool(gpu is not None and gpu.interconnect_gbps and gpu.interconnect_gbps >= NVLINK_MIN_GBPS)
        gib += NON_TORCH_MULTI_GPU_GIB
        rule += f" + {NON_TORCH_MULTI_GPU_GIB} GiB NCCL and custom all-reduce (TP {tp})"
        if nvlink and NVLINK_TP_SINCE <= _version_tuple(deployment.vllm_version) < NVLINK_TP_UNTIL:
            gib += NON_TORCH_NVLINK_TP_GIB
            rule += f" + {NON_TORCH_NVLINK_TP_GIB} GiB NVLink all-reduce buffers (vLLM 0.16 - 0.24 over NVLink)"
        elif not nvlink:
            rule += " (link not NVLink, or not known)"
    elif pp > 1:
        gib += NON_TORCH_PP_GIB
        rule += f" + {NON_TORCH_PP_GIB} GiB NCCL send/recv (PP {pp}, no all-reduce)"
    if model is not None and uses_all2all(model, deployment):
        gib += NON_TORCH_EP_GROUP_GIB
        rule += (f" + {NON_TORCH_EP_GROUP_GIB} GiB the MoE all-to-all's NCCL communicator over "
                 f"{deployment.moe_parallel_size} GPUs (DP {deployment.data_parallel_size}; estimate)")
    return gib, rule


def non_torch_bytes(deployment: DeploymentSpec, gpu: GpuSpec | None = None,
                    model: ModelSpec | None = None) -> float:
    """Non-torch memory on one GPU (:func:`non_torch_rule`).  # bytes"""
    return non_torch_rule(deployment, gpu, model)[0] * GIB


def lora_bytes_per_gpu(model: ModelSpec, deployment: DeploymentSpec) -> float:
    """Memory of vLLM's LoRA slots on one GPU.  # bytes

    vLLM allocates stacked A/B buffers for ``max_loras`` adapters of rank
    ``max_lora_rank`` on every wrapped projection, in the activation dtype:
    column-parallel layers (q/k/v, gate/up) ``r x (in + out / tp)``,
    row-parallel (o, down) ``r x (in / tp + out)``. MoE experts are not counted.
    """
    if not deployment.max_loras:
        return 0.0
    tp, r, H = deployment.tensor_parallel_size, deployment.max_lora_rank, model.hidden_size
    q_out = model.num_attention_heads * model.head_dim
    kv_out = max(1, model.num_kv_heads) * model.head_dim
    inter = model.intermediate_size if (not model.is_moe or model.num_dense_layers) else 0
    shapes = {"q_proj": (H, q_out, "col"), "k_proj": (H, kv_out, "col"), "v_proj": (H, kv_out, "col"),
              "o_proj": (q_out, H, "row"), "gate_proj": (H, inter, "col"), "up_proj": (H, inter, "col"),
              "down_proj": (inter, H, "row")}
    targets = deployment.lora_target_modules or tuple(shapes)
    unknown = [t for t in targets if t not in shapes]
    if unknown:
        raise SpecError(f"unknown module {unknown[0]!r} (known: {', '.join(shapes)})", field="lora_target_modules")
    per_layer = 0.0
    for name in targets:
        i, o, kind = shapes[name]
        per_layer += r * (i + o / tp) if kind == "col" else r * (i / tp + o)
    layers = -(-model.num_layers // deployment.pipeline_parallel_size)  # the fullest pipeline stage
    return per_layer * layers * deployment.max_loras * DTYPE_BYTES[compute_dtype(model, deployment)]


def encoder_cache_bytes(model: ModelSpec, deployment: DeploymentSpec, max_num_batched_tokens: int) -> float:
    """A multimodal model's encoder cache on one GPU.  # bytes

    vLLM sizes the encoder cache at ``max(max_num_batched_tokens, tokens of the
    largest image)`` embeddings and fills it with dummy images in the
    profiling run: ``budget x hidden_size x activation bytes`` (0 for text-only models).
    """
    if not model.mm_tokens_per_item:
        return 0.0
    budget = max(max_num_batched_tokens, model.mm_tokens_per_item)
    return float(budget * model.hidden_size * DTYPE_BYTES[compute_dtype(model, deployment)])


@dataclass(frozen=True)
class Overheads:
    """Everything vLLM takes off the budget besides the weights, one GPU (see :func:`overheads`).  # bytes"""

    activation: float
    non_torch: float
    cudagraph: float
    cudagraph_subtracted: float
    lora: float
    encoder: float

    @property
    def subtracted(self) -> float:
        return self.activation + self.non_torch + self.cudagraph_subtracted + self.lora + self.encoder


def overheads(model: ModelSpec, deployment: DeploymentSpec, rules: VersionRules, mnbt: int,
               seqs: int, gpu: GpuSpec | None = None) -> Overheads:
    """Everything vLLM takes off the budget besides the weights, per GPU.  # bytes"""
    act = deployment.activation_gib * GIB if deployment.activation_gib is not None else \
        activation_bytes(model, deployment, mnbt, seqs)
    nt = deployment.non_torch_gib * GIB if deployment.non_torch_gib is not None else \
        non_torch_bytes(deployment, gpu, model)
    if deployment.cudagraph_gib is not None:
        cg = deployment.cudagraph_gib * GIB
    else:
        cg = 0.0 if deployment.enforce_eager else CUDAGRAPH_GIB * GIB
    sub = cudagraph_subtracted(deployment)
    return Overheads(act, nt, cg, cg if sub else 0.0, lora_bytes_per_gpu(model, deployment),
                      encoder_cache_bytes(model, deployment, mnbt))


__all__ = [
    "ACTIVATION_DTYPES",
    "CUDAGRAPH_GIB",
    "CUDAGRAPH_SUBTRACTED_SINCE",
    "HYBRID_CONCURRENCY_TOKENS_SINCE",
    "NEWEST_VLLM",
    "NON_TORCH_EP_GROUP_GIB",
    "NON_TORCH_GIB",
    "NON_TORCH_MULTI_GPU_GIB",
    "NON_TORCH_NVLINK_TP_GIB",
    "NON_TORCH_PP_GIB",
    "NVLINK_MIN_GBPS",
    "NVLINK_TP_SINCE",
    "NVLINK_TP_UNTIL",
    "MRV2_ALL_SINCE",
    "MRV2_DENSE_SINCE",
    "SAMPLER_BYTES_PER_LOGIT",
    "SHARDED_SAMPLING_SINCE",
    "WARMUP_SAMPLER_FACTOR",
    "Overheads",
    "VersionRules",
    "activation_bytes",
    "compute_dtype",
    "forward_activation_bytes",
    "sampler_bytes",
    "sampler_path",
    "sampler_requests",
    "warmup_sampler_need_bytes",
    "cudagraph_subtracted",
    "default_batch_knobs",
    "encoder_cache_bytes",
    "lora_bytes_per_gpu",
    "non_torch_bytes",
    "non_torch_rule",
    "overheads",
    "version_rules",
]
