"""The vendored Plotly bundle (static/vendor/plotly) is the one its README names, matches the plotly.js
version plotly.py builds figures for, and has every trace type the pages draw."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import plotly

from planner.plotly_assets import PLOTLY_JS

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "static" / PLOTLY_JS
README = BUNDLE.parent / "README.md"
#: Modules whose figures go to a page or a report (every ``go.<Trace>(`` in them must be in the bundle).
FIGURE_SOURCES = [*ROOT.glob("planner/**/*.py"), *ROOT.glob("gpuprofiles/**/*.py")]


def _bundle() -> str:
    return BUNDLE.read_text(encoding="utf-8")


def test_the_bundle_is_the_file_its_readme_names():
    digest = hashlib.sha256(BUNDLE.read_bytes()).hexdigest()
    assert digest in README.read_text(), f"{BUNDLE.name} changed: sha256 {digest} is not the one in {README.name}"


def test_the_bundle_is_the_plotly_js_version_plotly_py_builds_figures_for():
    full = (Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    version = re.search(r"plotly\.js v(\d+\.\d+\.\d+)", full[:1000]).group(1)
    ours = re.search(r"plotly\.js \(cartesian - minified\) v(\d+\.\d+\.\d+)", _bundle()[:1000]).group(1)
    assert ours == version, f"plotly.py draws for plotly.js {version}; static has {ours} (README says how to update)"


def test_every_trace_type_the_figures_use_is_in_the_bundle():
    traces = set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', _bundle()))
    used = {name.lower() for path in FIGURE_SOURCES
            for name in re.findall(r"\bgo\.([A-Z][A-Za-z0-9]*)\(", path.read_text(encoding="utf-8"))
            if name not in {"Figure", "Layout"}}
    assert {"scatter", "bar", "heatmap"} <= used, used  # the scan sees the figures
    assert used <= traces, f"traces drawn but not in the cartesian bundle: {sorted(used - traces)}"
