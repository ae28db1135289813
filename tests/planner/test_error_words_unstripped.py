"""A message built around another error carries that error's field and words as data, so no page strips words.

Issue 29 (leftover of item 6): a sweep's cluster routing was refused as ``{"cluster.routing": ["routing: unknown
scorer ..."]}`` (the inner error's ``str()``, its field in the words), which the replicas page took off again with
``removeprefix("routing: ")``; a point's engine configuration was refused as ``{"point ...": ["cost_model.model:
..."]}``, which the sweep page's ``human_message`` stripped with a pattern. The definition now adds the inner
error at its own path (``FieldErrors.add_from``) with its words alone, and neither page removes words.
"""

from __future__ import annotations

import pytest

from config.form_errors import capitalized
from planner.errors import FieldErrors
from planner.sweeps.forms import human_message
from simulator.cluster import ClusterError
from simulator.cluster.routing import parse_routing
from simulator.engine.config import ConfigError

pytestmark = pytest.mark.django_db

BAD = "weighted:telepathy:3"


def _refusal() -> ClusterError:
    with pytest.raises(ClusterError) as raised:
        parse_routing(BAD)
    assert raised.value.field == "routing"
    return raised.value


def test_the_api_answers_the_routing_at_its_path_with_the_routers_own_words(signed_in_api):
    r = signed_in_api.post("/api/sweeps/", {"engine": {"num_gpu_blocks": 300}, "workload": {"spec": {"n": 5}},
                                            "cluster": {"num_instances": 2, "routing": BAD},
                                            "axes": [{"param": "max_num_seqs", "values": [1, 2]}]}, format="json")
    assert r.status_code == 400
    assert r.json()["errors"] == {"cluster.routing": [_refusal().message]}


def test_the_replicas_page_shows_the_same_words_without_taking_any_off(client):
    r = client.get("/replicas/", {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb", "rate": "20",
                                  "routing": "weighted", "routing_weights": "telepathy:3"})
    assert r.status_code == 200 and r.context["answer"] is None
    assert r.context["form"].errors["routing_weights"] == [capitalized(_refusal().message)]


def test_a_points_engine_error_is_added_at_its_own_path_and_the_sweep_page_keeps_every_word():
    err = FieldErrors()
    err.add_from("point num_gpu_blocks=100", ConfigError("the model's config.json object is required",
                                                         field="cost_model.model"))
    assert err.errors == {"point num_gpu_blocks=100.cost_model.model": ["the model's config.json object is required"]}
    # no pattern takes a path off the words any more: the words are the message's, capitalized
    assert human_message("the model's config.json object is required") == "The model's config.json object is required"
    assert human_message("deployment.tensor_parallel_size: must divide 32") == (
        "Deployment.tensor_parallel_size: must divide 32")
