"""A start-up that fails after sizing: vLLM prints its KV cache, then runs out of memory warming up the sampler
(issue 31: gpt-oss-20b on an H100 at gpu_memory_utilization 0.95). Golden: llm-d's vLLM 0.11 H100 runs
(tests/data/sizing/llmd_h100_memory_0_11.csv) start, the failed one fails."""

from __future__ import annotations

import pytest

from simulator.base.specs import DeploymentSpec, GpuSpec
from simulator.sizing.closed_form import plan
from simulator.sizing.hf_config import parse_hf_config
from tests.simulator._sizing_data import hf_config
from tests.simulator.test_sizing_activation_terms import MODELS, llmd_rows

H100 = GpuSpec(name="H100 SXM5 80GB", memory_gib=79.18, interconnect_gbps=900.0)
OSS20 = "openai--gpt-oss-20b_config.json"


def oss(gmu: float, version: str = "0.19.0", **kw):
    return plan(parse_hf_config(hf_config(OSS20)), H100,
                DeploymentSpec(gpu_memory_utilization=gmu, vllm_version=version, max_model_len=16000, **kw))


def test_gpt_oss_20b_at_095_prints_its_kv_cache_then_fails_warming_up_the_sampler():
    res = oss(0.95)
    assert res.fits is False
    assert res.memory_gib.kv > 50  # the KV cache was sized: vLLM printed it
    assert "warming up the sampler with 1,024 dummy requests" in res.reason
    assert "lower max_num_seqs" in res.reason


def test_gpt_oss_20b_at_09_starts():
    assert oss(0.9).fits is True


def test_the_suggested_max_num_seqs_starts():
    res = oss(0.95)
    seqs = int(res.reason.split("to about ")[1].split(")")[0].replace(",", ""))
    assert 0 < seqs < 1024
    assert oss(0.95, max_num_seqs=seqs).fits is True


def test_a_pasted_kv_figure_does_not_hide_the_warm_up_failure():
    assert oss(0.95, available_kv_gib=54.2).fits is False


def test_the_v0_engine_has_no_sampler_warm_up_after_the_kv_cache():
    llama = parse_hf_config(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"))
    res = plan(llama, H100, DeploymentSpec(gpu_memory_utilization=0.98, vllm_version="0.6.4", max_model_len=16000))
    assert res.fits is True


@pytest.mark.parametrize("row", [r for r in llmd_rows() if r["model"] != "openai/gpt-oss-120b"],
                         ids=lambda r: f"{r['model']}-tp{r['tp']}")
def test_fits_matches_vllm_on_llmd_0_11_runs(row):
    # gpt-oss-120b is left out: vLLM printed 3.33 GiB of KV where its own breakdown (71.26 - 64.38 - 7.38 - 0.13)
    # leaves -0.63 GiB; the planner follows the breakdown and says it does not fit (docs/sizing.md).
    res = plan(MODELS[row["model"]](), H100,
               DeploymentSpec(tensor_parallel_size=int(row["tp"]), gpu_memory_utilization=float(row["gmu"]),
                              max_model_len=int(row["max_model_len"]), vllm_version="0.11.0"))
    assert res.fits is (row["status"] == "SUCCESS"), res.reason
