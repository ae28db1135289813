"""Catalog values: memory two ways, estimated runtime totals, prices, unverified flags, verbatim sources."""

from gpuprofiles.models import GpuProfile, ModelProfile


def gpu(slug):
    return GpuProfile.objects.get(slug=slug)


def test_h100_memory_as_device_and_runtime_report_it(db):
    # gpus.csv H100 SXM5 80GB: nvidia_smi_total_MiB 81559; observed "79.18-79.25 (vLLM/torch total; ...)".
    h100 = gpu("h100-sxm5-80gb")
    assert (h100.memory_mib, h100.memory_gib, h100.memory_gib_estimated) == (81559.0, 79.18, False)
    assert h100.cell("torch_or_vllm_total_GiB_observed").startswith("79.18-79.25")
    assert h100.price_per_hour == 3.78  # lowest of $3.78 / $3.9492 / $5.49
    assert "Replicate H100 $5.49" in h100.price_text


def test_runtime_total_is_estimated_when_not_observed(db):
    # gpus.csv H200 SXM 141GB: 143771 MiB, no observed total -> 143771 / 1024 - 0.5 = 139.90 GiB.
    h200 = gpu("h200-sxm-141gb")
    assert h200.memory_gib_estimated and h200.memory_gib == 139.9
    assert h200.to_spec().memory_gib == 139.9


def test_unverified_values_are_flagged_with_their_text(db):
    # gpus.csv H100 NVL 94GB: bf16 "~835 (unverified)"; verification "compute/bandwidth UNVERIFIED".
    nvl = gpu("h100-nvl-94gb")
    assert nvl.bf16_tflops == 835.0 and nvl.tdp_w == 350.0
    assert {"bf16_tflops", "fp8_tflops", "bandwidth_tbps"} <= set(nvl.unverified_fields)
    assert nvl.is_unverified and "UNVERIFIED" in nvl.verification
    assert gpu("h100-sxm5-80gb").is_unverified is False


def test_missing_values_stay_empty(db):
    # gpus.csv A10G (AWS): bf16 "not published by AWS", fp8 "n/a (Ampere)", no price.
    a10g = gpu("a10g")
    assert (a10g.bf16_tflops, a10g.fp8_tflops, a10g.price_per_hour) == (None, None, None)


def test_amd_memory_from_the_runtime_log(db):
    # gpus.csv AMD Instinct MI300X: "191.98 (vLLM total_gpu_memory; R16)", no nvidia-smi figure.
    mi300x = gpu("mi300x")
    assert (mi300x.memory_mib, mi300x.memory_gib, mi300x.memory_gib_estimated) == (None, 191.98, False)


def test_model_rows_carry_config_and_sources(db):
    ds = ModelProfile.objects.get(slug="deepseek-v3")
    assert (ds.attention, ds.kv_lora_rank, ds.qk_rope_head_dim, ds.quantization) == ("MLA", 512, 64, "fp8")
    assert ds.hf_config["model_type"] == "deepseek_v3"
    assert ds.num_parameters == 671_030_000_000  # models.csv total_params_B 671.03
    assert "aiconfigurator" in ds.sources
    gemma = ModelProfile.objects.get(slug="gemma-2-9b")
    assert gemma.hf_config is None and gemma.sliding_window == 4096
    assert "weights_dtype" in gemma.unverified_fields  # torch_dtype "bfloat16 (UNVERIFIED; ...)"
    oss = ModelProfile.objects.get(slug="gpt-oss-120b")
    assert (oss.quantization, oss.num_experts, oss.num_experts_per_tok) == ("mxfp4", 128, 4)
