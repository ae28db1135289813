"""Give every existing private profile an unguessable slug (catalog slugs stay).

Private slugs used to be ``<username>-<name>`` (``alice-h100-sxm5-80gb`` for a
copy of the H100), so anyone could guess them. New rows get
``<username>-<name>-<16 random hex digits>`` (:func:`gpuprofiles.services.private_slug`);
this appends the same random suffix to the rows made before. Rows that already
end in such a suffix are left alone, so running it again changes nothing.
Reversing keeps the new slugs (the old ones were the problem).
"""

import re
import secrets

from django.db import migrations

SUFFIX = re.compile(r"-[0-9a-f]{16}$")


def add_random_suffix(apps, schema_editor):
    for name in ("GpuProfile", "ModelProfile"):
        model = apps.get_model("gpuprofiles", name)
        for row in model.objects.filter(is_catalog=False).only("pk", "slug"):
            if SUFFIX.search(row.slug):
                continue
            slug = f"{row.slug[:100]}-{secrets.token_hex(8)}"
            while model.objects.filter(slug=slug).exists():
                slug = f"{row.slug[:100]}-{secrets.token_hex(8)}"
            model.objects.filter(pk=row.pk).update(slug=slug)


class Migration(migrations.Migration):
    dependencies = [("gpuprofiles", "0003_modelprofile_quantization_detail")]

    operations = [migrations.RunPython(add_random_suffix, migrations.RunPython.noop)]
