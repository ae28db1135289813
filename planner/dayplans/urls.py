"""Day plan pages (mounted at ``/``)."""

from django.urls import path

from planner.dayplans import views

app_name = "dayplans"

urlpatterns = [
    path("plans/day/", views.dayplan_new, name="new"),
    path("plans/day/<int:plan_id>/", views.dayplan_detail, name="detail"),
    path("plans/day/<int:plan_id>/cancel/", views.dayplan_cancel, name="cancel"),
    path("plans/day/<int:plan_id>/download.<str:fmt>", views.dayplan_download, name="download"),
]
