"""What the clock knows about a GPU beyond its data sheet: measured efficiencies and fixed times, with sources.

A roofline is only as true as the fractions of peak it assumes. The clock's defaults
(:class:`~simulator.clock.cost_model.RooflineCoefficients`) were calibrated on real vLLM runs on H100; other GPUs
reach other fractions (the A100's decode GEMVs stream at 0.71 of its HBM peak where the H100's do at 0.84; an
L40S all-reduces over PCIe). :func:`gpu_physics` gives the coefficients of one GPU and says where they come from:

1. the GPU profile's own figures (``GpuSpec.measured``, a user's benchmark), else
2. the shipped measurements of a GPU of the same name (``simulator/data/gpu_physics.json``: NVIDIA
   AIConfigurator's operator database, measured under vLLM, each figure with its source; made by
   ``tools/aic/derive_gpu_physics.py``), else
3. nothing: the GPU is timed from its data-sheet peaks with the H100-calibrated efficiencies, and
   :attr:`GpuPhysics.note` says so in every answer (:data:`UNMEASURED_NOTE`).

May import: simulator.base.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from simulator.base import GpuSpec

GPU_PHYSICS = Path(__file__).resolve().parent.parent / "data" / "gpu_physics.json"

#: What an answer timed on a GPU without measurements says.
UNMEASURED_NOTE = "timed from data-sheet peaks; not checked against a measurement"

#: Other names of the measured GPUs (how nvidia-smi, vLLM logs, the sim-to-real study and short forms call them),
#: matched without case.
ALIASES = {
    "H100 SXM5 80GB": ("H100", "H100 SXM", "H100 SXM5", "H100 80GB", "NVIDIA H100 80GB HBM3", "h100_sxm"),
    "H200 SXM 141GB": ("H200", "H200 SXM", "NVIDIA H200", "h200_sxm"),
    "A100 SXM4 80GB": ("A100-80GB", "A100 80GB", "A100 SXM 80GB", "NVIDIA A100-SXM4-80GB", "a100_sxm"),
    "L40S": ("NVIDIA L40S", "l40s"),
    "RTX PRO 6000 Blackwell Server": ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx_pro_6000_server"),
}


@dataclass(frozen=True)
class GpuPhysics:
    """One GPU's clock coefficients and their provenance.

    Attributes
    ----------
    coefficients : dict
        :class:`RooflineCoefficients` fields that differ by GPU (for the deployment's TP degree).
    measured : bool
        True when the figures come from a measurement (the profile's own or the shipped table).
    source : str
        Where they come from, in a few words.
    sources : dict
        Per figure, its source (shipped table only).
    unmeasured : tuple of str
        Figures of a measured GPU that are not measured on it (a proxy, e.g. the sampler's time).
    """

    coefficients: dict[str, float] = field(default_factory=dict)
    measured: bool = False
    source: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    unmeasured: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """One line for an answer: the source, or :data:`UNMEASURED_NOTE`."""
        if not self.measured:
            return UNMEASURED_NOTE
        if self.unmeasured:
            return f"{self.source} (not measured there: {', '.join(self.unmeasured)})"
        return self.source


@cache
def _table() -> dict[str, dict[str, Any]]:
    """Catalog name and aliases (casefolded) -> the shipped entry of ``gpu_physics.json``."""
    data = json.loads(GPU_PHYSICS.read_text())
    out: dict[str, dict[str, Any]] = {}
    for name, entry in data["gpus"].items():
        for key in (name, *ALIASES.get(name, ())):
            out[key.casefold()] = {**entry, "name": name, "data": data.get("data", "")}
    return out


def shipped_physics(name: str | None) -> dict[str, Any] | None:
    """The shipped entry of a GPU by catalog name or alias (any case); None when not measured."""
    if not name:
        return None
    return _table().get(str(name).strip().casefold())


def measured_gpu_names() -> tuple[str, ...]:
    """Catalog names of the GPUs with shipped measurements."""
    return tuple(sorted({e["name"] for e in _table().values()}))


def gpu_physics(gpu: GpuSpec, tp: int = 1) -> GpuPhysics:
    """The coefficients ``gpu`` is timed with at tensor-parallel degree ``tp`` (module docstring)."""
    own = gpu.measured_figures
    if own:
        return GpuPhysics(dict(own), True, gpu.measured_source or f"{gpu.name}'s measured figures (the GPU profile)")
    entry = shipped_physics(gpu.name)
    if entry is None:
        return GpuPhysics()
    coefficients, sources, unmeasured = {}, {}, []
    rows = dict(entry["coefficients"])
    rows.update(entry.get("by_tp", {}).get(str(tp), {}))
    for key, fig in rows.items():
        coefficients[key] = float(fig["value"])
        sources[key] = fig["source"]
        if fig.get("measured") is False:
            unmeasured.append(key)
    source = f"{entry['name']}'s operators measured under vLLM ({entry['data']}, simulator/data/gpu_physics.json)"
    return GpuPhysics(coefficients, True, source, sources, tuple(unmeasured))


__all__ = ["GPU_PHYSICS", "UNMEASURED_NOTE", "GpuPhysics", "gpu_physics", "measured_gpu_names", "shipped_physics"]
