# Issue 30: a GPU profile carries the clock's figures measured on it (or none: then the shipped measurements of a
# GPU of the same name, else the data-sheet peaks, and the answers say so).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("gpuprofiles", "0006_modelprofile_generation_config"),
    ]

    operations = [
        migrations.AddField(
            model_name="gpuprofile",
            name="measured",
            field=models.JSONField(
                blank=True, default=dict,
                help_text="The clock's figures measured on this GPU (simulator.base.GPU_MEASURED_FIELDS: achieved "
                          "bandwidth and GEMM / attention efficiencies as fractions of peak, fixed times in seconds, "
                          "the sampler's time over the H100's). Empty: the shipped measurements of a GPU of the same "
                          "name, else the data-sheet peaks (and every answer says so)."),
        ),
        migrations.AddField(
            model_name="gpuprofile",
            name="measured_source",
            field=models.TextField(blank=True, help_text="Where the measured figures come from."),
        ),
    ]
