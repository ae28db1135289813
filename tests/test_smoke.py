"""The app boots: settings load, the home page renders, static Plotly is served locally."""

from django.contrib.staticfiles import finders


def test_home_page_renders(db, client):
    response = client.get("/")
    assert response.status_code == 200
    assert b"KV Planner" in response.content


def test_plotly_javascript_is_served_from_static_files():
    from planner.plotly_assets import PLOTLY_JS

    assert finders.find(PLOTLY_JS) is not None


def test_healthz_reports_database_ok(db, client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
