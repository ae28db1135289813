"""The launch exports: ``vllm serve`` lines with vLLM's own flag names, manifests valid for Kubernetes.

Flags are checked against the frozen list of vLLM's engine arguments in
``tests/data/vllm/engine_args_99d7eb5.txt`` (its header says where it comes from); the manifests are
validated against the Kubernetes OpenAPI schemas shipped by ``kubernetes-validate`` (strict: no unknown
field), for the newest Kubernetes it knows.
"""

from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path

import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.launch import LaunchError, LaunchSpec, kubernetes_manifests, launch, vllm_serve_args

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm" / "engine_args_99d7eb5.txt"


def vllm_flags() -> tuple[set[str], set[str]]:
    """(every option name, the negatable ones) of the frozen list."""
    names: set[str] = set()
    negatable: set[str] = set()
    part = "names"
    for line in DATA.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        if line == "[negatable]":
            part = "negatable"
            continue
        (names if part == "names" else negatable).add(line)
    return names, negatable


NAMES, NEGATABLE = vllm_flags()


def _check_flags(args: list[str]) -> None:
    assert args[:2] == ["vllm", "serve"] and not args[2].startswith("-")
    for a in args[3:]:
        if not a.startswith("--"):
            continue
        if a.startswith("--no-"):
            assert "--" + a[5:] in NEGATABLE, a
        else:
            assert a in NAMES, f"{a} is not one of vLLM's engine arguments"


@pytest.fixture(scope="module", autouse=True)
def _schemas_parsed_once():
    """``kubernetes_validate.validate`` reads and parses its JSON schemas (the definitions file: 1.7 MB) on every
    call, 90 % of this file's time; here each file is parsed once. The validation is the library's, unchanged."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kubernetes_validate.utils, "schema_contents",
                      functools.cache(kubernetes_validate.utils.schema_contents))
        yield


def _validate(docs: list[dict]) -> None:
    version = kubernetes_validate.latest_version()
    for d in docs:
        kubernetes_validate.validate(d, version, strict=True)


SPECS = st.builds(
    LaunchSpec,
    model=st.sampled_from(["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B", "/models/llama"]),
    tensor_parallel_size=st.sampled_from([1, 2, 4, 8]), pipeline_parallel_size=st.sampled_from([1, 2]),
    max_num_seqs=st.none() | st.integers(1, 2048), max_num_batched_tokens=st.none() | st.integers(16, 65536),
    max_model_len=st.none() | st.integers(256, 131072),
    gpu_memory_utilization=st.none() | st.floats(0.5, 0.98).map(lambda x: round(x, 2)),
    kv_cache_dtype=st.sampled_from(["auto", "fp8", "fp8_e5m2"]), quantization=st.sampled_from([None, "bf16", "fp8", "int4"]),
    block_size=st.none() | st.sampled_from([16, 32]), enable_prefix_caching=st.none() | st.booleans(),
    async_scheduling=st.none() | st.booleans(),
    speculative=st.none() | st.just({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}),
    kv_offload_cpu_blocks=st.none() | st.integers(1, 100_000), replicas=st.integers(1, 64),
    gpu_name=st.sampled_from(["", "H100 SXM5 80GB"]), vllm_version=st.none() | st.sampled_from(["0.11.0", "0.28"]),
    autoscale=st.none() | st.just({"min_replicas": 1, "max_replicas": 8}))


@settings(max_examples=60, deadline=None)
@given(SPECS)
def test_every_launch_uses_vllm_flags_and_valid_manifests(spec):
    out = launch(spec)
    args = shlex.split(out["vllm_serve"])
    assert args == vllm_serve_args(spec)  # one shell line that splits back to the arguments
    _check_flags(args)
    docs = list(yaml.safe_load_all(out["kubernetes"]))
    assert docs == kubernetes_manifests(spec)  # the YAML reads back as the manifests
    _validate(docs)
    kinds = [d["kind"] for d in docs]
    assert kinds == ["Deployment", "Service"] + (["HorizontalPodAutoscaler"] if spec.autoscale else [])
    dep = docs[0]
    assert dep["spec"]["replicas"] == spec.replicas
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == args
    gpus = str(spec.tensor_parallel_size * spec.pipeline_parallel_size)
    assert c["resources"]["limits"]["nvidia.com/gpu"] == c["resources"]["requests"]["nvidia.com/gpu"] == gpus
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] == "/health"
    assert docs[1]["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]


def test_the_sized_knobs_are_on_the_line_with_their_values():
    spec = LaunchSpec("meta-llama/Llama-3.1-70B-Instruct", tensor_parallel_size=4, max_num_seqs=256,
                      max_num_batched_tokens=8192, max_model_len=4352, gpu_memory_utilization=0.9,
                      kv_cache_dtype="fp8", quantization="fp8", async_scheduling=False, replicas=5,
                      kv_offload_cpu_blocks=4096)
    args = vllm_serve_args(spec)
    pairs = dict(zip(args[3::1], args[4::1]))
    assert pairs["--tensor-parallel-size"] == "4" and pairs["--max-num-seqs"] == "256"
    assert pairs["--max-num-batched-tokens"] == "8192" and pairs["--max-model-len"] == "4352"
    assert pairs["--gpu-memory-utilization"] == "0.9" and pairs["--kv-cache-dtype"] == "fp8"
    assert pairs["--quantization"] == "fp8" and "--no-async-scheduling" in args
    offload = json.loads(pairs["--kv-transfer-config"])
    assert offload["kv_connector"] == "OffloadingConnector" and offload["kv_connector_extra_config"] == {
        "num_cpu_blocks": 4096}
    assert kubernetes_manifests(spec)[0]["spec"]["replicas"] == 5


def test_a_flag_outside_vllms_list_would_be_caught():
    with pytest.raises(AssertionError, match="not one of vLLM"):
        _check_flags(["vllm", "serve", "m", "--max-num-sequences", "8"])
    bad = kubernetes_manifests(LaunchSpec("m"))[0]
    bad["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate([bad])


@pytest.mark.parametrize("kw, field", [({"model": "a b"}, "model"), ({"tensor_parallel_size": 0}, "tensor_parallel"),
                                       ({"kv_cache_dtype": "int3"}, "kv_cache_dtype"),
                                       ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization")])
def test_bad_specs_name_the_field(kw, field):
    with pytest.raises(LaunchError, match=field):
        LaunchSpec(**{"model": "m", **kw})
