"""``simulator/`` is a house of parts (issue 29): subpackages whose imports run one way, as their docstrings say.

Each subpackage's ``__init__`` docstring ends with ``May import: simulator.a, simulator.b.``; every import
its modules make of another part (module level or inside a function, ``TYPE_CHECKING`` aside) must be named
there, and the parts, ordered by those lists, form floors with no arrow back up. ``docs/simulator.md``'s
package map lists exactly the tree's parts and modules.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.test_import_graph import imported_names

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "simulator"
PARTS = sorted(p.name for p in SIM.iterdir() if (p / "__init__.py").exists())


def allowed_imports(part: str) -> set[str]:
    doc = ast.get_docstring(ast.parse((SIM / part / "__init__.py").read_text())) or ""
    found = re.search(r"May import: (.*?)\.\s*$", doc, re.S)
    assert found, f"simulator/{part}/__init__.py: its docstring does not end with 'May import: ...'"
    text = found.group(1)
    return set() if text.startswith("nothing") else {name.strip().removeprefix("simulator.")
                                                     for name in text.split(",")}


def part_imports(part: str) -> dict[str, set[str]]:
    """``{other part: {module of this part that imports it}}``."""
    out: dict[str, set[str]] = {}
    for path in sorted((SIM / part).rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for name, _line in imported_names(module, path):
            bits = name.split(".")
            if bits[0] == "simulator" and len(bits) > 1 and bits[1] in PARTS and bits[1] != part:
                out.setdefault(bits[1], set()).add(module)
    return out


#: Old import paths kept for the tools that score the clock on real runs (``simulator/specs.py`` says why).
DOORS = {"specs.py": "simulator.base.specs", "hf_config.py": "simulator.sizing.hf_config",
         "cost_model.py": "simulator.clock.cost_model"}


def test_every_module_lives_in_a_part():
    loose = sorted(p.name for p in SIM.glob("*.py") if p.name not in {"__init__.py", "__main__.py", *DOORS})
    assert loose == [], f"modules outside a subpackage: {loose}"


@pytest.mark.parametrize("name", sorted(DOORS))
def test_an_old_import_path_only_re_exports_its_part(name):
    tree = ast.parse((SIM / name).read_text())
    body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    assert body and all(isinstance(n, ast.ImportFrom) and n.module == DOORS[name] for n in body)
    assert {"base", "sizing", "clock", "workload", "engine", "cluster", "batch", "search", "calibration",
            "cli"} <= set(PARTS)


@pytest.mark.parametrize("part", PARTS)
def test_a_part_imports_only_what_its_docstring_allows(part):
    allowed = allowed_imports(part)
    assert allowed <= set(PARTS), f"{part} allows parts that do not exist: {allowed - set(PARTS)}"
    unexpected = {other: sorted(mods) for other, mods in part_imports(part).items() if other not in allowed}
    assert not unexpected, f"simulator/{part} imports parts its docstring does not allow: {unexpected}"


def test_the_parts_stand_on_floors_with_no_arrow_back_up():
    allowed = {part: allowed_imports(part) for part in PARTS}
    floor: dict[str, int] = {}
    while len(floor) < len(PARTS):
        ready = [p for p in PARTS if p not in floor and allowed[p] <= set(floor)]
        assert ready, f"the allowed imports of {sorted(set(PARTS) - set(floor))} go round in a circle"
        for p in ready:
            floor[p] = 1 + max((floor[q] for q in allowed[p]), default=0)
    assert floor["base"] == 1 and floor["cli"] == max(floor.values())


def test_the_top_package_is_only_a_door():
    assert part_imports_of_top() <= {"cli"}


def part_imports_of_top() -> set[str]:
    names = set()
    for path in (SIM / "__init__.py", SIM / "__main__.py"):  # the doors of DOORS are checked on their own
        module = "simulator" if path.name == "__init__.py" else "simulator.__main__"
        names |= {n.split(".")[1] for n, _ in imported_names(module, path) if n.startswith("simulator.")}
    return names & set(PARTS)


def documented_map() -> dict[str, set[str]]:
    """The package map of ``docs/simulator.md``: rows ``| `simulator/part/` | `a.py`, `b.py` | ... |``."""
    text = (ROOT / "docs" / "simulator.md").read_text()
    section = text.split("## Package map", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `simulator/(\w+)/` \| ([^|]+) \|", section, re.M)
    return {part: set(re.findall(r"`(\w+)\.py`", modules)) for part, modules in rows}


def test_the_docs_package_map_is_the_tree():
    tree = {part: {p.stem for p in (SIM / part).glob("*.py") if p.name != "__init__.py"} for part in PARTS}
    assert documented_map() == tree


def test_every_part_exports_what_its_init_imports():
    for part in PARTS:
        tree = ast.parse((SIM / part / "__init__.py").read_text())
        imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
        exported = next((set(ast.literal_eval(n.value)) for n in tree.body if isinstance(n, ast.Assign)
                         and any(getattr(t, "id", "") == "__all__" for t in n.targets)), set())
        assert imported == exported, f"simulator/{part}: __all__ and the imports of __init__ differ"
