"""``manage.py export_gpus``: the catalog's GPUs as the search command's ``--gpus`` file; ``examples/search_gpus.json``
is its output (issue 32 item 5: one source of truth, so the command line sizes GPUs as the API does)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from gpuprofiles.models import GpuProfile
from simulator.base import GpuSpec

pytestmark = pytest.mark.django_db
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "search_gpus.json"


def export(*argv: str) -> str:
    out = io.StringIO()
    call_command("export_gpus", *argv, stdout=out)
    return out.getvalue()


def test_the_example_file_is_the_catalog_s_own_output():
    names = [g["name"] for g in json.loads(EXAMPLE.read_text())]
    argv = [a for n in names for a in ("--name", n)]
    assert export(*argv) == EXAMPLE.read_text(), "examples/search_gpus.json is stale: regenerate it (examples/README.md)"


def test_every_gpu_in_the_file_is_the_spec_the_api_uses():
    for g in json.loads(EXAMPLE.read_text()):
        assert GpuSpec(**g) == GpuProfile.objects.get(name=g["name"], is_catalog=True).to_spec()


def test_without_names_every_priced_catalog_gpu_and_an_unknown_name_is_refused():
    every = json.loads(export())
    priced = GpuProfile.objects.filter(is_catalog=True, price_per_hour__isnull=False).count()
    assert len(every) == priced > 6 and all("price_per_hour" in g for g in every)
    with pytest.raises(CommandError, match="no catalog GPU named 'H1000'"):
        export("--name", "H1000")
