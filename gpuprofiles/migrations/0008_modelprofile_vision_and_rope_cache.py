"""Weights vLLM loads beside the language model (issue 31): a multimodal checkpoint's vision tower and projector
(``vision_parameters``, from ``vision_config``) and the rotary cos/sin cache (``rope_cache_elements``); then reload
the catalog to fill them (idempotent, as 0002)."""

from django.db import migrations, models


def load(apps, schema_editor):
    from gpuprofiles.catalog import load_catalog

    load_catalog(apps.get_model("gpuprofiles", "GpuProfile"), apps.get_model("gpuprofiles", "ModelProfile"))


class Migration(migrations.Migration):

    dependencies = [
        ("gpuprofiles", "0007_gpu_measured_physics"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelprofile",
            name="vision_parameters",
            field=models.BigIntegerField(
                blank=True, null=True,
                help_text="Vision tower and projector parameters a multimodal checkpoint loads (from vision_config)."),
        ),
        migrations.AddField(
            model_name="modelprofile",
            name="rope_cache_elements",
            field=models.BigIntegerField(
                blank=True, null=True,
                help_text="Elements of vLLM's rotary cos/sin cache; blank = max_position_embeddings x head_dim."),
        ),
        migrations.RunPython(load, migrations.RunPython.noop),
    ]
