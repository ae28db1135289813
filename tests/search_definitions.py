"""Deployment-search definitions several tests run (each call returns a fresh copy to change)."""

from __future__ import annotations


def two_gpu_search(**space) -> dict:
    """24 requests at 10/s of Llama 3.1 8B, TTFT p90 <= 500 ms, over H100 and L40S x bf16 and fp8 (4 shapes in
    two chunks): the H100 answers, at $3.78/h. ``space`` overrides entries of the space."""
    return {
        "model": "llama-3-1-8b",
        "workload": {"spec": {"n": 24, "prompt": "normal:1024,256", "output": "normal:128,32",
                              "arrival": {"kind": "poisson", "rate": 10, "unit": "s"}}, "seed": 0},
        "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5}]},
        "space": {"gpus": ["h100-sxm5-80gb", "l40s"], "tensor_parallel": [1], "precisions": ["bf16", "fp8"],
                  "max_replicas": 2, **space}}


def xpyd_search(**extra) -> dict:
    """40 requests at 16/s of 2,048-token prompts on H100s, TTFT p90 <= 400 ms and ITL p90 <= 13 ms: the answer
    needs 2 or more replicas, and ``disaggregated`` compares its prefill/decode splits. ``extra``: more fields."""
    return {"model": "llama-3-1-8b",
            "workload": {"spec": {"n": 40, "prompt": "normal:2048,256", "output": "normal:64,16",
                                  "arrival": {"kind": "poisson", "rate": 16, "unit": "s"}}, "seed": 0},
            "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.4},
                                {"metric": "itl", "percentile": "p90", "max_s": 0.013}]},
            "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1], "precisions": ["bf16"],
                      "max_replicas": 4, "routing": "least-loaded"},
            "disaggregated": {"link_gbps": 50, "link_latency_s": 0.0001}, **extra}


def dp_pools_search(**extra) -> dict:
    """60 requests at 20/s of Qwen3-30B-A3B on H100s, TTFT p90 <= 300 ms and ITL p90 <= 50 ms, over TP 1 at DP 1
    and 2 with expert parallelism: the joint prefill/decode pools search (``disaggregated.pools``) pools the
    DP-group shapes too (issue 34, item 5). ``extra``: more fields."""
    return {"model": "qwen3-30b-a3b",
            "workload": {"spec": {"n": 60, "prompt": "normal:1024,256", "output": "normal:64,16",
                                  "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
            "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.3},
                                {"metric": "itl", "percentile": "p90", "max_s": 0.05}]},
            "space": {"gpus": ["h100-sxm5-80gb"], "tensor_parallel": [1], "precisions": ["bf16"],
                      "data_parallel": [1, 2], "expert_parallel": [True], "max_replicas": 3, "max_gpus": 8},
            "check_seeds": 0, "disaggregated": {"pools": True}, **extra}
