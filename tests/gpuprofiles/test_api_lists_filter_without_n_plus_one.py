"""List endpoints filter, paginate, validate their filters, and run a fixed number of queries."""

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from .factories import api_client, make_gpu, make_model, make_user


def slugs(response):
    return {row["slug"] for row in response.json()["results"]}


def test_gpu_filters(db):
    c = api_client()
    r = c.get(reverse("api-gpu-list"), {"vendor": "nvidia", "min_memory_gib": 80, "max_memory_gib": 200})
    assert r.status_code == 200
    # Runtime totals from gpus.csv: H200 139.90 (est.), B200 179, GB200 184.53 (est.), H100 NVL 93.08 (est.).
    assert slugs(r) == {"h200-sxm-141gb", "b200", "gb200", "h100-nvl-94gb", "rtx-pro-6000-blackwell-server"}
    assert slugs(c.get(reverse("api-gpu-list"), {"vendor": "AMD"})) == {"mi300x", "mi325x", "mi250"}
    assert slugs(c.get(reverse("api-gpu-list"), {"q": "h100"})) == {"h100-sxm5-80gb", "h100-pcie-80gb",
                                                                     "h100-nvl-94gb"}


def test_model_filters(db):
    c = api_client()
    assert slugs(c.get(reverse("api-model-list"), {"attention": "MLA"})) == {"deepseek-v3", "deepseek-r1"}
    llama = slugs(c.get(reverse("api-model-list"), {"q": "llama", "attention": "GQA"}))
    assert "llama-3-1-70b" in llama and "llama-2-7b" not in llama  # Llama 2 7B is MHA
    moe = slugs(c.get(reverse("api-model-list"), {"moe": "true", "architecture": "qwen3"}))
    assert moe == {"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-next-80b-a3b"}
    big = slugs(c.get(reverse("api-model-list"), {"min_params_b": 400}))
    assert big == {"llama-3-1-405b", "deepseek-v3", "deepseek-r1"}


def test_bad_filters_are_400_with_the_field(db):
    c = api_client()
    r = c.get(reverse("api-gpu-list"), {"min_memory_gib": "lots"})
    assert r.status_code == 400 and "min_memory_gib" in r.json()["errors"]
    r = c.get(reverse("api-gpu-list"), {"min_memory_gib": 100, "max_memory_gib": 10})
    assert r.status_code == 400 and "max_memory_gib" in r.json()["errors"]
    r = c.get(reverse("api-model-list"), {"attention": "XYZ"})
    assert r.status_code == 400 and "attention" in r.json()["errors"]


def test_lists_show_catalog_plus_own_rows_only(db):
    alice, bob = make_user("alice"), make_user("bob")
    mine, theirs = make_gpu(alice, name="Alice GPU"), make_gpu(bob, name="Bob GPU")
    listed = slugs(api_client(alice).get(reverse("api-gpu-list"), {"q": "GPU"}))
    assert mine.slug in listed and theirs.slug not in listed
    assert slugs(api_client(alice).get(reverse("api-gpu-list"), {"scope": "mine"})) == {mine.slug}
    assert theirs.slug not in slugs(api_client().get(reverse("api-gpu-list"), {"q": "GPU"}))


def test_pagination_shape(db):
    r = api_client().get(reverse("api-model-list"))
    body = r.json()
    assert set(body) == {"count", "next", "previous", "results"} and body["count"] == 41  # 30 models.csv rows, 2 config-only, 9 quantized checkpoints


def test_detail_by_slug_and_404(db):
    c = api_client()
    r = c.get(reverse("api-model-detail", args=["gpt-oss-20b"]))
    assert r.status_code == 200 and r.json()["hf_config"]["model_type"] == "gpt_oss"
    r = c.get(reverse("api-gpu-detail", args=["nope"]))
    assert r.status_code == 404 and "errors" in r.json()


def _queries(client, url):
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_list_query_count_does_not_grow_with_rows(db):
    user = make_user("alice")
    c = api_client(user)
    before = (_queries(c, reverse("api-gpu-list")), _queries(c, reverse("api-model-list")))
    for _ in range(5):
        make_gpu(user)
        make_model(user)
    after = (_queries(c, reverse("api-gpu-list")), _queries(c, reverse("api-model-list")))
    assert after == before
    assert before[0] <= 3  # count + page (owner joined); no query per row
