"""Catalog rows: GPUs and models, curated (``is_catalog``) or owned by a user.

Each row converts to the simulator's plain spec objects with ``to_spec()``
(:class:`simulator.base.specs.GpuSpec`, :class:`simulator.base.specs.ModelSpec`); the
planner never reads these columns directly.

Ownership: catalog rows have ``owner=None`` and ``is_catalog=True`` and are
read-only for everyone (a user copies one to edit it); a user's own rows are
editable by that user only (:meth:`Profile.can_edit`).

Provenance: ``sources`` and ``verification`` hold the source's text for the
row; ``unverified_fields`` lists the fields whose value is not confirmed by a
second source; ``source_row`` keeps the original CSV cells verbatim, so the
full text behind every parsed number ("~835 (unverified)", a list of prices)
stays visible.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.db import models
from django.urls import reverse

from gpuprofiles.convert import QUANT_COLUMNS, SPEC_FIELDS, interconnect_gbps, spec_columns, spec_from_columns
from simulator.base import SAMPLER_PATHS, GpuSpec, ModelSpec


class Profile(models.Model):
    """Fields and rules shared by GPU and model profiles."""

    slug = models.SlugField(max_length=120, unique=True)
    name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+",
        help_text="Empty for catalog rows.",
    )
    is_catalog = models.BooleanField(default=False, help_text="Curated row shipped with the app (read-only).")
    copied_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    sources = models.TextField(blank=True, help_text="Where the values come from.")
    verification = models.TextField(blank=True, help_text="How far the values were checked.")
    unverified_fields = models.JSONField(default=list, blank=True,
                                         help_text="Fields whose value lacks a second source.")
    source_row = models.JSONField(default=dict, blank=True, help_text="The original catalog cells, verbatim.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def can_edit(self, user) -> bool:
        """Only the owner edits or deletes; catalog rows are read-only for everyone."""
        return bool(not self.is_catalog and self.owner_id is not None and user.is_authenticated
                    and self.owner_id == user.pk)

    @property
    def is_unverified(self) -> bool:
        """Some value of the row lacks a second source (shown with an "unverified" badge)."""
        return bool(self.unverified_fields) or "unverified" in self.verification.lower()

    def field_unverified(self, field: str) -> bool:
        return field in (self.unverified_fields or [])

    def cell(self, column: str) -> str:
        """The verbatim catalog cell behind a value ("" for user rows)."""
        return str((self.source_row or {}).get(column, ""))


class GpuProfile(Profile):
    """One GPU model (one device as the runtime sees it).

    Memory is kept two ways: ``memory_mib`` as ``nvidia-smi`` reports it, and
    ``memory_gib`` as torch / vLLM see the total (what
    ``gpu_memory_utilization`` multiplies). When the runtime total was not
    observed, ``memory_gib`` is derived (``MiB / 1024 - 0.5`` GiB driver
    reserve, or the nominal size) and ``memory_gib_estimated`` is set.
    """

    vendor = models.CharField(max_length=40, blank=True)
    memory_nominal = models.CharField(max_length=120, blank=True, help_text="As the vendor states it.")
    memory_type = models.CharField(max_length=40, blank=True)
    memory_mib = models.FloatField(null=True, blank=True, help_text="Total as nvidia-smi reports it, MiB.")
    memory_gib = models.FloatField(help_text="Total as torch / vLLM see it, GiB (2^30 bytes).")
    memory_gib_estimated = models.BooleanField(
        default=False, help_text="memory_gib derived, not observed in a runtime log.")
    bandwidth_tbps = models.FloatField(null=True, blank=True, help_text="Memory bandwidth, TB/s.")
    bf16_tflops = models.FloatField(null=True, blank=True, help_text="Dense BF16 tensor TFLOPS.")
    fp8_tflops = models.FloatField(null=True, blank=True, help_text="Dense FP8 tensor TFLOPS.")
    fp4_tflops = models.FloatField(null=True, blank=True, help_text="Dense FP4 tensor TFLOPS.")
    interconnect = models.CharField(max_length=200, blank=True, help_text="GPU-to-GPU link.")
    pcie = models.CharField(max_length=80, blank=True)
    tdp_w = models.FloatField(null=True, blank=True, help_text="Board power, W.")
    price_per_hour = models.FloatField(null=True, blank=True,
                                       help_text="Cloud price per GPU-hour, USD (lowest listed).")
    price_text = models.TextField(blank=True, help_text="Every listed price with its source.")
    measured = models.JSONField(
        default=dict, blank=True,
        help_text="The clock's figures measured on this GPU (simulator.base.GPU_MEASURED_FIELDS: achieved "
                  "bandwidth and GEMM / attention efficiencies as fractions of peak, fixed times in seconds, the "
                  "sampler's time over the H100's). Empty: the shipped measurements of a GPU of the same name, "
                  "else the data-sheet peaks (and every answer says so).")
    measured_source = models.TextField(blank=True, help_text="Where the measured figures come from.")

    class Meta(Profile.Meta):
        verbose_name = "GPU profile"
        indexes = [models.Index(fields=["vendor"]), models.Index(fields=["memory_gib"])]

    def get_absolute_url(self) -> str:
        return reverse("gpuprofiles:gpu-detail", kwargs={"slug": self.slug})

    def to_spec(self) -> GpuSpec:
        """This GPU as the simulator's :class:`~simulator.base.specs.GpuSpec`."""
        return GpuSpec(
            name=self.name,
            memory_gib=self.memory_gib,
            memory_mib=self.memory_mib,
            bandwidth_tbps=self.bandwidth_tbps,
            bf16_tflops=self.bf16_tflops,
            fp8_tflops=self.fp8_tflops,
            fp4_tflops=self.fp4_tflops,
            interconnect_gbps=interconnect_gbps(self.interconnect, self.pcie),
            price_per_hour=self.price_per_hour,
            memory_gib_estimated=self.memory_gib_estimated,
            measured=self.measured or None,
            measured_source=self.measured_source or "",
        )


