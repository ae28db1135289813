"""config/form_errors.py: the one function that puts input errors on a page's form fields.

Its rules (a path's field from the form's tables, never from the words; a field showing its own error keeps only
that; no message twice; when the path is written in front), and that no form or view of the planner, the catalog
or the accounts loops over an error's fields to attach them itself.
"""

import ast
from pathlib import Path

import pytest
from django import forms
from django.core.exceptions import ValidationError

from config.form_errors import attach_errors, capitalized, errors_of, field_for
from planner.errors import InputError
from simulator.base.errors import FieldError

ROOT = Path(__file__).resolve().parents[1]


class Page(forms.Form):
    model = forms.CharField(required=False)
    tensor_parallel_size = forms.IntegerField(required=False)
    ttft_ms = forms.FloatField(required=False)
    policy = forms.CharField(required=False)


def page(data=None) -> Page:
    form = Page(data or {})
    form.is_valid()
    return form


def shown(form) -> dict:
    return {k: list(v) for k, v in form.errors.items()}


def test_a_path_finds_its_field_in_the_tables_in_order():
    form = page()
    where = {"deployment.tensor_parallel_size": "tensor_parallel_size"}
    prefixes = (("slo.ttft_s", "ttft_ms"), ("slo", "policy"))
    assert field_for(form, "deployment.tensor_parallel_size", where=where) == ("tensor_parallel_size", True)
    assert field_for(form, "model", by_name=True) == ("model", True)
    assert field_for(form, "model") == (None, False)  # by name only when asked
    assert field_for(form, "slo.ttft_s", prefixes=prefixes) == ("ttft_ms", False)
    assert field_for(form, "slo.targets[0]", prefixes=prefixes) == ("policy", False)
    assert field_for(form, "slow", prefixes=prefixes) == (None, False)  # a prefix ends at "." or "["
    assert field_for(form, "gpu", default="model") == ("model", False)
    assert field_for(form, "gpu", where={"gpu": "no_such_field"}) == (None, False)  # not a field: the top


def test_a_field_showing_its_own_error_keeps_only_that_one_unless_named_in_also():
    form = page({"tensor_parallel_size": "two", "policy": ""})
    form.add_error("policy", "its own")
    errors = {"tensor_parallel_size": ["must divide the heads"], "policy": ["a window is too long"]}
    attach_errors(form, errors, by_name=True, also=("policy",))
    assert shown(form) == {"tensor_parallel_size": ["Enter a whole number."],
                           "policy": ["its own", "a window is too long"]}


def test_no_message_twice_where_it_lands():
    form = page()
    attach_errors(form, {"a": ["same words"], "b": ["same words"]}, paths="never")
    attach_errors(form, {"model": ["x"]}, by_name=True)
    attach_errors(form, {"model": ["x"]}, by_name=True, also=("model",))
    assert shown(form) == {"__all__": ["same words"], "model": ["x"]}


@pytest.mark.parametrize("paths,expected", [
    ("top", {"__all__": ["gpu: unknown", "whole"], "ttft_ms": ["too low"], "model": ["no such"]}),
    ("foreign", {"__all__": ["gpu: unknown", "whole"], "ttft_ms": ["slo.ttft_s: too low"], "model": ["no such"]}),
    ("never", {"__all__": ["unknown", "whole"], "ttft_ms": ["too low"], "model": ["no such"]}),
])
def test_when_the_path_is_written_in_front_of_the_words(paths, expected):
    form = page()
    errors = {"gpu": ["unknown"], "slo.ttft_s": ["too low"], "model": ["no such"], "non_field_errors": ["whole"]}
    attach_errors(form, errors, by_name=True, prefixes=(("slo", "ttft_ms"),), paths=paths)
    assert shown(form) == expected


def test_words_are_the_forms_own_and_know_where_they_land():
    form = page()
    attach_errors(form, {"model": ["gone"], "gpu": ["unknown"]}, by_name=True,
                  words=lambda m, field: capitalized(m) if field else m + ".")
    assert shown(form) == {"model": ["Gone"], "__all__": ["gpu: unknown."]}


def test_every_kind_of_input_error_gives_its_paths():
    assert errors_of(FieldError("must be > 0", field="engine.max_num_seqs")) == {"engine.max_num_seqs": ["must be > 0"]}
    assert errors_of(FieldError("no model")) == {"non_field_errors": ["no model"]}
    assert errors_of(InputError({"model": ["a"], "gpu": ["b"]})) == {"model": ["a"], "gpu": ["b"]}
    assert errors_of(ValidationError({"name": ["taken"]})) == {"name": ["taken"]}
    assert errors_of(ValidationError("bad")) == {"non_field_errors": ["bad"]}
    form = page()
    attach_errors(form, ValidationError({"model": ["taken"], "__all__": ["whole"]}), by_name=True)
    assert shown(form) == {"model": ["taken"], "__all__": ["whole"]}


def _loops_attaching_errors(path: Path) -> list[int]:
    """Lines of ``for ... in X.items():`` loops whose body calls ``add_error``: an error's fields attached by hand."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) \
                and isinstance(node.iter.func, ast.Attribute) and node.iter.func.attr == "items" \
                and any(isinstance(n, ast.Attribute) and n.attr == "add_error" for n in ast.walk(node)):
            lines.append(node.lineno)
    return lines


def test_no_form_or_view_attaches_an_errors_fields_itself():
    found = {str(p.relative_to(ROOT)): lines for package in ("planner", "gpuprofiles", "accounts")
             for p in sorted((ROOT / package).rglob("*.py")) if (lines := _loops_attaching_errors(p))}
    assert found == {}, f"use config.form_errors.attach_errors: {found}"
    assert _loops_attaching_errors(ROOT / "config" / "form_errors.py")  # the one loop, seen by the same check
