from django.urls import path

from webapp.review import views

urlpatterns = [
    path("groups/<int:pk>/", views.group, name="group"),
    path("groups/<int:pk>/interdiff/", views.group_interdiff, name="interdiff"),
    path("trajectories/<int:pk>/patch/", views.patch_raw, name="patch_raw"),
    path("trajectories/<int:pk>/file/", views.patch_file, name="patch_file"),
    path("trajectories/<int:pk>/transcript/", views.transcript, name="transcript"),
    path("trajectories/<int:pk>/transcript/<int:index>/<int:part>/", views.transcript_part, name="transcript_part"),
]
