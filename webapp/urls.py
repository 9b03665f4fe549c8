from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("", include("webapp.batches.urls")),
    path("", include("webapp.review.urls")),
    path("", include("webapp.grading.urls")),
    path("", include("webapp.annotation.urls")),
    path("", include("webapp.exports.urls")),
    path("", include("webapp.search.urls")),
    path("", include("webapp.audit.urls")),
    path("", include("webapp.evidence.urls")),
    path("", include("webapp.runs.urls")),
    path("api/", include("webapp.api.urls")),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
