"""From a plan to a deployment: the ``vllm serve`` command line and the Kubernetes manifests of an answer.

:class:`LaunchSpec` holds what an answer chose (model, TP/PP/DP, the scheduler's caps, memory, KV dtype,
quantization, speculative decoding, KV offloading, replicas, autoscaling); :func:`launch` turns it into
``{"vllm_serve": one shell command line, "kubernetes": Deployment + Service (+ HPA) YAML, ...}``
(:mod:`~simulator.launch.commands`).

May import: simulator.base.
"""

from simulator.launch.commands import (
    LaunchError,
    LaunchSpec,
    kubernetes_manifests,
    launch,
    search_launch,
    sizing_launch,
    to_yaml,
    vllm_serve_args,
    vllm_serve_command,
)

__all__ = ["LaunchError", "LaunchSpec", "kubernetes_manifests", "launch", "search_launch", "sizing_launch", "to_yaml", "vllm_serve_args",
           "vllm_serve_command"]
