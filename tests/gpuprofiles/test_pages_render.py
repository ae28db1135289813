"""Catalog pages render with nav highlighted, units, sources and unverified badges."""

from django.urls import reverse

from .factories import make_gpu


def test_lists_and_details_render(client, db):
    for url in (reverse("gpuprofiles:index"), reverse("gpuprofiles:model-list"), reverse("gpuprofiles:gpu-list"),
                reverse("gpuprofiles:model-detail", args=["gemma-3-27b"]),
                reverse("gpuprofiles:gpu-detail", args=["b200"])):
        r = client.get(url)
        assert r.status_code == 200, url
        assert r.context["nav"] == "catalog"
        assert 'href="/catalog/" aria-current="page"' in r.content.decode()


def test_gpu_list_has_units_badges_and_filters(client, db):
    html = client.get(reverse("gpuprofiles:gpu-list"), {"vendor": "NVIDIA", "min_memory_gib": "90"}).content.decode()
    assert "Memory (GiB, runtime)" in html and "Bandwidth (TB/s)" in html and "Price (USD/GPU-h)" in html
    assert "H100 NVL 94GB" in html and "L40S" not in html
    # The H100 NVL row's verification text is the badge's tooltip (gpus.csv).
    assert 'class="badge unverified" title="memory MiB verified; compute/bandwidth UNVERIFIED"' in html


def test_bad_filter_shows_error_at_the_field(client, db):
    html = client.get(reverse("gpuprofiles:gpu-list"), {"min_memory_gib": "lots"}).content.decode()
    assert 'class="errorlist' in html


def test_detail_shows_each_value_with_its_source_cell(client, db):
    html = client.get(reverse("gpuprofiles:gpu-detail", args=["h100-nvl-94gb"])).content.decode()
    assert "~835 (unverified)" in html and "TFLOPS" in html
    assert "H100 NVL datasheet" in html  # spec_sources
    html = client.get(reverse("gpuprofiles:model-detail", args=["deepseek-v3"])).content.decode()
    assert "MLA" in html and "config.json (verbatim)" in html and "kv_lora_rank" in html


def test_copy_button_for_signed_in_users_and_edit_links_for_owners(client, db, user):
    url = reverse("gpuprofiles:gpu-detail", args=["h100-sxm5-80gb"])
    assert "Sign in to copy" in client.get(url).content.decode()
    client.force_login(user)
    assert "Copy to my profiles" in client.get(url).content.decode()
    own = make_gpu(user)
    html = client.get(own.get_absolute_url()).content.decode()
    assert reverse("gpuprofiles:gpu-edit", args=[own.slug]) in html
    html = client.get(reverse("gpuprofiles:mine")).content.decode()
    assert own.name in html


def test_forms_have_labels_help_and_units(client, db, user):
    client.force_login(user)
    html = client.get(reverse("gpuprofiles:gpu-create")).content.decode()
    assert "Memory (GiB)" in html and "Price (USD per GPU-hour)" in html and 'class="help"' in html
    html = client.get(reverse("gpuprofiles:model-import")).content.decode()
    assert 'type="file"' in html and "<textarea" in html and 'enctype="multipart/form-data"' in html


LLAMA_LIKE = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
              "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
              "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
              "torch_dtype": "bfloat16"}


def _cells(html: str, table_label: str) -> list[list[str]]:
    """The text of every body cell of the table with this aria-label, row by row."""
    import re

    table = html[html.index(f'aria-label="{table_label}"'):]
    table = table[:table.index("</table>")]
    body = table[table.index("<tbody>"):]
    return [[re.sub(r"\s+", " ", re.sub("<[^>]+>", "", c)).strip()
             for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]


def test_an_imported_model_shows_every_value_or_why_it_has_none(client, user):
    from gpuprofiles import services

    profile = services.model_profile_import(owner=user, config=LLAMA_LIKE, name="My Llama")
    client.force_login(user)
    rows = _cells(client.get(reverse("gpuprofiles:model-list"), {"scope": "mine"}).content.decode(), "Models")
    row = next(r for r in rows if r[0].startswith("My Llama"))
    assert "—" not in row and all(row), row
    # 2 (K and V) x 8 KV heads x 128 x 32 layers x 2 bytes, computed: the config has no published figure
    assert row[6] == "131,072 computed" and row[5] == "8.03"

    rows = _cells(client.get(profile.get_absolute_url()).content.decode(), "Values and their sources")
    assert rows and not [r for r in rows if "—" in r[1] or not r[1]], rows
    by_label = {r[0]: r for r in rows}
    assert by_label["MLA kv_lora_rank"][1] == "does not apply: GQA attention, not MLA"
    assert by_label["Sliding window"][1:3] == ["does not apply: no sliding-window layers", ""]
    assert by_label["KV per token, FP8"][1:3] == ["65,536", "bytes"]
    assert by_label["KV per token, FP8"][3].startswith("computed from the config")
    assert by_label["Parameters, total"][3] == "estimated from config.json"
    assert all(r[3] for r in rows), "every row says where its value comes from"
