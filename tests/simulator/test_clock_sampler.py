"""The sampler's GPU time (simulator/clock/cost_model.py ``SAMPLER_PATHS``), against sampling times measured on one H100
(tests/data/latency/README.md, h100_sampler_offload_times.json).

vLLM 0.15 applies the model's ``generation_config.json`` defaults to requests that set no sampling parameters
(inference-perf, which drove the training runs, sends none), and its sampler for top-k / top-p requests sorts
each request's logits over the whole vocabulary (the PyTorch path; FlashInfer's sampler is off by default in
that release). The sort costs 0.6-1.1 ms a step for 8-32 requests over Qwen's 152K tokens: the time the TP = 1
runs of the training split were missing (docs/cost-model.md).
"""

import json
from pathlib import Path

import pytest

from simulator.base.specs import GpuSpec
from simulator.calibration.validation import load_experiments
from simulator.clock.cost_model import SAMPLER_PATHS, CostModelError, RooflineStepTime, sampling_coefficients
from simulator.clock.terms import StepCostTerms
from simulator.sizing.hf_config import parse_hf_config

DATA = json.loads((Path(__file__).resolve().parents[1] / "data" / "latency" / "h100_sampler_offload_times.json")
                  .read_text())["sampler"]
H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, interconnect_gbps=900)
MEASURED = {"greedy": "greedy_ms", "temperature": "random_ms", "top_k_top_p": "topk_topp_ms",
            "top_k_top_p_penalties": "topk_topp_penalties_ms"}


def _sampler_ms(path, batch, vocab):
    step, per_vocab, per_request_vocab = SAMPLER_PATHS[path]
    return (step + per_vocab * vocab + per_request_vocab * batch * vocab) * 1e3


@pytest.mark.parametrize("path", list(SAMPLER_PATHS))
def test_each_sampler_path_follows_its_measurement(path):
    pts = [p for p in DATA if 8 <= p["batch"] <= 64]  # the batch sizes of the training runs (6-44 requests)
    assert len(pts) == 16  # 4 batch sizes x 4 vocabularies (32K, 128K, 152K, 202K)
    for p in pts:
        want = p[MEASURED[path]]
        assert _sampler_ms(path, p["batch"], p["vocab"]) == pytest.approx(want, rel=0.2, abs=0.03), p


def test_the_top_k_top_p_sort_costs_far_more_than_temperature_sampling_and_grows_with_requests_x_vocabulary():
    for batch, vocab in ((8, 152064), (32, 152064), (32, 202048)):
        sort, plain = _sampler_ms("top_k_top_p", batch, vocab), _sampler_ms("temperature", batch, vocab)
        assert sort > 4 * plain
    assert _sampler_ms("top_k_top_p", 16, 152064) == pytest.approx(0.75, rel=0.1)  # measured 0.746 ms
    assert _sampler_ms("top_k_top_p", 32, 32000) < 0.4  # Llama 2's 32K vocabulary: a third of Qwen's


def test_the_clock_charges_the_default_sort_path_per_step_and_per_request():
    qwen = parse_hf_config({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
                            "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
                            "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768,
                            "torch_dtype": "bfloat16", "tie_word_embeddings": False})
    clock = RooflineStepTime.from_specs(qwen, H100)
    co = clock.coefficients
    assert (co.sampling_step_s, co.sampling_vocab_s, co.sampling_request_vocab_s) == SAMPLER_PATHS["top_k_top_p"]
    f8, f16 = (clock.components(0, 0, r, r * 1000, r)["fixed"] for r in (8, 16))
    assert f8 == pytest.approx(28 * co.layer_overhead_s + _sampler_ms("top_k_top_p", 8, 152064) / 1e3, rel=1e-9)
    assert f16 - f8 == pytest.approx(8 * co.sampling_request_vocab_s * 152064, rel=1e-9)
    # the sampler is GPU time: async scheduling's CPU overlap does not hide it
    plain = RooflineStepTime.from_specs(qwen, H100, coefficients=sampling_coefficients("temperature"))
    step = clock.terms.time(0, 0, 9, 9 * 876, 9)
    assert step - plain.terms.time(0, 0, 9, 9 * 876, 9) == pytest.approx(
        (_sampler_ms("top_k_top_p", 9, 152064) - _sampler_ms("temperature", 9, 152064)) / 1e3, rel=1e-9)
    assert 0.05 < (step - plain.terms.time(0, 0, 9, 9 * 876, 9)) / step < 0.10  # ~7 % of a 7B decode step


def test_an_unknown_sampler_path_is_refused_by_name():
    with pytest.raises(CostModelError, match="sampling: must be one of"):
        sampling_coefficients("beam")


def test_a_row_without_a_per_request_gpu_time_writes_as_before():
    assert "gpu_req_s" not in StepCostTerms(base_s=0.01).to_dict()  # linear rows: byte-identical results
    row = RooflineStepTime.from_specs(parse_hf_config({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
        "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}), H100).terms
    assert row.gpu_req_s > 0 and StepCostTerms.from_dict(row.to_dict()) == row


def test_each_training_run_samples_the_way_its_models_generation_config_makes_vllm_sample():
    paths = {e["model"].split("/")[-1]: parse_hf_config(e["model_config"], name=e["model"]).sampling
             for e in load_experiments()}
    assert set(paths.values()) <= set(SAMPLER_PATHS)
    # Qwen2.5-7B-Instruct: top_k 20, top_p 0.8, repetition_penalty 1.05; Llama 2 / 3.1 / 4: top_p 0.9;
    # Mistral-Nemo-Instruct-2407 and Yi-34B set none (temperature 1.0, no sort)
    assert paths["Qwen2.5-7B-Instruct"] == "top_k_top_p_penalties"
    assert {paths[m] for m in ("Llama-2-7b-hf", "Llama-3.1-70B-Instruct",
                               "Llama-4-Scout-17B-16E-Instruct-FP8-dynamic")} == {"top_k_top_p"}
    assert paths["Mistral-Nemo-Instruct-2407"] == paths["Yi-34B"] == "temperature"
