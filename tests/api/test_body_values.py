"""A request body of more JSON values than MAX_JSON_VALUES is refused before it is parsed (issue 37 item 1: no heavy
work in a web request). A 5 MB body of 2,600,000 numbers took 1.5-2.4 s of a web worker's CPU to parse and check
before its 400; counted at C speed, it is refused in milliseconds. Text is one value however long: a trace's
commas are not counted."""

from __future__ import annotations

import json
import time

import pytest

from config.json_input import MAX_JSON_VALUES, count_values, loads_checked

pytestmark = pytest.mark.django_db

PLAN = {"model": "llama-3-1-8b", "gpu": "h100-sxm5-80gb"}


@pytest.mark.parametrize("junk", [
    [1] * 2_600_000,  # the measured case
    [""] * 1_700_000,  # strings: counted by their quotes
    {f"{i:x}": 1 for i in range(450_000)},  # keys
    [[]] * 1_000_000,
], ids=["numbers", "strings", "keys", "lists"])
def test_a_body_of_too_many_values_is_refused_at_once(token_client, junk):
    body = json.dumps({**PLAN, "x": junk}, separators=(",", ":"))
    assert len(body) < 5 * 2**20
    token_client.get("/api/plan/")  # the first request of a process loads the URLs and the views: not the refusal's
    t0 = time.process_time()
    response = token_client.post("/api/plan/", body, content_type="application/json")
    seconds = time.process_time() - t0
    assert response.status_code == 400
    message = response.json()["errors"]["non_field_errors"][0]
    assert message.startswith("holds about ") and f"at most {MAX_JSON_VALUES:,} are accepted" in message
    assert seconds < 0.5, seconds


def test_long_text_is_one_value(token_client):
    """Four megabytes of comma-separated text (a trace's shape) pass the count: the answer is about the field."""
    text = "\n".join(f'{{"timestamp": {i}, "input_length": 100, "output_length": 20, "note": "a,b\\"c"}}'
                     for i in range(50_000))
    assert text.count(",") > MAX_JSON_VALUES
    response = token_client.post("/api/plan/", {**PLAN, "zz_text": text}, format="json")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["zz_text"]  # an unknown field, not a count


def test_the_count_is_an_upper_bound_at_the_limit():
    at = json.dumps([0] * (MAX_JSON_VALUES - 1))
    assert count_values(at, limit=MAX_JSON_VALUES) == MAX_JSON_VALUES  # the list and its numbers
    assert loads_checked(at, max_values=MAX_JSON_VALUES) == [0] * (MAX_JSON_VALUES - 1)
    with pytest.raises(ValueError, match="holds about 100,001 JSON values"):
        loads_checked(json.dumps([0] * MAX_JSON_VALUES), max_values=MAX_JSON_VALUES)
    assert count_values(json.dumps({"t": "a,b,c" * 100_000}), limit=MAX_JSON_VALUES) == 2
