from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from holodeck_web.api import api
from holodeck_web.login import ThrottledAdminLoginView, ThrottledLoginView
from runs.web import health

urlpatterns = [
    # Probes: no login, nothing revealed (runs/web/health.py).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    # Before admin.site.urls so the admin's own login page is throttled like /login/.
    path("admin/login/", ThrottledAdminLoginView.as_view(), name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("compare/", include("runs.compare.urls")),
    path("", include("runs.web.urls")),
]

handler400 = "runs.web.views.bad_request"
handler404 = "runs.web.views.not_found"
