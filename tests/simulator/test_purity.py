"""simulator/ is a plain library: importing all of it pulls in no Django, Celery, DRF or Plotly."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import simulator

FORBIDDEN = ("django", "celery", "rest_framework", "plotly", "kombu", "gpuprofiles", "planner")


def test_simulator_modules_import_no_web_framework():
    names = sorted(m.name for m in pkgutil.walk_packages(simulator.__path__, "simulator."))
    assert "simulator.engine.config" in names and "simulator.workload.requests" in names
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    if name != 'simulator.__main__':\n"
        "        importlib.import_module(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    root = Path(simulator.__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == "", f"simulator imported: {out.stdout.strip()}"


def test_simulator_sources_have_no_forbidden_import_lines():
    root = Path(simulator.__file__).resolve().parent
    offenders = []
    for path in root.rglob("*.py"):
        for line in path.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")) and stripped.split()[1].split(".")[0] in FORBIDDEN:
                offenders.append(f"{path.name}: {stripped}")
    assert offenders == []
