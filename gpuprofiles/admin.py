from django.contrib import admin

from .models import GpuProfile, ModelProfile


@admin.register(GpuProfile)
class GpuProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "vendor", "memory_gib", "memory_mib", "bandwidth_tbps", "price_per_hour",
                    "is_catalog", "owner")
    list_filter = ("is_catalog", "vendor", "memory_gib_estimated")
    search_fields = ("name", "slug", "sources")
    readonly_fields = ("created_at", "updated_at", "source_row")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(ModelProfile)
class ModelProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "model_type", "attention", "num_layers", "num_kv_heads", "head_dim",
                    "num_parameters", "is_catalog", "owner")
    list_filter = ("is_catalog", "attention", "model_type")
    search_fields = ("name", "slug", "hf_id", "sources")
    readonly_fields = ("created_at", "updated_at", "source_row", "hf_config", "hf_quant_config", "hf_generation_config")
    prepopulated_fields = {"slug": ("name",)}
