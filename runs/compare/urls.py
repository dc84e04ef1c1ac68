"""Compare's pages, under /compare/ (mounted by holodeck_web/urls.py beside runs.web.urls)."""

from __future__ import annotations

from django.urls import URLPattern, path

from runs.compare.pages import download, transcript_pair, views

urlpatterns: list[URLPattern] = [
    path("", views.compare, name="compare"),
    path("case/", views.compare_case, name="compare_case"),
    path("config/", views.compare_config, name="compare_config"),
    path("export.csv", download.compare_csv, name="compare_csv"),
    path("transcript/", transcript_pair.compare_transcript, name="compare_transcript"),
]
