"""One input-error type (simulator/base/errors.py): every simulator error about its input is a FieldError that
carries its field path, so the planner attaches it to a field without reading the path back out of the words."""

from __future__ import annotations

import ast
import pathlib

import pytest

import simulator
from planner.errors import field_and_message
from simulator.base import GpuSpec, SpecError
from simulator.base.errors import FieldError
from simulator.base.json_input import JsonInputError
from simulator.cluster.routing import ClusterError
from simulator.engine.metrics import MetricsError
from simulator.engine.tiers import TierError
from simulator.launch.commands import LaunchError
from simulator.search.space import SearchError
from simulator.speculative.drafting import SpeculativeError
from simulator.workload.requests import WorkloadError

SIMULATOR = pathlib.Path(simulator.__file__).parent


def _error_classes() -> set[str]:
    """Names of the classes defined in simulator/ whose name ends in Error."""
    names = set()
    for path in SIMULATOR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                names.add(node.name)
    return names


@pytest.mark.parametrize("cls", [SpecError, WorkloadError, ClusterError, SearchError, SpeculativeError,
                                 TierError, MetricsError, LaunchError, JsonInputError])
def test_every_input_error_is_a_field_error(cls):
    assert issubclass(cls, FieldError) and issubclass(cls, ValueError)


def test_a_spec_error_names_its_field_apart_from_its_words():
    with pytest.raises(SpecError) as caught:
        GpuSpec(name="x", memory_gib=-1.0)
    exc = caught.value
    assert exc.field == "memory_gib" and not exc.message.startswith("memory_gib")
    assert str(exc) == f"memory_gib: {exc.message}"  # what the CLI prints is unchanged


def test_the_planner_takes_the_field_not_the_words():
    # words that themselves look like "field: ..." are not read as a path
    exc = WorkloadError("requests: 3 of them have no output", field="workload.requests[2]")
    assert field_and_message(exc) == ("workload.requests[2]", "requests: 3 of them have no output")
    assert field_and_message(SearchError.nested(exc, "definition")) == ("definition.workload.requests[2]",
                                                                         "requests: 3 of them have no output")
    assert field_and_message(SearchError("no deployment fits")) == (None, "no deployment fits")


def test_no_input_error_writes_a_literal_path_into_its_words():
    """An input error (a simulator error type, or a plain ValueError / TypeError, in the simulator or the
    planner) built with words starting 'name: ' should pass field= instead: the planner reads no field out of a
    message (planner.errors.field_and_message). This test fails on the code before the error type (271 such
    raises), and on a 'bad = SearchError("slo.percentile: ...")' built before its raise."""
    ours = (_error_classes() | {"ValueError", "TypeError"}) - {"CliError"}  # the CLI's own error prints
    found = []
    for root in (SIMULATOR, SIMULATOR.parent / "planner"):
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.Call) and node.args):
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                first = node.args[0]
                text = first.value if isinstance(first, ast.Constant) else (
                    first.values[0].value if isinstance(first, ast.JoinedStr) and first.values
                    and isinstance(first.values[0], ast.Constant) else "")
                head, sep, _ = str(text).partition(": ")
                if name in ours and sep and head and " " not in head and head.replace("_", "").replace(".", "").isalnum():
                    found.append(f"{path.relative_to(SIMULATOR.parent)}:{node.lineno}")
    assert not found, found
