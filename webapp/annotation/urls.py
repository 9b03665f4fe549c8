from django.urls import path

from webapp.annotation import views

urlpatterns = [
    path("groups/<int:pk>/ranking/", views.ranking_save_view, name="ranking_save"),
    path("groups/<int:pk>/ranking/preview/", views.ranking_preview, name="ranking_preview"),
    path("groups/<int:pk>/history/", views.ranking_history, name="ranking_history"),
    path("groups/<int:pk>/history/revert/", views.ranking_revert_view, name="ranking_revert"),
    path("groups/<int:pk>/lease/release/", views.lease_release_view, name="lease_release"),
    path("batches/<int:pk>/queue/", views.annotation_queue, name="annotation_queue"),
    path("batches/<int:pk>/queue/next/", views.queue_next, name="queue_next"),
    path("batches/<int:pk>/annotation/", views.annotation_panel, name="annotation_panel"),
    path("batches/<int:pk>/annotation/policy/", views.annotation_policy, name="annotation_policy"),
]
