"""An input error's field is read from the error (``FieldError.field``), never parsed back out of its words.

Issue 29, item 6: the sizing service, the profile services and the config.json import split ``str(exc)`` at its
first colon to find the field; a message holding a colon of its own (a ratio, a distribution such as
``lognormal:2048,1536``) then landed on a made-up field, and the import's errors reached the planner with their
field only in the words.
"""

from __future__ import annotations

import copy
import json

import pytest
from django.core.exceptions import ValidationError

from gpuprofiles.services import _spec_error
from planner.sizing.services import spec_error_field
from simulator.base.errors import FieldError
from simulator.base.specs import SpecError
from simulator.sizing.hf_config import parse_hf_config
from tests.simulator._sizing_data import hf_config


def test_the_profile_services_take_the_field_of_the_error():
    named = _spec_error(SpecError("ratio 1:2 is not allowed", field="memory_gib"))
    assert named.errors == {"memory_gib": ["ratio 1:2 is not allowed"]}
    # no field named: the whole words on non_field_errors (the old split made a field "ratio 1" of them)
    assert _spec_error(SpecError("ratio 1:2 is not allowed")).errors == {
        "non_field_errors": ["ratio 1:2 is not allowed"]}
    assert _spec_error(SpecError("x", field="num_layers"), "config").errors == {"config": ["num_layers: x"]}
    assert isinstance(_spec_error(SpecError("x")), FieldError)  # the one input-error type, not Django's


def test_the_sizing_service_takes_the_field_of_the_error():
    assert spec_error_field(SpecError("must be >= 1, got 0", field="max_num_seqs"), default="model") == (
        "max_num_seqs", "must be >= 1, got 0")
    # a model field (not a deployment knob) stays in the words, under the default
    assert spec_error_field(SpecError("bad", field="num_layers"), default="model") == ("model", "num_layers: bad")
    # words that begin like a knob name are not a field
    assert spec_error_field(SpecError("max_num_seqs: looks like a field"), default="model") == (
        "model", "max_num_seqs: looks like a field")


