"""Shared loaders for the sizing golden data in tests/data/sizing (copied from the project reference; tests never read outside the repository)."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import replace
from pathlib import Path

from simulator.base.specs import ModelSpec
from simulator.sizing.config_rules import vision_parameters
from simulator.sizing.hf_config import parse_hf_config

DATA = Path(__file__).resolve().parents[1] / "data" / "sizing"


def load_json(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def hf_config(name: str) -> dict:
    return json.loads((DATA / "hf_configs" / name).read_text())


def log_rows() -> dict[str, dict]:
    with open(DATA / "vllm_startup_logs.csv", newline="") as fh:
        return {r["id"]: r for r in csv.DictReader(fh)}


def model_rows() -> list[dict]:
    with open(DATA / "models.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def first_number(text: str | None) -> float | None:
    m = re.search(r"-?\d[\d,]*\.?\d*", text or "")
    return float(m.group(0).replace(",", "")) if m else None


def golden_model(entry: dict) -> ModelSpec:
    m = entry["model"]
    model = parse_hf_config(hf_config(m)) if isinstance(m, str) else ModelSpec(**m)
    if entry.get("quantization"):
        model = replace(model, quantization=entry["quantization"])
    if entry.get("vision"):  # a multimodal checkpoint given as its text model plus the vision_config
        v = entry["vision"]
        params, _ = vision_parameters(v, model.hidden_size, v["model_type"])
        model = replace(model, vision_parameters=params)
    return model


def golden_knobs(entry: dict) -> dict:
    return dict(
        tensor_parallel_size=entry["tp"],
        gpu_memory_utilization=entry["gmu"],
        max_model_len=entry["max_model_len"],
        block_size=entry["block_size"],
        vllm_version=entry["vllm_version"],
        dtype=entry.get("dtype", "auto"),
        max_num_seqs=entry.get("max_num_seqs"),
        max_num_batched_tokens=entry.get("max_num_batched_tokens"),
    )
