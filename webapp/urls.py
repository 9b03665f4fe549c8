from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from webapp.views import batches, groups, transcripts

urlpatterns = [
    path("", batches.index, name="index"),
    path("batches/<int:pk>/", batches.batch, name="batch"),
    path("groups/<int:pk>/", groups.group, name="group"),
    path("groups/<int:pk>/interdiff/", groups.group_interdiff, name="interdiff"),
    path("trajectories/<int:pk>/patch/", groups.patch_raw, name="patch_raw"),
    path("trajectories/<int:pk>/file/", groups.patch_file, name="patch_file"),
    path("trajectories/<int:pk>/transcript/", transcripts.transcript, name="transcript"),
    path("trajectories/<int:pk>/transcript/<int:index>/<int:part>/", transcripts.transcript_part,
         name="transcript_part"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("webapp.grading_urls")),
    path("", include("webapp.annotation_urls")),
]
