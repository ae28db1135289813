"""The ``vllm serve`` command line and the Kubernetes manifests of one deployment.

Flags are vLLM's own option names (``vllm serve MODEL --tensor-parallel-size 2 ...``), only those the
plan decided, each with the value the planner sized with, so that the engine starts as it was
simulated: ``--max-num-seqs``, ``--max-num-batched-tokens``, ``--max-model-len`` and
``--gpu-memory-utilization`` fix the KV cache the sizing computed; ``--kv-cache-dtype``,
``--quantization fp8`` (W8A8), ``--block-size``; ``--speculative-config`` (JSON) for a drafter;
``--kv-transfer-config`` with vLLM's ``OffloadingConnector`` for a CPU KV tier; ``--async-scheduling``
or ``--no-async-scheduling`` when the plan says which. ``tests/simulator/test_launch.py`` checks every
flag against vLLM's argument list (``tests/data/vllm/``).

The manifests: a Deployment of ``replicas`` pods, each requesting and limited to the replica's GPUs
(``nvidia.com/gpu``), the vLLM OpenAI image's ``vllm serve`` as the container command, port 8000,
startup / readiness / liveness probes on vLLM's ``/health``, a memory-backed ``/dev/shm`` (NCCL between
the TP ranks), ``HF_TOKEN`` from an optional secret; a ClusterIP Service on port 8000; and, when the
answer autoscales, an ``autoscaling/v2`` HorizontalPodAutoscaler on vLLM's waiting-queue metric.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from simulator.base.errors import FieldError

#: The vLLM OpenAI server image; the tag is the chosen version's.
IMAGE = "vllm/vllm-openai"
#: The image tag when no version is chosen.
DEFAULT_TAG = "latest"
PORT = 8000
#: vLLM's ``--kv-cache-dtype`` values (CacheDType).
KV_CACHE_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
#: A weight precision of the planner -> vLLM's ``--quantization`` (None: read from the checkpoint).
QUANTIZATION = {"bf16": None, "fp8": "fp8", "int4": None, "int8": None, "awq": None, "gptq": None, "mxfp4": None}
_NAME = re.compile(r"[^a-z0-9-]+")


class LaunchError(FieldError):
    """A plan that cannot be written as a vLLM launch; the message names the field."""


@dataclass(frozen=True)
class LaunchSpec:
    """What an answer deploys, in vLLM's terms.

    ``model``: the Hugging Face repository id (or a path) ``vllm serve`` loads. ``quantization``: the
    weight precision (``bf16``, ``fp8``, ``int4``) or a vLLM ``--quantization`` method. ``speculative``:
    vLLM's speculative config (``{"method": "eagle", "model": ..., "num_speculative_tokens": 3}``).
    ``kv_offload_cpu_blocks``: CPU KV blocks per GPU rank (vLLM's OffloadingConnector). ``autoscale``:
    ``{"min_replicas", "max_replicas", "target_waiting"}`` for an HPA. ``async_scheduling``: None
    leaves vLLM's default.
    """

    model: str
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    block_size: int | None = None
    enable_prefix_caching: bool | None = None
    async_scheduling: bool | None = None
    speculative: dict[str, Any] | None = None
    kv_offload_cpu_blocks: int | None = None
    replicas: int = 1
    gpu_name: str = ""
    vllm_version: str | None = None
    name: str = ""
    autoscale: dict[str, Any] | None = None
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip() or any(c.isspace() for c in self.model):
            raise LaunchError(f"a Hugging Face repository id or a path without spaces, got {self.model!r}", field="model")
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "replicas"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 4096:
                raise LaunchError(f"a whole number from 1 to 4096, got {v!r}", field=name)
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise LaunchError(f"vLLM takes one of {', '.join(KV_CACHE_DTYPES)}, got "
                              f"{self.kv_cache_dtype!r}", field="kv_cache_dtype")
        u = self.gpu_memory_utilization
        if u is not None and not (isinstance(u, (int, float)) and 0 < u <= 1):
            raise LaunchError(f"a fraction in (0, 1], got {u!r}", field="gpu_memory_utilization")

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @property
    def app_name(self) -> str:
        """A DNS-1123 name for the Kubernetes objects (``vllm-llama-3-1-8b-instruct``)."""
        base = self.name or "vllm-" + self.model.rsplit("/", 1)[-1]
        text = _NAME.sub("-", base.lower()).strip("-")[:53].strip("-")
        return text or "vllm"


def _quantization(spec: LaunchSpec) -> str | None:
    q = spec.quantization
    return QUANTIZATION.get(q, q) if q is not None else None


def vllm_serve_args(spec: LaunchSpec) -> list[str]:
    """``["vllm", "serve", MODEL, "--tensor-parallel-size", "2", ...]``: only the options the plan sets."""
    args = ["vllm", "serve", spec.model]

    def opt(flag: str, value: Any) -> None:
        if value is not None:
            args.extend([flag, str(value)])

    opt("--tensor-parallel-size", spec.tensor_parallel_size if spec.tensor_parallel_size > 1 else None)
    opt("--pipeline-parallel-size", spec.pipeline_parallel_size if spec.pipeline_parallel_size > 1 else None)
    opt("--data-parallel-size", spec.data_parallel_size if spec.data_parallel_size > 1 else None)
    if spec.enable_expert_parallel:
        args.append("--enable-expert-parallel")
    opt("--max-model-len", spec.max_model_len)
    opt("--max-num-seqs", spec.max_num_seqs)
    opt("--max-num-batched-tokens", spec.max_num_batched_tokens)
    if spec.gpu_memory_utilization is not None:
        opt("--gpu-memory-utilization", f"{spec.gpu_memory_utilization:g}")
    opt("--kv-cache-dtype", None if spec.kv_cache_dtype == "auto" else spec.kv_cache_dtype)
    opt("--quantization", _quantization(spec))
    opt("--block-size", spec.block_size)
    if spec.enable_prefix_caching is not None:
        args.append("--enable-prefix-caching" if spec.enable_prefix_caching else "--no-enable-prefix-caching")
    if spec.async_scheduling is not None:
        args.append("--async-scheduling" if spec.async_scheduling else "--no-async-scheduling")
    if spec.speculative:
        opt("--speculative-config", json.dumps(spec.speculative, separators=(",", ":"), sort_keys=True))
    if spec.kv_offload_cpu_blocks:
        opt("--kv-transfer-config", json.dumps(
            {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
             "kv_connector_extra_config": {"num_cpu_blocks": int(spec.kv_offload_cpu_blocks)}},
            separators=(",", ":"), sort_keys=True))
    return args


def vllm_serve_command(spec: LaunchSpec) -> str:
    """:func:`vllm_serve_args` as one shell command line (each argument quoted as the shell needs)."""
    return shlex.join(vllm_serve_args(spec))


def _probe(path: str, period: int, failures: int, delay: int = 0) -> dict[str, Any]:
    p: dict[str, Any] = {"httpGet": {"path": path, "port": "http"}, "periodSeconds": period,
                         "failureThreshold": failures, "timeoutSeconds": 5}
    if delay:
        p["initialDelaySeconds"] = delay
    return p


def kubernetes_manifests(spec: LaunchSpec) -> list[dict[str, Any]]:
    """Deployment and Service (and an HPA with ``autoscale``) as plain dicts, ``apiVersion`` first."""
    name = spec.app_name
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "vllm"}
    gpus = str(spec.gpus_per_replica)
    tag = f"v{spec.vllm_version.lstrip('v')}" if spec.vllm_version else DEFAULT_TAG
    container = {
        "name": "vllm",
        "image": f"{IMAGE}:{tag}",
        "command": vllm_serve_args(spec),
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token",
                                                                    "optional": True}}}],
        "resources": {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}},
        # loading the weights takes minutes: up to 30 min before the other probes start
        "startupProbe": _probe("/health", 10, 180),
        "readinessProbe": _probe("/health", 5, 3),
        "livenessProbe": _probe("/health", 10, 6),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod: dict[str, Any] = {"containers": [container],
                           "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}
    if spec.gpu_name:
        pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    meta = {"name": name, "labels": dict(labels)}
    if spec.gpu_name:
        meta["annotations"] = {"kv-planner/gpu": spec.gpu_name,
                               "kv-planner/gpus-per-replica": gpus}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {"replicas": spec.replicas, "selector": {"matchLabels": dict(labels)},
                 "template": {"metadata": {"labels": dict(labels)}, "spec": pod}},
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"type": "ClusterIP", "selector": dict(labels),
                 "ports": [{"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}]},
    }
    docs = [deployment, service]
    if spec.autoscale:
        docs.append(_hpa(spec, name, labels))
    return docs


def _hpa(spec: LaunchSpec, name: str, labels: dict[str, str]) -> dict[str, Any]:
    a = spec.autoscale or {}
    lo = int(a.get("min_replicas", max(1, spec.replicas)))
    hi = int(a.get("max_replicas", max(lo, spec.replicas)))
    if not 1 <= lo <= hi:
        raise LaunchError(f"min_replicas {lo} and max_replicas {hi} must satisfy 1 <= min <= max", field="autoscale")
    target = a.get("target_waiting", 5)
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "minReplicas": lo, "maxReplicas": hi,
                 # vLLM's vllm:num_requests_waiting, as a Prometheus adapter exposes it per pod
                 "metrics": [{"type": "Pods", "pods": {
                     "metric": {"name": "vllm_num_requests_waiting"},
                     "target": {"type": "AverageValue", "averageValue": str(target)}}}]},
    }


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else json.dumps(str(v))
    return json.dumps(str(v))  # a JSON string is a YAML double-quoted scalar


def _empty(x: Any) -> str:
    return "{}" if isinstance(x, dict) else "[]"


def _emit(v: Any, indent: int, out: list[str]) -> None:
    """Block-style YAML of ``v`` (a dict or a list) at ``indent`` spaces, appended to ``out``."""
    pad = " " * indent
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, (dict, list)):
                if x:
                    out.append(f"{pad}{k}:")
                    _emit(x, indent + 2, out)
                else:
                    out.append(f"{pad}{k}: {_empty(x)}")
            else:
                out.append(f"{pad}{k}: {_scalar(x)}")
        return
    for x in v:
        if isinstance(x, (dict, list)) and x:
            sub: list[str] = []
            _emit(x, indent + 2, sub)
            out.append(f"{pad}- {sub[0][indent + 2:]}")  # the item's first line after the dash
            out.extend(sub[1:])
        elif isinstance(x, (dict, list)):
            out.append(f"{pad}- {_empty(x)}")
        else:
            out.append(f"{pad}- {_scalar(x)}")


def to_yaml(docs: list[dict[str, Any]]) -> str:
    """YAML documents separated by ``---`` (block style; strings double-quoted, so nothing is re-typed)."""
    parts = []
    for d in docs:
        lines: list[str] = []
        _emit(d, 0, lines)
        parts.append("\n".join(lines) + "\n")
    return "---\n" + "---\n".join(parts)


def launch(spec: LaunchSpec) -> dict[str, Any]:
    """``{"vllm_serve", "kubernetes", "vllm_version", "replicas", "gpus_per_replica", "notes"}`` of ``spec``."""
    notes = list(spec.notes)
    if spec.quantization in QUANTIZATION and spec.quantization not in ("bf16", "fp8"):
        notes.append(f"{spec.quantization} weights: serve a {spec.quantization} checkpoint of the model (AWQ or GPTQ "
                     "for int4); vLLM reads its quantization from the checkpoint's config")
    if spec.replicas > 1 or spec.autoscale:
        notes.append(f"{spec.replicas} replica{'s' if spec.replicas > 1 else ''} of {spec.gpus_per_replica} "
                     f"GPU{'s' if spec.gpus_per_replica > 1 else ''} each behind the Service (round-robin "
                     "by kube-proxy)")
    return {"vllm_serve": vllm_serve_command(spec), "kubernetes": to_yaml(kubernetes_manifests(spec)),
            "vllm_version": spec.vllm_version, "replicas": spec.replicas,
            "gpus_per_replica": spec.gpus_per_replica, "notes": notes}


def speculative_config(draft: Any, model: str) -> tuple[dict[str, Any] | None, list[str]]:
    """vLLM's ``--speculative-config`` of a drafter (:class:`simulator.speculative.memory.DraftSpec`, duck-typed:
    ``method``, ``num_speculative_tokens``, ``draft_model``) and the notes it needs."""
    if draft is None or not getattr(draft, "num_speculative_tokens", 0):
        return None, []
    method, k = draft.method, int(draft.num_speculative_tokens)
    cfg: dict[str, Any] = {"method": method, "num_speculative_tokens": k}
    notes = []
    if method == "ngram":
        cfg["prompt_lookup_max"] = 4
    elif method in ("eagle", "eagle3"):
        cfg["model"] = "EAGLE_HEAD_REPO"
        notes.append(f"replace EAGLE_HEAD_REPO with the {method.upper()} head trained for {model}")
    elif method == "draft_model":
        name = getattr(getattr(draft, "draft_model", None), "name", "") or "DRAFT_MODEL_REPO"
        cfg["model"] = "-".join(str(name).split())
        notes.append("the draft model is named as its profile is; use its Hugging Face repository id")
    return cfg, notes


def sizing_launch(result: Any, deployment: Any, model: str, *, replicas: int = 1, quantization: str | None = None,
                  speculative: Any = None, autoscale: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`launch` of a sized deployment: ``result`` a :class:`simulator.sizing.closed_form.SizingResult`,
    ``deployment`` its :class:`simulator.base.specs.DeploymentSpec` (read by attribute), ``replicas`` engines.
    The knobs are those the sizing resolved (vLLM's defaults filled in), so vLLM starts with the KV cache
    the planner computed; a CPU tier becomes vLLM's OffloadingConnector with as many CPU blocks."""
    spec_cfg, notes = speculative_config(speculative, model)
    block = int(getattr(result, "block_size", 16) or 16)
    spec = LaunchSpec(
        model=model, tensor_parallel_size=int(deployment.tensor_parallel_size),
        pipeline_parallel_size=int(deployment.pipeline_parallel_size),
        data_parallel_size=int(getattr(deployment, "data_parallel_size", 1)),
        enable_expert_parallel=bool(getattr(deployment, "enable_expert_parallel", False)),
        max_num_seqs=int(result.max_num_seqs),
        max_num_batched_tokens=int(result.max_num_batched_tokens), max_model_len=int(result.max_model_len),
        gpu_memory_utilization=float(deployment.gpu_memory_utilization),
        kv_cache_dtype=str(deployment.kv_cache_dtype or "auto"), quantization=quantization,
        block_size=None if block == 16 else block, speculative=spec_cfg,
        kv_offload_cpu_blocks=getattr(result, "cpu_tier_blocks", None) or None, replicas=int(replicas),
        gpu_name=str(getattr(result, "gpu", "") or ""), vllm_version=getattr(deployment, "vllm_version", None),
        autoscale=autoscale, notes=tuple(notes))
    return launch(spec)


