"""The sampler path of a model's requests that set no sampling parameters (its generation_config.json), then
reload the catalog to fill it (idempotent, as 0002)."""

from django.db import migrations, models


def load(apps, schema_editor):
    from gpuprofiles.catalog import load_catalog

    load_catalog(apps.get_model("gpuprofiles", "GpuProfile"), apps.get_model("gpuprofiles", "ModelProfile"))


class Migration(migrations.Migration):

    dependencies = [
        ("gpuprofiles", "0004_private_slugs_unguessable"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelprofile",
            name="sampling",
            field=models.CharField(
                blank=True, max_length=32,
                choices=[("greedy", "greedy"), ("temperature", "temperature"), ("top_k_top_p", "top_k_top_p"),
                         ("top_k_top_p_penalties", "top_k_top_p_penalties")],
                help_text="Sampler path of requests that set no sampling parameters (its generation_config.json); "
                          "blank = not known."),
        ),
        migrations.RunPython(load, migrations.RunPython.noop),
    ]
