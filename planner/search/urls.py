"""Search pages (mounted at ``/``)."""

from django.urls import path

from planner.search import views

app_name = "search"

urlpatterns = [
    path("searches/", views.search_new, name="new"),
    path("searches/<int:search_id>/", views.search_detail, name="detail"),
    path("searches/<int:search_id>/cancel/", views.search_cancel, name="cancel"),
    path("searches/r/<str:slug>/", views.search_report, name="report"),
    path("searches/r/<str:slug>/download.<str:fmt>", views.search_report_download, name="report-download"),
]
