"""The sampler path a model's requests take when they set none (simulator/base/sampling.py, ModelSpec.sampling).

vLLM 0.15 applies the temperature / top_k / top_p / min_p / repetition_penalty of a model's
``generation_config.json`` to every request that sets no sampling parameters, and the path they select costs
from 0.05 ms (an argmax) to over 1 ms a step (a sort of every request's logits). The clock follows the model
unless the caller chooses a path.
"""

import csv
import json
from pathlib import Path

import pytest

from simulator.base.sampling import (
    DEFAULT_SAMPLER_PATH,
    GENERATION_CONFIGS,
    SAMPLER_PATHS,
    generation_config_path,
    generation_defaults,
    model_sampler_path,
    sampler_path,
)
from simulator.base.specs import GpuSpec, ModelSpec, SpecError
from simulator.calibration.validation import build_run, load_experiments
from simulator.clock.cost_model import RooflineCoefficients, RooflineStepTime, model_coefficients, sampling_coefficients
from simulator.sizing.hf_config import parse_hf_config

ROOT = Path(__file__).resolve().parents[2]
H100 = GpuSpec(name="H100 SXM5 80GB", memory_mib=81559, bandwidth_tbps=3.35, bf16_tflops=989, interconnect_gbps=900)
LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "vocab_size": 128256, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize(("fields", "path"), [
    ({}, "temperature"),  # the file sets none: temperature 1, no filter
    ({"temperature": 0}, "greedy"),
    ({"temperature": 0.0, "top_k": 20, "top_p": 0.8}, "greedy"),  # temperature 0 is an argmax whatever else is set
    ({"temperature": 0.6, "top_p": 0.9}, "top_k_top_p"),  # Llama 2 / 3.x
    ({"top_k": 64, "top_p": 0.95}, "top_k_top_p"),  # no temperature: 1.0, still filtered
    ({"temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05}, "top_k_top_p_penalties"),  # Qwen2.5
    ({"top_p": 1.0, "top_k": 0}, "temperature"),  # top-p 1 and top-k 0 filter nothing
    ({"top_k": -1}, "temperature"),  # -1: no top-k (vLLM's older spelling)
    ({"min_p": 0.05}, "temperature"),  # min-p is a threshold, no sort
    ({"repetition_penalty": 1.1}, "temperature"),  # a penalty without a filter: no sort
    ({"temperature": None, "top_p": None}, "temperature"),
])
def test_the_path_follows_vllms_rule(fields, path):
    assert sampler_path(fields) == path


@pytest.mark.parametrize(("generation_config", "path"), [
    ({"top_k": 50}, "temperature"),  # transformers' default top_k: to_diff_dict() drops it, vLLM applies nothing
    ({"top_k": 50, "top_p": 0.9}, "top_k_top_p"),
    ({"temperature": 1.0, "top_p": 1.0, "repetition_penalty": 1.0}, "temperature"),
    ({"temperature": 0.6, "top_p": 0.9, "do_sample": False}, "top_k_top_p"),  # do_sample is not read
    ({"bos_token_id": 1, "eos_token_id": 2}, "temperature"),
])
def test_a_generation_config_gives_what_vllm_applies_of_it(generation_config, path):
    assert generation_config_path(generation_config) == path


@pytest.mark.parametrize(("fields", "message"), [
    ({"top_p": "0.9"}, "top_p: must be a number"),
    ({"temperature": True}, "temperature: must be a number"),
    ({"repetition_penalty": -1}, "repetition_penalty: must be 0 or more"),
    ({"temperature": float("nan")}, "temperature: must be a number"),
])
def test_a_bad_field_is_named(fields, message):
    with pytest.raises(ValueError, match=message):
        sampler_path(fields)


def test_the_shipped_table_is_well_formed_and_sourced():
    data = json.loads(GENERATION_CONFIGS.read_text())
    assert set(data["vllm_reads"]["keys"]) >= {"temperature", "top_k", "top_p", "min_p", "repetition_penalty"}
    for hf_id, entry in data["models"].items():
        assert "/" in hf_id and entry["source"].strip(), hf_id
        assert set(entry["fields"]) <= set(data["vllm_reads"]["keys"]), hf_id
        assert isinstance(entry["verified"], bool) and sampler_path(entry["fields"]) in SAMPLER_PATHS


def test_lookup_by_id_or_catalog_name_any_case():
    assert generation_defaults("mistralai/Mixtral-8x7B-v0.1")["fields"] == {}
    assert generation_defaults("  MIXTRAL 8x7b ")["hf_id"] == "mistralai/Mixtral-8x7B-v0.1"
    assert model_sampler_path("Qwen/Qwen2.5-7B-Instruct") == "top_k_top_p_penalties"
    assert generation_defaults("no-such/model") is None and model_sampler_path(None) is None


def test_every_catalog_name_finds_the_entry_of_its_own_repository():
    """The table's catalog names must not drift from models.csv: a name finds its row's Hugging Face id."""
    rows = list(csv.DictReader((ROOT / "gpuprofiles" / "data" / "models.csv").open(encoding="utf-8")))
    rows += json.loads((ROOT / "gpuprofiles" / "data" / "quantized_models.json").read_text())["models"]
    known = 0
    for row in rows:
        by_id, by_name = generation_defaults(row["hf_id"]), generation_defaults(row["name"])
        assert (by_name or {}).get("hf_id") == (by_id or {}).get("hf_id"), row["name"]
        known += by_id is not None
    assert known >= len(rows) - 2  # every catalog checkpoint but Gemma 4 has its defaults


def test_validate_times_each_training_run_with_the_path_its_model_gives():
    for exp in load_experiments():
        path = model_sampler_path(exp["model"])
        vocab = parse_hf_config(exp["model_config"]).vocab_size
        _, config = build_run(exp, max_requests=10)
        assert config.cost_model.gpu_req_s == pytest.approx(SAMPLER_PATHS[path][2] * vocab), exp["name"]


def test_parse_hf_config_reads_a_given_generation_config_first_then_the_name_then_name_or_path():
    assert parse_hf_config(LLAMA_8B).sampling is None  # nothing known
    assert parse_hf_config(LLAMA_8B, name="meta-llama/Llama-3.1-8B-Instruct").sampling == "top_k_top_p"
    assert parse_hf_config({**LLAMA_8B, "_name_or_path": "01-ai/Yi-34B"}, name="my copy").sampling == "temperature"
    given = parse_hf_config(LLAMA_8B, name="meta-llama/Llama-3.1-8B-Instruct", generation_config={"temperature": 0})
    assert given.sampling == "greedy"
    assert parse_hf_config(LLAMA_8B, generation_config={}).sampling == "temperature"
    with pytest.raises(SpecError, match=r"^generation_config\.top_p: must be a number"):
        parse_hf_config(LLAMA_8B, generation_config={"top_p": "high"})
    with pytest.raises(SpecError, match=r"^generation_config: must be a JSON object"):
        parse_hf_config(LLAMA_8B, generation_config=[0.9])


def test_a_spec_refuses_an_unknown_path():
    spec = parse_hf_config(LLAMA_8B)
    with pytest.raises(SpecError, match="^sampling: must be one of greedy, temperature"):
        ModelSpec(**{**spec.to_dict(), "layers": spec.layers, "sampling": "beam"})


def _fixed_ms(model, coefficients=None):
    terms = RooflineStepTime.from_specs(model, H100, coefficients=coefficients).terms
    return (terms.gpu_fixed_s + 32 * terms.gpu_req_s) * 1e3  # the sampler's share of a 32-request step


def test_the_clock_times_the_models_own_path_unless_the_caller_chooses_one():
    plain = parse_hf_config(LLAMA_8B, generation_config={})  # temperature only
    sorting = parse_hf_config(LLAMA_8B, generation_config={"temperature": 0.6, "top_p": 0.9})
    unknown = parse_hf_config(LLAMA_8B)
    # 32 requests over 128K tokens: the sort costs about 0.8 ms more a step than plain sampling
    assert _fixed_ms(sorting) - _fixed_ms(plain) == pytest.approx(0.80, abs=0.05)
    assert _fixed_ms(unknown) == pytest.approx(_fixed_ms(sorting))  # not known: the default path, top-k / top-p
    assert DEFAULT_SAMPLER_PATH == "top_k_top_p"
    # a chosen path (a dict setting the sampler fields) wins over the model's; a dict without them keeps the model's
    assert _fixed_ms(plain, sampling_coefficients("top_k_top_p")) == pytest.approx(_fixed_ms(sorting))
    assert _fixed_ms(plain, {"mfu": 0.6}) == pytest.approx(_fixed_ms(plain))
    # a RooflineCoefficients is taken as it is (its sampler fields are the default path's)
    assert _fixed_ms(plain, RooflineCoefficients()) == pytest.approx(_fixed_ms(sorting))
    assert model_coefficients(plain)["sampling_vocab_s"] == SAMPLER_PATHS["temperature"][1]
    assert model_coefficients(plain, {"sampling_vocab_s": 1e-9})["sampling_vocab_s"] == 1e-9
