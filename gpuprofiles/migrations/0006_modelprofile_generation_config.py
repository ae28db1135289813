"""The verbatim generation_config.json a user imported with a config.json (its sampling fields gave the row's
``sampling``). Schema only: catalog rows keep null (their defaults are shipped in simulator/data), so the
catalog is not reloaded."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("gpuprofiles", "0005_modelprofile_sampling"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelprofile",
            name="hf_generation_config",
            field=models.JSONField(
                blank=True, null=True,
                help_text="Verbatim generation_config.json, when the user imported one."),
        ),
    ]
