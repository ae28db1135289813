"""A run over a limit (``simulator.batch.OverBudget``) is the one input error: every door maps it as any other.

Issue 29, item 6 (leftover): OverBudget was a plain ValueError with a ``.field``, turned into a 400 or a form
error by hand (``{exc.field: [str(exc)]}``) at ten sites. It is a :class:`FieldError` now, answered by the API's
one mapping (``planner.api.errors``) and attached by the forms' one function (``config.form_errors``); the
checks below hold its shape, the doors' answers (same status, field and words as before) and that no module
converts it by hand again.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from django import forms
from django.contrib.auth import get_user_model
from django.test import Client

from config.form_errors import attach_errors
from planner.api.errors import input_error_as_api_exception
from simulator.base.errors import FieldError
from simulator.batch.budget import OverBudget, Price, check

ROOT = Path(__file__).resolve().parents[2]

SWEEP = {"engine": {"num_gpu_blocks": 300}, "workload": {"spec": {"n": 5}},
         "axes": [{"param": "max_num_seqs", "values": [1, 2]}]}
PAGE = {"name": "over", "mode": "grid", "tensor_parallel_size": 1, "gpu_memory_utilization": 0.9,
        "block_size": 16, "num_gpu_blocks": 500, "enable_prefix_caching": "on", "n": 20, "prompt": "normal:100,20",
        "output": "normal:30,5", "arrival": "poisson:2", "arrival_unit": "step", "seed": 0,
        "axis1_param": "num_gpu_blocks", "axis1_values": "100, 200", "axis1_scale": "linear",
        "cliff_metric": "preemptions_per_request", "cliff_param": "num_gpu_blocks"}


def test_over_budget_is_the_one_input_error_at_its_field():
    exc = OverBudget("This run is estimated to need about 3 GiB", field="workload")
    assert isinstance(exc, FieldError) and exc.status_code == 400
    assert (exc.field, exc.message, exc.errors) == ("workload", "This run is estimated to need about 3 GiB",
                                                   {"workload": ["This run is estimated to need about 3 GiB"]})
    whole = OverBudget("too big")  # about the input as a whole: its words alone, as the CLI prints them
    assert (whole.field, str(whole), whole.errors) == (None, "too big", {"non_field_errors": ["too big"]})
    assert OverBudget("too big", field="non_field_errors").errors == whole.errors
    with pytest.raises(OverBudget) as raised:
        check(Price(3 * 2**30, 1.0), max_bytes=2**30, max_seconds=None, what="This run", field="file")
    assert raised.value.errors == {"file": ["This run is estimated to need about 3.0 GiB of memory (the limit is "
                                            "1.0 GiB)."]}


def test_the_api_and_a_form_take_it_as_any_input_error():
    exc = OverBudget("This calibration took longer than 1 s", field="file")
    assert input_error_as_api_exception(exc).detail == {"file": ["This calibration took longer than 1 s"]}

    class Upload(forms.Form):
        file = forms.CharField(required=False)

    form = Upload({})
    form.is_valid()
    attach_errors(form, exc, by_name=True, paths="never")
    assert form.errors == {"file": ["This calibration took longer than 1 s"]}


@pytest.mark.django_db
def test_a_sweep_over_the_chunk_limit_is_refused_alike_by_the_api_the_page_and_the_command(
        signed_in_api, settings, capsys, tmp_path):
    from django.core.management import CommandError, call_command

    settings.KVP_CHUNK_MAX_SECONDS = 1e-9
    r = signed_in_api.post("/api/sweeps/", SWEEP, format="json")
    assert r.status_code == 400
    words = r.json()["errors"]["workload"][0]
    assert words.startswith("Sweep point max_num_seqs=1 is estimated to need about ") and "(the limit is" in words

    page = Client()
    page.force_login(get_user_model().objects.create_user("pat", password="pw-123456789"))
    r = page.post("/sweeps/new/", PAGE)
    assert r.status_code == 200  # the form again, the refusal at its top (the workload as a whole)
    shown = [str(m) for m in r.context["form"].non_field_errors()]
    assert len(shown) == 1 and shown[0].startswith("Sweep point num_gpu_blocks=100 is estimated to need about ")

    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(SWEEP))
    with pytest.raises(CommandError, match="bad sweep definition"):
        call_command("sweep", "create", str(path), "--user", "pat")
    printed = capsys.readouterr().err
    assert json.loads(printed[:printed.rindex("}") + 1]) == {"errors": {"workload": [words]}}


def _hand_conversions(source: str) -> list[int]:
    """Lines of ``except ... OverBudget ...`` handlers that make another error out of it: raising anything but
    the error itself, or reading its parts (``exc.field``, ``str(exc)``, ``f"{exc}"``) instead of passing it on
    whole (``raise``, ``err.merge(exc)``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ExceptHandler) or node.type is None:
            continue
        if not any(isinstance(n, ast.Name) and n.id == "OverBudget" or isinstance(n, ast.Attribute)
                   and n.attr == "OverBudget" for n in ast.walk(node.type)):
            continue
        name = node.name
        for n in (n for stmt in node.body for n in ast.walk(stmt)):
            raises_new = isinstance(n, ast.Raise) and n.exc is not None
            reads_parts = name is not None and (
                isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name
                or isinstance(n, ast.FormattedValue) and isinstance(n.value, ast.Name) and n.value.id == name
                or isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("str", "repr")
                and any(isinstance(a, ast.Name) and a.id == name for a in n.args))
            if raises_new or reads_parts:
                lines.append(node.lineno)
                break
    return lines


def test_no_planner_catalog_or_accounts_module_converts_over_budget_by_hand():
    found = {str(p.relative_to(ROOT)): lines for package in ("planner", "gpuprofiles", "accounts", "config")
             for p in sorted((ROOT / package).rglob("*.py")) if (lines := _hand_conversions(p.read_text()))}
    assert found == {}, f"let OverBudget reach the API's mapping or attach_errors: {found}"
    # the check sees the old shapes, and lets the error through whole
    assert _hand_conversions("try:\n    f()\nexcept OverBudget as exc:\n"
                             "    raise X({exc.field: [str(exc)]}) from None\n") == [3]
    assert _hand_conversions("try:\n    f()\nexcept (KeyError, pricing.OverBudget) as exc:\n"
                             "    err.add(exc.field, str(exc))\n") == [3]
    assert _hand_conversions("try:\n    f()\nexcept OverBudget as exc:\n    err.merge(exc)\n"
                             "except OverBudget:\n    raise\n") == []
    # the command line's door prints the words (it is not a form, and has no field to show)
    assert _hand_conversions((ROOT / "simulator" / "cli" / "commands.py").read_text())