def search_launch(best: dict[str, Any], model: str, *, gpu_memory_utilization: float = 0.9,
                  vllm_version: str | None = None, async_scheduling: bool | None = None) -> dict[str, Any]:
    """:func:`launch` of a search's answer (the JSON of :class:`simulator.search.deployments.Outcome`): its
    shape, the knobs it was sized and simulated with (``sizing``: ``max_num_batched_tokens``,
    ``max_model_len``), the space's ``gpu_memory_utilization`` and its replica count."""
    c, sizing = best["candidate"], best.get("sizing") or {}
    drafter = c.get("speculative")  # a SpecOption's dict: method, num_speculative_tokens, acceptance_rate
    spec_cfg, notes = speculative_config(None if drafter is None else SimpleNamespace(**drafter), model)
    spec = LaunchSpec(
        model=model, tensor_parallel_size=int(c["tensor_parallel"]), pipeline_parallel_size=int(c["pipeline_parallel"]),
        data_parallel_size=int(c.get("data_parallel", 1)), enable_expert_parallel=bool(c.get("expert_parallel", False)),
        max_num_seqs=int(c["max_num_seqs"]), max_num_batched_tokens=sizing.get("max_num_batched_tokens"),
        max_model_len=sizing.get("max_model_len"), gpu_memory_utilization=gpu_memory_utilization,
        kv_cache_dtype=c.get("kv_cache_dtype") or "auto", quantization=c.get("precision"),
        async_scheduling=async_scheduling, replicas=int(best["replicas"]), gpu_name=str(c.get("gpu") or ""),
        vllm_version=vllm_version, speculative=spec_cfg, notes=tuple(notes))
    return launch(spec)


__all__ = ["IMAGE", "KV_CACHE_DTYPES", "LaunchError", "LaunchSpec", "QUANTIZATION", "kubernetes_manifests",
           "launch", "search_launch", "sizing_launch", "speculative_config", "to_yaml", "vllm_serve_args",
           "vllm_serve_command"]
