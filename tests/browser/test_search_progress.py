"""Issue 22 for deployment searches: a search running on a real worker, watched on its page.

The bar, the count beside it ("N of M deployment shapes settled") and the time left come from the same
progress (``planner/search/selectors.search_progress``, polled by ``static/js/search_progress.js``): the count
is the bar's own, neither goes down, no estimate before a chunk is done, and the page opens the report when
the search ends. The estimate's accuracy is measured on a longer search in tests/integration/test_search_eta.py.
"""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

SEARCH_TIMEOUT_S = 120
#: Four GPU types (four chunks, run one after another by one worker process), long enough to watch.
DEFINITION = {
    "name": "Search watched in the browser",
    "model": "llama-3-1-8b",
    "workload": {"spec": {"n": 600, "prompt": "normal:1024,256", "output": "normal:256,64",
                          "arrival": {"kind": "poisson", "rate": 20, "unit": "s"}}, "seed": 0},
    "slo": {"targets": [{"metric": "ttft", "percentile": "p90", "max_s": 0.5},
                        {"metric": "itl", "percentile": "p90", "max_s": 0.05}]},
    "space": {"gpus": ["a10", "a100-sxm4-40gb", "l4", "rtx-4090"], "tensor_parallel": [1, 2],
              "precisions": ["bf16", "fp8"], "max_replicas": 16},
}


def test_search_progress_on_a_real_worker(signed_in_page, user, worker_factory, sender_on_redis, screenshot):
    from planner.search import services

    worker_factory(concurrency=1)
    search = services.search_create(owner=user, definition=DEFINITION)
    page = signed_in_page
    page.goto(f"/searches/{search.pk}/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Search watched in the browser")
    bar = page.get_by_role("progressbar", name="Search progress")
    expect(bar).to_be_visible()
    screenshot(page, "search-progress")

    seen, counts, estimates = [], [], []
    deadline = time.monotonic() + SEARCH_TIMEOUT_S
    while time.monotonic() < deadline and "/searches/r/" not in page.url:
        try:
            value = int(bar.get_attribute("aria-valuenow", timeout=2_000))
            shown = int(page.locator('[data-field="shown"]').inner_text(timeout=2_000))
            total = int(page.locator('[data-field="total"]').inner_text(timeout=2_000))
            eta = page.locator('[data-field="eta"]').inner_text(timeout=2_000)
        except Exception:  # noqa: BLE001 - the page is opening the report; look again
            continue
        assert total == search.total_candidates, "the total never changes"
        assert abs(shown - value * total / 100) <= 1, f"{shown} of {total} shapes beside a bar at {value}%"
        chunks_done = search.chunks.filter(status="done").count()
        if eta.startswith("about "):
            estimates.append(eta)
            assert chunks_done > 0, "no estimate before a chunk is done"
        counts.append(shown)
        if not seen or seen[-1] != value:
            seen.append(value)
        if 0 < value < 100 and len(seen) == 2:
            screenshot(page, "search-progress-running")
        page.wait_for_timeout(200)
    assert seen == sorted(seen), f"the bar went backwards: {seen}"
    assert counts == sorted(counts), f"the count went backwards: {counts}"
    assert len(seen) >= 3, f"the bar moved in fewer than 3 steps: {seen}"
    assert estimates, "no time left was ever shown while the search ran"
    expect(page).to_have_url(re.compile(r"/searches/r/[^/]+/$"), timeout=SEARCH_TIMEOUT_S * 1000)
    expect(page.locator("#search-answer")).to_be_visible()