def test_a_config_import_names_the_config_key_in_the_field():
    cfg = copy.deepcopy(hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"))
    cfg["num_key_value_heads"] = 7  # does not divide 32 attention heads
    with pytest.raises(SpecError) as exc:
        parse_hf_config(cfg)
    assert exc.value.field == "num_key_value_heads"  # the ModelSpec field num_kv_heads, as the config calls it
    assert str(exc.value) == f"num_key_value_heads: {exc.value.message}"


def test_the_search_command_names_the_option_of_a_bad_file_from_the_errors_field(capsys, tmp_path):
    from simulator.cli.commands import main
    from tests.simulator.test_search_cli import BASE

    bad = tmp_path / "generation_config.json"
    bad.write_text('{"temperature": "hot"}')
    assert main(BASE + ["--slo", "itl:p90:1", "--generation-config", str(bad)]) == 2
    assert capsys.readouterr().err.startswith("error: --generation-config: generation_config.temperature")
    cfg = hf_config("meta-llama--Meta-Llama-3.1-8B_config.json")
    model = tmp_path / "config.json"
    model.write_text(json.dumps({**cfg, "num_key_value_heads": 7}))
    assert main([*BASE[:2], str(model), *BASE[3:], "--slo", "itl:p90:1"]) == 2
    assert capsys.readouterr().err.startswith("error: --model: num_key_value_heads")


# --------------------------------------------------------------------------- the simulator's own sites (issue 29, audit 2)


def test_a_disaggregated_deployments_slo_keeps_its_field_and_the_command_names_the_option(tmp_path, capsys):
    from simulator.cli.commands import main
    from simulator.cluster.disaggregated import DisaggError, deployment_from_dict
    from tests.simulator.test_disaggregated_cli import DEPLOYMENT

    with pytest.raises(DisaggError) as exc:
        deployment_from_dict({**DEPLOYMENT, "slo_ttft_s": -1})
    assert exc.value.field == "slo_ttft_s" and str(exc.value) == "slo_ttft_s: must be > 0 seconds, got -1"
    wl, dep = tmp_path / "wl.json", tmp_path / "dep.json"
    assert main(["workload", "--n", "8", "--arrival", "poisson-time:30", "--prompt", "normal:300,80",
                 "--output", "normal:30,10", "--out", str(wl)]) == 0
    dep.write_text(json.dumps({**DEPLOYMENT, "slo_itl_s": 0}))
    base = ["cluster", "--workload", str(wl), "--disaggregated", str(dep)]
    capsys.readouterr()
    assert main(base) == 2
    assert capsys.readouterr().err.strip() == "error: --slo-itl-s: must be > 0 seconds, got 0"
    dep.write_text(json.dumps({**DEPLOYMENT, "link": {"bandwidth_gbps": 0}}))
    assert main(base + ["--decode-instances", "1,x"]) == 2  # the file's error first, under its field
    assert capsys.readouterr().err.strip() == "error: --disaggregated link.bandwidth_gbps: must be > 0, got 0"
    dep.write_text(json.dumps(DEPLOYMENT))
    assert main(base + ["--decode-instances", "1,x"]) == 2  # an option's own words as they are
    assert capsys.readouterr().err.strip() == (
        "error: --decode-instances '1,x': expected N or N1,N2,... (whole numbers)")


@pytest.mark.parametrize("bad,field,words", [
    ({"speedup": 0}, "speedup", "trace speedup: must be a number from 1e-06 to 1e+06, got 0"),
    ({"window": (5.0, 1.0)}, "window", "trace window: needs 0 <= start < end seconds, got 5.0 to 1.0"),
    ({"max_model_len": 0}, "max_model_len", "trace max_model_len: must be a whole number from 1 to 100,000,000, got 0"),
])
def test_a_trace_option_names_itself_in_the_field_with_the_same_words(bad, field, words):
    from simulator.workload import TraceOptions, TraceOptionValueError

    with pytest.raises(TraceOptionValueError) as exc:
        TraceOptions(**bad)
    assert exc.value.field == field and str(exc.value) == words


def test_the_trace_command_options_are_named_from_the_errors_field():
    import argparse

    from simulator.cli.traces import trace_options

    class Bad(Exception):
        pass

    for ns, max_len, words in ((argparse.Namespace(trace_rate_scale=0.0), None,
                                "--trace-rate-scale: must be a number from 1e-06 to 1000, got 0.0"),
                               (argparse.Namespace(), 0, "config max_model_len: must be a whole number from 1 to "
                                                         "100,000,000, got 0")):
        with pytest.raises(Bad) as exc:
            trace_options(ns, max_len, Bad)
        assert str(exc.value) == words


def test_a_sweeps_trace_error_is_filed_by_its_type_not_by_its_words():
    from planner.errors import FieldErrors
    from planner.sweeps.sections import parse_workload

    # a Mooncake trace whose bad timestamp quotes the words "trace options": an error of the trace, not its options
    err = FieldErrors()
    line = json.dumps({"timestamp": "trace options", "input_length": 5, "output_length": 2, "hash_ids": [1]})
    parse_workload({"trace": line + "\n", "format": "mooncake"}, err)
    assert err.errors == {"workload.trace": [
        "trace line 1, field timestamp: expected a time in ms, got 'trace options'"]}
    err = FieldErrors()  # options on the planner's own columns: the options' error
    parse_workload({"trace": "arrival_time,prompt_tokens,output_tokens\n0,3,4\n", "format": "csv",
                    "options": {"speedup": 2}}, err)
    assert list(err.errors) == ["workload.options"]
    assert err.errors["workload.options"][0].startswith("trace: trace options (speedup) apply to the public formats")


def test_an_engine_tier_and_cost_model_error_keep_their_field():
    from simulator.engine.config import ConfigError, EngineConfig

    with pytest.raises(ConfigError) as exc:
        EngineConfig(enable_prefix_caching=True, cpu_tier={"num_blocks": -1})
    assert exc.value.field == "cpu_tier.num_blocks"
    assert str(exc.value) == "cpu_tier.num_blocks: must be a whole number between 0 and 200,000,000, got -1"
    with pytest.raises(ConfigError) as exc:
        EngineConfig(cost_model={"kind": "terms", "prefill_s": -1.0})
    assert exc.value.field == "cost_model.prefill_s" and str(exc.value).startswith("cost_model.prefill_s: ")
    gpu = {"name": "g", "memory_gib": 80, "bandwidth_tbps": 3.35, "bf16_tflops": 989}
    with pytest.raises(ConfigError) as exc:  # a field of the roofline's own goes under cost_model, words kept
        EngineConfig(cost_model={"kind": "roofline", "model": hf_config("meta-llama--Meta-Llama-3.1-8B_config.json"),
                                 "gpu": gpu, "tp": 0})
    assert exc.value.field == "cost_model" and str(exc.value) == "cost_model: tp: must be a whole number >= 1, got 0"


def test_the_search_forms_speculative_setting_keeps_its_words():
    from planner.search.forms import SearchForm

    form = SearchForm.__new__(SearchForm)  # the clean step alone (the form's model choices read the catalog)
    for word, words in (("eagle:3", "eagle:3:  'eagle:3' must look like METHOD:K:ACCEPTANCE, e.g. eagle:3:0.7"),
                        ("medusa:3:0.7", "medusa:3:0.7: method must be one of")):
        form.cleaned_data = {"speculative": word}
        with pytest.raises(ValidationError) as exc:
            form.clean_speculative()
        assert exc.value.messages[0].startswith(words), exc.value.messages


# --------------------------------------------------------------------------- the CLI names options by field (item 6)


def test_the_cluster_command_names_its_options_from_the_errors_field(tmp_path, capsys):
    """``cluster`` used to cut "routing" off the front of the words (and replace "closed_loop.clients" inside
    them); the option is now found from the error's field (simulator.cli.values.option_words)."""
    from pathlib import Path

    from simulator.cli.commands import main
    from simulator.cli.values import option_words
    from simulator.cluster import ClusterError

    wl = tmp_path / "wl.json"
    assert main(["workload", "--n", "8", "--unit", "s", "--arrival", "poisson:5", "--prompt", "const:64",
                 "--output", "const:8", "--out", str(wl)]) == 0
    cfg = Path(__file__).resolve().parents[1] / "examples" / "C.json"
    base = ["cluster", "--workload", str(wl), "--config", str(cfg), "--instances", "1"]
    capsys.readouterr()
    assert main(base + ["--routing", "routing-robin"]) == 2
    assert capsys.readouterr().err.strip().startswith(
        "error: --routing: unknown policy 'routing-robin' (known: round-robin, least-loaded, prefix-affinity")
    assert main(base + ["--clients", "0"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --clients: must be a whole number from 1 to ")
    # words that only look like a field are left as they are; a field the options do not set keeps its path
    assert option_words(ClusterError("routing: not a field"), {"routing": "--routing"}) == "routing: not a field"
    assert option_words(ClusterError("bad", field="seed"), {"routing": "--routing"}) == "seed: bad"
    assert option_words(ClusterError("bad", field="routing"), {"routing": "--routing"}) == "--routing: bad"


# --------------------------------------------------------------------------- one error type (item 6)


def test_every_input_error_is_one_type_with_its_field_paths():
    """The simulator's errors, the planner's InputError and the catalog's are one type (FieldError) carrying
    ``errors`` (path -> messages) and ``not_found``; the planner's name is that type with its constructor."""
    from planner.errors import InputError, field_and_message

    one = SpecError("must be >= 1, got 0", field="max_num_seqs")
    assert one.errors == {"max_num_seqs": ["must be >= 1, got 0"]} and one.status_code == 400
    many = InputError({"tensor_parallel_size": ["3 does not divide 32"], "model": ["No model 'x'"]}, not_found=True)
    assert isinstance(many, FieldError) and many.status_code == 404
    assert str(many) == "tensor_parallel_size: 3 does not divide 32; model: No model 'x'"
    assert field_and_message(many) == (None, str(many))  # several fields: none of them is "the" field
    single = InputError.one("gpu", "No GPU 'h1' (see GET /api/gpus/).")
    assert (single.field, single.message, str(single)) == ("gpu", "No GPU 'h1' (see GET /api/gpus/).",
                                                           "gpu: No GPU 'h1' (see GET /api/gpus/).")
    assert FieldError.many({"non_field_errors": ["Send a JSON object."]}).field is None


@pytest.mark.django_db
def test_one_mapping_answers_a_simulator_a_planner_and_a_catalog_error_alike():
    """planner.api.errors maps every FieldError once: a simulator error that reaches a view is a 400 at its
    field (it was a 500), as the planner's and the catalog's are."""
    from rest_framework.test import APIRequestFactory

    from planner.api.errors import exception_handler
    from planner.errors import InputError

    request = APIRequestFactory().post("/api/plan/")
    for exc, status, body in (
            (SpecError("must be >= 1, got 0", field="max_num_seqs"), 400, {"max_num_seqs": ["must be >= 1, got 0"]}),
            (InputError.one("model", "No model 'x'.", not_found=True), 404, {"model": ["No model 'x'."]}),
            (_spec_error(SpecError("bad", field="memory_gib")), 400, {"memory_gib": ["bad"]})):
        response = exception_handler(exc, {"request": request})
        assert (response.status_code, response.data) == (status, {"errors": body})
