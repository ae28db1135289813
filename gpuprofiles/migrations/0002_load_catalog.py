"""Load the curated catalog (data/gpus.csv, data/models.csv, data/hf_configs/).

Idempotent: rows are matched by slug and updated only when a value changed, so
running it again (or after editing the CSVs, through ``manage.py
load_catalog``) changes nothing else. Reversing leaves the rows in place.
"""

from django.db import migrations


def load(apps, schema_editor):
    from gpuprofiles.catalog import load_catalog

    load_catalog(apps.get_model("gpuprofiles", "GpuProfile"), apps.get_model("gpuprofiles", "ModelProfile"))


class Migration(migrations.Migration):
    dependencies = [("gpuprofiles", "0001_initial")]

    operations = [migrations.RunPython(load, migrations.RunPython.noop)]