ATTENTION_CHOICES = [("MHA", "MHA"), ("GQA", "GQA"), ("MQA", "MQA"), ("MLA", "MLA")]


class ModelProfile(Profile):
    """A decoder-only model; the columns mirror :class:`simulator.base.specs.ModelSpec`.

    ``layers`` holds the per-layer kinds (``[]`` = every layer full
    attention), e.g. ``{"kind": "sliding", "window": 4096}``; the counts
    ``num_full_layers`` / ``num_sliding_layers`` / ``num_linear_layers`` are
    derived from it. ``hf_config`` is the verbatim ``config.json`` when one is
    known (imported, or shipped in ``gpuprofiles/data/hf_configs/``).
    """

    hf_id = models.CharField(max_length=200, blank=True, help_text="Hugging Face repository id.")
    model_type = models.CharField(max_length=60, blank=True)
    num_layers = models.PositiveIntegerField(help_text="Decoder layers (num_hidden_layers).")
    hidden_size = models.PositiveIntegerField()
    num_attention_heads = models.PositiveIntegerField(help_text="Query heads.")
    num_kv_heads = models.PositiveIntegerField(help_text="KV heads (1 for MLA: one latent is cached).")
    head_dim = models.PositiveIntegerField()
    intermediate_size = models.PositiveIntegerField(default=0, help_text="Dense MLP width.")
    moe_intermediate_size = models.PositiveIntegerField(null=True, blank=True, help_text="Per-expert MLP width.")
    num_experts = models.PositiveIntegerField(default=0, help_text="Routed experts (0 = dense).")
    num_experts_per_tok = models.PositiveIntegerField(default=0)
    num_shared_experts = models.PositiveIntegerField(default=0)
    shared_expert_intermediate_size = models.PositiveIntegerField(null=True, blank=True)
    num_dense_layers = models.PositiveIntegerField(default=0, help_text="Dense-FFN layers of an MoE model.")
    vocab_size = models.PositiveIntegerField(default=0)
    tie_word_embeddings = models.BooleanField(default=False)
    attention_bias = models.BooleanField(default=False)
    gated_mlp = models.BooleanField(default=True)
    num_parameters = models.BigIntegerField(null=True, blank=True, help_text="Total parameters.")
    num_active_parameters = models.BigIntegerField(null=True, blank=True, help_text="Active per token.")
    params_note = models.TextField(blank=True)
    attention = models.CharField(max_length=3, choices=ATTENTION_CHOICES)
    attention_note = models.CharField(max_length=200, blank=True, help_text="Attention as the source describes it.")
    kv_lora_rank = models.PositiveIntegerField(null=True, blank=True, help_text="MLA latent rank.")
    qk_rope_head_dim = models.PositiveIntegerField(null=True, blank=True, help_text="MLA decoupled RoPE dims.")
    q_lora_rank = models.PositiveIntegerField(null=True, blank=True)
    qk_nope_head_dim = models.PositiveIntegerField(null=True, blank=True)
    v_head_dim = models.PositiveIntegerField(null=True, blank=True)
    sliding_window = models.PositiveIntegerField(null=True, blank=True, help_text="Sliding window, tokens.")
    layer_pattern = models.TextField(blank=True, help_text="Layer layout in words.")
    layers = models.JSONField(default=list, blank=True, help_text="Per-layer kinds; empty = all full attention.")
    num_full_layers = models.PositiveIntegerField(default=0)
    num_sliding_layers = models.PositiveIntegerField(default=0)
    num_linear_layers = models.PositiveIntegerField(default=0, help_text="Linear-attention / Mamba layers.")
    max_position_embeddings = models.PositiveIntegerField(null=True, blank=True, help_text="Tokens.")
    vision_parameters = models.BigIntegerField(
        null=True, blank=True,
        help_text="Vision tower and projector parameters a multimodal checkpoint loads (from vision_config).")
    rope_cache_elements = models.BigIntegerField(
        null=True, blank=True,
        help_text="Elements of vLLM's rotary cos/sin cache; blank = max_position_embeddings x head_dim.")
    weights_dtype = models.CharField(max_length=16, default="bf16")
    quantization = models.CharField(max_length=32, blank=True, help_text="Checkpoint quantization method.")
    quant_scheme = models.CharField(max_length=32, blank=True,
                                    help_text="Format within the method (w4a16, w8a8-fp8, fp8-block, nvfp4, nf4...).")
    quant_bits = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Bits per quantized weight.")
    quant_group_size = models.IntegerField(null=True, blank=True,
                                           help_text="Weights per scale (-1 per channel, 0 per tensor).")
    quant_ignore = models.JSONField(default=list, blank=True,
                                    help_text="Modules the checkpoint leaves unquantized (its ignore list).")
    checkpoint_quant_text = models.TextField(blank=True)
    kv_bytes_per_token_bf16 = models.BigIntegerField(
        null=True, blank=True, help_text="Source's figure: all attention layers, BF16, bytes per token.")
    kv_bytes_per_token_bf16_global = models.BigIntegerField(
        null=True, blank=True, help_text="Source's figure: global (full-attention) layers only, bytes per token.")
    kv_bytes_per_token_fp8 = models.BigIntegerField(
        null=True, blank=True, help_text="Source's figure: FP8 KV, bytes per token.")
    sampling = models.CharField(
        max_length=32, blank=True, choices=[(k, k) for k in SAMPLER_PATHS],
        help_text="Sampler path of requests that set no sampling parameters (its generation_config.json); "
                  "blank = not known.")
    hf_config = models.JSONField(null=True, blank=True, help_text="Verbatim config.json.")
    hf_quant_config = models.JSONField(null=True, blank=True, help_text="Verbatim hf_quant_config.json.")
    hf_generation_config = models.JSONField(
        null=True, blank=True, help_text="Verbatim generation_config.json, when the user imported one.")

    class Meta(Profile.Meta):
        verbose_name = "model profile"
        indexes = [models.Index(fields=["attention"]), models.Index(fields=["model_type"])]

    SPEC_FIELDS = SPEC_FIELDS

    def get_absolute_url(self) -> str:
        return reverse("gpuprofiles:model-detail", kwargs={"slug": self.slug})

    def to_spec(self) -> ModelSpec:
        """This model as the simulator's :class:`~simulator.base.specs.ModelSpec` (validated)."""
        return spec_from_columns(self.name, {f: getattr(self, f) for f in (*SPEC_FIELDS, *QUANT_COLUMNS, "layers",
                                                                           "sampling")})

    def set_from_spec(self, spec: ModelSpec) -> None:
        """Copy a validated spec into the columns (layer counts and sliding window included)."""
        for field, value in spec_columns(spec).items():
            setattr(self, field, value)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def hf_config_text(self) -> str:
        """The imported config.json as indented JSON (Django's ``pprint`` filter took 6 s for 340,000 values)."""
        return json.dumps(self.hf_config, indent=2, ensure_ascii=False)

    @property
    def hf_generation_config_text(self) -> str:
        """The imported generation_config.json as indented JSON."""
        return json.dumps(self.hf_generation_config, indent=2, ensure_ascii=False)

    @property
    def quant_ignore_text(self) -> str:
        """The ignore list as text, or "" (embeddings, LM head, norms and router are never quantized)."""
        return ", ".join(self.quant_ignore or [])

    @property
    def quantization_label(self) -> str:
        """``"awq w4a16, group 128"`` or ``"none (bf16)"``: what the catalog shows beside the dtype."""
        from simulator.sizing import describe

        try:
            return describe(self.to_spec())
        except ValueError:
            return self.quantization or "none"

    @property
    def params_b(self) -> str:
        """Total parameters in billions, 3 significant digits ("70.6"), or ""."""
        return f"{self.num_parameters / 1e9:.3g}" if self.num_parameters else ""

    @property
    def active_params_b(self) -> str:
        return f"{self.num_active_parameters / 1e9:.3g}" if self.num_active_parameters else ""
