"""The data migration ships every CSV row, and loading the catalog again changes nothing."""

from gpuprofiles.catalog import EXTRA_CONFIG_MODELS, gpu_rows, load_catalog, model_rows, quantized_model_entries
from gpuprofiles.models import GpuProfile, ModelProfile

# Row counts of gpus.csv (24) and models.csv (30), copied from reference/README.md and the files.
N_GPUS, N_MODELS = 24, 30


def test_shipped_csvs_have_every_reference_row():
    assert len(gpu_rows()) == N_GPUS
    assert len(model_rows()) == N_MODELS


def test_migration_loaded_every_row(db):
    assert GpuProfile.objects.filter(is_catalog=True, owner=None).count() == N_GPUS
    assert ModelProfile.objects.filter(is_catalog=True, owner=None).count() == N_MODELS + len(EXTRA_CONFIG_MODELS) + len(
        quantized_model_entries())


def _snapshot():
    return ([tuple(r.values()) for r in GpuProfile.objects.order_by("slug").values()],
            [tuple(r.values()) for r in ModelProfile.objects.order_by("slug").values()])


def test_loading_twice_changes_nothing(db):
    before = _snapshot()
    counts = load_catalog(GpuProfile, ModelProfile)
    assert counts["changed"] == 0
    assert _snapshot() == before


def test_loading_repairs_an_edited_catalog_row(db):
    GpuProfile.objects.filter(slug="h100-sxm5-80gb").update(memory_gib=1.0)
    assert load_catalog(GpuProfile, ModelProfile)["changed"] == 1
    assert GpuProfile.objects.get(slug="h100-sxm5-80gb").memory_gib == 79.18
