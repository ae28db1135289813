"""Page routes of the planner app: sizing at ``/``, sweeps and reports, searches, calibrations, day plans."""

from django.urls import include, path

urlpatterns = [
    path("", include("planner.sizing.urls")),
    path("", include("planner.sweeps.urls")),
    path("", include("planner.search.urls")),
    path("", include("planner.calibration.urls")),
    path("", include("planner.dayplans.urls")),
]
