"""Test data for the catalog tests: users, API clients, owned profiles."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from gpuprofiles.models import GpuProfile, ModelProfile

HF_CONFIGS = Path(__file__).resolve().parents[2] / "gpuprofiles" / "data" / "hf_configs"
_seq = itertools.count(1)


def hf_config(filename: str) -> dict:
    """A verbatim config.json shipped in gpuprofiles/data/hf_configs/."""
    return json.loads((HF_CONFIGS / filename).read_text(encoding="utf-8"))


def make_user(username: str | None = None):
    # No password: hashing one is slow and the tests sign in with force_login / force_authenticate.
    return get_user_model().objects.create(username=username or f"user{next(_seq)}")


def api_client(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def make_gpu(owner, **fields) -> GpuProfile:
    n = next(_seq)
    values = {"name": f"GPU {n}", "slug": f"{owner.username}-gpu-{n}", "memory_gib": 40.0, "vendor": "NVIDIA",
              "owner": owner, "is_catalog": False, **fields}
    return GpuProfile.objects.create(**values)


def make_model(owner, **fields) -> ModelProfile:
    n = next(_seq)
    values = {"name": f"Model {n}", "slug": f"{owner.username}-model-{n}", "owner": owner, "is_catalog": False,
              "num_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "num_kv_heads": 2, "head_dim": 64,
              "attention": "GQA", "vocab_size": 1000, "intermediate_size": 1024, "num_full_layers": 4, **fields}
    return ModelProfile.objects.create(**values)


MINIMAL_CONFIG = {
    "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}
