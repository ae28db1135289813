"""The clock of an MoE step under expert parallelism and data-parallel attention (issue 34, item 4).

Under ``--data-parallel-size N --enable-expert-parallel`` every DP rank runs its own batch through the attention
and dense layers, and every MoE layer exchanges the ranks' tokens: each token goes to the GPUs holding its top-k
experts (dispatch), their outputs come back (combine). The ranks therefore wait for one another at every MoE layer,
and a step of the DP group lasts as long as its slowest rank's plus the exchanges. This module times the terms of
such a step, each as a function of what the step scheduled, with its source (``docs/moe_parallelism.md``, "The
clock"):

- :func:`all2all_bytes` / :func:`all2all_time`: dispatch and combine bytes and seconds per MoE layer over NVLink
  within a node and InfiniBand across nodes (:class:`Fabric`), for vLLM's all-to-all backends
  (:data:`ALL2ALL_BACKENDS`; the default ``allgather_reducescatter``, DeepEP's high-throughput and low-latency
  kernels with fp8 dispatch), their latencies and efficiencies fitted on AIConfigurator's measured vLLM tables;
- :func:`measured_moe`: AIConfigurator's measured vLLM fused-MoE layers at the model's expert shape, dtype and EP
  size (``simulator/data/ep_moe_rows.json``) where they exist; elsewhere :func:`grouped_gemm_efficiency` and
  :func:`expert_kernel`, the kernel's efficiency by tokens per expert and its fixed times fitted on every such
  row (``simulator/data/ep_physics.json``), else the clock's single-GPU figures;
- :func:`expert_imbalance`: the hottest EP rank's grouped-GEMM work over the mean (:data:`EXPERT_IMBALANCE_BY_EP`,
  measured under AIConfigurator's default routing skew);
- :func:`moe_layer_time`: one MoE layer's experts on the busiest GPU;
- :func:`dp_sync_time` and :func:`step_time_dp`: the DP group's step from the per-rank batches (an idle rank runs
  vLLM's one-token dummy forward pass; every rank is padded to the most tokens of any rank).

Pure floats (no numpy, no Django). Units: ``# s``, ``# bytes``, ``# tokens``, as named.
May import: simulator.base, simulator.sizing, simulator.clock.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from simulator.base import DeploymentSpec, GpuSpec, ModelSpec
from simulator.clock.cost_model import RooflineCoefficients, RooflineStepTime, gemm_format
from simulator.clock.physics import ALIASES
from simulator.clock.terms import CostModelError
from simulator.sizing.moe_parallel import local_experts, sequence_parallel_moe

GIGA = 1e9

#: vLLM's all-to-all backends (``ParallelConfig.all2all_backend`` / ``VLLM_ALL2ALL_BACKEND``), the default first.
ALL2ALL_BACKENDS = ("allgather_reducescatter", "deepep_high_throughput", "deepep_low_latency")

_AIC = "aiconfigurator-core 0.12.0 systems/data/h200_sxm/comm"


@dataclass(frozen=True)
class A2APhase:
    """One collective of an MoE layer: fixed latency and the fraction of the NVLink bandwidth (per direction) its
    bytes move at."""

    latency_s: float  # s per call
    nvlink_efficiency: float  # fraction of the per-direction NVLink bandwidth
    source: str = ""


#: Per backend, the dispatch and combine collectives, fitted (``latency + bytes / (NVLink x efficiency)``, least
#: relative squares) on AIConfigurator's tables measured on one 8 x H200 node (the H100 node's fits agree within
#: 15 %: 0.28-0.39 efficiency, 43-242 us): NCCL all-gather / reduce-scatter at 8 GPUs (latency: the median at
#: <= 64 KB; bus bandwidth: the median over 1-268 MB, 141 GB/s) and vLLM 0.24.0's DeepEP kernels at EP 8 (78-84
#: rows each, hidden 3,072-7,168, top-6/8 of 256/384 experts, 1-65,536 tokens; median error 8-13 %).
A2A_PHASES: dict[str, tuple[A2APhase, A2APhase]] = {
    "allgather_reducescatter": (
        A2APhase(12.4e-6, 0.314, f"NCCL all_gather, 8 GPUs ({_AIC}/nccl/2.29.2/nccl_perf.parquet)"),
        A2APhase(12.4e-6, 0.314, f"NCCL reduce_scatter, 8 GPUs ({_AIC}/nccl/2.29.2/nccl_perf.parquet)"),
    ),
    "deepep_high_throughput": (
        A2APhase(227.8e-6, 0.299, f"DeepEP normal dispatch, vLLM 0.24.0, EP 8 ({_AIC}/vllm/0.24.0/moe_a2a_perf.parquet)"),
        A2APhase(79.2e-6, 0.409, f"DeepEP normal combine, vLLM 0.24.0, EP 8 ({_AIC}/vllm/0.24.0/moe_a2a_perf.parquet)"),
    ),
    "deepep_low_latency": (
        A2APhase(46.2e-6, 0.149, f"DeepEP low-latency dispatch, vLLM 0.24.0, EP 8 ({_AIC}/vllm/0.24.0/moe_a2a_perf.parquet)"),
        A2APhase(47.9e-6, 0.391, f"DeepEP low-latency combine, vLLM 0.24.0, EP 8 ({_AIC}/vllm/0.24.0/moe_a2a_perf.parquet)"),
    ),
}

#: The hottest EP rank's grouped-GEMM time over a balanced routing's, by EP size: the median ratio of
#: AIConfigurator's vLLM 0.24.0 fused-MoE rows routed by its default skew (a power law of exponent 1.2,
#: ``power_law_1.2``) to the same rows routed evenly (``balanced``), at TP 1 and more than 64 tokens per expert,
#: where the kernels are compute-bound (``systems/data/h200_sxm/moe/vllm/0.24.0/moe_perf.parquet``; the H100 table
#: gives the same to 0.02 up to EP 32). Below 8 tokens per expert the ratio is 0.85-1.03: those steps are bound by
#: reading the experts, which the imbalance does not change, so the factor applies to the FLOPs only.
EXPERT_IMBALANCE_BY_EP = {1: 1.0, 2: 1.32, 4: 1.49, 8: 1.66, 16: 1.81, 32: 1.94, 64: 1.98}

#: DP ranks agree on each step's token counts with one all-reduce of a small tensor (vLLM
#: ``vllm/v1/worker/dp_utils.py`` ``coordinate_batch_across_dp``; each rank is then padded to the largest count):
#: charged at NCCL's small-message all-reduce latency (the clock's ``nccl_allreduce_latency_s``, 20 us) plus the
#: scale-out message latency when the group spans nodes.
DP_SYNC_ALLREDUCES = 1


@dataclass(frozen=True)
class Fabric:
    """The links of an EP group: NVLink within a node, the scale-out network (InfiniBand / RoCE) across nodes.

    Parameters
    ----------
    nvlink_bytes_per_s : float
        Per GPU per direction (half a data sheet's NVLink figure: H100 / H200 900 GB/s -> 450).  # bytes/s
    gpus_per_node : int
        GPUs sharing one NVLink domain (HGX H100 / H200: 8).  # GPUs
    scaleout_bytes_per_s : float
        Per GPU per direction across nodes: one ConnectX-7 NDR 400 Gb/s NIC a GPU, 50 GB/s (DGX H100 / H200;
        AIConfigurator's ``h200_sxm.yaml`` ``inter_node_bw``).  # bytes/s
    scaleout_efficiency : float
        Fraction of it a collective's bytes move at (an assumption: no measured multi-node vLLM all-to-all was
        found; NCCL over NDR reaches about 0.8-0.9 of the NIC in nccl-tests).
    scaleout_latency_s : float
        Extra latency of a message that crosses nodes (AIConfigurator's ``h200_sxm.yaml`` ``p2p_latency``, 10 us).  # s
    """

    nvlink_bytes_per_s: float
    gpus_per_node: int = 8
    scaleout_bytes_per_s: float = 50e9
    scaleout_efficiency: float = 0.80
    scaleout_latency_s: float = 10e-6

    def __post_init__(self) -> None:
        for name in ("nvlink_bytes_per_s", "scaleout_bytes_per_s"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise CostModelError(f"must be a number of bytes/s > 0, got {v!r}", field=name)
        if isinstance(self.gpus_per_node, bool) or not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise CostModelError(f"must be a whole number >= 1, got {self.gpus_per_node!r}", field="gpus_per_node")
        if not 0 < self.scaleout_efficiency <= 1:
            raise CostModelError(f"must be a fraction in (0, 1], got {self.scaleout_efficiency!r}", field="scaleout_efficiency")
        if not math.isfinite(self.scaleout_latency_s) or self.scaleout_latency_s < 0:
            raise CostModelError(f"must be a number of seconds >= 0, got {self.scaleout_latency_s!r}", field="scaleout_latency_s")

    @classmethod
    def from_gpu(cls, gpu: GpuSpec, **kw) -> Fabric:
        """The fabric of ``gpu``'s NVLink (``interconnect_gbps`` is both directions, as data sheets give it)."""
        if not gpu.interconnect_gbps:
            raise CostModelError(f"{gpu.name} has no GPU-to-GPU bandwidth; expert parallelism needs one",
                                 field="gpu.interconnect_gbps")
        return cls(nvlink_bytes_per_s=gpu.interconnect_gbps / 2.0 * GIGA, **kw)

    def nodes(self, gpus: int) -> int:
        """Nodes ``gpus`` GPUs of one group span.  # nodes"""
        return -(-gpus // self.gpus_per_node)


def ranks_per_token(num_experts: int, top_k: int, ep: int) -> float:
    """Expected EP ranks one token's top-``k`` experts land on, experts spread ``E / ep`` a rank and routed
    uniformly: ``ep x (1 - C(E - E/ep, k) / C(E, k))`` (each rank missed with the probability that all ``k``
    experts fall outside its ``E / ep``).  # ranks"""
    if ep <= 1:
        return 1.0
    per = num_experts / ep
    miss = 1.0
    for i in range(top_k):  # C(E - per, k) / C(E, k) as a product
        miss *= max(num_experts - per - i, 0.0) / (num_experts - i)
    return ep * (1.0 - miss)


@dataclass(frozen=True)
class A2ABytes:
    """Bytes one GPU sends (dispatch) and receives back (combine) in one MoE layer, split by link."""

    dispatch_nvlink: float  # bytes
    dispatch_scaleout: float  # bytes
    combine_nvlink: float  # bytes
    combine_scaleout: float  # bytes

    @property
    def total(self) -> float:
        return self.dispatch_nvlink + self.dispatch_scaleout + self.combine_nvlink + self.combine_scaleout


def dispatch_element_bytes(backend: str, act_bytes: float, fp8_dispatch: bool) -> float:
    """Bytes of one hidden element sent by dispatch: fp8 with a float32 scale per 128 elements (``1 + 4/128``)
    where DeepEP dispatches in fp8 (its low-latency kernels' FP8 dispatch and BF16 combine, deepseek-ai/DeepEP's
    README; vLLM quantizes before dispatch for fp8 checkpoints), else the activations' dtype. The default
    all-gather moves the bf16 hidden states.  # bytes"""
    if backend != "allgather_reducescatter" and fp8_dispatch:
        return 1.0 + 4.0 / 128.0
    return float(act_bytes)


def all2all_bytes(tokens_per_gpu: float, hidden_size: int, top_k: int, num_experts: int, group: int,
                  fabric: Fabric, *, backend: str = "allgather_reducescatter", act_bytes: float = 2.0,
                  fp8_dispatch: bool = False) -> A2ABytes:
    """Dispatch and combine bytes of one GPU in one MoE layer.

    ``allgather_reducescatter`` (vLLM's default): every GPU of the group of ``group`` receives every other's
    tokens, ``(group - 1) x tokens x hidden x bytes`` (an all-gather), and returns as much (a reduce-scatter of
    the outputs), whatever the routing; across nodes NCCL's ring moves every byte at the pace of its slowest hop,
    the scale-out link (NCCL's bus bandwidth of a ring is its slowest link's). DeepEP: each token goes only to
    the other ranks holding one of its experts, :func:`ranks_per_token` ``x (group - 1) / group`` of them, and
    comes back from each; across nodes the share of peers off the node (``(group - gpus_per_node) / (group -
    1)``) crosses the scale-out links, the rest NVLink.
    """
    if backend not in ALL2ALL_BACKENDS:
        raise CostModelError(f"must be one of {', '.join(ALL2ALL_BACKENDS)}, got {backend!r}", field="all2all_backend")
    if group <= 1 or tokens_per_gpu <= 0:
        return A2ABytes(0.0, 0.0, 0.0, 0.0)
    if backend == "allgather_reducescatter":
        peers = group - 1.0
    else:
        peers = ranks_per_token(num_experts, top_k, group) * (group - 1.0) / group
    if backend == "allgather_reducescatter":  # NCCL's ring: every byte passes the slowest hop, the scale-out one
        off_node = 1.0 if fabric.nodes(group) > 1 else 0.0
    else:  # DeepEP sends each token straight to its peers: only those off the node cross the scale-out links
        off_node = max(group - fabric.gpus_per_node, 0) / (group - 1.0)
    d = tokens_per_gpu * peers * hidden_size * dispatch_element_bytes(backend, act_bytes, fp8_dispatch)
    c = tokens_per_gpu * peers * hidden_size * act_bytes
    return A2ABytes(d * (1 - off_node), d * off_node, c * (1 - off_node), c * off_node)


def all2all_time(nbytes: A2ABytes, fabric: Fabric, backend: str = "allgather_reducescatter",
                 group: int = 8) -> tuple[float, float]:
    """Seconds of ``(dispatch, combine)`` of one MoE layer: each ``latency + max(NVLink bytes / (NVLink x
    efficiency), scale-out bytes / (scale-out x its efficiency))`` (the two links run at once), plus the
    scale-out latency when the group spans nodes (:data:`A2A_PHASES`; both 0 for a group of one GPU).  # s"""
    if group <= 1 or nbytes.total <= 0:
        return 0.0, 0.0
    out = []
    cross = fabric.scaleout_latency_s if fabric.nodes(group) > 1 else 0.0
    scale = fabric.scaleout_bytes_per_s * fabric.scaleout_efficiency
    for phase, nvl, so in zip(A2A_PHASES[backend], (nbytes.dispatch_nvlink, nbytes.combine_nvlink),
                              (nbytes.dispatch_scaleout, nbytes.combine_scaleout)):
        out.append(phase.latency_s + cross + max(nvl / (fabric.nvlink_bytes_per_s * phase.nvlink_efficiency),
                                                 so / scale))
    return out[0], out[1]


def grouped_gemm_efficiency(tokens_per_expert: float, expert_mfu: float, half_tokens: float) -> float:
    """Fraction of the peak the fused-MoE kernel's grouped GEMMs reach at ``tokens_per_expert`` tokens on each
    expert it runs: ``expert_mfu x t / (t + half_tokens)``. Few tokens per expert, as at wide EP, leave the tensor
    cores mostly idle (:class:`ExpertKernel` holds each GPU's measured pair).  # fraction"""
    if tokens_per_expert <= 0:
        return 0.0
    return expert_mfu * tokens_per_expert / (tokens_per_expert + half_tokens)


EP_PHYSICS = Path(__file__).resolve().parent.parent / "data" / "ep_physics.json"


@dataclass(frozen=True)
class ExpertKernel:
    """The fused-MoE kernel's figures on one GPU: ``max(touched bytes / (HBM x stream), FLOPs / (peak x
    grouped_gemm_efficiency))`` + ``fixed_per_expert`` x local experts + ``fixed_per_layer`` + ``per_token`` x the
    tokens the GPU's kernel runs over, each MoE layer."""

    stream_efficiency: float  # fraction of peak HBM bandwidth the touched experts stream at
    expert_mfu: float  # fraction of the format's peak at many tokens per expert
    half_tokens: float  # tokens per expert at half of expert_mfu
    fixed_per_expert_s: float  # s per local expert per layer
    fixed_per_layer_s: float  # s per layer
    per_token_s: float  # s per token the kernel runs over (routing, alignment, permutation, quantization)
    source: str


@cache
def _ep_table() -> dict[str, dict]:
    data = json.loads(EP_PHYSICS.read_text())
    out = {}
    for name, entry in data["gpus"].items():
        for key in (name, *ALIASES.get(name, ())):
            out[key.casefold()] = entry["by_dtype"]
    return out


EP_MOE_ROWS = Path(__file__).resolve().parent.parent / "data" / "ep_moe_rows.json"

#: The clock's GEMM formats (:func:`simulator.clock.cost_model.gemm_format`) as AIConfigurator names its MoE dtypes.
_AIC_MOE_DTYPES = {"bf16": "bfloat16", "fp8": "fp8", "block_fp8": "fp8_block"}


def _loglog(tokens: tuple[float, ...], seconds: tuple[float, ...], n: float) -> float:
    """Log-log interpolation between measured counts; the first row's below them, linear in ``n`` past the last.  # s"""
    t, s = tokens, seconds
    if n <= t[0]:
        return s[0]
    if n >= t[-1]:
        return s[-1] * n / t[-1]
    for i in range(1, len(t)):
        if n <= t[i]:
            f = (math.log(n) - math.log(t[i - 1])) / (math.log(t[i]) - math.log(t[i - 1]))
            return math.exp(math.log(s[i - 1]) + f * (math.log(s[i]) - math.log(s[i - 1])))
    return s[-1]


@dataclass(frozen=True)
class MeasuredMoE:
    """A fused-MoE layer measured at one expert shape, dtype and EP size on one GPU: its latency by the tokens
    entering it across the EP group (every rank running all of them, as under vLLM's default all-gather), routed
    evenly (``balanced``) and by AIConfigurator's default skew (``skewed``: a power law of exponent 1.2, the measured
    GPU holding the hottest experts)."""

    tokens: tuple[float, ...]  # tokens, ascending
    balanced: tuple[float, ...]  # s per layer
    skewed: tuple[float, ...]  # s per layer
    source: str

    def latency(self, n: float, imbalance: float | None = None) -> float:
        """Seconds of one layer at ``n`` tokens on the hottest GPU: the skewed rows (``imbalance`` None), or the
        balanced rows at ``imbalance x n`` tokens (a chosen factor; 1 = evenly routed).  # s"""
        if imbalance is None:
            return _loglog(self.tokens, self.skewed, n)
        return _loglog(self.tokens, self.balanced, n * imbalance)


@cache
def _rows_table() -> dict[str, tuple[dict, str]]:
    data = json.loads(EP_MOE_ROWS.read_text())
    out = {}
    for name, entry in data["gpus"].items():
        for key in (name, *ALIASES.get(name, ())):
            out[key.casefold()] = (entry["shapes"], entry["source"])
    return out


def measured_moe(gpu: GpuSpec, model: ModelSpec, fmt: str, ep: int) -> MeasuredMoE | None:
    """AIConfigurator's measured rows of ``model``'s expert shape on ``gpu`` at EP ``ep`` in GEMM format ``fmt``
    (``simulator/data/ep_moe_rows.json``: vLLM 0.24.0's fused-MoE layers, H100 and H200, the catalog's MoE
    shapes), or None where none was measured."""
    dtype = "w4a16_mxfp4" if model.quantization == "mxfp4" else _AIC_MOE_DTYPES.get(fmt)
    found = _rows_table().get(gpu.name.strip().casefold())
    if ep <= 1 or dtype is None or found is None:
        return None
    shapes, source = found
    ie = model.moe_intermediate_size or model.intermediate_size
    row = shapes.get(f"{model.hidden_size},{ie},{model.num_experts},{model.num_experts_per_tok},{dtype}", {}).get(str(ep))
    if not row:
        return None
    return MeasuredMoE(tuple(float(x) for x in row["tokens"]), tuple(x * 1e-6 for x in row["balanced_us"]),
                       tuple(x * 1e-6 for x in row["skewed_us"]), f"{source}: {dtype}, EP {ep}")


def expert_kernel(gpu: GpuSpec, fmt: str, co: RooflineCoefficients, ep: int) -> ExpertKernel:
    """The fused-MoE kernel of ``gpu`` for GEMM format ``fmt`` (``bf16``, ``block_fp8`` ...) at EP ``ep``.

    With EP on a GPU of ``simulator/data/ep_physics.json`` (AIConfigurator's measured vLLM fused-MoE rows at EP
    2-64, ``tools/aic/derive_ep_physics.py``; bf16 and block-scaled fp8): those figures. Otherwise the clock's own
    (``expert_bandwidth_efficiency``, ``expert_mfu`` / ``expert_half_tokens`` fitted on the GPU's single-GPU rows,
    ``moe_expert_overhead_s``; without a fit the dense GEMMs' ``mfu`` and ``gemm_half_tokens``, an assumption).
    """
    rows = _ep_table().get(gpu.name.strip().casefold(), {}) if ep > 1 else {}
    row = rows.get({"bf16": "bf16", "block_fp8": "fp8-block"}.get(fmt, ""))
    if row:
        return ExpertKernel(row["expert_bandwidth_efficiency"], row["expert_mfu"], row["expert_half_tokens"],
                            row["moe_expert_overhead_s"], row["moe_layer_overhead_s"], row["moe_token_overhead_s"],
                            row["source"])
    half = co.gemm_half_tokens if co.expert_half_tokens is None else co.expert_half_tokens
    return ExpertKernel(co.expert_bandwidth_efficiency, co.expert_mfu or co.mfu, half, co.moe_expert_overhead_s,
                        0.0, 0.0, "the clock's single-GPU fused-MoE figures (simulator/data/gpu_physics.json or defaults)")


def expert_imbalance(ep: int, table: dict[int, float] | None = None) -> float:
    """The hottest EP rank's grouped-GEMM work over the mean at EP ``ep`` (:data:`EXPERT_IMBALANCE_BY_EP`,
    interpolated in ``log2(ep)``, held at its last entry past EP 64; 1 without EP).  # ratio"""
    table = EXPERT_IMBALANCE_BY_EP if table is None else table
    if ep <= 1:
        return 1.0
    keys = sorted(table)
    if ep >= keys[-1]:
        return float(table[keys[-1]])
    for lo, hi in zip(keys, keys[1:]):
        if lo <= ep <= hi:
            f = (math.log2(ep) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
            return float(table[lo] + f * (table[hi] - table[lo]))
    return float(table[keys[0]])


@dataclass(frozen=True)
class DPShape:
    """A TP x DP x EP shape of one MoE model on one GPU kind, and how its layers exchange tokens.

    Parameters
    ----------
    deployment : DeploymentSpec
        ``tensor_parallel_size``, ``data_parallel_size``, ``enable_expert_parallel`` (PP 1).
    all2all_backend : str
        One of :data:`ALL2ALL_BACKENDS` (vLLM's default first).
    fp8_dispatch : bool, optional
        DeepEP dispatches fp8 (``None``: when the checkpoint's GEMMs run in fp8, as vLLM's DeepEP
        prepare-and-finalize quantizes before dispatch for fp8 models).
    imbalance : float, optional
        The hottest EP rank's grouped-GEMM work over the mean (``None``: :func:`expert_imbalance`; 1.0 for a
        perfectly balanced routing, e.g. with enough EPLB redundant experts).
    fabric : Fabric, optional
        Default :meth:`Fabric.from_gpu`.
    """

    deployment: DeploymentSpec
    all2all_backend: str = "allgather_reducescatter"
    fp8_dispatch: bool | None = None
    imbalance: float | None = None
    fabric: Fabric | None = None

    def __post_init__(self) -> None:
        if self.all2all_backend not in ALL2ALL_BACKENDS:
            raise CostModelError(f"must be one of {', '.join(ALL2ALL_BACKENDS)}, got {self.all2all_backend!r}",
                                 field="all2all_backend")
        if self.deployment.pipeline_parallel_size != 1:
            raise CostModelError("the DP / EP clock models PP 1", field="pipeline_parallel_size")
        if self.imbalance is not None and not (math.isfinite(self.imbalance) and 1.0 <= self.imbalance <= 100.0):
            raise CostModelError(f"must be a ratio in [1, 100], got {self.imbalance!r}", field="imbalance")


@dataclass(frozen=True)
class RankBatch:
    """What one DP rank scheduled in a step (the clock's sums, ``docs/cost-model.md``); all 0 = idle."""

    prefill_tokens: float = 0.0  # tokens
    prefill_attention_tokens: float = 0.0  # tokens
    decode_tokens: float = 0.0  # tokens
    decode_context_tokens: float = 0.0  # tokens
    num_reqs: float = 0.0  # requests
    prefill_kv_tokens: float | None = None  # tokens (None = prefill_tokens)

    def __post_init__(self) -> None:
        for name in ("prefill_tokens", "prefill_attention_tokens", "decode_tokens", "decode_context_tokens",
                     "num_reqs", "prefill_kv_tokens"):
            v = getattr(self, name)
            if v is None and name == "prefill_kv_tokens":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise CostModelError(f"must be a finite number >= 0, got {v!r}", field=name)

    @property
    def tokens(self) -> float:
        return self.prefill_tokens + self.decode_tokens

    @classmethod
    def decode(cls, batch: int, context: int) -> RankBatch:
        """``batch`` requests each decoding one token after ``context`` tokens."""
        return cls(decode_tokens=batch, decode_context_tokens=batch * (context + 1), num_reqs=batch)

    @classmethod
    def prefill(cls, tokens: int) -> RankBatch:
        """One fresh prompt of ``tokens`` tokens in one step."""
        return cls(prefill_tokens=tokens, prefill_attention_tokens=tokens * (tokens + 1) / 2.0, num_reqs=1,
                   prefill_kv_tokens=tokens)


#: vLLM's idle DP rank: ``DPEngineCoreProc`` runs ``execute_dummy_batch`` -> the model runner's ``_dummy_run(1)``:
#: one token through every layer, so the MoE layers' collectives can complete.
DUMMY_BATCH = RankBatch(decode_tokens=1, decode_context_tokens=1, num_reqs=1)


@dataclass(frozen=True)
class DPStepTime:
    """One DP group's step, split into its terms (seconds; ``ranks``: each rank's own GPU part)."""

    total: float  # s
    slowest_rank: float  # s, the slowest rank's attention, dense GEMMs, TP all-reduces, fixed times, sampler
    experts: float  # s, the MoE layers' experts on the busiest GPU, all layers
    dispatch: float  # s, all layers
    combine: float  # s, all layers
    sync: float  # s
    cpu: float  # s, the slowest rank's CPU part
    sampler: float  # s, of the slowest rank (inside slowest_rank)
    tokens_per_rank: float  # tokens each rank runs (padded to the largest)
    tokens_per_expert: float  # tokens per touched expert on the busiest GPU
    efficiency: float  # the grouped GEMMs' fraction of peak at that
    imbalance: float
    bytes_per_layer: A2ABytes = field(default_factory=lambda: A2ABytes(0.0, 0.0, 0.0, 0.0))
    ranks: tuple[float, ...] = ()

    @property
    def forward(self) -> float:
        """The GPU's forward pass less the sampler (what AIConfigurator times).  # s"""
        return self.slowest_rank - self.sampler + self.experts + self.dispatch + self.combine + self.sync


@dataclass(frozen=True)
class DPClock:
    """The parts of the clock a DP / EP step needs, built once per model x GPU x shape (:meth:`build`)."""

    model: ModelSpec
    shape: DPShape
    rank_clock: RooflineStepTime  # one DP rank's clock at its TP degree (DP 1, EP off)
    fabric: Fabric
    kernel: ExpertKernel  # the fused-MoE kernel's figures at this EP size
    measured: MeasuredMoE | None  # the layer's measured rows at this shape, dtype and EP size (all-gather only)
    expert_bytes: float  # one whole routed expert of every MoE layer, bytes
    pair_flops: float  # one token x expert pair over every MoE layer, FLOP
    moe_layers: int

    @classmethod
    def build(cls, model: ModelSpec, gpu: GpuSpec, shape: DPShape,
              coefficients: RooflineCoefficients | dict | None = None) -> DPClock:
        if not model.is_moe:
            raise CostModelError(f"{model.name} has no experts; the DP / EP clock times MoE models "
                                 "(a dense model's DP ranks are independent engines)", field="model")
        dep = shape.deployment
        rank_dep = replace(dep, data_parallel_size=1, enable_expert_parallel=False)
        rank = RooflineStepTime.from_specs(model, gpu, coefficients=coefficients, deployment=rank_dep)
        co, E = rank.coefficients, model.num_experts
        fmt = gemm_format(model, rank_dep)
        kernel = expert_kernel(gpu, fmt, co, dep.expert_parallel_size)
        measured = (measured_moe(gpu, model, fmt, dep.expert_parallel_size)
                    if shape.all2all_backend == "allgather_reducescatter" else None)
        moe_layers = model.num_layers - model.num_dense_layers
        ie = model.moe_intermediate_size or model.intermediate_size
        mats = 3 if model.gated_mlp else 2
        # The rank clock streams all routed experts split TP ways in experts_s: one whole expert's bytes (its
        # format's, scales included) are experts_s x TP / E x the rate it streams them at.
        expert_bytes = (rank.terms.experts_s * dep.tensor_parallel_size / E
                        * rank.hbm_bytes_per_s * co.expert_bandwidth_efficiency)
        return cls(model=model, shape=shape, rank_clock=rank, fabric=shape.fabric or Fabric.from_gpu(gpu),
                   kernel=kernel, measured=measured, expert_bytes=expert_bytes, pair_flops=2.0 * mats * model.hidden_size * ie * moe_layers,
                   moe_layers=moe_layers)

    @property
    def coefficients(self) -> RooflineCoefficients:
        return self.rank_clock.coefficients

    def _fp8_dispatch(self) -> bool:
        if self.shape.fp8_dispatch is not None:
            return self.shape.fp8_dispatch
        return self.rank_clock.flops_dtype == "fp8"

    def moe_layer_time(self, group_tokens: float) -> tuple[float, float, float, float]:
        """The MoE layers' experts on the busiest GPU for ``group_tokens`` tokens entering each across the group:
        ``(seconds over every MoE layer, tokens per touched expert, grouped-GEMM efficiency, imbalance)``.

        Where AIConfigurator measured the layer at this shape, dtype and EP size (:func:`measured_moe`, vLLM's
        default all-gather), its rows time it: by default those routed by its default skew (the measured GPU
        holding the hottest experts; the imbalance returned is their ratio to the evenly routed rows), with a
        chosen ``imbalance`` the evenly routed layer at ``imbalance x`` the tokens (so a factor stretches a
        compute-bound layer and leaves a streaming one). Otherwise the fitted kernel (:class:`ExpertKernel`):

        EP on: the GPU holds ``ceil(E / ep)`` whole experts and computes ``group_tokens x k / ep`` token x expert
        pairs, times the imbalance (:func:`expert_imbalance`) on the hottest rank; it streams the experts those
        tokens touch (``1 - (1 - k/E)^N`` of them). EP off: every expert is split ``TP x DP`` ways and each GPU
        computes its slice of every pair. Time (:class:`ExpertKernel`)::

            max(touched bytes / (HBM x stream), pairs x FLOP / (peak x grouped_gemm_efficiency(pairs / touched)))
            + fixed_per_expert x local experts + fixed_per_layer + per_token x kernel_tokens      (each MoE layer)
        """
        dep, m, kern = self.shape.deployment, self.model, self.kernel
        E, k, ep = m.num_experts, m.num_experts_per_tok, dep.expert_parallel_size
        if group_tokens <= 0:
            return 0.0, 0.0, 0.0, 1.0
        touched = 1.0 - (1.0 - k / E) ** group_tokens  # fraction of the experts at least one token reaches
        if ep > 1:
            n_local = local_experts(m, dep)
            imb = self.shape.imbalance if self.shape.imbalance is not None else expert_imbalance(ep)
            pairs = group_tokens * k / ep * imb  # token x expert pairs on the hottest GPU
            split = 1.0
        else:
            n_local, imb = E, 1.0
            pairs = group_tokens * k  # each GPU computes its 1 / (TP x DP) slice of every pair
            split = float(dep.moe_parallel_size)
        tpe = pairs / (n_local * touched)  # tokens per touched expert
        eff = grouped_gemm_efficiency(tpe, kern.expert_mfu, kern.half_tokens)
        hbm, peak = self.rank_clock.hbm_bytes_per_s, self.rank_clock.peak_flops
        stream = self.expert_bytes * n_local * touched / split / (hbm * kern.stream_efficiency)
        flops = self.pair_flops * pairs / split / (peak * eff)
        if self.measured is not None:
            hot = self.measured.latency(group_tokens, self.shape.imbalance)
            if self.shape.imbalance is None:  # the measured skew's own factor at this count
                imb = hot / self.measured.latency(group_tokens, 1.0)
            return hot * self.moe_layers, tpe, eff, imb
        fixed = (kern.fixed_per_expert_s * n_local + kern.fixed_per_layer_s
                 + kern.per_token_s * self.kernel_tokens(group_tokens)) * self.moe_layers
        return max(stream, flops) + fixed, tpe, eff, imb

    def kernel_tokens(self, group_tokens: float) -> float:
        """Tokens one GPU's fused-MoE kernel runs over: every token of the group under the default all-gather
        (each GPU gathers them all), the tokens routed to it under DeepEP (:func:`ranks_per_token` ``/ ep`` of
        them).  # tokens"""
        dep, m = self.shape.deployment, self.model
        if self.shape.all2all_backend == "allgather_reducescatter" or dep.expert_parallel_size <= 1:
            return group_tokens
        ep = dep.expert_parallel_size
        return group_tokens * ranks_per_token(m.num_experts, m.num_experts_per_tok, ep) / ep

    def all2all(self, tokens_per_rank: float) -> tuple[float, float, A2ABytes]:
        """``(dispatch, combine, bytes per layer)`` over every MoE layer for ``tokens_per_rank`` tokens on each DP
        rank (each TP rank of a sequence-parallel MoE block sends its ``1 / TP`` slice).  # s"""
        dep, m = self.shape.deployment, self.model
        sp = sequence_parallel_moe(dep)
        group = dep.moe_parallel_size if sp else dep.data_parallel_size
        per_gpu = tokens_per_rank / dep.tensor_parallel_size if sp else tokens_per_rank
        act = self.coefficients.activation_bytes or 2.0
        nbytes = all2all_bytes(per_gpu, m.hidden_size, m.num_experts_per_tok, m.num_experts, group, self.fabric,
                               backend=self.shape.all2all_backend, act_bytes=act, fp8_dispatch=self._fp8_dispatch())
        d, c = all2all_time(nbytes, self.fabric, self.shape.all2all_backend, group)
        return d * self.moe_layers, c * self.moe_layers, nbytes

    def dp_sync_time(self) -> float:
        """See :func:`dp_sync_time`.  # s"""
        return dp_sync_time(self.shape.deployment, self.coefficients, self.fabric)

    def rank_time(self, batch: RankBatch, padded_tokens: float) -> tuple[float, float, float]:
        """One rank's GPU part outside the routed experts (attention on its own requests; dense GEMMs, TP
        all-reduces at ``padded_tokens``; per-layer fixed times; the sampler), its CPU part, and its sampler.  # s"""
        t = self.rank_clock.terms
        pad = max(padded_tokens - batch.tokens, 0.0)
        comp = self.rank_clock.components(batch.prefill_tokens, batch.prefill_attention_tokens,
                                          batch.decode_tokens + pad, batch.decode_context_tokens, batch.num_reqs,
                                          prefill_kv_tokens=batch.prefill_kv_tokens)
        co, m = self.coefficients, self.model
        all_experts_fixed = co.moe_expert_overhead_s * m.num_experts * self.moe_layers  # in the rank clock's fixed
        sampler = ((co.sampling_step_s + co.sampling_vocab_s * m.vocab_size) * co.sampler_scale
                   + t.gpu_req_s * batch.num_reqs)
        gpu = comp["gemm"] + comp["attention"] + comp["comm"] + comp["fixed"] - all_experts_fixed
        return gpu, comp["overhead"], sampler


def dp_sync_time(deployment: DeploymentSpec, co: RooflineCoefficients, fabric: Fabric) -> float:
    """The DP group's per-step synchronisation: :data:`DP_SYNC_ALLREDUCES` small all-reduce at NCCL's latency,
    plus the scale-out latency when the group spans nodes (0 at DP 1).  # s"""
    if deployment.data_parallel_size <= 1:
        return 0.0
    cross = fabric.scaleout_latency_s if fabric.nodes(deployment.num_gpus) > 1 else 0.0
    return DP_SYNC_ALLREDUCES * (co.nccl_allreduce_latency_s + cross)


def step_time_dp(ranks_batches: Sequence[RankBatch], clock: DPClock, *, async_scheduling: bool = False) -> DPStepTime:
    """Seconds of one step of a DP group, from each DP rank's batch (``len(ranks_batches)`` = DP).

    The MoE layers synchronise the ranks at every layer, so the group moves at its slowest rank::

        tokens    = max over ranks of their tokens (vLLM pads every rank to it; an idle rank runs the one-token
                    dummy batch, DUMMY_BATCH)
        rank_r    = attention(r's own requests) + dense GEMMs, TP all-reduces at `tokens` + fixed + sampler
        step      = max_r rank_r + experts(DP x tokens) + dispatch + combine + sync        (GPU)
                  + the slowest rank's CPU part (or the longer of the two with async scheduling)

    A step where no rank has work takes 0 (vLLM's DP ranks then idle together).
    """
    dep = clock.shape.deployment
    if len(ranks_batches) != dep.data_parallel_size:
        raise CostModelError(f"one batch per DP rank: {len(ranks_batches)} given for DP {dep.data_parallel_size}",
                             field="ranks_batches")
    if all(b.tokens <= 0 for b in ranks_batches):
        return DPStepTime(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    batches = [b if b.tokens > 0 else DUMMY_BATCH for b in ranks_batches]
    tokens = max(b.tokens for b in batches)
    parts = [clock.rank_time(b, tokens) for b in batches]
    slow = max(range(len(parts)), key=lambda i: parts[i][0])
    gpu_rank, cpu, sampler = parts[slow]
    experts, tpe, eff, imb = clock.moe_layer_time(tokens * dep.data_parallel_size)
    dispatch, combine, nbytes = clock.all2all(tokens)
    sync = clock.dp_sync_time()
    gpu = gpu_rank + experts + dispatch + combine + sync
    cpu = max(p[1] for p in parts)
    total = max(gpu, cpu) if async_scheduling else gpu + cpu
    return DPStepTime(total=total, slowest_rank=gpu_rank, experts=experts, dispatch=dispatch, combine=combine,
                      sync=sync, cpu=cpu, sampler=sampler, tokens_per_rank=tokens, tokens_per_expert=tpe,
                      efficiency=eff, imbalance=imb, bytes_per_layer=nbytes, ranks=tuple(p[0] for p in parts))


__all__ = ["A2A_PHASES", "ALL2ALL_BACKENDS", "DP_SYNC_ALLREDUCES", "DUMMY_BATCH", "EXPERT_IMBALANCE_BY_EP",
           "A2ABytes", "A2APhase", "DPClock", "DPShape", "DPStepTime", "Fabric", "RankBatch", "all2all_bytes",
           "all2all_time", "dispatch_element_bytes", "dp_sync_time", "expert_imbalance", "expert_kernel", "ExpertKernel",
           "EP_MOE_ROWS", "EP_PHYSICS", "MeasuredMoE", "grouped_gemm_efficiency", "measured_moe",
           "ranks_per_token", "step_time_dp"]
