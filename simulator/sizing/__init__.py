"""Closed-form sizing: what vLLM computes at start-up, before any request arrives.

KV bytes per token and the KV cache layout (groups, pipeline stages), a model's parameters and the weight
bytes one GPU loads (with checkpoint quantization), the activation peak and non-torch memory of vLLM's
profiling run, KV blocks per GPU, KV cache tokens and maximum concurrency (:func:`plan`), fragmentation and
offload-tier capacity; a Hugging Face ``config.json`` read into a :class:`~simulator.base.ModelSpec`; the
figures of a vLLM start-up log, to calibrate a plan.

May import: simulator.base.
"""

from simulator.sizing.closed_form import FragmentationResult, SizingResult, plan
from simulator.sizing.draft_memory import DraftMemory
from simulator.sizing.hf_config import parse_hf_config
from simulator.sizing.kv_layout import check_parallelism, kv_bytes_per_token, resolve_kv_dtype
from simulator.sizing.memory_model import compute_dtype, default_async_scheduling
from simulator.sizing.quantization import describe
from simulator.sizing.weights import estimate_num_parameters, weights_bytes_per_gpu

__all__ = ["DraftMemory", "FragmentationResult", "SizingResult", "check_parallelism", "compute_dtype", "default_async_scheduling", "describe", "estimate_num_parameters", "kv_bytes_per_token", "parse_hf_config", "plan", "resolve_kv_dtype", "weights_bytes_per_gpu"]
