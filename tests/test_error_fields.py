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
from simulator.base.specs import SpecError
from simulator.sizing.hf_config import parse_hf_config
from tests.simulator._sizing_data import hf_config


def test_the_profile_services_take_the_field_of_the_error():
    named = _spec_error(SpecError("ratio 1:2 is not allowed", field="memory_gib"))
    assert named.message_dict == {"memory_gib": ["ratio 1:2 is not allowed"]}
    # no field named: the whole words on non_field_errors (the old split made a field "ratio 1" of them)
    assert _spec_error(SpecError("ratio 1:2 is not allowed")).message_dict == {
        "non_field_errors": ["ratio 1:2 is not allowed"]}
    assert _spec_error(SpecError("x", field="num_layers"), "config").message_dict == {"config": ["num_layers: x"]}
    assert isinstance(_spec_error(SpecError("x")), ValidationError)


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
