"""A pasted config.json or generation_config.json holding 1e999 (JSON text Python reads as infinity) is an error
on its field, not a 500: PostgreSQL's jsonb cannot store the verbatim file."""

import json

import pytest
from django.urls import reverse

from gpuprofiles.models import ModelProfile

from .factories import MINIMAL_CONFIG

MESSAGE = "holds a number too large for JSON (e.g. 1e999): write a finite one"


@pytest.mark.parametrize("data, field", [
    ({"config_text": json.dumps(MINIMAL_CONFIG)[:-1] + ', "rope_theta": 1e999}'}, "config_text"),
    ({"config_text": json.dumps(MINIMAL_CONFIG), "generation_config": '{"temperature": 1e999}'}, "generation_config"),
])
def test_page_import_names_the_field(client, user, data, field):
    client.force_login(user)
    r = client.post(reverse("gpuprofiles:model-import"), data)
    assert r.status_code == 200
    assert list(r.context["form"].errors) == [field]
    assert MESSAGE in r.context["form"].errors[field][0]
    assert not ModelProfile.objects.filter(owner=user).exists()
