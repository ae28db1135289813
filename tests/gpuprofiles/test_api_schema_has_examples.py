"""Every catalog operation in the OpenAPI schema carries a request (for writes) and a response example."""

from drf_spectacular.generators import SchemaGenerator

CATALOG_PATHS = ("/api/models/", "/api/models/import/", "/api/models/{slug}/", "/api/models/{slug}/copy/",
                 "/api/gpus/", "/api/gpus/{slug}/", "/api/gpus/{slug}/copy/")


def test_every_operation_has_examples(db):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    seen = 0
    for path in CATALOG_PATHS:
        for method, op in schema["paths"][path].items():
            seen += 1
            ok = [r for code, r in op["responses"].items() if code.startswith("2")]
            assert ok and any("examples" in c for r in ok for c in r.get("content", {"x": {"examples": 1}}).values()), \
                (path, method)
            if method in ("post", "patch") and "requestBody" in op:
                assert all("examples" in c for c in op["requestBody"]["content"].values()), (path, method)
    assert seen == 13  # models: 7 operations, gpus: 6
